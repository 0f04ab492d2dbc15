//! NodeClaim and NodePool status as upstream's controllers keep it, so `kubectl get
//! nodeclaims` / `get nodepools`, dashboards and a console attached to this cluster read
//! what they would under upstream Karpenter v1.14:
//!
//! - NodeClaim (`nodeclaim/lifecycle/{launch,registration,initialization}.go`,
//!   `nodeclaim/disruption/{drift,consolidation}.go`, `nodeclaim/podevents`): nodeName,
//!   providerID, imageID, capacity, allocatable, lastPodEventTime, and the conditions
//!   Launched, Registered, Initialized, Ready (the root: True when those three are),
//!   Drifted and Consolidatable (present only while True, as upstream clears them).
//! - NodePool (`nodepool/counter`, `nodepool/readiness`, `nodepool/validation`): nodes,
//!   resources (the capacity of its nodes, plus `nodes`), and the conditions
//!   ValidationSucceeded, NodeClassReady and Ready.
//!
//! A condition keeps its lastTransitionTime while its status stays; a status is written
//! only when something in it changed.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::Controller;
use super::registration::{has_label, not_initialized};
use super::registry::NodeRecord;
use crate::api::labels;
use crate::api::nodeclaim::{NodeClaimStatus, conditions as cond};
use crate::api::nodepool::NodePool;
use crate::api::time::from_chrono;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, ClusterError, NodeObject, PoolStatus, Write};

/// Upstream's pod-events controller writes lastPodEventTime at most this often per node.
const POD_EVENT_DEDUPE: TimeDelta = TimeDelta::seconds(10);

const AWAITING: (&str, &str) = (
    "AwaitingReconciliation",
    "object is awaiting reconciliation",
);

/// One condition as wanted: type, status, reason, message.
type Want = (&'static str, &'static str, String, String);

fn want(type_: &'static str, status: &'static str, reason: &str, message: &str) -> Want {
    (type_, status, reason.to_string(), message.to_string())
}

/// The conditions list for `wanted`, keeping each transition time (and the condition
/// whole) from `previous` where its status did not change; sorted by type, as
/// operatorpkg stores them.
pub(super) fn conditions(
    wanted: Vec<Want>,
    previous: &[Condition],
    generation: i64,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = wanted
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let before = previous.iter().find(|c| c.type_ == type_);
            let last_transition_time = match before {
                Some(b) if b.status == status => b.last_transition_time.clone(),
                _ => from_chrono(now),
            };
            Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason,
                message,
                last_transition_time,
                observed_generation: Some(generation),
            }
        })
        .collect();
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// operatorpkg's root condition over its dependents: True when all are, False when one
/// is, else Unknown naming those not True.
fn root(type_: &'static str, deps: &[&Want]) -> Want {
    if deps.iter().all(|d| d.1 == "True") {
        return want(type_, "True", type_, "");
    }
    let not_true: Vec<String> = deps
        .iter()
        .filter(|d| d.1 != "True")
        .map(|d| format!("{}={}", d.0, d.1))
        .collect();
    if deps.iter().any(|d| d.1 == "False") {
        return want(type_, "False", "UnhealthyDependents", &not_true.join(", "));
    }
    want(
        type_,
        "Unknown",
        "ReconcilingDependents",
        &not_true.join(", "),
    )
}

fn time(t: DateTime<Utc>) -> Time {
    from_chrono(t)
}

/// The status a NodeClaim's record says it has now.
pub(super) fn nodeclaim_status(
    r: &NodeRecord,
    node: Option<&NodeObject>,
    pool: Option<&NodePool>,
    drifted: Option<&str>,
    now: DateTime<Utc>,
) -> NodeClaimStatus {
    let previous = r
        .status_written
        .as_ref()
        .map_or(&r.claim.conditions[..], |s| &s.conditions[..]);
    let launched = r.claim.launched.as_ref();
    let launched_c = match (launched, &r.launch.last_error) {
        (Some(_), _) => want(cond::LAUNCHED, "True", cond::LAUNCHED, ""),
        (None, Some(e)) => want(cond::LAUNCHED, "Unknown", "LaunchFailed", e),
        (None, None) => want(cond::LAUNCHED, "Unknown", AWAITING.0, AWAITING.1),
    };
    let registered = node.is_some_and(|n| has_label(n, labels::REGISTERED));
    let initialized = registered && node.is_some_and(|n| has_label(n, labels::INITIALIZED));
    let not_found = ("NodeNotFound", "Node not registered with cluster");
    let registered_c = match (launched, registered) {
        (_, true) => want(cond::REGISTERED, "True", cond::REGISTERED, ""),
        (Some(_), false) => want(cond::REGISTERED, "Unknown", not_found.0, not_found.1),
        (None, false) => want(cond::REGISTERED, "Unknown", AWAITING.0, AWAITING.1),
    };
    let initialized_c = match (node, registered, initialized) {
        (_, _, true) => want(cond::INITIALIZED, "True", cond::INITIALIZED, ""),
        (Some(n), true, false) => match not_initialized(&r.claim, n) {
            Some((reason, message)) => want(cond::INITIALIZED, "Unknown", reason, &message),
            // Due: the label is on its way.
            None => want(cond::INITIALIZED, "Unknown", AWAITING.0, AWAITING.1),
        },
        _ if launched.is_some() => want(cond::INITIALIZED, "Unknown", not_found.0, not_found.1),
        _ => want(cond::INITIALIZED, "Unknown", AWAITING.0, AWAITING.1),
    };
    let ready_c = root(cond::READY, &[&launched_c, &registered_c, &initialized_c]);
    let mut wanted = vec![launched_c, registered_c, initialized_c, ready_c];
    if let Some(reason) = drifted {
        wanted.push(want(cond::DRIFTED, "True", reason, ""));
    }
    if initialized
        && let Some(pool) = pool
        && consolidatable(r, pool, now)
    {
        wanted.push(want(cond::CONSOLIDATABLE, "True", cond::CONSOLIDATABLE, ""));
    }
    let written_event = r
        .status_written
        .as_ref()
        .and_then(|s| s.last_pod_event_time.clone());
    let last_pod_event_time = match (r.last_pod_event, written_event) {
        (Some(t), Some(w)) if t - crate::api::time::to_chrono(&w) < POD_EVENT_DEDUPE => Some(w),
        (Some(t), _) => Some(time(t)),
        (None, w) => w,
    };
    NodeClaimStatus {
        node_name: node.filter(|_| registered).map(|n| n.name.clone()),
        provider_id: launched.map(|l| l.provider_id.clone()),
        image_id: launched.and_then(|l| l.image_id.clone()),
        capacity: launched.map(|l| l.capacity.to_map()).unwrap_or_default(),
        allocatable: launched.map(|l| l.allocatable.to_map()).unwrap_or_default(),
        conditions: conditions(wanted, previous, 1, now),
        last_pod_event_time,
    }
}

/// Upstream `nodeclaim/disruption/consolidation.go`: consolidateAfter has passed since
/// initialization or the last pod event, whichever is later.
fn consolidatable(r: &NodeRecord, pool: &NodePool, now: DateTime<Utc>) -> bool {
    r.initialized_at.is_some_and(|initialized| {
        crate::engine::disruption::candidates::consolidatable_from(
            initialized,
            r.last_pod_event,
            pool,
        )
        .is_some_and(|at| now >= at)
    })
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Writes every NodeClaim and NodePool status that changed, where the cluster keeps
    /// status for others to read.
    pub(super) async fn write_status(&mut self, now: DateTime<Utc>) {
        if !self.cluster.keeps_status() {
            return;
        }
        let drifted: BTreeMap<String, String> = self
            .disruption
            .last_pass
            .as_ref()
            .map(|p| p.drifted.clone())
            .unwrap_or_default();
        let due: Vec<(String, NodeClaimStatus)> = self
            .registry
            .records()
            .filter(|r| r.claim.finalizer || r.claim.deleting.is_none())
            .filter_map(|r| {
                let node = self.registry.node_of(&r.claim.name);
                let pool = self.state.nodepools.get(&r.claim.nodepool);
                let drift = drifted.get(&r.claim.name).map(|s| drift_reason(s));
                let s = nodeclaim_status(r, node, pool, drift, now);
                let same = match &r.status_written {
                    Some(w) => *w == s,
                    None => same_as_read(r, &s),
                };
                (!same).then(|| (r.claim.name.clone(), s))
            })
            .collect();
        for (name, status) in due {
            let w = Write::NodeClaimStatus {
                nodeclaim: name.clone(),
                status: Box::new(status.clone()),
            };
            match self.cluster.write(w).await {
                Ok(()) => {
                    if let Some(r) = self.registry.get_mut(&name) {
                        r.status_written = Some(status);
                    }
                }
                Err(ClusterError::NotFound { .. }) => {}
                Err(e) => self.error(format!("writing the status of NodeClaim {name}: {e}")),
            }
        }
        self.write_pool_status(now).await;
    }

    async fn write_pool_status(&mut self, now: DateTime<Utc>) {
        let mut due = Vec::new();
        for (name, pool) in &self.state.nodepools {
            let resources = self.state.pool_usage(name);
            let nodes = resources.get(crate::engine::resources::NODES) / 1000;
            // The verdict the pool was read with (decoding and validation, see
            // `convert::nodepool`).
            let validation = match pool.validation_failure() {
                None => want("ValidationSucceeded", "True", "ValidationSucceeded", ""),
                Some(why) => want(
                    "ValidationSucceeded",
                    "False",
                    crate::api::nodepool::REASON_VALIDATION_FAILED,
                    why,
                ),
            };
            let nodeclass = match self.cloud.unlaunchable(pool) {
                None => want("NodeClassReady", "True", "NodeClassReady", ""),
                Some(why) => want("NodeClassReady", "False", "NodeClassNotReady", &why),
            };
            let ready = root("Ready", &[&validation, &nodeclass]);
            let previous = self
                .pool_status_written
                .get(name)
                .map(|s| s.conditions.clone())
                .unwrap_or_else(|| {
                    pool.status
                        .as_ref()
                        .map(|s| s.conditions.clone())
                        .unwrap_or_default()
                });
            let generation = pool.metadata.generation.unwrap_or(1);
            let status = PoolStatus {
                nodes,
                resources,
                conditions: conditions(
                    vec![nodeclass, ready, validation],
                    &previous,
                    generation,
                    now,
                ),
            };
            if self.pool_status_written.get(name) != Some(&status) {
                due.push((name.clone(), status));
            }
        }
        for (name, status) in due {
            let w = Write::NodePoolStatus {
                nodepool: name.clone(),
                status: Box::new(status.clone()),
            };
            match self.cluster.write(w).await {
                Ok(()) => {
                    self.pool_status_written.insert(name, status);
                }
                Err(ClusterError::NotFound { .. }) => {}
                Err(e) => self.error(format!("writing the status of NodePool {name}: {e}")),
            }
        }
    }
}

/// The Drifted condition's reason for a pass's drift verdict ("RequirementsDrifted (...)"
/// carries its words in the pass; the condition's reason is the first word).
fn drift_reason(verdict: &str) -> &str {
    verdict.split_whitespace().next().unwrap_or(verdict)
}

/// Whether the status the cluster already holds (read with the NodeClaim) is `s`, so a
/// restarted controller does not rewrite every NodeClaim.
fn same_as_read(r: &NodeRecord, s: &NodeClaimStatus) -> bool {
    r.claim.conditions == s.conditions
        && r.claim.launched.as_ref().map(|l| &l.hostname) == s.node_name.as_ref()
        && r.claim.last_pod_event.map(time) == s.last_pod_event_time
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::controller::registry::tests::{claim, launched};
    use crate::engine::resources::Resources;
    use chrono::DateTime;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap()
    }

    fn summary(s: &NodeClaimStatus) -> Vec<(String, String, String)> {
        s.conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    fn node(labels_: &[&str], ready: bool) -> NodeObject {
        NodeObject {
            name: "ip-10-0-0-1".into(),
            provider_id: "aws:///z/i-1".into(),
            labels: std::sync::Arc::new(
                labels_
                    .iter()
                    .map(|l| (l.to_string(), "true".to_string()))
                    .collect(),
            ),
            annotations: Default::default(),
            taints: Vec::new(),
            allocatable: Resources::cpu_mem(1900, 7 << 30),
            ready,
            faults: Vec::new(),
            created: at(0),
        }
    }

    /// What `kubectl get nodeclaim -o yaml` shows through the lifecycle: Registered and
    /// Initialized stay Unknown (with upstream's reasons) until the labels say so, Ready
    /// follows them, and a condition keeps its transition time while its status stays.
    #[test]
    fn conditions_follow_the_lifecycle_as_upstream_writes_them() {
        let mut r = NodeRecord::new_for_tests(claim("default-abc"));
        r.claim.launched = Some(launched("aws:///z/i-1"));
        let s = nodeclaim_status(&r, None, None, None, at(10));
        assert_eq!(
            summary(&s),
            [
                ("Initialized", "Unknown", "NodeNotFound"),
                ("Launched", "True", "Launched"),
                ("Ready", "Unknown", "ReconcilingDependents"),
                ("Registered", "Unknown", "NodeNotFound"),
            ]
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        );
        assert_eq!(s.node_name, None);
        r.status_written = Some(s);

        let registered = node(&[labels::REGISTERED], false);
        let s = nodeclaim_status(&r, Some(&registered), None, None, at(20));
        assert_eq!(s.node_name.as_deref(), Some("ip-10-0-0-1"));
        let initialized = s.condition(cond::INITIALIZED).unwrap();
        assert_eq!(
            (initialized.reason.as_str(), initialized.message.as_str()),
            ("NodeNotReady", "Node status is NotReady")
        );
        let launched_c = s.condition(cond::LAUNCHED).unwrap();
        assert_eq!(
            crate::api::time::to_chrono(&launched_c.last_transition_time),
            at(10),
            "Launched did not change, so neither did its transition time"
        );
        r.status_written = Some(s);

        let done = node(&[labels::REGISTERED, labels::INITIALIZED], true);
        let s = nodeclaim_status(&r, Some(&done), None, Some("NodePoolDrifted"), at(30));
        for c in [
            cond::LAUNCHED,
            cond::REGISTERED,
            cond::INITIALIZED,
            cond::READY,
        ] {
            assert!(s.is_true(c), "{c}");
        }
        assert_eq!(
            s.condition(cond::DRIFTED).unwrap().reason,
            "NodePoolDrifted"
        );
        let ready = s.condition(cond::READY).unwrap();
        assert_eq!(
            crate::api::time::to_chrono(&ready.last_transition_time),
            at(30)
        );
    }
}
