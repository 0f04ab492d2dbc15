//! The pods as the kube-scheduler stand-in and the workload controllers read them, kept
//! up to date as pods come, go and bind, so a round reads only what it needs instead of
//! walking every pod of the cluster (the 1,000-node day holds 10,000 of them and runs
//! tens of thousands of rounds).
//!
//! Every set is ordered by [`PodKey`], the order of the cluster's own pod map, so what a
//! round reads from the index comes in the order a walk over all pods would give. Each
//! entry shares the pod itself with the cluster's map (an `Arc`), so a reader gets the pod
//! without hashing its key again: the scheduler reads every bound pod at each attempt,
//! and looking 10,000 keys up was half of its cost.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::engine::pod::{Pod, PodKey};

/// Pods of one set, by key.
type Pods = BTreeMap<PodKey, Arc<Pod>>;

/// A workload controller that owns pods: (namespace, owner kind, owner name).
pub(super) type OwnerKey = (String, String, String);

/// Pods by what the stand-ins ask of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct PodIndex {
    /// Pods waiting for the scheduler: not bound, not being deleted, not a DaemonSet's
    /// (the DaemonSet controller places those), not finished.
    pending: Pods,
    /// Pods bound to each node, whatever their phase.
    bound: HashMap<String, Pods>,
    /// Live (not deleting) pods of each Deployment and Job.
    owned: HashMap<OwnerKey, Pods>,
}

/// The owner a pod is counted under, if a Deployment or a Job owns it.
fn owner_key(p: &Pod) -> Option<OwnerKey> {
    let o = p.owner.as_ref()?;
    (o.kind == "Deployment" || o.kind == "Job")
        .then(|| (p.key.namespace.clone(), o.kind.clone(), o.name.clone()))
}

/// Whether the scheduler looks at `p` (see [`PodIndex::pending`]).
fn waits_for_scheduler(p: &Pod) -> bool {
    p.node_name.is_none() && p.deleting.is_none() && !p.is_daemonset() && !p.is_terminal()
}

impl PodIndex {
    /// Counts `p` in (after it was stored or changed).
    pub(super) fn insert(&mut self, p: &Arc<Pod>) {
        if waits_for_scheduler(p) {
            self.pending.insert(p.key.clone(), Arc::clone(p));
        }
        if let Some(node) = &p.node_name {
            self.bound
                .entry(node.clone())
                .or_default()
                .insert(p.key.clone(), Arc::clone(p));
        }
        if p.deleting.is_none()
            && let Some(o) = owner_key(p)
        {
            self.owned
                .entry(o)
                .or_default()
                .insert(p.key.clone(), Arc::clone(p));
        }
    }

    /// Counts `p` out (before it changes or after it was removed). Once it is out, the
    /// cluster's map holds the pod's only `Arc`, so changing it copies nothing.
    pub(super) fn remove(&mut self, p: &Pod) {
        self.pending.remove(&p.key);
        if let Some(node) = &p.node_name
            && let Some(set) = self.bound.get_mut(node)
        {
            set.remove(&p.key);
            if set.is_empty() {
                self.bound.remove(node);
            }
        }
        if let Some(o) = owner_key(p)
            && let Some(set) = self.owned.get_mut(&o)
        {
            set.remove(&p.key);
            if set.is_empty() {
                self.owned.remove(&o);
            }
        }
    }

    /// Pods waiting for the scheduler, in key order.
    pub(super) fn pending(&self) -> impl Iterator<Item = &Pod> {
        self.pending.values().map(|p| &**p)
    }

    /// Pods bound to `node`, in key order.
    pub(super) fn bound_to(&self, node: &str) -> impl Iterator<Item = &Pod> {
        self.bound
            .get(node)
            .into_iter()
            .flat_map(|set| set.values().map(|p| &**p))
    }

    /// Live pods of a Deployment or Job, in key order.
    pub(super) fn owned_by(&self, owner: &OwnerKey) -> impl Iterator<Item = &Pod> {
        self.owned
            .get(owner)
            .into_iter()
            .flat_map(|set| set.values().map(|p| &**p))
    }

    /// How many live pods a Deployment or Job has.
    pub(super) fn owned_count(&self, owner: &OwnerKey) -> usize {
        self.owned.get(owner).map_or(0, BTreeMap::len)
    }
}

impl PodIndex {
    /// The index built from scratch over `pods`: what the kept one must equal.
    #[cfg(test)]
    pub(super) fn rebuilt<'a>(pods: impl Iterator<Item = &'a Arc<Pod>>) -> PodIndex {
        let mut index = PodIndex::default();
        for p in pods {
            if p.node_name.is_none()
                && p.deleting.is_none()
                && !p.is_daemonset()
                && !p.is_terminal()
            {
                index.pending.insert(p.key.clone(), Arc::clone(p));
            }
            if let Some(n) = &p.node_name {
                index
                    .bound
                    .entry(n.clone())
                    .or_default()
                    .insert(p.key.clone(), Arc::clone(p));
            }
            if let Some(o) = &p.owner
                && (o.kind == "Deployment" || o.kind == "Job")
                && p.deleting.is_none()
            {
                let k = (p.key.namespace.clone(), o.kind.clone(), o.name.clone());
                index
                    .owned
                    .entry(k)
                    .or_default()
                    .insert(p.key.clone(), Arc::clone(p));
            }
        }
        index
    }
}
