//! Where each pod of a [`ClusterState`]'s `pods` list is: its position by key, and the
//! positions of the pods bound to each Node name or to none.
//!
//! The controller keeps one beside its state and changes the two together (pods come, go
//! and bind only through [`PodPlaces::upsert`] and [`PodPlaces::remove`]), so a
//! disruption poll or a provisioning round reads the pods by node and the pending pods
//! from it instead of hashing each of 10,000 pods' node names at every poll (8% of the
//! 1,000-node day). [`ClusterState::pods_by_node`] and
//! [`pending_pods`](crate::engine::disruption::pending_pods) stay the definitions: what
//! this index answers must equal them: the controller audits the index against one built
//! from scratch, and unit-test builds check every answer against those definitions.

use std::collections::{BTreeSet, HashMap, HashSet};

use foldhash::fast::FixedState;

use crate::engine::pod::{Pod, PodKey};
use crate::engine::state::{ClusterState, is_reschedulable};

/// Pods by key and by the Node name they are bound to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodPlaces {
    /// Position in `pods` of each pod.
    at: HashMap<PodKey, usize, FixedState>,
    /// Node name -> positions of the pods naming it, ascending (the `pods` order).
    by_node: HashMap<String, Vec<usize>, FixedState>,
    /// Positions of the pods bound to no node.
    unbound: BTreeSet<usize>,
}

/// What [`PodPlaces::remove`] took out.
pub struct Removed {
    pub pod: Pod,
    /// The position the last pod moved into to fill the gap, if one moved.
    pub moved_to: Option<usize>,
}

impl PodPlaces {
    /// The index of `pods` from scratch: what the kept one must equal.
    pub fn of(pods: &[Pod]) -> PodPlaces {
        let mut places = PodPlaces::default();
        for (i, p) in pods.iter().enumerate() {
            places.at.insert(p.key.clone(), i);
            places.place(i, p.node_name.as_deref());
        }
        places
    }

    /// Where the pod of `key` is in `pods`.
    pub fn position(&self, key: &PodKey) -> Option<usize> {
        self.at.get(key).copied()
    }

    /// Stores `pod` in `pods`: in place of the pod with its key, or appended. Returns the
    /// pod it replaced.
    pub fn upsert(&mut self, pods: &mut Vec<Pod>, pod: Pod) -> Option<Pod> {
        match self.at.get(&pod.key).copied() {
            Some(i) => {
                if pods[i].node_name != pod.node_name {
                    self.unplace(i, pods[i].node_name.as_deref());
                    self.place(i, pod.node_name.as_deref());
                }
                Some(std::mem::replace(&mut pods[i], pod))
            }
            None => {
                let i = pods.len();
                self.at.insert(pod.key.clone(), i);
                self.place(i, pod.node_name.as_deref());
                pods.push(pod);
                None
            }
        }
    }

    /// Removes the pod of `key` from `pods`; the last pod takes its place.
    pub fn remove(&mut self, pods: &mut Vec<Pod>, key: &PodKey) -> Option<Removed> {
        let i = self.at.remove(key)?;
        let last = pods.len() - 1;
        self.unplace(i, pods[i].node_name.as_deref());
        let pod = pods.swap_remove(i);
        if i == last {
            return Some(Removed {
                pod,
                moved_to: None,
            });
        }
        let moved = &pods[i];
        self.unplace(last, moved.node_name.as_deref());
        self.place(i, moved.node_name.as_deref());
        self.at.insert(moved.key.clone(), i);
        Some(Removed {
            pod,
            moved_to: Some(i),
        })
    }

    /// [`ClusterState::pods_by_node`] of `state`, read from the index. As there, when
    /// two nodes share a name the last of them lists the pods.
    pub fn by_node(&self, state: &ClusterState) -> Vec<Vec<usize>> {
        // Two nodes of one name find the same list: known by where it starts, so no name
        // is hashed twice.
        let mut taken: HashSet<*const usize, FixedState> =
            HashSet::with_capacity_and_hasher(state.nodes.len(), FixedState::default());
        let mut out = vec![Vec::new(); state.nodes.len()];
        for (i, n) in state.nodes.iter().enumerate().rev() {
            let list = self.on_node(&n.name);
            if !list.is_empty() && taken.insert(list.as_ptr()) {
                out[i] = list.to_vec();
            }
        }
        #[cfg(test)]
        assert_eq!(out, state.pods_by_node(), "kept pods by node");
        out
    }

    /// Positions of the pods bound to the Node of this name, ascending.
    pub fn on_node(&self, name: &str) -> &[usize] {
        self.by_node.get(name).map_or(&[], Vec::as_slice)
    }

    /// [`pending_pods`](crate::engine::disruption::pending_pods) of `state`, read from the
    /// index: the unbound pods a provisioner would schedule and the pods of nodes going
    /// away, in `pods` order.
    pub fn pending<'s>(&self, state: &'s ClusterState) -> Vec<&'s Pod> {
        let going: BTreeSet<&str> = state
            .nodes
            .iter()
            .filter(|n| n.going_away())
            .map(|n| n.name.as_str())
            .collect();
        let mut at: Vec<usize> = self
            .unbound
            .iter()
            .copied()
            .filter(|&i| state.pods[i].is_provisionable())
            .collect();
        for name in going {
            at.extend(
                self.on_node(name)
                    .iter()
                    .copied()
                    .filter(|&i| is_reschedulable(&state.pods[i])),
            );
        }
        at.sort_unstable();
        let out: Vec<&Pod> = at.into_iter().map(|i| &state.pods[i]).collect();
        #[cfg(test)]
        assert_eq!(
            out.iter().map(|p| &p.key).collect::<Vec<_>>(),
            crate::engine::disruption::pending_pods(state)
                .iter()
                .map(|p| &p.key)
                .collect::<Vec<_>>(),
            "kept pending pods"
        );
        out
    }

    fn place(&mut self, i: usize, node: Option<&str>) {
        match node {
            Some(n) => {
                let list = self.by_node.entry(n.to_string()).or_default();
                if let Err(at) = list.binary_search(&i) {
                    list.insert(at, i);
                }
            }
            None => {
                self.unbound.insert(i);
            }
        }
    }

    fn unplace(&mut self, i: usize, node: Option<&str>) {
        match node {
            Some(n) => {
                if let Some(list) = self.by_node.get_mut(n) {
                    if let Ok(at) = list.binary_search(&i) {
                        list.remove(at);
                    }
                    if list.is_empty() {
                        self.by_node.remove(n);
                    }
                }
            }
            None => {
                self.unbound.remove(&i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use proptest::prelude::*;

    use super::*;
    use crate::api::nodepool::NodePool;
    use crate::engine::catalog::CapacityType;
    use crate::engine::disruption::fixture::instance_type;
    use crate::engine::pod::Phase;
    use crate::engine::resources::Resources;
    use crate::engine::state::StateNode;

    /// Where a pod in a step is bound: no node, one of the state's, or a Node the state
    /// does not know (another provisioner's).
    const NODES: [Option<&str>; 5] = [None, Some("a"), Some("b"), Some("c"), Some("other")];

    /// Nodes a, b and c; b is being deleted, and a second node also answers to "c" (a
    /// NodeClaim's name before its Node registered can be taken by another's Node).
    fn state() -> ClusterState {
        let it = instance_type("m.4", 4, 16, 0.2, None);
        let pool = NodePool::unconstrained("default");
        let mut s = ClusterState::default();
        for name in ["a", "b", "c", "c"] {
            let mut n = StateNode::launched(
                name,
                &pool,
                &it,
                CapacityType::OnDemand,
                DateTime::UNIX_EPOCH,
            );
            n.deleting = name == "b";
            s.nodes.push(n);
        }
        s
    }

    #[derive(Clone, Debug)]
    enum Step {
        /// Pod `k` is applied: bound to `NODES[node]`, pending or not, finished or not,
        /// terminating or not.
        Apply(usize, usize, bool, bool, bool),
        Remove(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0..10usize, 0..NODES.len(), any::<bool>(), any::<bool>(), any::<bool>())
                .prop_map(|(k, n, u, t, d)| Step::Apply(k, n, u, t, d)),
            1 => (0..10usize).prop_map(Step::Remove),
        ]
    }

    fn key(k: usize) -> PodKey {
        PodKey {
            namespace: "default".into(),
            name: format!("p{k}"),
        }
    }

    proptest! {
        /// Whatever pods come, go, bind and finish, the kept index is the one built from
        /// scratch, and what it answers is what the definitions say.
        #[test]
        fn kept_places_answer_as_the_definitions_do(steps in prop::collection::vec(step(), 1..60)) {
            let mut s = state();
            let mut places = PodPlaces::default();
            for st in steps {
                match st {
                    Step::Apply(k, n, unschedulable, terminal, deleting) => {
                        let mut p = Pod::new("default", &format!("p{k}"), Resources::cpu_mem(100, 1 << 20));
                        p.node_name = NODES[n].map(str::to_string);
                        p.unschedulable = unschedulable;
                        if terminal {
                            p.phase = Phase::Succeeded;
                        }
                        p.deleting = deleting.then_some(DateTime::UNIX_EPOCH);
                        let before = places.position(&key(k)).map(|i| s.pods[i].clone());
                        let replaced = places.upsert(&mut s.pods, p);
                        prop_assert_eq!(replaced, before);
                    }
                    Step::Remove(k) => {
                        let len = s.pods.len();
                        let at = places.position(&key(k));
                        let removed = places.remove(&mut s.pods, &key(k));
                        prop_assert_eq!(removed.is_some(), at.is_some());
                        if let (Some(r), Some(i)) = (removed, at) {
                            prop_assert_eq!(r.pod.key, key(k));
                            prop_assert_eq!(r.moved_to, (i + 1 < len).then_some(i));
                        }
                    }
                }
                prop_assert_eq!(&places, &PodPlaces::of(&s.pods));
                for (i, p) in s.pods.iter().enumerate() {
                    prop_assert_eq!(places.position(&p.key), Some(i));
                }
                prop_assert_eq!(places.by_node(&s), s.pods_by_node());
                let kept: Vec<&PodKey> = places.pending(&s).iter().map(|p| &p.key).collect();
                let fresh = crate::engine::disruption::pending_pods(&s);
                prop_assert_eq!(kept, fresh.iter().map(|p| &p.key).collect::<Vec<_>>());
            }
        }
    }
}
