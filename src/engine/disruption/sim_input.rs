//! What a pass simulates against: every pool, every node not being deleted (uninitialized
//! ones included, their capacity on its way, but marked), every bound pod; and what a
//! simulation must place besides a command's candidates (upstream `SimulateScheduling`:
//! pending pods and the pods of nodes already going away).

use crate::engine::fast_hash::{FastMap, FastSet};
use std::cell::OnceCell;
use std::sync::Arc;

use crate::engine::pod::{Pod, PodKey};
use crate::engine::pod_places::{NodeLoad, PodFacts, PodPlaces};
use crate::engine::scheduling::{
    BoundPod, GroupCounts, MinValuesPolicy, NodeInput, NodeLabels, PoolInput, PreferencePolicy,
    Simulator, SolveInput,
};
use crate::engine::state::{ClusterState, StateNode};

/// Whether simulations see this node: one being deleted, or tainted by a disruption in
/// flight, is already gone for them.
pub fn simulated(n: &StateNode) -> bool {
    !n.going_away()
}

/// The pods bound to the node at `i` that simulations count (every one not finished),
/// none when simulations do not see the node: what the node adds to `input.bound`.
pub fn bound_on<'a, 'p>(
    state: &'a ClusterState,
    i: usize,
    pods_by_node: &'p [Vec<usize>],
) -> impl Iterator<Item = BoundPod<'a>> + use<'a, 'p> {
    let n = &state.nodes[i];
    let pods = if simulated(n) {
        &pods_by_node[i][..]
    } else {
        &[]
    };
    pods.iter()
        .map(|&p| &state.pods[p])
        .filter(|p| PodFacts::counts(p))
        .map(move |p| BoundPod::new(p, &n.labels, &n.taints))
}

/// The scheduling input of a pass: every pool, every node not being deleted (uninitialized
/// ones included: their capacity is on its way), every bound pod.
pub struct SimInput<'a> {
    pub input: SolveInput<'a>,
    /// State node index -> index into `input.nodes`.
    pub index: Vec<Option<usize>>,
    /// Node name -> NodeClaim of the nodes that are not initialized: a pod a simulation
    /// places there is counting on capacity that is not there yet.
    pub uninitialized: FastMap<String, String>,
}

impl<'a> SimInput<'a> {
    /// The input of `state`, adding up what each node's pods take.
    pub fn new(state: &'a ClusterState, pods_by_node: &[Vec<usize>]) -> SimInput<'a> {
        SimInput::build(state, |i, bound| {
            let mut load = NodeLoad::default();
            for b in bound_on(state, i, pods_by_node) {
                load.requested.add(&b.pod.requests);
                load.host_ports.extend(b.pod.host_ports.iter().cloned());
                bound.push(b);
            }
            load.host_ports.sort_unstable();
            load
        })
    }

    /// [`SimInput::new`], with each node's load and each pod's facts read from `places`
    /// instead of from the pods: `places` must be exactly the index of `state.pods`, and
    /// `pods_by_node` what it answers (the controller keeps both so, and audits them).
    pub fn placed(
        state: &'a ClusterState,
        pods_by_node: &[Vec<usize>],
        places: &PodPlaces,
    ) -> SimInput<'a> {
        let sim = SimInput::build(state, |i, bound| {
            let on = &pods_by_node[i];
            if on.is_empty() {
                // Also the earlier of two nodes of one name: the last one lists the pods.
                return NodeLoad::default();
            }
            let n = &state.nodes[i];
            for &p in on {
                let facts = places.facts(p);
                if facts.counted {
                    bound.push(BoundPod {
                        pod: &state.pods[p],
                        node_labels: &n.labels,
                        node_taints: &n.taints,
                        repels: facts.repels,
                    });
                }
            }
            places.load_on(&n.name).cloned().unwrap_or_default()
        });
        #[cfg(test)]
        sim.assert_same_as(&SimInput::new(state, pods_by_node));
        sim
    }

    /// The input with every node simulations see, its load and its pods from `node`,
    /// which pushes the pods of the node at its index onto the list it is given.
    fn build(
        state: &'a ClusterState,
        mut node: impl FnMut(usize, &mut Vec<BoundPod<'a>>) -> NodeLoad,
    ) -> SimInput<'a> {
        let mut input = SolveInput {
            daemonsets: state.daemonsets.clone(),
            ..Default::default()
        };
        for (name, pool) in &state.nodepools {
            // A pool that failed validation launches nothing (upstream's provisioner
            // skips pools that are not Ready).
            // A static pool launches for its replica count only, never for pods
            // (upstream `provisioner.go` leaves static pools out of scheduling).
            if pool.validation_failure().is_some() || pool.spec.replicas.is_some() {
                continue;
            }
            let in_use = state.pool_usage(name);
            input.pools.push(PoolInput {
                nodepool: pool,
                instance_types: state.instance_types.get(name).cloned().unwrap_or_default(),
                in_use,
            });
        }
        // Sized up front: grown push by push, the bound pods' vector was copied a dozen
        // times per pass (1.8% of the first 3 simulated hours' instructions).
        input.nodes.reserve(state.nodes.len());
        input.bound.reserve(state.pods.len());
        let mut index = vec![None; state.nodes.len()];
        let mut uninitialized = FastMap::default();
        for (i, n) in state.nodes.iter().enumerate() {
            if !simulated(n) {
                continue;
            }
            if !n.initialized {
                uninitialized.insert(n.name.clone(), n.nodeclaim.clone());
            }
            let NodeLoad {
                requested,
                host_ports,
            } = node(i, &mut input.bound);
            index[i] = Some(input.nodes.len());
            input.nodes.push(NodeInput {
                name: n.name.clone(),
                labels: NodeLabels::Shared(Arc::clone(&n.labels)),
                taints: n.taints.clone(),
                allocatable: n.allocatable.clone(),
                requested,
                host_ports,
                initialized: n.initialized,
            });
        }
        SimInput {
            input,
            index,
            uninitialized,
        }
    }

    /// Unit-test builds: the input read from kept places is the one built from the pods.
    #[cfg(test)]
    fn assert_same_as(&self, fresh: &SimInput<'_>) {
        // Both read the same state: the same node's labels are at the same address.
        let bound = |s: &SimInput<'_>| -> Vec<(PodKey, *const (), bool)> {
            s.input
                .bound
                .iter()
                .map(|b| {
                    (
                        b.pod.key.clone(),
                        std::ptr::from_ref(b.node_labels).cast(),
                        b.repels,
                    )
                })
                .collect()
        };
        let nodes = |s: &SimInput<'_>| -> Vec<(
            String,
            crate::engine::resources::Resources,
            Vec<crate::engine::pod::HostPort>,
        )> {
            s.input
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.requested.clone(), n.host_ports.clone()))
                .collect()
        };
        assert_eq!(bound(self), bound(fresh), "kept bound pods");
        assert_eq!(nodes(self), nodes(fresh), "kept node loads");
        assert_eq!(self.index, fresh.index);
    }

    /// The first of `pods` a simulation placed on a node that is not initialized, and
    /// that node's NodeClaim (upstream `UninitializedNodeError`: "would schedule against
    /// uninitialized nodeclaim").
    pub fn on_uninitialized<'p>(
        &self,
        results: &'p crate::engine::scheduling::Results,
        pods: &FastSet<&crate::engine::pod::PodKey>,
    ) -> Option<(&'p crate::engine::pod::PodKey, &str)> {
        if self.uninitialized.is_empty() {
            return None;
        }
        results.nominations.iter().find_map(|n| {
            let claim = self.uninitialized.get(&n.node)?;
            let pod = n.pods.iter().find(|p| pods.contains(p))?;
            Some((pod, claim.as_str()))
        })
    }
}

/// What every simulation against one state shares, each part built on first use: the
/// pods by node, the scheduling input, the pods every simulation places. A controller
/// poll re-validates the waiting decisions and runs a pass over the same state; one
/// `Prepared` (and one [`Simulator`] over it, see [`Prepared::simulator`]) serves them
/// all. Building these for each of them was a fifth of a simulated day, more than the
/// simulations themselves.
pub struct Prepared<'s> {
    pub state: &'s ClusterState,
    /// The owner's kept index of where the state's pods are, when it keeps one: the pods
    /// by node and the pending pods are read from it instead of found by a walk over
    /// every pod.
    places: Option<&'s PodPlaces>,
    pods_by_node: OnceCell<Vec<Vec<usize>>>,
    sim_input: OnceCell<SimInput<'s>>,
    pending: OnceCell<Vec<&'s Pod>>,
    moving: OnceCell<FastSet<&'s PodKey>>,
    /// Topology counts kept from earlier passes, for the simulator (see
    /// [`Prepared::use_group_counts`]).
    group_counts: OnceCell<Arc<GroupCounts>>,
    /// The operator's minValues policy: disruption's simulations schedule as
    /// provisioning does (upstream's `SimulateScheduling` builds its scheduler with the
    /// same options as the provisioner's).
    min_values_policy: MinValuesPolicy,
    /// The operator's preference policy, as provisioning applies it (upstream
    /// `SimulateScheduling` in `disruption/helpers.go`).
    preference_policy: PreferencePolicy,
}

impl<'s> Prepared<'s> {
    pub fn new(state: &'s ClusterState) -> Prepared<'s> {
        Prepared {
            state,
            places: None,
            pods_by_node: OnceCell::new(),
            sim_input: OnceCell::new(),
            pending: OnceCell::new(),
            moving: OnceCell::new(),
            group_counts: OnceCell::new(),
            min_values_policy: MinValuesPolicy::default(),
            preference_policy: PreferencePolicy::default(),
        }
    }

    /// Simulations over this state apply `policy` to minValues (the default is
    /// best effort).
    pub fn with_min_values_policy(mut self, policy: MinValuesPolicy) -> Self {
        self.min_values_policy = policy;
        self
    }

    /// Simulations over this state schedule under the operator's minValues and
    /// preference policies.
    pub fn with_policies(mut self, features: &crate::engine::features::Features) -> Self {
        self.min_values_policy = features.min_values_policy;
        self.preference_policy = features.preference_policy;
        self
    }

    /// Like [`Prepared::new`], reading the pods by node and the pending pods from
    /// `places`, which must be exactly the index of `state.pods` (the controller keeps it
    /// so, and audits it).
    pub fn placed(state: &'s ClusterState, places: &'s PodPlaces) -> Prepared<'s> {
        Prepared {
            places: Some(places),
            ..Prepared::new(state)
        }
    }

    /// Gives the simulator, when it is built, these counts of the bound pods per
    /// topology group instead of counting them itself. They must be exactly this state's
    /// (the disruption planner keeps them so). Ignored once a simulator was built or
    /// counts were given.
    pub fn use_group_counts(&self, counts: Arc<GroupCounts>) {
        let _ = self.group_counts.set(counts);
    }

    /// [`ClusterState::pods_by_node`], once.
    pub fn pods_by_node(&self) -> &[Vec<usize>] {
        self.pods_by_node.get_or_init(|| match self.places {
            Some(places) => places.by_node(self.state),
            None => self.state.pods_by_node(),
        })
    }

    /// The scheduling input of the state, once.
    pub fn sim_input(&self) -> &SimInput<'s> {
        self.sim_input.get_or_init(|| {
            let mut sim = match self.places {
                Some(places) => SimInput::placed(self.state, self.pods_by_node(), places),
                None => SimInput::new(self.state, self.pods_by_node()),
            };
            sim.input.min_values_policy = self.min_values_policy;
            sim.input.preference_policy = self.preference_policy;
            sim
        })
    }

    /// [`pending_pods`], once.
    pub fn pending(&self) -> &[&'s Pod] {
        self.pending.get_or_init(|| match self.places {
            Some(places) => places.pending(self.state),
            None => pending_pods(self.state),
        })
    }

    /// [`moving_pods`] of the pending pods, once.
    pub fn moving(&self) -> &FastSet<&'s PodKey> {
        self.moving.get_or_init(|| moving_pods(self.pending()))
    }

    /// What a consolidation simulation moves besides the candidates' pods.
    pub fn movers(&self) -> Movers<'_> {
        Movers {
            sim_input: self.sim_input(),
            pending: self.pending(),
            moving: self.moving(),
        }
    }

    /// The simulator over this state in `slot`, built there on first use. Its runs leave
    /// it as they found it, so every simulation over the state can share it.
    pub fn simulator<'a, 'p>(&'p self, slot: &'a mut SimSlot<'p>) -> &'a mut Simulator<'p> {
        slot.get_or_insert_with(|| {
            let sim = Simulator::new(&self.sim_input().input);
            match self.group_counts.get() {
                Some(counts) => sim.with_group_counts(Arc::clone(counts)),
                None => sim,
            }
        })
    }
}

/// Where a [`Prepared`] state's simulator lives once built (beside it, as it borrows it).
pub type SimSlot<'p> = Option<Simulator<'p>>;

/// Pods that will need capacity whatever the pass decides: pending pods the provisioner
/// would schedule, and pods on nodes being deleted or marked for deletion by a command in
/// flight (upstream `SimulateScheduling` adds both to every consolidation simulation;
/// without the second, two commands in a row count on the same free capacity).
pub fn pending_pods(state: &ClusterState) -> Vec<&crate::engine::pod::Pod> {
    // Every bound pod's node is looked up here at each pass: foldhash, and no lookup at
    // all while no node is going away.
    let deleting: FastSet<&str> = state
        .nodes
        .iter()
        .filter(|n| n.going_away())
        .map(|n| n.name.as_str())
        .collect();
    crate::engine::provisioning::pods_to_schedule(&state.pods, |n| {
        !deleting.is_empty() && deleting.contains(n)
    })
}

/// Of [`pending_pods`], those still bound to a node (it is going away). Upstream counts
/// their scheduling failures against a command (`NonPendingPodSchedulingErrors`); only
/// pods that were already pending may fail without blocking it.
pub fn moving_pods<'a>(pending: &[&'a crate::engine::pod::Pod]) -> FastSet<&'a PodKey> {
    pending
        .iter()
        .filter(|p| p.node_name.is_some())
        .map(|p| &p.key)
        .collect()
}

/// What a consolidation simulation moves besides the candidates' pods, and where it must
/// not count on room.
pub struct Movers<'a> {
    pub sim_input: &'a SimInput<'a>,
    /// [`pending_pods`]: they compete for the same room.
    pub pending: &'a [&'a crate::engine::pod::Pod],
    /// [`moving_pods`]: their failures block a command.
    pub moving: &'a FastSet<&'a PodKey>,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{DateTime, TimeDelta};

    use super::*;
    use crate::api::nodepool::NodePool;
    use crate::api::quantity::Quantity;
    use crate::engine::catalog::CapacityType;
    use crate::engine::disruption::fixture::{Fixture, instance_type};
    use crate::engine::pod::Pod;
    use crate::engine::resources::Resources;
    use crate::engine::scheduling::solve;

    #[test]
    fn limits_count_a_nodes_capacity_not_its_allocatable() {
        // A 4-core node with 0.1 core reserved by the kubelet: upstream counts its 4 cores
        // against `limits.cpu: 7950m`, leaving 3.95, too little for a second 4-core node.
        // Counting allocatable (3.9) left 4.05 and launched one past the limit.
        let mut it = (*instance_type("m.4", 4, 16, 0.2, None)).clone();
        it.overhead = Resources::cpu_mem(100, 1 << 30);
        let mut pool = NodePool::unconstrained("default");
        pool.spec
            .limits
            .insert("cpu".into(), Quantity("7950m".into()));
        let mut f = Fixture::new(vec![Arc::new(it)], DateTime::UNIX_EPOCH);
        f.pool(pool);
        f.node(
            "n1",
            "default",
            "m.4",
            CapacityType::OnDemand,
            TimeDelta::hours(1),
        );
        f.pod("busy", "n1", 3000, 1024);
        let pods = f.state.pods_by_node();
        let sim = SimInput::new(&f.state, &pods);
        assert_eq!(sim.input.pools[0].in_use.cpu, 4000);
        let pending = Pod::new("default", "p", Resources::cpu_mem(1000, 1 << 30));
        let r = solve(&sim.input, &[&pending]);
        assert!(r.new_nodeclaims.is_empty(), "launched past the limit");
        let why = r.errors.values().next().expect("the pod stays pending");
        assert!(why.contains("exceed its limits"), "{why}");
    }
}
