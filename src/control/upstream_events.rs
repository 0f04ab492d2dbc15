//! The Kubernetes Events upstream Karpenter v1.14.1 emits in the code paths this
//! controller has, one constructor each: the reason, the type (Normal or Warning), the
//! object(s) it goes on and how long a repeat is dropped, as upstream's events files set
//! them (`pkg/controllers/disruption/events/events.go`,
//! `pkg/controllers/provisioning/scheduling/events.go`,
//! `pkg/controllers/node/termination/terminator/events/events.go`,
//! `pkg/controllers/nodeclaim/lifecycle/events.go`, and the AWS provider's
//! `pkg/controllers/interruption/events/events.go`; the default dedupe window is
//! `pkg/events/recorder.go`'s). Upstream dedupes on the reason and the object (plus a
//! value or two, never the message); so does the Kubernetes backend that posts them
//! (`Cluster::notify`).

use std::time::Duration;

use crate::cloud::InterruptionKind;
use crate::cluster::{Notice, ObjectRef};
use crate::engine::pod::PodKey;

/// Upstream's default dedupe window.
pub const DEDUPE: Duration = Duration::from_secs(120);
/// `Unconsolidatable` repeats at most this often per object.
pub const UNCONSOLIDATABLE_DEDUPE: Duration = Duration::from_secs(15 * 60);
/// `FailedScheduling` repeats at most this often per pod.
pub const FAILED_SCHEDULING_DEDUPE: Duration = Duration::from_secs(5 * 60);
/// A NodePool's budget block repeats at most this often (a budget can change every
/// minute).
pub const NODEPOOL_BLOCKED_DEDUPE: Duration = Duration::from_secs(60);

fn notice(regarding: ObjectRef, reason: &'static str, note: String, warning: bool) -> Notice {
    Notice {
        regarding,
        reason,
        note,
        warning,
        dedupe: String::new(),
        dedupe_window: DEDUPE,
        rate_limited: false,
    }
}

/// The same notice on the Node (once registered) and on the NodeClaim, as upstream pairs
/// them.
fn on_both(node: Option<&str>, nodeclaim: &str, make: impl Fn(ObjectRef) -> Notice) -> Vec<Notice> {
    let mut out = Vec::with_capacity(2);
    if let Some(n) = node {
        out.push(make(ObjectRef::Node(n.to_string())));
    }
    out.push(make(ObjectRef::NodeClaim(nodeclaim.to_string())));
    out
}

/// `DisruptionLaunching`: a command's replacement NodeClaim is launching (`reason`: the
/// disruption reason, `Underutilized`, `Drifted`, ...).
pub fn launching(nodeclaim: &str, reason: &str) -> Notice {
    let mut n = notice(
        ObjectRef::NodeClaim(nodeclaim.to_string()),
        "DisruptionLaunching",
        format!("Launching NodeClaim: {reason}"),
        false,
    );
    n.dedupe = reason.to_string();
    n
}

/// `DisruptionWaitingReadiness`: the command waits for its replacement to initialize.
pub fn waiting_on_readiness(nodeclaim: &str) -> Notice {
    notice(
        ObjectRef::NodeClaim(nodeclaim.to_string()),
        "DisruptionWaitingReadiness",
        "Waiting on readiness to continue disruption".into(),
        false,
    )
}

/// `DisruptionTerminating` on the candidate's Node and NodeClaim: it is being deleted.
pub fn terminating(node: Option<&str>, nodeclaim: &str, reason: &str) -> Vec<Notice> {
    on_both(node, nodeclaim, |r| {
        let what = if matches!(r, ObjectRef::Node(_)) {
            "Node"
        } else {
            "NodeClaim"
        };
        let mut n = notice(
            r,
            "DisruptionTerminating",
            format!("Disrupting {what}: {reason}"),
            false,
        );
        n.dedupe = reason.to_string();
        n
    })
}

/// `Unconsolidatable` on the Node and NodeClaim: consolidation cannot act on it (the
/// pool's policy, no cheaper replacement, pods that would not fit, ...).
pub fn unconsolidatable(node: Option<&str>, nodeclaim: &str, message: &str) -> Vec<Notice> {
    on_both(node, nodeclaim, |r| {
        let mut n = notice(r, "Unconsolidatable", message.to_string(), false);
        n.dedupe_window = UNCONSOLIDATABLE_DEDUPE;
        n
    })
}

/// `DisruptionBlocked` on the Node and NodeClaim: nothing may disrupt it now (a
/// do-not-disrupt pod or annotation, a PodDisruptionBudget, ...).
pub fn blocked(node: Option<&str>, nodeclaim: &str, message: &str) -> Vec<Notice> {
    on_both(node, nodeclaim, |r| {
        notice(r, "DisruptionBlocked", message.to_string(), false)
    })
}

/// `NodeRepairBlocked` (a Warning) on the Node and NodeClaim: the node is unhealthy but
/// is not repaired (upstream `pkg/controllers/node/health/events.go`; here also for a
/// `karpenter-tui.dev/do-not-repair` veto).
pub fn repair_blocked(node: Option<&str>, nodeclaim: &str, message: &str) -> Vec<Notice> {
    on_both(node, nodeclaim, |r| {
        notice(r, "NodeRepairBlocked", message.to_string(), true)
    })
}

/// The AWS provider's event for an interruption notice, on the NodeClaim and its Node
/// (`pkg/controllers/interruption/events/events.go`): what the cloud said, as a Warning,
/// but a rebalance recommendation as Normal.
pub fn interruption(node: Option<&str>, nodeclaim: &str, kind: InterruptionKind) -> Vec<Notice> {
    let (reason, note, warning) = match kind {
        InterruptionKind::SpotInterrupted => (
            "SpotInterrupted",
            "Spot interruption warning was triggered",
            true,
        ),
        InterruptionKind::RebalanceRecommendation => (
            "SpotRebalanceRecommendation",
            "Spot rebalance recommendation was triggered",
            false,
        ),
        InterruptionKind::ScheduledChange => (
            "InstanceUnhealthy",
            "An unhealthy warning was triggered for the instance",
            true,
        ),
        InterruptionKind::InstanceStopped => ("InstanceStopping", "Instance is stopping", true),
        InterruptionKind::InstanceTerminated => {
            ("InstanceTerminating", "Instance is terminating", true)
        }
        InterruptionKind::CapacityReservationInterrupted => (
            "CapacityReservationInstanceInterrupted",
            "Capacity Reservation interruption warning was triggered",
            true,
        ),
    };
    on_both(node, nodeclaim, |r| {
        notice(r, reason, note.to_string(), warning)
    })
}

/// `TerminatingOnInterruption` on the NodeClaim and its Node: the notice deleted it.
pub fn terminating_on_interruption(node: Option<&str>, nodeclaim: &str) -> Vec<Notice> {
    on_both(node, nodeclaim, |r| {
        let what = if matches!(r, ObjectRef::Node(_)) {
            "Node"
        } else {
            "NodeClaim"
        };
        notice(
            r,
            "TerminatingOnInterruption",
            format!("Interruption triggered termination for the {what}"),
            true,
        )
    })
}

/// `DisruptionBlocked` on a NodePool whose budget allows no disruption for `reason`.
pub fn nodepool_blocked(nodepool: &str, reason: &str) -> Notice {
    let mut n = notice(
        ObjectRef::NodePool(nodepool.to_string()),
        "DisruptionBlocked",
        format!("No allowed disruptions for disruption reason {reason} due to blocking budget"),
        false,
    );
    n.dedupe = reason.to_string();
    n.dedupe_window = NODEPOOL_BLOCKED_DEDUPE;
    n
}

/// `Nominated` on a pod provisioning placed: the NodeClaim and, once it registered, the
/// Node it should schedule on. Rate limited as upstream's.
pub fn nominated(pod: &PodKey, nodeclaim: Option<&str>, node: Option<&str>) -> Notice {
    let mut on: Vec<String> = Vec::new();
    if let Some(c) = nodeclaim {
        on.push(format!("nodeclaim/{c}"));
    }
    if let Some(n) = node {
        on.push(format!("node/{n}"));
    }
    let mut n = notice(
        ObjectRef::Pod(pod.clone()),
        "Nominated",
        format!("Pod should schedule on: {}", on.join(", ")),
        false,
    );
    n.rate_limited = true;
    n
}

/// `InvalidDoNotDisruptAnnotation` (Warning) on a pod whose `karpenter.sh/do-not-disrupt`
/// is neither `true` nor a positive duration, so it protects nothing (upstream
/// `pkg/utils/pod/events.go`; deduped on the pod and the problem).
pub fn invalid_do_not_disrupt(pod: &PodKey, uid: &str, problem: &str) -> Notice {
    let mut n = notice(
        ObjectRef::Pod(pod.clone()),
        "InvalidDoNotDisruptAnnotation",
        format!("Invalid karpenter.sh/do-not-disrupt annotation: {problem}, ignoring annotation"),
        true,
    );
    n.dedupe = format!("{uid} {problem}");
    n
}

/// `DoNotDisruptUntil` on a pod whose do-not-disrupt duration holds its node until `at`
/// (RFC 3339, as upstream writes it; deduped on the pod and the time).
pub fn do_not_disrupt_until(pod: &PodKey, uid: &str, at: &str) -> Notice {
    let mut n = notice(
        ObjectRef::Pod(pod.clone()),
        "DoNotDisruptUntil",
        format!("The karpenter.sh/do-not-disrupt grace period will elapse at {at}"),
        false,
    );
    n.dedupe = format!("{uid} {at}");
    n
}

/// `UnregisteredTaintMissing` (Warning) on a NodeClaim whose Node registered without
/// `karpenter.sh/unregistered:NoExecute` (upstream `nodeclaim/lifecycle/events.go`): pods
/// may have landed on it before its labels and taints were synced.
pub fn unregistered_taint_missing(nodeclaim: &str) -> Notice {
    notice(
        ObjectRef::NodeClaim(nodeclaim.to_string()),
        "UnregisteredTaintMissing",
        format!(
            "Missing {} taint which prevents registration related race conditions on Karpenter-managed nodes",
            crate::api::labels::UNREGISTERED_TAINT_KEY
        ),
        true,
    )
}

/// `NoCompatibleInstanceTypes` (Warning) on a NodePool whose requirements leave no
/// available instance type (upstream `provisioning/scheduling/events.go`; repeats at most
/// once a minute).
pub fn no_compatible_instance_types(nodepool: &str, min_values: bool) -> Notice {
    let mut n = notice(
        ObjectRef::NodePool(nodepool.to_string()),
        "NoCompatibleInstanceTypes",
        if min_values {
            "NodePool requirements filtered out all compatible available instance types due to minValues incompatibility".into()
        } else {
            "NodePool requirements filtered out all compatible available instance types".into()
        },
        true,
    );
    n.dedupe_window = NODEPOOL_BLOCKED_DEDUPE;
    n
}

/// `ConsolidationApproved` for a Balanced move's passing score (upstream
/// `disruption/events/events.go`): on the candidate's Node and NodeClaim for a single-node
/// move, on the NodePool for a multi-node one.
pub fn consolidation_approved(
    nodepool: &str,
    candidate: Option<(Option<&str>, &str)>,
    score: &crate::engine::disruption::balanced::Score,
) -> Vec<Notice> {
    use crate::engine::disruption::balanced::{BALANCED_K, Score};
    // Go's %.2f writes an infinite score (a move that disrupts nothing) as +Inf.
    let value = match score.value() {
        v if v.is_infinite() => "+Inf".to_string(),
        v => format!("{v:.2}"),
    };
    let note = format!(
        "score {value} >= threshold {:.2} (k: {BALANCED_K}, savings {:.1}%, disruption {:.1}%)",
        Score::threshold(),
        score.savings_fraction * 100.0,
        score.disruption_fraction * 100.0
    );
    match candidate {
        Some((node, nodeclaim)) => on_both(node, nodeclaim, |regarding| {
            notice(regarding, "ConsolidationApproved", note.clone(), false)
        }),
        None => vec![notice(
            ObjectRef::NodePool(nodepool.to_string()),
            "ConsolidationApproved",
            note,
            false,
        )],
    }
}

/// `ConsolidationCandidate` on each candidate of a consolidation decision, on its Node
/// (once registered) and NodeClaim, worded as upstream's `Command.StringForNode`
/// (`disruption/types.go`): the whole command for one candidate, the node and the
/// command's size for several. `id` is the decision's number, where upstream writes its
/// command's id.
pub fn consolidation_candidates(
    cmd: &crate::engine::disruption::Command,
    id: u64,
    registered: impl Fn(&str) -> bool,
) -> Vec<Notice> {
    let decision = if cmd.replacements.is_empty() {
        "delete"
    } else {
        "replace"
    };
    let savings = cmd.savings_per_hour;
    let whole = || {
        let mut pools: Vec<&str> = Vec::new();
        for c in &cmd.candidates {
            if !pools.contains(&c.nodepool.as_str()) {
                pools.push(&c.nodepool);
            }
        }
        let sources: Vec<&str> = cmd.node_names().collect();
        let to = match cmd.replacements.len() {
            0 => String::new(),
            1 => " -> [1 replacement]".to_string(),
            n => format!(" -> [{n} replacements]"),
        };
        format!(
            "{}/{id}: {decision}: nodepools=[{}]: [{}]{to} (savings: ${savings:.2})",
            cmd.reason.as_str(),
            pools.join(","),
            sources.join(", ")
        )
    };
    let mut out = Vec::new();
    for c in &cmd.candidates {
        let described = if cmd.candidates.len() == 1 {
            whole()
        } else {
            format!(
                "{decision}: [{}] (part of {}-node consolidation)",
                c.node,
                cmd.candidates.len()
            )
        };
        let note = format!("Consolidation candidate: {described} (savings: ${savings:.2})");
        let node = registered(&c.nodeclaim).then_some(c.node.as_str());
        out.extend(on_both(node, &c.nodeclaim, |regarding| {
            let mut n = notice(regarding, "ConsolidationCandidate", note.clone(), false);
            n.dedupe = described.clone();
            n
        }));
    }
    out
}

/// `FailedScheduling` (Warning) on a pod no NodePool can launch a node for.
pub fn failed_scheduling(pod: &PodKey, why: &str) -> Notice {
    let mut n = notice(
        ObjectRef::Pod(pod.clone()),
        "FailedScheduling",
        format!("Failed to schedule pod, {why}"),
        true,
    );
    n.dedupe_window = FAILED_SCHEDULING_DEDUPE;
    n
}

/// `InsufficientCapacityError` (Warning) on a NodeClaim no offering could launch.
pub fn insufficient_capacity(nodeclaim: &str, why: &str) -> Notice {
    notice(
        ObjectRef::NodeClaim(nodeclaim.to_string()),
        "InsufficientCapacityError",
        format!("NodeClaim {nodeclaim} event: {why}"),
        true,
    )
}

/// `Evicted` on a pod its node's drain evicted; `reason` is the NodeClaim's disruption
/// reason, or `Forceful Termination` for a deletion nobody planned as a disruption.
pub fn evicted(pod: &PodKey, reason: &str) -> Notice {
    notice(
        ObjectRef::Pod(pod.clone()),
        "Evicted",
        format!("Evicted pod: {reason}"),
        false,
    )
}

/// `Disrupted` on a pod deleted because its node's termination grace period runs out,
/// past its PodDisruptionBudget and do-not-disrupt annotation.
pub fn disrupted_pod_delete(pod: &PodKey, node_termination_time: &str) -> Notice {
    notice(
        ObjectRef::Pod(pod.clone()),
        "Disrupted",
        format!(
            "Deleted at the node's termination time {node_termination_time}, regardless of its PodDisruptionBudget and do-not-disrupt annotation"
        ),
        false,
    )
}

/// `FailedDraining` (Warning) on a Node whose drain is refused.
pub fn failed_draining(node: &str, why: &str) -> Notice {
    notice(
        ObjectRef::Node(node.to_string()),
        "FailedDraining",
        format!("Failed to drain node, {why}"),
        true,
    )
}

/// `TerminationGracePeriodExpiring` (Warning) on the Node and the NodeClaim of a
/// terminating node with a `terminationGracePeriod`: what is left is deleted at `at`.
pub fn termination_grace_period_expiring(
    node: Option<&str>,
    nodeclaim: &str,
    at: &str,
) -> Vec<Notice> {
    on_both(node, nodeclaim, |r| {
        notice(
            r,
            "TerminationGracePeriodExpiring",
            format!("All pods will be deleted by {at}"),
            true,
        )
    })
}

/// This tool's own notices (the approval gate, operator actions): upstream has none, so
/// they keep the default window.
pub fn own(regarding: ObjectRef, reason: &'static str, note: String, warning: bool) -> Notice {
    notice(regarding, reason, note, warning)
}

/// The reason upstream gives an eviction (`evictionReason` in
/// `terminator/eviction.go`): the disruption reason as the API spells it, or `Forceful
/// Termination` when no disruption command deleted the node.
pub fn eviction_reason(delete_reason: &str) -> &'static str {
    match crate::engine::disruption::Reason::parse(
        delete_reason.split(" (").next().unwrap_or(delete_reason),
    ) {
        Some(r) if r.budget_reason().is_some() => r.as_str(),
        _ => "Forceful Termination",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_go_where_upstream_puts_them_with_its_types_and_windows() {
        let t = terminating(Some("ip-1"), "default-a", "Underutilized");
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].regarding, ObjectRef::Node("ip-1".into()));
        assert_eq!(t[0].note, "Disrupting Node: Underutilized");
        assert_eq!(t[1].note, "Disrupting NodeClaim: Underutilized");
        assert!(t.iter().all(|n| !n.warning));
        let u = unconsolidatable(None, "default-a", "Can't replace with a cheaper node");
        assert_eq!(u.len(), 1, "no Node before registration");
        assert_eq!(u[0].dedupe_window, UNCONSOLIDATABLE_DEDUPE);
        let f = failed_scheduling(
            &PodKey {
                namespace: "shop".into(),
                name: "web-1".into(),
            },
            "no pool fits",
        );
        assert!(f.warning);
        assert_eq!(f.dedupe_window, FAILED_SCHEDULING_DEDUPE);
        let n = nominated(
            &PodKey {
                namespace: "shop".into(),
                name: "web-1".into(),
            },
            Some("default-a"),
            Some("ip-1"),
        );
        assert_eq!(
            n.note,
            "Pod should schedule on: nodeclaim/default-a, node/ip-1"
        );
        assert!(n.rate_limited);
        assert!(
            termination_grace_period_expiring(Some("ip-1"), "default-a", "t")
                .iter()
                .all(|n| n.warning)
        );
        assert_eq!(
            eviction_reason("underutilized (decision #3)"),
            "Underutilized"
        );
        assert_eq!(eviction_reason("expired"), "Forceful Termination");
        let score = crate::engine::disruption::balanced::Score {
            savings_fraction: 0.75,
            disruption_fraction: 0.5,
        };
        let a = consolidation_approved("default", Some((Some("ip-1"), "default-a")), &score);
        assert_eq!(a.len(), 2);
        assert_eq!(
            a[0].note,
            "score 1.50 >= threshold 0.50 (k: 2, savings 75.0%, disruption 50.0%)"
        );
        let m = consolidation_approved("default", None, &score);
        assert_eq!(m[0].regarding, ObjectRef::NodePool("default".into()));
        assert_eq!(eviction_reason("deleted"), "Forceful Termination");
    }
}
