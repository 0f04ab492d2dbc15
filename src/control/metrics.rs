//! Prometheus metrics under upstream Karpenter's names and labels, so dashboards built for
//! Karpenter read this controller too:
//! `karpenter_voluntary_disruption_decisions_total{decision,reason,consolidation_type}`,
//! `karpenter_voluntary_disruption_eligible_nodes{reason}`,
//! `karpenter_nodepools_allowed_disruptions{nodepool,reason}`,
//! `karpenter_nodeclaims_disrupted_total{reason,nodepool,capacity_type}`, plus
//! `karpenter_tui_pending_decisions` for the approval gate, which upstream has no notion of.
//! Reasons are lower-case, as upstream writes them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::api::nodepool::DisruptionReason;
use crate::engine::disruption::{Command, Method, Pass, Reason};

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

/// The controller's metrics registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    eligible: Family<ReasonLabels, Gauge>,
    allowed: Family<PoolReasonLabels, Gauge>,
    disrupted: Family<DisruptedLabels, Counter>,
    pending: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn lower(r: Reason) -> String {
    r.as_str().to_ascii_lowercase()
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        let eligible = Family::<ReasonLabels, Gauge>::default();
        let allowed = Family::<PoolReasonLabels, Gauge>::default();
        let disrupted = Family::<DisruptedLabels, Counter>::default();
        let pending = Gauge::default();
        registry.register(
            "karpenter_voluntary_disruption_decisions",
            "Number of disruption decisions performed.",
            decisions.clone(),
        );
        registry.register(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by reason.",
            eligible.clone(),
        );
        registry.register(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time.",
            allowed.clone(),
        );
        registry.register(
            "karpenter_nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter.",
            disrupted.clone(),
        );
        registry.register(
            "karpenter_tui_pending_decisions",
            "Disruption decisions waiting in the approval gate.",
            pending.clone(),
        );
        Metrics {
            registry,
            decisions,
            eligible,
            allowed,
            disrupted,
            pending,
        }
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
                let allowed = b.allowed(reason).min(i64::MAX as usize) as i64;
                self.allowed
                    .get_or_create(&PoolReasonLabels {
                        nodepool: b.nodepool.clone(),
                        reason: reason.as_str().to_ascii_lowercase(),
                    })
                    .set(allowed);
            }
        }
    }

    /// A command started executing.
    pub fn executed(&self, cmd: &Command) {
        let consolidation_type = match cmd.method {
            Method::Emptiness
            | Method::MultiNodeConsolidation
            | Method::SingleNodeConsolidation => cmd.method.metric_label(),
            _ => "",
        };
        self.decisions
            .get_or_create(&DecisionLabels {
                decision: if cmd.is_delete() { "delete" } else { "replace" }.into(),
                reason: lower(cmd.reason),
                consolidation_type: consolidation_type.into(),
            })
            .inc();
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

    /// The gate's queue length.
    pub fn set_pending(&self, n: usize) {
        self.pending.set(n as i64);
    }

    /// The exposition text (`text/plain; version=0.0.4` / OpenMetrics text).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
