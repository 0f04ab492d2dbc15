//! The cluster as the engine sees it: NodePools, the nodes Karpenter manages (a NodeClaim
//! and its Node, merged), pods, PodDisruptionBudgets and the instance types each pool may
//! launch. One snapshot type feeds provisioning, disruption and termination, so every
//! decision of a pass reads the same facts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::labels;
use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::api::nodepool::NodePool;
use crate::engine::catalog::{CapacityType, InstanceType};
use crate::engine::fast_hash::FastMap;
use crate::engine::pod::{Pod, PodKey};
use crate::engine::resources::Resources;
use crate::engine::selector::Selector;

/// A node Karpenter launched: its NodeClaim and (once registered) its Node, as one record.
///
/// Its identity is its NodeClaim's name, from creation to deletion: every decision,
/// nomination, hold and outcome names a node by `nodeclaim`. The Node's name arrives
/// later and is what pods are bound to (upstream's `state.StateNode` pairs the two
/// under one key).
#[derive(Clone, Debug, PartialEq)]
pub struct StateNode {
    /// Node name once registered; the NodeClaim name before. Pods name their node by it.
    pub name: String,
    /// The node's identity.
    pub nodeclaim: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    /// USD per hour of the offering it runs on.
    pub price: f64,
    /// What scheduling matches against: the Node's labels over the NodeClaim's (upstream
    /// registration copies the NodeClaim's labels onto the Node; a kubelet alone may
    /// register with only a few). Shared, so that a simulator's memo of what it derived
    /// from them (`scheduling::node_memo`) knows them unchanged by identity instead of
    /// comparing every label of every node at each poll.
    pub labels: Arc<BTreeMap<String, String>>,
    /// The NodeClaim's labels (the pool's template, the launched offering's instance
    /// type, zone and capacity type): what requirements drift is judged on, as upstream's
    /// `areRequirementsDrifted` reads `nodeClaim.Labels`.
    pub claim_labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// The NodeClaim's `status.capacity` (the instance type's full capacity): what
    /// `spec.limits` and `status.resources` count, as upstream's `StateNode.Capacity()`.
    pub capacity: Resources,
    /// NodeClaim creation time: the start of its `expireAfter` lifetime.
    pub created: DateTime<Utc>,
    /// When it became initialized (the Initialized condition's transition): consolidation
    /// counts `consolidateAfter` from here when no pod came or went since.
    pub initialized_at: Option<DateTime<Utc>>,
    /// Since when it has been drifted, as first seen (the Drifted condition's transition):
    /// drift replaces nodes in this order.
    pub drifted_since: Option<DateTime<Utc>>,
    /// NodeClaim Initialized=True (registered, ready, startup taints gone, resources
    /// reported).
    pub initialized: bool,
    /// A Node object exists for it (NodeClaim Registered=True).
    pub registered: bool,
    /// Node Ready=True.
    pub ready: bool,
    /// The Node's conditions a repair policy names (`engine::repair`): empty while the
    /// node is healthy.
    pub faults: Vec<crate::engine::repair::NodeFault>,
    /// Deletion requested (the NodeClaim or Node has a deletionTimestamp) or marked for
    /// deletion by a disruption command in flight.
    pub deleting: bool,
    /// `status.lastPodEventTime`: the last bind, terminal transition or termination start
    /// of a pod on it. Consolidation waits `consolidateAfter` from here.
    pub last_pod_event: Option<DateTime<Utc>>,
    /// The NodeClaim spec's `expireAfter` (copied from the pool at launch); None = Never.
    pub expire_after: Option<TimeDelta>,
    /// The NodeClaim spec's `terminationGracePeriod`.
    pub termination_grace_period: Option<TimeDelta>,
    /// Why the cloud provider considers it drifted from its NodeClass (AMIDrift,
    /// SubnetDrift, SecurityGroupDrift, NodeClassDrift), if it does.
    pub nodeclass_drift: Option<String>,
    /// Set when another controller stamped the NodeClaim's `karpenter.sh/nodepool-hash`
    /// (a `nodepool-hash-version` not ours, e.g. upstream Karpenter's `v3`): its drift is
    /// that controller's verdict, the NodeClaim's Drifted condition (`Some(reason)` while
    /// True), never a comparison of hashes computed two different ways.
    pub foreign_drift: Option<Option<String>>,
    /// A scheduling round nominated pods to it until this time (protects it from
    /// disruption; upstream: 20 s).
    pub nominated_until: Option<DateTime<Utc>>,
}

impl StateNode {
    /// A node of `pool` on `it`'s cheapest offering allowed by `capacity_type` (any zone),
    /// initialized and ready, carrying the labels a launched node would have. The starting
    /// point of scenarios, tests and benchmarks.
    pub fn launched(
        name: &str,
        pool: &NodePool,
        it: &InstanceType,
        capacity_type: CapacityType,
        created: DateTime<Utc>,
    ) -> StateNode {
        let offering = it
            .cheapest_offering(|o| o.capacity_type == capacity_type)
            .or_else(|| it.cheapest_offering(|_| true));
        let zone = offering.map(|o| o.zone.clone()).unwrap_or_default();
        let price = offering.map(|o| o.price).unwrap_or(0.0);
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        let mut node_labels = it.labels.clone();
        node_labels.extend(pool.spec.template.metadata.labels.clone());
        node_labels.insert(labels::NODEPOOL.into(), pool_name.clone());
        node_labels.insert(labels::ZONE.into(), zone.clone());
        node_labels.insert(
            labels::CAPACITY_TYPE.into(),
            capacity_type.as_str().to_string(),
        );
        node_labels.insert(labels::HOSTNAME.into(), name.to_string());
        let spec = &pool.spec.template.spec;
        let mut annotations = pool.spec.template.metadata.annotations.clone();
        annotations.insert(
            labels::NODEPOOL_HASH.into(),
            crate::engine::disruption::drift::nodepool_hash(pool),
        );
        StateNode {
            name: name.to_string(),
            nodeclaim: name.to_string(),
            nodepool: pool_name,
            instance_type: it.name.clone(),
            zone,
            capacity_type,
            price,
            claim_labels: node_labels.clone(),
            labels: Arc::new(node_labels),
            annotations,
            taints: spec.taints.clone(),
            allocatable: it.allocatable(),
            capacity: it.capacity.clone(),
            created,
            initialized_at: Some(created),
            drifted_since: None,
            initialized: true,
            registered: true,
            ready: true,
            faults: Vec::new(),
            deleting: false,
            last_pod_event: None,
            expire_after: spec
                .expire_after
                .value()
                .and_then(|d| TimeDelta::from_std(d).ok()),
            termination_grace_period: spec
                .termination_grace_period
                .as_ref()
                .and_then(|d| d.value())
                .and_then(|d| TimeDelta::from_std(d).ok()),
            nodeclass_drift: None,
            foreign_drift: None,
            nominated_until: None,
        }
    }

    /// Carries `karpenter.sh/do-not-disrupt: "true"`.
    pub fn do_not_disrupt(&self) -> bool {
        self.annotations
            .get(labels::DO_NOT_DISRUPT)
            .is_some_and(|v| v == "true")
    }

    /// Tainted `karpenter.sh/disrupted:NoSchedule` by a disruption command.
    pub fn is_disrupted_tainted(&self) -> bool {
        self.taints
            .iter()
            .any(|t| t.key == labels::DISRUPTED_TAINT_KEY && t.effect == TaintEffect::NoSchedule)
    }

    /// Being deleted, or tainted by a disruption command in flight: going away, so
    /// simulations no longer count on it, its pods need a new home and disruption
    /// counts it as already disrupting.
    pub fn going_away(&self) -> bool {
        self.deleting || self.is_disrupted_tainted()
    }

    /// When `expireAfter` runs out, if it is set.
    pub fn expires_at(&self) -> Option<DateTime<Utc>> {
        self.expire_after.map(|d| self.created + d)
    }
}

/// The disruption taint a command puts on its candidates (upstream `DisruptedNoScheduleTaint`).
pub fn disrupted_taint() -> Taint {
    Taint {
        key: labels::DISRUPTED_TAINT_KEY.to_string(),
        value: None,
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }
}

/// A PodDisruptionBudget, reduced to what eviction checks read.
#[derive(Clone, Debug, PartialEq)]
pub struct Pdb {
    pub namespace: String,
    pub name: String,
    pub selector: Selector,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
}

impl Pdb {
    /// True when the PDB covers the pod (same namespace, selector matches).
    pub fn selects(&self, pod: &Pod) -> bool {
        self.namespace == pod.key.namespace && self.selector.matches(&pod.labels)
    }
}

/// One consistent snapshot of everything the engine decides on.
#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    pub nodepools: BTreeMap<String, NodePool>,
    pub nodes: Vec<StateNode>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<Pdb>,
    /// DaemonSet pod templates: every new node's overhead.
    pub daemonsets: Vec<Pod>,
    /// Instance types each pool may launch (narrowed to its NodeClass, ICE cache applied).
    pub instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
}

impl ClusterState {
    /// What a pool's nodes add up to: each node's capacity plus one `nodes` each. This is
    /// the pool's `status.resources`, the `karpenter_nodepools_usage` gauge and what
    /// `spec.limits` are checked against (upstream `state.Cluster.NodePoolResourcesFor`
    /// sums `StateNode.Capacity()` with `nodes: 1`).
    pub fn pool_usage(&self, pool: &str) -> Resources {
        let mut total = Resources::default();
        let mut nodes = 0;
        for n in self.nodes.iter().filter(|n| n.nodepool == pool) {
            total.add(&n.capacity);
            nodes += 1;
        }
        total.add_named(crate::engine::resources::NODES, nodes * 1000);
        total
    }

    /// Index of a node by its identity (NodeClaim name).
    pub fn node_index(&self) -> FastMap<&str, usize> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.nodeclaim.as_str(), i))
            .collect()
    }

    /// Per pod (in `pods` order), the index in `nodes` of the node it is bound to, or
    /// `u32::MAX` when it is bound to none of them: the one lookup from a pod's Node
    /// name to its node, for callers that fold over pods without lists per node. Every
    /// disruption pass, re-validation and Nodes view rebuild starts here, with one lookup
    /// per pod (50,000 at the benchmark's scale), so the index hashes with foldhash
    /// rather than SipHash (no untrusted keys choose where they land here).
    pub fn pod_nodes(&self) -> Vec<u32> {
        let index: HashMap<&str, u32, foldhash::fast::FixedState> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i as u32))
            .collect();
        self.pods
            .iter()
            .map(|p| {
                p.node_name
                    .as_deref()
                    .and_then(|n| index.get(n))
                    .copied()
                    .unwrap_or(u32::MAX)
            })
            .collect()
    }

    /// Pods per node (indices into `pods`, in `pods` order), for every node in `nodes`.
    /// Pods name their node by its Node name ([`ClusterState::pod_nodes`]); each list is
    /// allocated once at its final size.
    pub fn pods_by_node(&self) -> Vec<Vec<usize>> {
        let at = self.pod_nodes();
        let mut counts = vec![0usize; self.nodes.len()];
        for &n in &at {
            if let Some(c) = counts.get_mut(n as usize) {
                *c += 1;
            }
        }
        let mut out: Vec<Vec<usize>> = counts.into_iter().map(Vec::with_capacity).collect();
        for (i, &n) in at.iter().enumerate() {
            if let Some(list) = out.get_mut(n as usize) {
                list.push(i);
            }
        }
        out
    }

    /// A node by its identity (NodeClaim name).
    pub fn node(&self, nodeclaim: &str) -> Option<&StateNode> {
        self.nodes.iter().find(|n| n.nodeclaim == nodeclaim)
    }

    /// A node by its identity, to change it.
    pub fn node_mut(&mut self, nodeclaim: &str) -> Option<&mut StateNode> {
        self.nodes.iter_mut().find(|n| n.nodeclaim == nodeclaim)
    }

    /// A pod by key.
    pub fn pod(&self, key: &PodKey) -> Option<&Pod> {
        self.pods.iter().find(|p| &p.key == key)
    }
}

/// Pods that must find a new home when their node goes away (upstream
/// `IsReschedulable`): not DaemonSet or static pods, not terminal, not already terminating.
pub fn is_reschedulable(p: &Pod) -> bool {
    !p.is_daemonset() && !p.is_static() && !p.is_terminal() && p.deleting.is_none()
}
