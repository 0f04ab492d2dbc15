//! Applying the cluster's changes to the one `ClusterState`, in place (copy-on-write when a
//! published snapshot still shares it), and noticing what deserves an event.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Controller;
use crate::api::labels;
use crate::cloud::CloudProvider;
use crate::cluster::{Change, Cluster, NodeClaimObject, NodeObject, Object, ObjectRef};
use crate::control::events::EventKind;
use crate::engine::pod::Pod;
use crate::engine::state::{ClusterState, StateNode};

/// Taints a node carries only while it starts or loses contact; upstream's
/// `StateNode.Taints()` ignores them (and startup taints) until the node is initialized.
const EPHEMERAL_TAINTS: [&str; 3] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
];

/// The engine's record of a launched NodeClaim and (once registered) its Node.
pub(super) fn state_node(
    claim: &NodeClaimObject,
    node: Option<&NodeObject>,
    last_pod_event: Option<DateTime<Utc>>,
) -> Option<StateNode> {
    let launched = claim.launched.as_ref()?;
    let startup: Vec<&str> = claim
        .startup_taints
        .iter()
        .map(|t| t.key.as_str())
        .collect();
    let initialized = node
        .is_some_and(|n| n.ready && !n.taints.iter().any(|t| startup.contains(&t.key.as_str())));
    let mut node_labels = claim.requirements.labels();
    node_labels.extend(launched.labels.clone());
    node_labels.extend(claim.labels.clone());
    node_labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    node_labels.insert(labels::INSTANCE_TYPE.into(), launched.instance_type.clone());
    node_labels.insert(labels::ZONE.into(), launched.zone.clone());
    node_labels.insert(
        labels::CAPACITY_TYPE.into(),
        launched.capacity_type.as_str().into(),
    );
    node_labels.insert(labels::HOSTNAME.into(), claim.name.clone());
    let mut annotations = claim.annotations.clone();
    let mut taints = claim.taints.clone();
    taints.extend(claim.startup_taints.clone());
    let mut allocatable = launched.allocatable.clone();
    let mut name = claim.name.clone();
    if let Some(n) = node {
        node_labels = n.labels.clone();
        annotations.extend(n.annotations.clone());
        taints = n.taints.clone();
        allocatable = n.allocatable.clone();
        name = n.name.clone();
    }
    if !initialized {
        taints.retain(|t| {
            !startup.contains(&t.key.as_str()) && !EPHEMERAL_TAINTS.contains(&t.key.as_str())
        });
    }
    Some(StateNode {
        name,
        nodeclaim: claim.name.clone(),
        nodepool: claim.nodepool.clone(),
        instance_type: launched.instance_type.clone(),
        zone: launched.zone.clone(),
        capacity_type: launched.capacity_type,
        price: launched.price,
        labels: node_labels,
        annotations,
        taints,
        allocatable,
        created: claim.created,
        initialized,
        registered: node.is_some(),
        ready: node.is_some_and(|n| n.ready),
        deleting: claim.deleting.is_some(),
        last_pod_event,
        expire_after: claim.expire_after,
        termination_grace_period: claim.termination_grace_period,
        nodeclass_drift: None,
        nominated_until: None,
    })
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    pub(super) fn state_mut(&mut self) -> &mut ClusterState {
        self.generation += 1;
        self.changes += 1;
        Arc::make_mut(&mut self.state)
    }

    /// Applies every pending change from the cluster.
    pub(super) fn ingest(&mut self, now: DateTime<Utc>) {
        for change in self.cluster.changes() {
            match change {
                Change::Applied(object) => self.applied(object, now),
                Change::Deleted(r) => self.deleted(r, now),
                Change::Problem(message) => self.error(message),
            }
        }
    }

    fn applied(&mut self, object: Object, now: DateTime<Utc>) {
        match object {
            Object::NodePool(pool) => {
                let name = pool.metadata.name.clone().unwrap_or_default();
                let types = self
                    .unavailable
                    .apply(&self.cloud.instance_types(&pool), now);
                let s = self.state_mut();
                s.nodepools.insert(name.clone(), *pool);
                s.instance_types.insert(name, types);
                self.report_unlaunchable();
                if self.state.pods.iter().any(Pod::is_provisionable) {
                    self.batcher.trigger(now);
                }
            }
            Object::NodeClaim(claim) => {
                let name = claim.name.clone();
                if let Some(l) = &claim.launched {
                    self.claim_by_provider
                        .insert(l.provider_id.clone(), name.clone());
                }
                let started_deleting = claim.deleting.is_some()
                    && self
                        .nodeclaims
                        .get(&name)
                        .is_none_or(|old| old.deleting.is_none());
                self.nodeclaims.insert(name.clone(), *claim);
                self.refresh_node(&name, now);
                if started_deleting && self.state.pods.iter().any(|p| self.on_claim(p, &name)) {
                    // Its pods will need a home: provision replacements before the drain.
                    self.batcher.trigger(now);
                }
            }
            Object::Node(node) => {
                let name = node.name.clone();
                let claim = self.claim_by_provider.get(&node.provider_id).cloned();
                self.node_by_provider
                    .insert(node.provider_id.clone(), name.clone());
                self.nodes.insert(name.clone(), *node);
                if let Some(claim) = claim {
                    self.claim_of_node.insert(name, claim.clone());
                    self.refresh_node(&claim, now);
                }
            }
            Object::Pod(pod) => self.pod_applied(*pod, now),
            Object::Pdb(pdb) => {
                let s = self.state_mut();
                match s
                    .pdbs
                    .iter_mut()
                    .find(|p| p.namespace == pdb.namespace && p.name == pdb.name)
                {
                    Some(p) => *p = *pdb,
                    None => s.pdbs.push(*pdb),
                }
            }
            Object::DaemonSet(ds) => {
                let s = self.state_mut();
                s.daemonsets.retain(|p| {
                    p.owner.as_ref().is_none_or(|o| o.name != ds.name)
                        || p.key.namespace != ds.namespace
                });
                let mut template = ds.template.clone();
                template.owner = Some(crate::engine::pod::Owner {
                    kind: "DaemonSet".into(),
                    name: ds.name.clone(),
                });
                template.key.namespace = ds.namespace.clone();
                s.daemonsets.push(template);
            }
            Object::Settings(annotations) => {
                self.changes += 1;
                self.protocol.settings = annotations;
            }
        }
    }

    fn on_claim(&self, p: &Pod, claim: &str) -> bool {
        p.node_name
            .as_deref()
            .is_some_and(|n| self.claim_of_node.get(n).is_some_and(|c| c == claim))
    }

    fn deleted(&mut self, r: ObjectRef, now: DateTime<Utc>) {
        match r {
            ObjectRef::NodePool(name) => {
                let s = self.state_mut();
                s.nodepools.remove(&name);
                s.instance_types.remove(&name);
            }
            ObjectRef::NodeClaim(name) => {
                if let Some(c) = self.nodeclaims.remove(&name)
                    && let Some(l) = &c.launched
                {
                    self.claim_by_provider.remove(&l.provider_id);
                }
                self.refresh_node(&name, now);
                let reason = self
                    .delete_reasons
                    .remove(&name)
                    .unwrap_or_else(|| "deleted".into());
                self.announced_registered.remove(&name);
                self.announced_initialized.remove(&name);
                self.announced_deleting.remove(&name);
                self.instance_gone.remove(&name);
                self.launch_errors.remove(&name);
                self.last_pod_event.remove(&name);
                self.emit(EventKind::NodeClaimDeleted {
                    nodeclaim: name,
                    reason,
                });
            }
            ObjectRef::Node(name) => {
                if let Some(n) = self.nodes.remove(&name) {
                    self.node_by_provider.remove(&n.provider_id);
                }
                if let Some(claim) = self.claim_of_node.remove(&name) {
                    self.refresh_node(&claim, now);
                }
            }
            ObjectRef::Pod(key) => {
                if let Some(i) = self.pod_pos.remove(&key) {
                    let s = self.state_mut();
                    let removed = s.pods.swap_remove(i);
                    if let Some(moved) = s.pods.get(i) {
                        let k = moved.key.clone();
                        self.pod_pos.insert(k, i);
                    }
                    self.touch_node_of(&removed, now);
                }
                self.nominated.remove(&key);
                self.unschedulable.remove(&key);
                self.announced_pending.remove(&key);
            }
            ObjectRef::Pdb(ns, name) => {
                self.state_mut()
                    .pdbs
                    .retain(|p| p.namespace != ns || p.name != name);
            }
            ObjectRef::DaemonSet(ns, name) => {
                self.state_mut().daemonsets.retain(|p| {
                    p.key.namespace != ns || p.owner.as_ref().is_none_or(|o| o.name != name)
                });
            }
            ObjectRef::Settings => {
                self.changes += 1;
                self.protocol.settings.clear();
            }
        }
    }

    fn pod_applied(&mut self, pod: Pod, now: DateTime<Utc>) {
        let key = pod.key.clone();
        let old_node = self
            .pod_pos
            .get(&key)
            .and_then(|&i| self.state.pods[i].node_name.clone());
        let provisionable = pod.is_provisionable();
        let bound_now = pod.node_name.clone().filter(|_| old_node.is_none());
        match self.pod_pos.get(&key).copied() {
            Some(i) => self.state_mut().pods[i] = pod,
            None => {
                let s = self.state_mut();
                s.pods.push(pod);
                let i = s.pods.len() - 1;
                self.pod_pos.insert(key.clone(), i);
            }
        }
        if let Some(node) = bound_now {
            self.nominated.remove(&key);
            self.unschedulable.remove(&key);
            self.announced_pending.remove(&key);
            let i = self.pod_pos[&key];
            let p = self.state.pods[i].clone();
            self.touch_node_of(&p, now);
            if !p.is_daemonset() {
                self.emit(EventKind::PodBound { pod: key, node });
            }
        } else if provisionable {
            self.batcher.trigger(now);
            if self.announced_pending.insert(key.clone()) {
                self.emit(EventKind::PodPending { pod: key });
            }
        }
    }

    /// Records a pod event (bind, removal) on the pod's node: consolidation counts
    /// `consolidateAfter` from the last one (upstream `status.lastPodEventTime`).
    fn touch_node_of(&mut self, pod: &Pod, now: DateTime<Utc>) {
        let Some(claim) = pod
            .node_name
            .as_deref()
            .and_then(|n| self.claim_of_node.get(n))
            .cloned()
        else {
            return;
        };
        self.last_pod_event.insert(claim.clone(), now);
        if let Some(&i) = self.node_pos.get(&claim) {
            self.state_mut().nodes[i].last_pod_event = Some(now);
        }
    }

    /// Re-derives a NodeClaim's state node from its claim and Node, and announces
    /// registration and initialization.
    pub(super) fn refresh_node(&mut self, claim: &str, now: DateTime<Utc>) {
        let node = self
            .nodeclaims
            .get(claim)
            .and_then(|c| c.launched.as_ref())
            .and_then(|l| self.node_by_provider.get(&l.provider_id))
            .and_then(|n| self.nodes.get(n));
        if let Some(n) = node {
            self.claim_of_node.insert(n.name.clone(), claim.to_string());
        }
        let derived = self.nodeclaims.get(claim).and_then(|c| {
            let mut d = state_node(c, node, self.last_pod_event.get(claim).copied())?;
            // The cloud provider's drift verdict (upstream `IsDrifted`), for launched
            // NodeClaims of pools that still exist.
            d.nodeclass_drift = self
                .state
                .nodepools
                .get(&c.nodepool)
                .and_then(|pool| self.cloud.drifted(c, pool));
            Some(d)
        });
        let nominated = derived
            .as_ref()
            .and_then(|d| self.nominations.nominated_until(&d.name, now));
        match (derived, self.node_pos.get(claim).copied()) {
            (Some(mut d), Some(i)) => {
                d.nominated_until = nominated;
                if self.state.nodes[i] != d {
                    self.state_mut().nodes[i] = d;
                }
            }
            (Some(mut d), None) => {
                d.nominated_until = nominated;
                let s = self.state_mut();
                s.nodes.push(d);
                let i = s.nodes.len() - 1;
                self.node_pos.insert(claim.to_string(), i);
            }
            (None, Some(i)) => {
                self.node_pos.remove(claim);
                let s = self.state_mut();
                s.nodes.swap_remove(i);
                if let Some(moved) = s.nodes.get(i) {
                    let c = moved.nodeclaim.clone();
                    self.node_pos.insert(c, i);
                }
            }
            (None, None) => {}
        }
        let Some(&i) = self.node_pos.get(claim) else {
            return;
        };
        let (name, registered, initialized) = {
            let n = &self.state.nodes[i];
            (
                n.name.clone(),
                self.nodes.contains_key(&n.name),
                n.initialized,
            )
        };
        if registered && self.announced_registered.insert(claim.to_string()) {
            self.emit(EventKind::NodeRegistered {
                nodeclaim: claim.to_string(),
                node: name.clone(),
            });
        }
        if initialized && self.announced_initialized.insert(claim.to_string()) {
            self.emit(EventKind::NodeInitialized {
                nodeclaim: claim.to_string(),
                node: name,
            });
        }
    }

    /// Marks nodes nominated at `now` (protected from disruption for the window).
    pub(super) fn nominate(&mut self, node: &str, now: DateTime<Utc>) {
        self.nominations.nominate(node, now);
        let until = self.nominations.nominated_until(node, now);
        if let Some(i) = self.state.nodes.iter().position(|n| n.name == node) {
            self.state_mut().nodes[i].nominated_until = until;
        }
    }
}
