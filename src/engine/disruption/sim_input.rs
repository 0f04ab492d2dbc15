//! What a pass simulates against: every pool, every node not being deleted (uninitialized
//! ones included, their capacity on its way, but marked), every bound pod; and what a
//! simulation must place besides a command's candidates (upstream `SimulateScheduling`:
//! pending pods and the pods of nodes already going away).

use std::collections::{HashMap, HashSet};

use crate::engine::pod::PodKey;
use crate::engine::resources::Resources;
use crate::engine::scheduling::{BoundPod, NodeInput, PoolInput, SolveInput};
use crate::engine::state::ClusterState;

/// The scheduling input of a pass: every pool, every node not being deleted (uninitialized
/// ones included: their capacity is on its way), every bound pod.
pub struct SimInput<'a> {
    pub input: SolveInput<'a>,
    /// State node index -> index into `input.nodes`.
    pub index: Vec<Option<usize>>,
    /// Node name -> NodeClaim of the nodes that are not initialized: a pod a simulation
    /// places there is counting on capacity that is not there yet.
    pub uninitialized: HashMap<String, String>,
}

impl<'a> SimInput<'a> {
    pub fn new(state: &'a ClusterState, pods_by_node: &[Vec<usize>]) -> SimInput<'a> {
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
            let mut in_use = Resources::default();
            for n in state.nodes.iter().filter(|n| &n.nodepool == name) {
                in_use.add(&n.allocatable);
            }
            input.pools.push(PoolInput {
                nodepool: pool,
                instance_types: state.instance_types.get(name).cloned().unwrap_or_default(),
                in_use,
            });
        }
        let mut index = vec![None; state.nodes.len()];
        let mut uninitialized = HashMap::new();
        for (i, n) in state.nodes.iter().enumerate() {
            if n.deleting || n.is_disrupted_tainted() {
                continue;
            }
            if !n.initialized {
                uninitialized.insert(n.name.clone(), n.nodeclaim.clone());
            }
            let mut requested = Resources::default();
            let mut host_ports = Vec::new();
            for &p in &pods_by_node[i] {
                let p = &state.pods[p];
                if p.is_terminal() {
                    continue;
                }
                requested.add(&p.requests);
                host_ports.extend(p.host_ports.iter().cloned());
                input.bound.push(BoundPod {
                    pod: p,
                    node_labels: &n.labels,
                    node_taints: &n.taints,
                });
            }
            index[i] = Some(input.nodes.len());
            input.nodes.push(NodeInput {
                name: n.name.clone(),
                labels: n.labels.clone(),
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

    /// The first of `pods` a simulation placed on a node that is not initialized, and
    /// that node's NodeClaim (upstream `UninitializedNodeError`: "would schedule against
    /// uninitialized nodeclaim").
    pub fn on_uninitialized<'p>(
        &self,
        results: &'p crate::engine::scheduling::Results,
        pods: &HashSet<&crate::engine::pod::PodKey>,
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

/// Pods that will need capacity whatever the pass decides: pending pods the provisioner
/// would schedule, and pods on nodes being deleted or marked for deletion by a command in
/// flight (upstream `SimulateScheduling` adds both to every consolidation simulation;
/// without the second, two commands in a row count on the same free capacity).
pub fn pending_pods(state: &ClusterState) -> Vec<&crate::engine::pod::Pod> {
    let deleting: HashSet<&str> = state
        .nodes
        .iter()
        .filter(|n| n.deleting || n.is_disrupted_tainted())
        .map(|n| n.name.as_str())
        .collect();
    crate::engine::provisioning::pods_to_schedule(&state.pods, |n| deleting.contains(n))
}

/// Of [`pending_pods`], those still bound to a node (it is going away). Upstream counts
/// their scheduling failures against a command (`NonPendingPodSchedulingErrors`); only
/// pods that were already pending may fail without blocking it.
pub fn moving_pods<'a>(pending: &[&'a crate::engine::pod::Pod]) -> HashSet<&'a PodKey> {
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
    pub moving: &'a HashSet<&'a PodKey>,
}
