//! Where each pod of a [`ClusterState`]'s `pods` list is: its position by key, and the
//! positions of the pods bound to each Node name or to none; and what the pods bound to
//! each Node name add to it in a scheduling input ([`NodeLoad`], [`PodFacts`]), so a
//! disruption pass builds its input without reading every pod
//! ([`SimInput::placed`](crate::engine::disruption::SimInput::placed)).
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

use crate::engine::pod::{HostPort, Pod, PodKey};
use crate::engine::resources::Resources;
use crate::engine::scheduling::BoundPod;
use crate::engine::state::{ClusterState, is_reschedulable};

/// Pods by key and by the Node name they are bound to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodPlaces {
    /// Position in `pods` of each pod.
    at: HashMap<PodKey, usize, FixedState>,
    /// Node name -> the pods naming it and what they add up to.
    by_node: HashMap<String, OnNode, FixedState>,
    /// Positions of the pods bound to no node.
    unbound: BTreeSet<usize>,
    /// By position in `pods`: what a scheduling input needs to know of the pod.
    facts: Vec<PodFacts>,
}

/// The pods bound to one Node name.
#[derive(Clone, Debug, Default, PartialEq)]
struct OnNode {
    /// Their positions in `pods`, ascending (the `pods` order).
    pods: Vec<usize>,
    load: NodeLoad,
}

/// What the pods bound to a Node name take of it in a scheduling input: the requests
/// and host ports of those not finished (the pods
/// [`bound_on`](crate::engine::disruption::sim_input::bound_on) lists). Kept as pods
/// come, go and change, because adding them up at every pass meant reading all 10,000
/// pods of the 1,000-node day, each a cache miss (7.9% of the day).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeLoad {
    pub requested: Resources,
    /// Sorted: what counts is which ports are taken, not which pod came first.
    pub host_ports: Vec<HostPort>,
}

/// What a scheduling input needs to know of one pod, kept by position.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PodFacts {
    /// Not finished: it holds room on its node, and topology counts it.
    pub counted: bool,
    /// [`BoundPod::repels_others`].
    pub repels: bool,
}

impl PodFacts {
    pub fn of(pod: &Pod) -> PodFacts {
        PodFacts {
            counted: PodFacts::counts(pod),
            repels: BoundPod::repels_others(pod),
        }
    }

    /// Whether a pod bound to a node takes room there and counts in topology: what
    /// [`PodFacts::counted`] says, and which bound pods a scheduling input lists.
    pub fn counts(pod: &Pod) -> bool {
        !pod.is_terminal()
    }
}

impl NodeLoad {
    /// Adds (`sign` 1) or takes away (-1) what `pod` takes, when it is counted.
    fn count(&mut self, pod: &Pod, sign: i8) {
        if !PodFacts::counts(pod) {
            return;
        }
        if sign > 0 {
            self.requested.add(&pod.requests);
            for hp in &pod.host_ports {
                let at = self.host_ports.partition_point(|x| x < hp);
                self.host_ports.insert(at, hp.clone());
            }
        } else {
            self.requested.sub(&pod.requests);
            for hp in &pod.host_ports {
                if let Ok(at) = self.host_ports.binary_search(hp) {
                    self.host_ports.remove(at);
                }
            }
        }
    }
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
            places.facts.push(PodFacts::of(p));
            places.place(i, p.node_name.as_deref());
            places.load(p, 1);
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
                self.load(&pods[i], -1);
                if pods[i].node_name != pod.node_name {
                    self.unplace(i, pods[i].node_name.as_deref());
                    self.place(i, pod.node_name.as_deref());
                }
                self.load(&pod, 1);
                self.facts[i] = PodFacts::of(&pod);
                Some(std::mem::replace(&mut pods[i], pod))
            }
            None => {
                let i = pods.len();
                self.at.insert(pod.key.clone(), i);
                self.facts.push(PodFacts::of(&pod));
                self.place(i, pod.node_name.as_deref());
                self.load(&pod, 1);
                pods.push(pod);
                None
            }
        }
    }

    /// Removes the pod of `key` from `pods`; the last pod takes its place.
    pub fn remove(&mut self, pods: &mut Vec<Pod>, key: &PodKey) -> Option<Removed> {
        let i = self.at.remove(key)?;
        let last = pods.len() - 1;
        self.load(&pods[i], -1);
        self.unplace(i, pods[i].node_name.as_deref());
        self.facts.swap_remove(i);
        let pod = pods.swap_remove(i);
        if i == last {
            return Some(Removed {
                pod,
                moved_to: None,
            });
        }
        let moved = &pods[i];
        self.relist(last, i, moved.node_name.as_deref());
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
        self.by_node.get(name).map_or(&[], |n| n.pods.as_slice())
    }

    /// What the pods bound to the Node of this name take of it.
    pub fn load_on(&self, name: &str) -> Option<&NodeLoad> {
        self.by_node.get(name).map(|n| &n.load)
    }

    /// What a scheduling input needs to know of the pod at `position`.
    pub fn facts(&self, position: usize) -> PodFacts {
        self.facts[position]
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

    /// Adds (`sign` 1) or takes away (-1) what `pod` takes of its node. Called with the
    /// pod bound where [`PodPlaces::place`] listed it: before it is unlisted, after it
    /// is listed.
    fn load(&mut self, pod: &Pod, sign: i8) {
        if let Some(n) = pod.node_name.as_deref()
            && let Some(on) = self.by_node.get_mut(n)
        {
            on.load.count(pod, sign);
        }
    }

    /// The pod at `from` moved to `to`, bound where it was: its load stays.
    fn relist(&mut self, from: usize, to: usize, node: Option<&str>) {
        match node {
            Some(n) => {
                if let Some(on) = self.by_node.get_mut(n) {
                    if let Ok(at) = on.pods.binary_search(&from) {
                        on.pods.remove(at);
                    }
                    if let Err(at) = on.pods.binary_search(&to) {
                        on.pods.insert(at, to);
                    }
                }
            }
            None => {
                self.unbound.remove(&from);
                self.unbound.insert(to);
            }
        }
    }

    fn place(&mut self, i: usize, node: Option<&str>) {
        match node {
            Some(n) => {
                let list = &mut self.by_node.entry(n.to_string()).or_default().pods;
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
                if let Some(on) = self.by_node.get_mut(n) {
                    if let Ok(at) = on.pods.binary_search(&i) {
                        on.pods.remove(at);
                    }
                    if on.pods.is_empty() {
                        // Every pod's load was taken away before it was unlisted.
                        debug_assert_eq!(on.load, NodeLoad::default(), "load of {n}");
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
        /// terminating or not, asking for `cpu` (in tenths of a core), with host port
        /// 8000 + `port` or none, with required anti-affinity or not.
        Apply(usize, usize, bool, bool, bool, i64, Option<i32>, bool),
        Remove(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (
                (0..10usize, 0..NODES.len(), any::<bool>(), any::<bool>(), any::<bool>()),
                (1..8i64, proptest::option::of(0..3i32), any::<bool>()),
            )
                .prop_map(|((k, n, u, t, d), (cpu, port, repels))| {
                    Step::Apply(k, n, u, t, d, cpu, port, repels)
                }),
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
                    Step::Apply(k, n, unschedulable, terminal, deleting, cpu, port, repels) => {
                        let mut p = Pod::new("default", &format!("p{k}"), Resources::cpu_mem(100 * cpu, 1 << 20));
                        p.host_ports = port
                            .map(|x| HostPort {
                                ip: String::new(),
                                port: 8000 + x,
                                protocol: "TCP".into(),
                            })
                            .into_iter()
                            .collect();
                        if repels {
                            p.anti_affinity.push(crate::engine::pod::AffinityTerm {
                                selector: crate::engine::selector::Selector::from_labels(&p.labels),
                                namespaces: vec![],
                                topology_key: crate::api::labels::HOSTNAME.into(),
                                weight: 0,
                            });
                        }
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
                let by_node = places.by_node(&s);
                prop_assert_eq!(&by_node, &s.pods_by_node());
                // What each node's pods take, read from the kept loads, is what adding
                // them up gives (unit-test builds assert it inside).
                crate::engine::disruption::SimInput::placed(&s, &by_node, &places);
                let kept: Vec<&PodKey> = places.pending(&s).iter().map(|p| &p.key).collect();
                let fresh = crate::engine::disruption::pending_pods(&s);
                prop_assert_eq!(kept, fresh.iter().map(|p| &p.key).collect::<Vec<_>>());
            }
        }
    }
}
