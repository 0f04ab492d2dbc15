//! What a kept verdict depends on, as the [`super::incremental::Planner`] compares it
//! from one pass to the next: each node's image (a fingerprint of everything a simulation
//! or a candidate's verdict reads of it and its pods, with the taints and anti-affinity
//! that decide which verdicts its change can reach) and the image of what every
//! simulation reads besides the nodes.

use std::collections::BTreeMap;

use crate::engine::fast_hash::FastMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::api::nodepool::NodePoolSpec;
use crate::engine::catalog::InstanceType;
use crate::engine::pod::Pod;
use crate::engine::state::{ClusterState, StateNode};

use super::incremental::Knobs;

/// A changed node: its NodeClaim, and its image before and after (either may be missing).
pub(super) type Changed = (String, Option<NodeImage>, Option<NodeImage>);

/// Every node's image.
pub(super) fn all_nodes(
    state: &ClusterState,
    pods_by_node: &[Vec<usize>],
) -> FastMap<String, NodeImage> {
    state
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.nodeclaim.clone(), node_image(n, &pods_by_node[i], state)))
        .collect()
}

/// The nodes whose images differ between `old` and `new`.
pub(super) fn diff(
    old: &FastMap<String, NodeImage>,
    new: &FastMap<String, NodeImage>,
) -> Vec<Changed> {
    let mut changed = Vec::new();
    for (k, n) in new {
        match old.get(k) {
            Some(o) if o.fingerprint == n.fingerprint => {}
            o => changed.push((k.clone(), o.cloned(), Some(n.clone()))),
        }
    }
    for (k, o) in old {
        if !new.contains_key(k) {
            changed.push((k.clone(), Some(o.clone()), None));
        }
    }
    changed
}

/// What every simulation of a pass reads besides the nodes.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) knobs: Knobs,
    pub(super) pools: BTreeMap<String, PoolImage>,
    pub(super) instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    pub(super) daemonsets: Vec<Pod>,
    /// Fingerprint of the pods every simulation places besides the candidates'.
    pub(super) pending: u64,
    /// Whether some pending pod carries topology rules.
    pub(super) pending_topology: bool,
    /// The pending pods' tolerations, to tell which nodes they could land on.
    pub(super) pending_tolerations: Vec<Vec<crate::engine::pod::Toleration>>,
    /// Which PDB is where and what it selects (not its status): what [`super::incremental::Verdicts::node_pods`]
    /// index and match.
    pub(super) pdbs: Vec<(String, String, crate::engine::selector::Selector)>,
}

/// What a simulation reads of a NodePool.
#[derive(Debug, PartialEq)]
pub(super) struct PoolImage {
    pub(super) spec: NodePoolSpec,
    pub(super) invalid: Option<String>,
    /// Capacity in use, when the pool has limits (otherwise it decides nothing).
    pub(super) in_use: Option<crate::engine::resources::Resources>,
}

/// A node as simulations see it.
#[derive(Debug, Clone)]
pub(super) struct NodeImage {
    pub(super) fingerprint: u64,
    /// Taints that keep pods off (NoSchedule, NoExecute).
    pub(super) taints: Vec<Taint>,
    /// It holds a pod with anti-affinity: that pod keeps others out of its domain.
    pub(super) anti: bool,
}

impl Shared {
    pub(super) fn of(state: &ClusterState, pending: &[&Pod], knobs: Knobs) -> Shared {
        let pools = state
            .nodepools
            .iter()
            .map(|(name, p)| {
                let image = PoolImage {
                    spec: p.spec.clone(),
                    invalid: p.validation_failure().map(|s| s.to_string()),
                    in_use: (!p.spec.limits.is_empty()).then(|| state.pool_usage(name)),
                };
                (name.clone(), image)
            })
            .collect();
        let mut h = fingerprint_hasher();
        for p in pending {
            hash_pod(p, &mut h);
        }
        Shared {
            knobs,
            pools,
            instance_types: state.instance_types.clone(),
            daemonsets: state.daemonsets.clone(),
            pending: h.finish(),
            pending_topology: pending.iter().any(|p| has_topology(p)),
            pending_tolerations: pending.iter().map(|p| p.tolerations.clone()).collect(),
            pdbs: state
                .pdbs
                .iter()
                .map(|p| (p.namespace.clone(), p.name.clone(), p.selector.clone()))
                .collect(),
        }
    }

    /// Whether what every simulation reads is the same in both.
    pub(super) fn same(&self, other: &Shared) -> bool {
        let same_types =
            self.instance_types.len() == other.instance_types.len()
                && self.instance_types.iter().zip(&other.instance_types).all(
                    |((a, ta), (b, tb))| {
                        a == b
                            && ta.len() == tb.len()
                            && ta.iter().zip(tb).all(|(x, y)| Arc::ptr_eq(x, y))
                    },
                );
        self.knobs == other.knobs
            && self.pending == other.pending
            && same_types
            && self.pools == other.pools
            && self.daemonsets == other.daemonsets
    }
}

/// Whether a pod with these tolerations could be scheduled on the node as far as taints
/// go (the simulation may still find no room there).
pub(super) fn admits(node: &NodeImage, tolerations: &[crate::engine::pod::Toleration]) -> bool {
    node.taints
        .iter()
        .all(|t| tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// Rules that make a pod's placement depend on pods on other nodes.
pub(super) fn has_topology(p: &Pod) -> bool {
    !p.spread.is_empty()
        || !p.affinity.is_empty()
        || !p.anti_affinity.is_empty()
        || !p.preferred_affinity.is_empty()
        || !p.preferred_anti_affinity.is_empty()
}

pub(super) fn node_image(n: &StateNode, pods: &[usize], state: &ClusterState) -> NodeImage {
    let mut h = fingerprint_hasher();
    n.name.hash(&mut h);
    n.nodeclaim.hash(&mut h);
    n.nodepool.hash(&mut h);
    n.instance_type.hash(&mut h);
    n.zone.hash(&mut h);
    n.capacity_type.hash(&mut h);
    n.price.to_bits().hash(&mut h);
    n.labels.hash(&mut h);
    for t in &n.taints {
        hash_taint(t, &mut h);
    }
    n.allocatable.hash(&mut h);
    n.capacity.hash(&mut h);
    (n.initialized, n.registered, n.ready, n.deleting).hash(&mut h);
    // What drift reads of it (kept in `Verdicts::drifted`).
    n.claim_labels.hash(&mut h);
    n.annotations.hash(&mut h);
    n.foreign_drift.hash(&mut h);
    n.nodeclass_drift.hash(&mut h);
    let mut anti = false;
    for &p in pods {
        // Positions too: what is kept per node refers to its pods by position.
        p.hash(&mut h);
        let p = &state.pods[p];
        hash_pod(p, &mut h);
        anti |= !p.anti_affinity.is_empty() || !p.preferred_anti_affinity.is_empty();
    }
    NodeImage {
        fingerprint: h.finish(),
        taints: n
            .taints
            .iter()
            .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
            .cloned()
            .collect(),
        anti,
    }
}

/// The hasher of fingerprints: every pod of every node is hashed at each refresh, so a
/// fast one (foldhash, fixed seed: fingerprints are only compared within the process).
pub(super) fn fingerprint_hasher() -> impl Hasher {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().build_hasher()
}

pub(super) fn hash_taint(t: &Taint, h: &mut impl Hasher) {
    t.key.hash(h);
    t.value.hash(h);
    t.effect.hash(h);
}

/// Everything of a pod a simulation or a candidate's verdict reads. A pod's spec is
/// immutable for its uid, except what is hashed here (labels, annotations, tolerations,
/// binding and status).
pub(super) fn hash_pod(p: &Pod, h: &mut impl Hasher) {
    p.key.hash(h);
    p.uid.hash(h);
    p.labels.hash(h);
    p.annotations.hash(h);
    p.node_name.hash(h);
    std::mem::discriminant(&p.phase).hash(h);
    p.requests.hash(h);
    p.node_selector.hash(h);
    p.tolerations.hash(h);
    p.affinity.hash(h);
    p.preferred_affinity.hash(h);
    p.anti_affinity.hash(h);
    p.preferred_anti_affinity.hash(h);
    p.spread.hash(h);
    p.host_ports.hash(h);
    p.owner.hash(h);
    p.priority.hash(h);
    p.created.hash(h);
    p.started.hash(h);
    p.deleting.hash(h);
    p.unschedulable.hash(h);
}
