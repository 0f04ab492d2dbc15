//! The kube-scheduler stand-in: binds pending pods to Ready nodes that fit and marks the
//! rest `PodScheduled=False/Unschedulable`, which is what Karpenter provisions for.
//!
//! It reuses the engine's scheduler restricted to existing nodes, so the cluster and the
//! autoscaler agree on every constraint (resources, taints, node affinity, pod
//! (anti-)affinity, topology spread, host ports). Placement is first fit in the engine's
//! order rather than kube-scheduler's scoring (LeastAllocated); which node a pod lands on
//! changes utilisation details, not whether it fits.

use crate::engine::pod::{Pod, PodKey};
use crate::engine::resources::Resources;
use crate::engine::scheduling::{BoundPod, NodeInput, SolveInput, solve};

use super::SimCluster;

impl SimCluster {
    pub(super) fn schedule(&mut self) {
        if !self.schedule_dirty {
            return;
        }
        self.schedule_dirty = false;
        let pending: Vec<&Pod> = self
            .pods
            .values()
            .filter(|p| {
                p.node_name.is_none()
                    && p.deleting.is_none()
                    && !p.is_daemonset()
                    && !p.is_terminal()
            })
            .collect();
        if pending.is_empty() {
            self.bind_at.clear();
            return;
        }
        let mut input = SolveInput::default();
        let mut index = std::collections::HashMap::new();
        for n in self.nodes.values().filter(|n| n.object.ready) {
            index.insert(n.object.name.as_str(), input.nodes.len());
            input.nodes.push(NodeInput {
                name: n.object.name.clone(),
                labels: n.object.labels.clone(),
                taints: n.object.taints.clone(),
                allocatable: n.object.allocatable.clone(),
                requested: Resources::default(),
                host_ports: Vec::new(),
                initialized: true,
            });
        }
        for p in self.pods.values() {
            let Some(node) = p.node_name.as_deref() else {
                continue;
            };
            if p.is_terminal() {
                continue;
            }
            if let Some(&i) = index.get(node) {
                input.nodes[i].requested.add(&p.requests);
                input.nodes[i]
                    .host_ports
                    .extend(p.host_ports.iter().cloned());
            }
            if let Some(n) = self.nodes.get(node) {
                input.bound.push(BoundPod {
                    pod: p,
                    node_labels: &n.object.labels,
                    node_taints: &n.object.taints,
                });
            }
        }
        // Emptiest first (LeastAllocated), name as the tie-break for determinism.
        let share = |n: &NodeInput| {
            let f = |r: i64, a: i64| if a > 0 { r as f64 / a as f64 } else { 1.0 };
            f(n.requested.cpu, n.allocatable.cpu) + f(n.requested.memory, n.allocatable.memory)
        };
        input
            .nodes
            .sort_by(|a, b| share(a).total_cmp(&share(b)).then(a.name.cmp(&b.name)));
        let results = solve(&input, &pending);
        let binds: Vec<(PodKey, String)> = results
            .nominations
            .iter()
            .flat_map(|n| n.pods.iter().map(|p| (p.clone(), n.node.clone())))
            .collect();
        let failed: Vec<PodKey> = pending
            .iter()
            .filter(|p| !p.unschedulable && results.errors.contains_key(&p.key))
            .map(|p| p.key.clone())
            .collect();
        // The scheduler takes `bind_delay` from the moment it could place a pod; a pod it
        // can no longer place starts over.
        let now = self.now;
        let delay = self.settings.bind_delay;
        let placed: std::collections::HashSet<PodKey> =
            binds.iter().map(|(p, _)| p.clone()).collect();
        self.bind_at.retain(|p, _| placed.contains(p));
        let mut waiting = false;
        for (pod, node) in binds {
            let since = *self.bind_at.entry(pod.clone()).or_insert(now);
            if now - since < delay {
                waiting = true;
                continue;
            }
            self.bind_at.remove(&pod);
            self.start_pod(&pod, &node);
        }
        // Look again once the wait is over, whatever else changes.
        self.schedule_dirty |= waiting;
        for key in failed {
            if let Some(p) = self.pods.get_mut(&key) {
                p.unschedulable = true;
            }
            self.emit_pod(&key);
        }
    }
}
