//! Applying the cluster's changes to the one `ClusterState`, in place (copy-on-write when a
//! published snapshot still shares it), through the node registry, and noticing what
//! deserves an event.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Controller;
use super::registration::{has_label, is_ephemeral};
use super::registry::NodeRecord;
use crate::api::labels;
use crate::cloud::CloudProvider;
use crate::cluster::{Change, Cluster, NodeClaimObject, NodeObject, Object, ObjectRef};
use crate::control::events::EventKind;
use crate::engine::pod::Pod;
use crate::engine::pod_places::PodPlaces;
use crate::engine::resources::Resources;
use crate::engine::state::{ClusterState, StateNode};

/// The labels a launched NodeClaim carries (upstream: the template's, the requirements'
/// single values, and the launched offering's instance type, zone and capacity type).
fn claim_labels(claim: &NodeClaimObject) -> Option<std::collections::BTreeMap<String, String>> {
    let launched = claim.launched.as_ref()?;
    let mut out = claim.requirements.labels();
    out.extend(launched.labels.clone());
    out.extend(claim.labels.clone());
    out.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    out.insert(labels::INSTANCE_TYPE.into(), launched.instance_type.clone());
    out.insert(labels::ZONE.into(), launched.zone.clone());
    out.insert(
        labels::CAPACITY_TYPE.into(),
        launched.capacity_type.as_str().into(),
    );
    Some(out)
}

/// The engine's record of a launched NodeClaim and (once registered) its Node, as
/// upstream's `StateNode` reads the pair: before registration everything comes from the
/// NodeClaim; after, the Node's labels over the NodeClaim's (registration copies the
/// NodeClaim's onto the Node; a kubelet alone may know only a few), the Node's taints,
/// and its allocatable with the NodeClaim's filling what the kubelet has not reported yet.
/// Registered and initialized are the `karpenter.sh/registered` and `initialized` labels
/// (upstream `StateNode.Registered()`/`Initialized()`); until initialized, startup and
/// ephemeral taints (the unregistered taint among them) do not count.
pub(super) fn state_node(claim: &NodeClaimObject, node: Option<&NodeObject>) -> Option<StateNode> {
    let launched = claim.launched.as_ref()?;
    let claim_labels = claim_labels(claim)?;
    let startup: Vec<&str> = claim
        .startup_taints
        .iter()
        .map(|t| t.key.as_str())
        .collect();
    let registered = node.is_some_and(|n| has_label(n, labels::REGISTERED));
    let initialized = registered && node.is_some_and(|n| has_label(n, labels::INITIALIZED));
    let mut node_labels = claim_labels.clone();
    node_labels.insert(labels::HOSTNAME.into(), claim.name.clone());
    let mut annotations = claim.annotations.clone();
    let mut taints = claim.taints.clone();
    taints.extend(claim.startup_taints.clone());
    let mut allocatable = launched.allocatable.clone();
    let mut name = claim.name.clone();
    if let Some(n) = node {
        node_labels.extend(n.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        annotations.extend(n.annotations.clone());
        if registered {
            taints = n.taints.clone();
        }
        name = n.name.clone();
        let expected = std::mem::replace(&mut allocatable, n.allocatable.clone());
        if !initialized {
            allocatable.fill_zeros_from(&expected);
        }
    }
    if !initialized {
        taints.retain(|t| !startup.contains(&t.key.as_str()) && !is_ephemeral(t));
    }
    Some(StateNode {
        name,
        nodeclaim: claim.name.clone(),
        nodepool: claim.nodepool.clone(),
        instance_type: launched.instance_type.clone(),
        zone: launched.zone.clone(),
        capacity_type: launched.capacity_type,
        price: launched.price,
        labels: Arc::new(node_labels),
        claim_labels,
        annotations,
        taints,
        allocatable,
        // Upstream reads the Node's capacity once initialized; a Node's capacity is the
        // instance type's, which the NodeClaim's status carries from the launch.
        capacity: if launched.capacity == Resources::default() {
            launched.allocatable.clone()
        } else {
            launched.capacity.clone()
        },
        created: claim.created,
        initialized_at: None,
        drifted_since: None,
        initialized,
        registered,
        ready: node.is_some_and(|n| n.ready),
        faults: node.map(|n| n.faults.clone()).unwrap_or_default(),
        deleting: claim.deleting.is_some(),
        last_pod_event: None,
        expire_after: claim.expire_after,
        termination_grace_period: claim.termination_grace_period,
        nodeclass_drift: None,
        foreign_drift: crate::engine::disruption::drift::foreign_verdict(
            &claim.annotations,
            claim.condition_true(crate::api::nodeclaim::conditions::DRIFTED),
        ),
        nominated_until: None,
    })
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    pub(super) fn state_mut(&mut self) -> &mut ClusterState {
        self.generation += 1;
        self.changes += 1;
        Arc::make_mut(&mut self.state)
    }

    /// The state to change its pods, with the index of where they are: the two change
    /// together, through [`PodPlaces::upsert`] and [`PodPlaces::remove`] only.
    fn pods_mut(&mut self) -> (&mut ClusterState, &mut PodPlaces) {
        self.generation += 1;
        self.changes += 1;
        (Arc::make_mut(&mut self.state), &mut self.places)
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
                let scope = self.cloud.offering_scope(&pool);
                let types = self.unavailable.apply(
                    &self.cloud.instance_types(&pool),
                    scope.as_deref(),
                    now,
                );
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
                let started_deleting = self.registry.apply_claim(*claim);
                self.refresh_node(&name, now);
                if started_deleting {
                    self.deletion_started(&name, now);
                }
            }
            Object::Node(node) => {
                if let Some(claim) = self.registry.apply_node(*node) {
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

    /// A NodeClaim started deleting: its pods will need a home, so provisioning runs now
    /// for them (upstream provisions for pods of deleting nodes), not when the drain
    /// finally lets them go.
    pub(super) fn deletion_started(&mut self, claim: &str, now: DateTime<Utc>) {
        let Some(node) = self.registry.get(claim).and_then(|r| r.node.clone()) else {
            return;
        };
        let has_pods = self.state.pods.iter().any(|p| {
            p.node_name.as_deref() == Some(node.as_str())
                && crate::engine::state::is_reschedulable(p)
        });
        if has_pods {
            self.batcher.trigger(now);
        }
    }

    fn deleted(&mut self, r: ObjectRef, now: DateTime<Utc>) {
        match r {
            ObjectRef::NodePool(name) => {
                let s = self.state_mut();
                s.nodepools.remove(&name);
                s.instance_types.remove(&name);
            }
            ObjectRef::NodeClaim(name) => {
                let Some(record) = self.registry.remove_claim(&name) else {
                    return;
                };
                if let Some(i) = record.pos {
                    self.remove_state_node(i);
                }
                self.nominated.retain(|_, c| *c != name);
                let reason = record.delete_reason.unwrap_or_else(|| "deleted".into());
                self.emit(EventKind::NodeClaimDeleted {
                    nodeclaim: name,
                    reason,
                });
            }
            ObjectRef::Node(name) => {
                if let Some(claim) = self.registry.remove_node(&name) {
                    self.refresh_node(&claim, now);
                }
            }
            ObjectRef::Pod(key) => {
                let removed = if self.places.position(&key).is_some() {
                    let (state, places) = self.pods_mut();
                    places.remove(&mut state.pods, &key)
                } else {
                    None
                };
                if let Some(removed) = removed {
                    // The last pod took its place: its node lists its pods in a new order.
                    if let Some(i) = removed.moved_to {
                        let node = self.state.pods[i].node_name.clone();
                        self.pods_changed_on(node.as_deref());
                    }
                    self.pods_changed_on(removed.pod.node_name.as_deref());
                    self.touch_node_of(&removed.pod, now);
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
        self.measure_pod(&pod, now);
        if let Some(problem) = crate::engine::disruption::candidates::do_not_disrupt_problem(&pod) {
            let n = crate::control::upstream_events::invalid_do_not_disrupt(
                &pod.key, &pod.uid, &problem,
            );
            self.post([n]);
        }
        let key = pod.key.clone();
        let old_node = self
            .places
            .position(&key)
            .and_then(|i| self.state.pods[i].node_name.clone());
        let provisionable = pod.is_provisionable();
        self.pods_changed_on(old_node.as_deref());
        self.pods_changed_on(pod.node_name.as_deref());
        let bound_now = pod.node_name.clone().filter(|_| old_node.is_none());
        let (state, places) = self.pods_mut();
        places.upsert(&mut state.pods, pod);
        if let (Some(node), Some(i)) = (bound_now, self.places.position(&key)) {
            self.nominated.remove(&key);
            self.unschedulable.remove(&key);
            self.announced_pending.remove(&key);
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

    /// Tells the disruption planner that a pod on this node came, went or changed.
    fn pods_changed_on(&mut self, node: Option<&str>) {
        if let Some(node) = node {
            self.disruption.pods_changed_on(node);
        }
    }

    /// Records a pod event (bind, removal) on the pod's node: consolidation counts
    /// `consolidateAfter` from the last one (upstream `status.lastPodEventTime`).
    fn touch_node_of(&mut self, pod: &Pod, now: DateTime<Utc>) {
        let Some(claim) = pod
            .node_name
            .as_deref()
            .and_then(|n| self.registry.claim_of_node(n))
            .map(str::to_string)
        else {
            return;
        };
        let Some(r) = self.registry.get_mut(&claim) else {
            return;
        };
        r.last_pod_event = Some(now);
        if let Some(i) = r.pos {
            self.state_mut().nodes[i].last_pod_event = Some(now);
        }
    }

    /// Removes the state node at `i`, keeping every record's position right.
    fn remove_state_node(&mut self, i: usize) {
        let s = self.state_mut();
        let gone = s.nodes.swap_remove(i);
        self.disruption.node_changed(&gone.nodeclaim);
        let s = &self.state;
        let moved = s.nodes.get(i).map(|n| n.nodeclaim.clone());
        if let Some(claim) = moved
            && let Some(r) = self.registry.get_mut(&claim)
        {
            r.pos = Some(i);
        }
    }

    /// Re-derives a NodeClaim's state node from its record and Node, and announces
    /// registration and initialization.
    pub(super) fn refresh_node(&mut self, claim: &str, now: DateTime<Utc>) {
        let Some(r) = self.registry.get(claim) else {
            return;
        };
        self.disruption.node_changed(claim);
        let node = self.registry.node_of(claim);
        let derived = state_node(&r.claim, node).map(|mut d| {
            // The cloud provider's drift verdict (upstream `IsDrifted`), for launched
            // NodeClaims of pools that still exist.
            d.nodeclass_drift = self
                .state
                .nodepools
                .get(&r.claim.nodepool)
                .and_then(|pool| self.cloud.drifted(&r.claim, pool));
            d
        });
        let pos = r.pos;
        let Some(mut d) = derived else {
            if let Some(i) = pos {
                if let Some(r) = self.registry.get_mut(claim) {
                    r.pos = None;
                }
                self.remove_state_node(i);
            }
            return;
        };
        let Some(r) = self.registry.get_mut(claim) else {
            return;
        };
        if d.initialized && r.initialized_at.is_none() {
            // Where the cluster recorded it (a previous process, upstream), else now.
            r.initialized_at = Some(r.claim.initialized_at.unwrap_or(now));
        }
        apply_record(&mut d, r, now);
        let (registered, initialized) = (d.registered, d.initialized);
        let name = d.name.clone();
        match pos {
            Some(i) => {
                if self.state.nodes[i] != d {
                    self.state_mut().nodes[i] = d;
                }
            }
            None => {
                let s = self.state_mut();
                s.nodes.push(d);
                let i = s.nodes.len() - 1;
                if let Some(r) = self.registry.get_mut(claim) {
                    r.pos = Some(i);
                }
            }
        }
        let Some(r) = self.registry.get_mut(claim) else {
            return;
        };
        let announce_registered = registered && !r.announced_registered;
        let announce_initialized = initialized && !r.announced_initialized;
        r.announced_registered |= registered;
        r.announced_initialized |= initialized;
        if announce_registered {
            self.emit(EventKind::NodeRegistered {
                nodeclaim: claim.to_string(),
                node: name.clone(),
            });
        }
        if announce_initialized {
            self.emit(EventKind::NodeInitialized {
                nodeclaim: claim.to_string(),
                node: name,
            });
        }
    }

    /// Marks a NodeClaim nominated at `now` (protected from disruption for the window,
    /// upstream `NominateNodeForPod`: 2 × the batch's maximum, at least 10 s).
    pub(super) fn nominate(&mut self, claim: &str, now: DateTime<Utc>) {
        let until = now + self.features.nomination_window();
        let Some(r) = self.registry.get_mut(claim) else {
            return;
        };
        r.nominated_until = Some(until);
        if let Some(i) = r.pos {
            self.state_mut().nodes[i].nominated_until = Some(until);
        }
    }
}

/// What the controller remembers of a node, onto its derived state.
fn apply_record(d: &mut StateNode, r: &NodeRecord, now: DateTime<Utc>) {
    d.last_pod_event = r.last_pod_event;
    d.initialized_at = r.initialized_at;
    d.drifted_since = r.drifted_since;
    d.nominated_until = r.nominated_until.filter(|t| now < *t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::controller::registry::tests::{claim as unlaunched, launched};
    use crate::engine::resources::Resources;

    fn claim() -> NodeClaimObject {
        let mut c = unlaunched("default-abcde");
        c.labels = [("team".to_string(), "a".to_string())].into();
        let mut l = launched("aws:///us-east-1a/i-1");
        l.zone = "us-east-1a".into();
        l.allocatable = Resources::cpu_mem(1930, 7 << 30);
        c.launched = Some(l);
        c
    }

    /// A kubelet registers its Node with few labels and no resources yet (on AWS only
    /// `karpenter.sh/nodepool` comes from nodeadm before Karpenter's registration): the
    /// node keeps the NodeClaim's labels for scheduling, and until it is initialized the
    /// NodeClaim's resources where the Node reports none (upstream `StateNode`).
    #[test]
    fn a_node_registered_with_few_labels_keeps_its_nodeclaims() {
        let node = NodeObject {
            name: "ip-10-0-0-1".into(),
            provider_id: "aws:///us-east-1a/i-1".into(),
            labels: Arc::new([(labels::NODEPOOL.to_string(), "default".to_string())].into()),
            annotations: Default::default(),
            taints: Vec::new(),
            allocatable: Resources::default(),
            ready: false,
            faults: Vec::new(),
            created: DateTime::UNIX_EPOCH,
        };
        let n = state_node(&claim(), Some(&node)).expect("launched");
        assert_eq!(n.name, "ip-10-0-0-1");
        assert_eq!(n.nodeclaim, "default-abcde");
        for (k, v) in [
            (labels::INSTANCE_TYPE, "m5.large"),
            (labels::ZONE, "us-east-1a"),
            (labels::CAPACITY_TYPE, "on-demand"),
            ("team", "a"),
        ] {
            assert_eq!(n.labels.get(k).map(String::as_str), Some(v), "{k}");
            assert_eq!(n.claim_labels.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert_eq!(
            n.allocatable.cpu, 1930,
            "the NodeClaim's until the kubelet reports"
        );
        let mut ready = node.clone();
        ready.ready = true;
        let n = state_node(&claim(), Some(&ready)).unwrap();
        assert!(
            !n.registered && !n.initialized,
            "a Ready kubelet is not yet a registered node: registration labels it"
        );
        for l in [labels::REGISTERED, labels::INITIALIZED] {
            Arc::make_mut(&mut ready.labels).insert(l.into(), "true".into());
        }
        ready.allocatable = Resources::cpu_mem(1900, 7 << 30);
        let n = state_node(&claim(), Some(&ready)).unwrap();
        assert!(n.initialized);
        assert_eq!(n.allocatable.cpu, 1900, "the Node's once initialized");
    }
}
