//! Node repair: which nodes are unhealthy long enough to be replaced, and whether a pool
//! may repair at all.
//!
//! Upstream (`pkg/controllers/node/health/controller.go`, feature gate `NodeRepair`)
//! force-deletes a node once a condition named by the cloud provider's repair policies
//! has held past its toleration, unless more than 20% of the pool's nodes are unhealthy.
//! Here repair is a voluntary disruption instead (the direction of upstream's RFC #3192
//! and PR #3311): an unhealthy node becomes an `Unhealthy` decision that goes through the
//! pool's budgets, the approval gate and pauses like any other, replacement first. The
//! 20% cap stays, per pool, and is reported; `karpenter-tui.dev/do-not-repair` on a node
//! or its NodePool vetoes it.

use chrono::{DateTime, TimeDelta, Utc};

use crate::engine::fast_hash::FastMap;
use crate::engine::state::{ClusterState, StateNode};

/// A node condition that, in one status, means the node is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairPolicy {
    pub condition: &'static str,
    pub status: &'static str,
    /// How long the condition may hold before the node is repaired.
    pub toleration: TimeDelta,
}

const fn policy(condition: &'static str, status: &'static str, minutes: i64) -> RepairPolicy {
    RepairPolicy {
        condition,
        status,
        toleration: TimeDelta::minutes(minutes),
    }
}

/// The AWS provider's repair policies (aws/karpenter-provider-aws
/// `pkg/cloudprovider/cloudprovider.go`, `RepairPolicies`): the kubelet's Ready, and the
/// EKS node monitoring agent's conditions.
pub const POLICIES: [RepairPolicy; 7] = [
    policy("Ready", "False", 30),
    policy("Ready", "Unknown", 30),
    policy("AcceleratedHardwareReady", "False", 10),
    policy("StorageReady", "False", 30),
    policy("NetworkingReady", "False", 30),
    policy("KernelReady", "False", 30),
    policy("ContainerRuntimeReady", "False", 30),
];

/// The share of a pool's nodes that may be unhealthy before repair in it stops
/// (upstream's `allowedUnhealthyPercent`): beyond it the fault is likely systemic (a bad
/// image, a zone outage) and replacing nodes would not help.
pub const UNHEALTHY_PERCENT: usize = 20;

/// A condition of a node that one of the [`POLICIES`] names: the node is unhealthy since
/// the condition last changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFault {
    pub condition: String,
    pub status: String,
    /// The condition's `lastTransitionTime`.
    pub since: DateTime<Utc>,
}

impl NodeFault {
    /// The fault a node condition is, if a policy names it.
    pub fn of(condition: &str, status: &str, since: DateTime<Utc>) -> Option<NodeFault> {
        policy_for(condition, status).map(|_| NodeFault {
            condition: condition.to_string(),
            status: status.to_string(),
            since,
        })
    }

    /// When the fault has been tolerated long enough.
    pub fn repair_at(&self) -> DateTime<Utc> {
        let toleration =
            policy_for(&self.condition, &self.status).map_or(TimeDelta::zero(), |p| p.toleration);
        self.since + toleration
    }
}

impl std::fmt::Display for NodeFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={} since {}",
            self.condition,
            self.status,
            self.since.format("%H:%M:%S UTC")
        )
    }
}

fn policy_for(condition: &str, status: &str) -> Option<&'static RepairPolicy> {
    POLICIES
        .iter()
        .find(|p| p.condition == condition && p.status == status)
}

/// The node's fault that comes due first (upstream requeues on the closest one).
pub fn first_due(node: &StateNode) -> Option<&NodeFault> {
    node.faults.iter().min_by_key(|f| f.repair_at())
}

/// The node's fault that is due at `now`, if any.
pub fn due(node: &StateNode, now: DateTime<Utc>) -> Option<&NodeFault> {
    first_due(node).filter(|f| f.repair_at() <= now)
}

/// How many unhealthy nodes a pool of `nodes` tolerates and still repairs: 20%, rounded
/// up (as a PDB's percentage rounds), so one of three may be repaired.
pub fn cap(nodes: usize) -> usize {
    (nodes * UNHEALTHY_PERCENT).div_ceil(100)
}

/// A pool's health as repair sees it: registered nodes, and those with any fault
/// (tolerated yet or not, as upstream counts them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolHealth {
    pub nodes: usize,
    pub unhealthy: usize,
}

impl PoolHealth {
    /// More nodes are unhealthy than the cap allows: repair in the pool stops.
    pub fn capped(&self) -> bool {
        self.unhealthy > cap(self.nodes)
    }
}

/// Every pool's health, by name.
pub fn pool_health(state: &ClusterState) -> FastMap<&str, PoolHealth> {
    let mut out: FastMap<&str, PoolHealth> = FastMap::default();
    for n in state.nodes.iter().filter(|n| n.registered) {
        let h = out.entry(n.nodepool.as_str()).or_default();
        h.nodes += 1;
        if !n.faults.is_empty() {
            h.unhealthy += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(min: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::minutes(min)
    }

    #[test]
    fn only_the_conditions_a_policy_names_are_faults_and_each_has_its_toleration() {
        assert!(NodeFault::of("Ready", "True", at(0)).is_none());
        assert!(NodeFault::of("MemoryPressure", "True", at(0)).is_none());
        assert_eq!(
            NodeFault::of("Ready", "Unknown", at(0))
                .unwrap()
                .repair_at(),
            at(30)
        );
        assert_eq!(
            NodeFault::of("AcceleratedHardwareReady", "False", at(5))
                .unwrap()
                .repair_at(),
            at(15)
        );
    }

    #[test]
    fn the_cap_is_a_fifth_of_the_pool_rounded_up() {
        assert_eq!(cap(0), 0);
        assert_eq!(cap(1), 1);
        assert_eq!(cap(3), 1);
        assert_eq!(cap(5), 1);
        assert_eq!(cap(6), 2);
        assert_eq!(cap(10), 2);
        assert!(
            PoolHealth {
                nodes: 10,
                unhealthy: 3
            }
            .capped()
        );
        assert!(
            !PoolHealth {
                nodes: 10,
                unhealthy: 2
            }
            .capped()
        );
    }
}
