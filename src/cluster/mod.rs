//! Where truth lives: the objects the controller reads from a cluster and the writes it
//! makes. The controller talks to a cluster only through [`Cluster`]; `sim` is the
//! embedded in-memory cluster, and the Kubernetes backend implements the same trait.
//!
//! The objects here are the Karpenter-relevant slice of their Kubernetes counterparts, so
//! that a backend converts at its edge and the control loop never parses API objects.

pub mod kube;
pub mod scenario;
pub mod sim;
pub mod template;

use std::collections::BTreeMap;
use std::future::Future;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::nodeclaim::Taint;
use crate::api::nodepool::NodePool;
use crate::engine::catalog::CapacityType;
use crate::engine::pod::{Pod, PodKey};
use crate::engine::requirements::Requirements;
use crate::engine::resources::Resources;
use crate::engine::state::Pdb;

/// The finalizer that keeps a NodeClaim (and its Node) until termination drained it and
/// deleted the instance (upstream `karpenter.sh/termination`).
pub use crate::api::labels::TERMINATION_FINALIZER;

/// What the cloud provider reported when the NodeClaim launched (upstream: the status
/// fields and labels `cloudprovider.Create` fills in).
#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    /// USD per hour of the offering.
    pub price: f64,
    /// The instance type's full capacity (status.capacity), and what pods may use of it.
    pub capacity: Resources,
    pub allocatable: Resources,
    /// Labels the instance type gives the node (arch, os, instance family, ...).
    pub labels: BTreeMap<String, String>,
    /// The node name the kubelet will register under (the instance's private DNS name).
    pub hostname: String,
    pub at: DateTime<Utc>,
    /// status.imageID: the image the instance booted (AMIDrift compares it).
    pub image_id: Option<String>,
    /// Annotations the provider adds to the NodeClaim with the launch (the NodeClass hash).
    pub annotations: BTreeMap<String, String>,
}

/// A NodeClaim: a request for one node, and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeClaimObject {
    pub name: String,
    pub nodepool: String,
    /// spec.requirements: the pool's plus the scheduling round's (instance types allowed).
    pub requirements: Requirements,
    /// spec.resources.requests: what the pods it was launched for need.
    pub requests: Resources,
    /// Labels and annotations from the pool's template (plus the nodepool-hash).
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub expire_after: Option<TimeDelta>,
    pub termination_grace_period: Option<TimeDelta>,
    pub created: DateTime<Utc>,
    /// metadata.deletionTimestamp.
    pub deleting: Option<DateTime<Utc>>,
    /// Carries the termination finalizer: the object stays until termination removes it.
    pub finalizer: bool,
    /// Set once the cloud provider launched it (condition Launched=True).
    pub launched: Option<Launched>,
    /// When it became initialized, where the cluster records it (condition
    /// Initialized=True's lastTransitionTime, which upstream writes).
    pub initialized_at: Option<DateTime<Utc>>,
    /// status.conditions as the cluster holds them: a controller keeps their transition
    /// times across restarts, and a console attached to upstream Karpenter reads its
    /// verdicts (Drifted) instead of recomputing them. Empty in the simulation.
    pub conditions: Vec<Condition>,
    /// status.lastPodEventTime, where the cluster records it: consolidateAfter counts
    /// from it after a restart.
    pub last_pod_event: Option<DateTime<Utc>>,
}

impl NodeClaimObject {
    /// The reason of condition `type_` when it is True.
    pub fn condition_true(&self, type_: &str) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| c.reason.as_str())
    }
}

/// A Node, as the kubelet registered it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeObject {
    pub name: String,
    pub provider_id: String,
    /// Shared, as the controller's own nodes' labels are (`StateNode::labels`): the
    /// simulated kube-scheduler's simulator then knows an unchanged node's labels by
    /// identity instead of comparing them at every round.
    pub labels: std::sync::Arc<BTreeMap<String, String>>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// Condition Ready=True.
    pub ready: bool,
    /// Its conditions a repair policy names (`engine::repair`), with their transition
    /// times: empty while the node is healthy.
    pub faults: Vec<crate::engine::repair::NodeFault>,
    pub created: DateTime<Utc>,
}

/// A DaemonSet: its pod template runs on every node it tolerates and selects.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSetObject {
    pub namespace: String,
    pub name: String,
    /// The pod every node gets (owner kind DaemonSet).
    pub template: Pod,
}

/// An object of a kind the controller watches.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    NodePool(Box<NodePool>),
    NodeClaim(Box<NodeClaimObject>),
    Node(Box<NodeObject>),
    Pod(Box<Pod>),
    Pdb(Box<Pdb>),
    DaemonSet(Box<DaemonSetObject>),
    /// The annotations of the cluster-wide console object (the ConfigMap `karpenter-tui`
    /// in the controller's namespace): where a pause of every pool lives.
    Settings(BTreeMap<String, String>),
}

/// Which object a deletion names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectRef {
    NodePool(String),
    NodeClaim(String),
    Node(String),
    Pod(PodKey),
    Pdb(String, String),
    DaemonSet(String, String),
    Settings,
}

/// For people and logs: "nodeclaim/default-abc12", "pod/default/web-0".
impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectRef::NodePool(n) => write!(f, "nodepool/{n}"),
            ObjectRef::NodeClaim(n) => write!(f, "nodeclaim/{n}"),
            ObjectRef::Node(n) => write!(f, "node/{n}"),
            ObjectRef::Pod(k) => write!(f, "pod/{k}"),
            ObjectRef::Pdb(ns, n) => write!(f, "poddisruptionbudget/{ns}/{n}"),
            ObjectRef::DaemonSet(ns, n) => write!(f, "daemonset/{ns}/{n}"),
            ObjectRef::Settings => write!(f, "the karpenter-tui settings ConfigMap"),
        }
    }
}

/// One watch event.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Created or updated: the whole new object.
    Applied(Object),
    Deleted(ObjectRef),
    /// An object the backend could not read, or a watch that failed. Reported, never
    /// fatal: the last good version of the object stays in the controller's state.
    Problem(String),
}

/// A change the controller asks of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    CreateNodeClaim(Box<NodeClaimObject>),
    /// Records the launch in the NodeClaim's status.
    SetLaunched {
        nodeclaim: String,
        launched: Box<Launched>,
    },
    /// Sets the deletionTimestamp; the finalizer keeps the object while termination runs.
    DeleteNodeClaim {
        nodeclaim: String,
    },
    /// Termination is done: the NodeClaim and its Node go away.
    RemoveFinalizer {
        nodeclaim: String,
    },
    /// Registration (upstream `nodeclaim/lifecycle/registration.go`): the Node gets its
    /// NodeClaim's labels, annotations and taints, the termination finalizer, an owner
    /// reference to the NodeClaim and `karpenter.sh/registered`, and loses the
    /// `karpenter.sh/unregistered` taint, in one optimistic-locked write.
    RegisterNode {
        node: String,
        nodeclaim: String,
        sync: Box<NodeSync>,
    },
    /// Sets labels on a Node (`karpenter.sh/initialized` once it is initialized).
    LabelNode {
        node: String,
        labels: BTreeMap<String, String>,
    },
    /// Replaces a NodeClaim's status (the status subresource): conditions, nodeName,
    /// capacity, lastPodEventTime, as upstream's lifecycle controllers keep them.
    NodeClaimStatus {
        nodeclaim: String,
        status: Box<crate::api::nodeclaim::NodeClaimStatus>,
    },
    /// Replaces a NodePool's status: what its nodes hold, how many, and its conditions.
    NodePoolStatus {
        nodepool: String,
        status: Box<PoolStatus>,
    },
    /// Adds a taint to a Node (no-op if it has one with that key and effect).
    Taint {
        node: String,
        taint: Taint,
    },
    /// Removes taints with that key and effect from a Node.
    Untaint {
        node: String,
        taint: Taint,
    },
    /// The eviction API: refused with [`ClusterError::DisruptionBudget`] when a PDB
    /// allows no more disruptions.
    Evict {
        pod: PodKey,
    },
    /// Deletes a pod outright (bypasses PDBs): termination's grace-period deadline.
    DeletePod {
        pod: PodKey,
    },
    /// Sets (`Some`) or removes (`None`) annotations on a NodeClaim, a NodePool or the
    /// settings object: how decisions, approvals and pauses are recorded in the API
    /// server, where every console sees them and a restart finds them.
    Annotate {
        target: ObjectRef,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Sets (`Some`) or removes (`None`) labels on a NodeClaim or a Node: the capacity
    /// type of a node whose capacity reservation ended (upstream's
    /// `capacityreservation/capacitytype` controller).
    Relabel {
        target: ObjectRef,
        labels: BTreeMap<String, Option<String>>,
    },
}

/// What registration copies from a NodeClaim onto its Node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSync {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The NodeClaim's taints and startup taints, merged into the Node's by key and
    /// effect (left alone when the Node carries `karpenter.sh/do-not-sync-taints`).
    pub taints: Vec<Taint>,
}

/// A NodePool's status as upstream's nodepool counter and readiness controllers write it.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolStatus {
    /// status.nodes: the pool's NodeClaims (what the scale subresource reads).
    pub nodes: i64,
    /// status.resources: the capacity of its nodes, plus `nodes`.
    pub resources: Resources,
    pub conditions: Vec<Condition>,
}

/// Why a write failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ClusterError {
    #[error("{what} not found")]
    NotFound { what: String },
    /// 429 from the eviction API.
    #[error("cannot evict {pod}: PodDisruptionBudget {pdb} allows no more disruptions")]
    DisruptionBudget { pod: PodKey, pdb: String },
    #[error("API error: {0}")]
    Api(String),
}

/// Something the controller wants an operator to see on an object (`kubectl describe`,
/// `kubectl get events`): a Kubernetes Event in a real cluster, nothing in the simulation
/// (whose journal already holds it).
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub regarding: ObjectRef,
    /// Upstream Karpenter's event reason (`DisruptionBlocked`, `Nominated`, ...).
    pub reason: &'static str,
    /// What happened, for a person.
    pub note: String,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// What, beside the object and the reason, tells this notice apart from an earlier
    /// one (upstream's `DedupeValues` past the object; the message never does): usually
    /// empty.
    pub dedupe: String,
    /// How long a notice with the same object, reason and `dedupe` is dropped (upstream's
    /// `DedupeTimeout`; 2 minutes unless the event sets its own).
    pub dedupe_window: std::time::Duration,
    /// Counts against the nomination rate limit (upstream: 5 a second, bursts of 10).
    pub rate_limited: bool,
}

/// A cluster the controller can watch and write to.
pub trait Cluster {
    /// Every change since the last call, oldest first. The first call after the
    /// controller starts lists every object (the initial sync of a watch).
    fn changes(&mut self) -> Vec<Change>;

    /// Makes one change.
    fn write(&mut self, write: Write) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Publishes a notice; best effort, never blocks the loop. The default drops it.
    fn notify(&mut self, _notice: Notice) {}

    /// False until the cluster's objects have all been listed once (upstream's cluster
    /// state is not "synced" before): nothing may be disrupted on a partial view. The
    /// default (an in-memory cluster) is always synced.
    fn synced(&self) -> bool {
        true
    }

    /// True when the cluster keeps NodeClaim and NodePool status for others to read
    /// (`kubectl get nodeclaims`, dashboards): the controller then writes it. The
    /// simulation's journal and snapshots already hold everything, so it does not.
    fn keeps_status(&self) -> bool {
        false
    }

    /// False when [`Cluster::notify`] drops everything: the controller then does not
    /// compose notices at all (the simulation emits events on its hot path).
    fn takes_notices(&self) -> bool {
        false
    }
}
