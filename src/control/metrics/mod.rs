//! Prometheus metrics under upstream Karpenter's names, labels and label values, so the
//! capacity and performance dashboards of upstream's getting-started guide (and any built
//! for Karpenter) read this controller too:
//! `karpenter_voluntary_disruption_decisions_total{decision,reason,consolidation_type}`,
//! `karpenter_voluntary_disruption_eligible_nodes{reason}`,
//! `karpenter_nodepools_allowed_disruptions{nodepool,reason}`,
//! `karpenter_nodepools_nodes_consuming_budgets{nodepool,reason}`,
//! `karpenter_nodeclaims_disrupted_total{reason,nodepool,capacity_type}`,
//! `karpenter_nodeclaims_created_total{reason,nodepool,min_values_relaxed}`,
//! `karpenter_nodeclaims_terminated_total{nodepool,capacity_type,zone}`,
//! `karpenter_nodes_created_total{nodepool,zone}`, `karpenter_nodes_terminated_total{nodepool,zone}`,
//! `karpenter_nodes_termination_duration_seconds{nodepool,quantile}`,
//! `karpenter_pods_startup_duration_seconds{quantile}`,
//! `karpenter_voluntary_disruption_queue_failures_total{decision,reason,consolidation_type}`,
//! `karpenter_voluntary_disruption_failed_validations_total{consolidation_type}`,
//! `karpenter_pods_eviction_requests_total{code}`, `karpenter_pods_drained_total{reason}`,
//! `karpenter_cluster_state_node_count`, `karpenter_cluster_state_synced`,
//! `karpenter_build_info{version}`, controller-runtime's
//! `controller_runtime_reconcile_total{controller,result}`,
//! `controller_runtime_reconcile_time_seconds{controller}` and
//! `leader_election_master_status{name}`, the gauges derived from the cluster state
//! ([`cluster`]: per node, pod and NodePool), the AWS provider's interruption queue
//! metrics (`cloud::interruption_metrics`), plus `karpenter_tui_pending_decisions` for the approval
//! gate, which upstream has no notion of.
//!
//! Label values are cased as upstream writes them, which is not the same everywhere:
//! `reason` is lower case on counters and `eligible_nodes` (`underutilized`), but the
//! budget reason itself on `allowed_disruptions` and `nodes_consuming_budgets`
//! (`Underutilized`, `Empty`, `Drifted`; `pkg/controllers/disruption/helpers.go`).
//!
//! [`Metrics`] is a handle: clones share the same values, so the controller task updates
//! them while the `/metrics` endpoint encodes them from another task.

pub mod cluster;
pub mod summary;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::api::nodepool::DisruptionReason;
use crate::engine::disruption::{Command, Method, Pass, Reason};
use crate::engine::state::ClusterState;
use cluster::{ClusterGauges, StateView};
use summary::Summary;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    decision: String,
    reason: String,
    consolidation_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolReasonLabels {
    nodepool: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DisruptedLabels {
    reason: String,
    nodepool: String,
    capacity_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CreatedLabels {
    reason: String,
    nodepool: String,
    min_values_relaxed: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TerminatedLabels {
    nodepool: String,
    capacity_type: String,
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolZoneLabels {
    nodepool: String,
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// controller-runtime's reconcile time buckets (upstream's `metrics.DurationBuckets` up to
/// a minute).
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: String,
}

/// The controller's metrics registry. Cloning is cheap and shares the values.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Arc<Registry>,
    decisions: Family<DecisionLabels, Counter>,
    eligible: Family<ReasonLabels, Gauge>,
    allowed: Family<PoolReasonLabels, Gauge>,
    disrupted: Family<DisruptedLabels, Counter>,
    created: Family<CreatedLabels, Counter>,
    terminated: Family<TerminatedLabels, Counter>,
    nodes_created: Family<PoolZoneLabels, Counter>,
    nodes_terminated: Family<PoolZoneLabels, Counter>,
    termination_duration: Summary,
    pod_startup: Summary,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    /// The state the per-node, per-pod and per-pool gauges are computed from at scrape
    /// time.
    view: StateView,
    /// Whether anything serves these metrics: the controller hands over its state only
    /// then (sharing it makes its next change copy it).
    served: Arc<AtomicBool>,
    node_count: Gauge,
    synced: Gauge,
    leader: Family<NameLabels, Gauge>,
    pending: Gauge,
    consuming: Family<PoolReasonLabels, Gauge>,
    queue_failures: Family<DecisionLabels, Counter>,
    failed_validations: Family<TypeLabels, Counter>,
    eviction_requests: Family<CodeLabels, Counter>,
    drained: Family<ReasonLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabels {
    consolidation_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
}

/// The `reason` label of `karpenter_nodeclaims_created_total` for NodeClaims the
/// provisioner creates for pending pods (upstream `metrics.ProvisionedReason`); a
/// disruption's replacements carry the disruption reason instead.
pub const PROVISIONED: &str = "provisioned";

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn lower(r: Reason) -> String {
    r.as_str().to_ascii_lowercase()
}

/// Upstream's `consolidation_type` label: empty for drift and expiration.
fn consolidation_type(m: Method) -> &'static str {
    match m {
        Method::Emptiness | Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
            m.metric_label()
        }
        _ => "",
    }
}

fn decision_labels(cmd: &Command) -> DecisionLabels {
    DecisionLabels {
        decision: if cmd.is_delete() { "delete" } else { "replace" }.into(),
        reason: lower(cmd.reason),
        consolidation_type: consolidation_type(cmd.method).into(),
    }
}

impl Metrics {
    /// The content type of [`Metrics::encode`]'s output.
    pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        let eligible = Family::<ReasonLabels, Gauge>::default();
        let allowed = Family::<PoolReasonLabels, Gauge>::default();
        let disrupted = Family::<DisruptedLabels, Counter>::default();
        let created = Family::<CreatedLabels, Counter>::default();
        let terminated = Family::<TerminatedLabels, Counter>::default();
        let nodes_created = Family::<PoolZoneLabels, Counter>::default();
        let nodes_terminated = Family::<PoolZoneLabels, Counter>::default();
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        let reconcile_time =
            Family::<ControllerLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                reconcile_histogram,
            );
        let view = StateView::default();
        registry.register(
            "karpenter_nodes_created",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone",
            nodes_created.clone(),
        );
        registry.register(
            "karpenter_nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone",
            nodes_terminated.clone(),
        );
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile_time.clone(),
        );
        registry.register_collector(Box::new(ClusterGauges { view: view.clone() }));
        let node_count = Gauge::default();
        let synced = Gauge::default();
        let leader = Family::<NameLabels, Gauge>::default();
        let build = Family::<VersionLabels, Gauge>::default();
        let pending = Gauge::default();
        let consuming = Family::<PoolReasonLabels, Gauge>::default();
        let queue_failures = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "karpenter_nodepools_nodes_consuming_budgets",
            "Number of nodes in a NodePool that count against its disruption budgets: NotReady, being deleted, in a command in flight or a decision waiting",
            consuming.clone(),
        );
        let failed_validations = Family::<TypeLabels, Counter>::default();
        let eviction_requests = Family::<CodeLabels, Counter>::default();
        let drained = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "karpenter_voluntary_disruption_queue_failures",
            "Number of times that an enqueued disruption decision failed. Labeled by disruption method",
            queue_failures.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_failed_validations",
            "Number of candidates that were selected for disruption but failed validation",
            failed_validations.clone(),
        );
        registry.register(
            "karpenter_pods_eviction_requests",
            "The number of eviction requests. Labeled by the HTTP status code of the answer",
            eviction_requests.clone(),
        );
        registry.register(
            "karpenter_pods_drained",
            "The number of pods drained during termination. Labeled by the reason the node was terminated",
            drained.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_decisions",
            "Number of disruption decisions performed",
            decisions.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by reason",
            eligible.clone(),
        );
        registry.register(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time",
            allowed.clone(),
        );
        registry.register(
            "karpenter_nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter",
            disrupted.clone(),
        );
        registry.register(
            "karpenter_nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim",
            created.clone(),
        );
        registry.register(
            "karpenter_nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone",
            terminated.clone(),
        );
        registry.register(
            "karpenter_cluster_state_node_count",
            "Current count of nodes in cluster state",
            node_count.clone(),
        );
        registry.register(
            "karpenter_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state",
            synced.clone(),
        );
        registry.register(
            "karpenter_build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built",
            build.clone(),
        );
        build
            .get_or_create(&VersionLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name",
            leader.clone(),
        );
        registry.register(
            "karpenter_tui_pending_decisions",
            "Disruption decisions waiting in the approval gate",
            pending.clone(),
        );
        crate::cloud::interruption_metrics::INTERRUPTION.register(&mut registry);
        Metrics {
            registry: Arc::new(registry),
            decisions,
            eligible,
            allowed,
            disrupted,
            created,
            terminated,
            nodes_created,
            nodes_terminated,
            termination_duration: Summary::new(
                "karpenter_nodes_termination_duration_seconds",
                "The time taken between a node's deletion request and the removal of its finalizer",
                &["nodepool"],
            ),
            pod_startup: Summary::new(
                "karpenter_pods_startup_duration_seconds",
                "The time from pod creation until the pod is running",
                &[],
            ),
            reconciles,
            reconcile_time,
            view,
            served: Arc::default(),
            node_count,
            synced,
            leader,
            pending,
            consuming,
            queue_failures,
            failed_validations,
            eviction_requests,
            drained,
        }
    }

    /// A command in flight failed (a replacement did not launch or initialize).
    pub fn failed(&self, cmd: &Command) {
        self.queue_failures
            .get_or_create(&decision_labels(cmd))
            .inc();
    }

    /// A decision failed re-validation and was abandoned.
    pub fn failed_validation(&self, cmd: &Command) {
        self.failed_validations
            .get_or_create(&TypeLabels {
                consolidation_type: consolidation_type(cmd.method).into(),
            })
            .inc();
    }

    /// An eviction was asked for: `code` is the API server's answer (200, 429, ...).
    pub fn eviction_request(&self, code: u16) {
        self.eviction_requests
            .get_or_create(&CodeLabels {
                code: code.to_string(),
            })
            .inc();
    }

    /// A pod left a terminating node (evicted or deleted at the grace period's end);
    /// `reason` is upstream's eviction reason: the disruption reason as the API spells it
    /// (`Underutilized`) or `Forceful Termination`.
    pub fn pod_drained(&self, reason: &str) {
        self.drained
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }

    /// A NodeClaim was created: `reason` is [`PROVISIONED`] or the lower-case disruption
    /// reason whose replacement it is; `min_values_relaxed` is its
    /// `karpenter.sh/nodeclaim-min-values-relaxed` annotation ("false" without one).
    pub fn nodeclaim_created(&self, reason: &str, nodepool: &str, min_values_relaxed: &str) {
        self.created
            .get_or_create(&CreatedLabels {
                reason: reason.into(),
                nodepool: nodepool.into(),
                min_values_relaxed: min_values_relaxed.into(),
            })
            .inc();
    }

    /// A NodeClaim's termination finished (instance gone, finalizer removed).
    pub fn nodeclaim_terminated(&self, nodepool: &str, capacity_type: &str, zone: &str) {
        self.terminated
            .get_or_create(&TerminatedLabels {
                nodepool: nodepool.into(),
                capacity_type: capacity_type.into(),
                zone: zone.into(),
            })
            .inc();
    }

    /// A NodeClaim's Node registered (upstream counts nodes at registration).
    pub fn node_created(&self, nodepool: &str, zone: &str) {
        self.nodes_created
            .get_or_create(&PoolZoneLabels {
                nodepool: nodepool.into(),
                zone: zone.into(),
            })
            .inc();
    }

    /// A Node's termination finished `seconds` after its deletion was asked for, at `at`.
    pub fn node_terminated(&self, nodepool: &str, zone: &str, seconds: f64, at: DateTime<Utc>) {
        self.nodes_terminated
            .get_or_create(&PoolZoneLabels {
                nodepool: nodepool.into(),
                zone: zone.into(),
            })
            .inc();
        self.termination_duration.observe(&[nodepool], seconds, at);
    }

    /// A pod seen pending is running `seconds` after its creation.
    pub fn pod_started(&self, seconds: f64, at: DateTime<Utc>) {
        self.pod_startup.observe(&[], seconds, at);
    }

    /// One reconcile of `controller` (upstream's controller names: `provisioner`,
    /// `disruption`, `nodeclaim.lifecycle`, ...) took `seconds`; `failed` when it reported
    /// an error.
    pub fn reconciled(&self, controller: &str, seconds: f64, failed: bool) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller: controller.into(),
                result: if failed { "error" } else { "success" }.into(),
            })
            .inc();
        self.reconcile_time
            .get_or_create(&ControllerLabels {
                controller: controller.into(),
            })
            .observe(seconds);
    }

    /// Marks these metrics as served (the `/metrics` endpoint calls it): from then on the
    /// controller hands over its state for the scrape-time gauges.
    pub fn set_served(&self) {
        self.served.store(true, Ordering::Relaxed);
    }

    /// Whether [`Metrics::observe_state`] is wanted.
    pub fn is_served(&self) -> bool {
        self.served.load(Ordering::Relaxed)
    }

    /// The cluster state the per-node, per-pod and per-pool gauges are computed from.
    pub fn observe_state(&self, state: Arc<ClusterState>) {
        self.view.set(state);
    }

    /// Nodes in the controller's cluster state.
    pub fn set_node_count(&self, n: usize) {
        self.node_count.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Whether the controller's view has caught up with the API server: the initial list of
    /// every watched kind is in and every NodeClaim has launched (upstream `Synced`).
    pub fn set_synced(&self, synced: bool) {
        self.synced.set(i64::from(synced));
    }

    /// Whether this replica holds the leader-election Lease `lease` (1) or stands by (0).
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&NameLabels { name: lease.into() })
            .set(i64::from(leading));
    }

    /// Gauges from a pass: eligible nodes per reason, allowed disruptions per pool.
    pub fn observe_pass(&self, pass: &Pass) {
        for r in Reason::ALL {
            self.eligible
                .get_or_create(&ReasonLabels { reason: lower(r) })
                .set(pass.eligible.get(&r).copied().unwrap_or(0) as i64);
        }
        for b in &pass.budgets {
            for reason in DisruptionReason::ALL {
                // Upstream reports the budget itself here, and what already consumes it
                // beside (`karpenter_nodepools_nodes_consuming_budgets`).
                let limit = b
                    .reason(reason)
                    .limit
                    .map_or(i64::from(i32::MAX), |l| l.min(i32::MAX as usize) as i64);
                // Upstream labels these with the budget reason as the API spells it.
                let labels = PoolReasonLabels {
                    nodepool: b.nodepool.clone(),
                    reason: reason.as_str().to_string(),
                };
                self.allowed.get_or_create(&labels).set(limit);
                self.consuming
                    .get_or_create(&labels)
                    .set(b.disrupting.min(i64::MAX as usize) as i64);
            }
        }
    }

    /// A command started executing.
    pub fn executed(&self, cmd: &Command) {
        self.decisions.get_or_create(&decision_labels(cmd)).inc();
        for c in &cmd.candidates {
            self.disrupted
                .get_or_create(&DisruptedLabels {
                    reason: lower(cmd.reason),
                    nodepool: c.nodepool.clone(),
                    capacity_type: c.capacity_type.as_str().into(),
                })
                .inc();
        }
    }

    /// A NodeClaim deleted on an interruption notice: `karpenter_nodeclaims_disrupted_total`
    /// with the notice's kind as the reason, as upstream's interruption controller counts
    /// it.
    pub fn interrupted(&self, kind: &str, nodepool: &str, capacity_type: &str) {
        self.disrupted
            .get_or_create(&DisruptedLabels {
                reason: kind.to_string(),
                nodepool: nodepool.to_string(),
                capacity_type: capacity_type.to_string(),
            })
            .inc();
    }

    /// The gate's queue length.
    pub fn set_pending(&self, n: usize) {
        self.pending.set(n as i64);
    }

    /// The exposition text in the OpenMetrics 1.0 text format (ends with `# EOF`); serve it
    /// as [`Metrics::CONTENT_TYPE`].
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        // Summaries, which the registry cannot hold, go before the closing `# EOF`.
        let eof = out.rfind("# EOF").unwrap_or(out.len());
        let mut summaries = String::new();
        self.termination_duration.encode(&mut summaries);
        self.pod_startup.encode(&mut summaries);
        out.insert_str(eof, &summaries);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::interruption_metrics::INTERRUPTION;

    #[test]
    fn the_queue_and_its_deletions_are_served_under_upstream_names() {
        let m = Metrics::new();
        // Process-wide: other tests count too, so only what this one adds is certain.
        INTERRUPTION.received("capacity_reservation_interrupted");
        INTERRUPTION.deleted();
        INTERRUPTION.handled_after(3.0);
        m.interrupted("spot_interrupted", "default", "spot");
        let text = m.encode();
        for needle in [
            r#"karpenter_interruption_received_messages_total{message_type="capacity_reservation_interrupted"} "#,
            "karpenter_interruption_deleted_messages_total ",
            r#"karpenter_interruption_message_queue_duration_seconds_bucket{le="450.0"} "#,
            r#"karpenter_nodeclaims_disrupted_total{reason="spot_interrupted",nodepool="default",capacity_type="spot"} 1"#,
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
