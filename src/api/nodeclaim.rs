//! `karpenter.sh/v1` NodeClaim: one node Karpenter decided to launch, and the pieces of its
//! spec that NodePool templates share (requirements, taints, the NodeClass reference).
//!
//! Field names, defaults and CRD markers mirror `sigs.k8s.io/karpenter/pkg/apis/v1/nodeclaim.go`.

// kube's `printcolumn(...)` repeats `type_` and `priority` once per column; clippy reads
// the repeats as duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;
use super::quantity::Quantity;

/// Condition types a NodeClaim reports, in lifecycle order (upstream `ConditionType*`).
pub mod conditions {
    pub const LAUNCHED: &str = "Launched";
    pub const REGISTERED: &str = "Registered";
    pub const INITIALIZED: &str = "Initialized";
    pub const READY: &str = "Ready";
    pub const CONSOLIDATABLE: &str = "Consolidatable";
    pub const DRIFTED: &str = "Drifted";
    pub const DRAINED: &str = "Drained";
    pub const VOLUMES_DETACHED: &str = "VolumesDetached";
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
    pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
    pub const DISRUPTION_REASON: &str = "DisruptionReason";
}

/// The default `expireAfter`: 30 days, as upstream.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";

pub(crate) fn default_expire_after() -> GoDuration {
    GoDuration::parse(DEFAULT_EXPIRE_AFTER).expect("constant parses")
}

/// A NodeClaim is immutable once created: Karpenter replaces nodes rather than mutating them.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "karpenter",
    status = "NodeClaimStatus",
    derive = "PartialEq",
    doc = "NodeClaim is the Schema for the NodeClaims API",
    printcolumn(
        json_path = ".metadata.labels.node\\.kubernetes\\.io/instance-type",
        name = "Type",
        type_ = "string"
    ),
    printcolumn(
        json_path = ".metadata.labels.karpenter\\.sh/capacity-type",
        name = "Capacity",
        type_ = "string"
    ),
    printcolumn(
        json_path = ".metadata.labels.topology\\.kubernetes\\.io/zone",
        name = "Zone",
        type_ = "string"
    ),
    printcolumn(json_path = ".status.nodeName", name = "Node", type_ = "string"),
    printcolumn(
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        name = "Ready",
        type_ = "string"
    ),
    printcolumn(
        json_path = ".metadata.creationTimestamp",
        name = "Age",
        type_ = "date"
    ),
    printcolumn(
        json_path = ".status.imageID",
        name = "ImageID",
        type_ = "string",
        priority = "1"
    ),
    printcolumn(
        json_path = ".status.providerID",
        name = "ID",
        type_ = "string",
        priority = "1"
    ),
    printcolumn(
        json_path = ".metadata.labels.karpenter\\.sh/nodepool",
        name = "NodePool",
        type_ = "string",
        priority = "1"
    ),
    printcolumn(
        json_path = ".spec.nodeClassRef.name",
        name = "NodeClass",
        type_ = "string",
        priority = "1"
    ),
    printcolumn(
        json_path = ".status.conditions[?(@.type==\"Drifted\")].status",
        name = "Drifted",
        type_ = "string",
        priority = "1"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable"))]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    /// Taints applied to the node; pods must tolerate them to schedule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints present at startup that a daemon removes once the node is ready; they do not
    /// affect scheduling simulation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Label requirements the launched node must satisfy.
    #[x_kube(validation = Rule::new("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)").message("requirements with operator 'In' must have a value defined"))]
    #[x_kube(validation = Rule::new("self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)").message("requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"))]
    #[x_kube(validation = Rule::new("self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)").message("requirements with 'minValues' must have at least that many values specified in the 'values' field"))]
    #[schemars(length(max = 100))]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Resources the node must offer: the sum of the pods' requests plus daemon overhead.
    #[serde(default, skip_serializing_if = "ResourceRequirements::is_empty")]
    pub resources: ResourceRequirements,
    /// The provider-specific configuration (an EC2NodeClass on AWS).
    pub node_class_ref: NodeClassReference,
    /// How long a node may drain before pods are force-deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<GoDuration>,
    /// Lifetime after which the node is replaced; "Never" disables expiration.
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    pub expire_after: GoDuration,
}

/// A node selector requirement plus `minValues`: how many distinct values of the key the
/// launch must keep open (flexibility for spot and capacity).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key the selector applies to.
    #[x_kube(validation = Rule::new(r#"self in ["beta.kubernetes.io/instance-type", "failure-domain.beta.kubernetes.io/region", "beta.kubernetes.io/os", "beta.kubernetes.io/arch", "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/windows-build"] || self.find("^([^/]+)").endsWith("node.kubernetes.io") || self.find("^([^/]+)").endsWith("node-restriction.kubernetes.io") || !self.find("^([^/]+)").endsWith("kubernetes.io")"#).message(r#"label domain "kubernetes.io" is restricted"#))]
    #[x_kube(validation = Rule::new(r#"self.find("^([^/]+)").endsWith("kops.k8s.io") || !self.find("^([^/]+)").endsWith("k8s.io")"#).message(r#"label domain "k8s.io" is restricted"#))]
    #[x_kube(validation = Rule::new(r#"self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")"#).message(r#"label domain "karpenter.sh" is restricted"#))]
    #[x_kube(validation = Rule::new(r#"self != "kubernetes.io/hostname""#).message(r#"label "kubernetes.io/hostname" is restricted"#))]
    #[schemars(length(max = 316))]
    #[schemars(regex(
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
    ))]
    pub key: String,
    /// How the key relates to the values.
    pub operator: Operator,
    /// The values; empty for Exists and DoesNotExist, one integer for Gt/Lt/Gte/Lte.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The minimum number of distinct values the launch must keep available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i64>,
}

/// Requirement operators (Kubernetes' node selector operators plus Gte/Lte).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Operator {
    /// The operators that compare a single integer value.
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
        )
    }

    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }
}

/// A node taint (the core/v1 shape with the effect as a closed set).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The taint key.
    #[schemars(length(min = 1))]
    pub key: String,
    /// The taint value; may be empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What happens to pods that do not tolerate the taint.
    pub effect: TaintEffect,
    /// When the taint was added (only meaningful for NoExecute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

/// Taint effects.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl Taint {
    /// `karpenter.sh/unregistered:NoExecute`: a Karpenter node registers with it (the
    /// kubelet's registerWithTaints) and keeps it until registration synced the Node, so
    /// no pod lands before the NodeClaim's taints and labels do (upstream
    /// `UnregisteredNoExecuteTaint`).
    pub fn unregistered() -> Taint {
        Taint {
            key: crate::api::labels::UNREGISTERED_TAINT_KEY.into(),
            value: None,
            effect: TaintEffect::NoExecute,
            time_added: None,
        }
    }

    /// Same key, effect and value: how upstream's `MatchTaint` compares taints.
    pub fn matches(&self, other: &Taint) -> bool {
        self.key == other.key
            && self.effect == other.effect
            && self.value.as_deref().unwrap_or("") == other.value.as_deref().unwrap_or("")
    }
}

impl TaintEffect {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// Points at the provider's NodeClass object by group, kind and name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    /// Kind of the referent, e.g. EC2NodeClass.
    #[x_kube(validation = Rule::new("self != ''").message("kind may not be empty"))]
    pub kind: String,
    /// Name of the referent.
    #[x_kube(validation = Rule::new("self != ''").message("name may not be empty"))]
    pub name: String,
    /// API group of the referent, e.g. karpenter.k8s.aws.
    #[x_kube(validation = Rule::new("self != ''").message("group may not be empty"))]
    #[schemars(regex(pattern = r"^[^/]*$"))]
    pub group: String,
}

/// Resource requests a NodeClaim must satisfy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Minimum resources the node must provide.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

impl ResourceRequirements {
    fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// What the cloud provider and kubelet reported about the launched node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// The name of the Node object once registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The cloud provider's id of the instance, e.g. aws:///us-east-1a/i-0123.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The image the instance booted.
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Full capacity of the instance type.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Capacity minus kube-reserved, system-reserved and the eviction threshold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// Lifecycle conditions (Launched, Registered, Initialized, Ready, Drifted, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last time a pod was bound to, or left, this node: drives consolidateAfter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}

impl NodeClaimStatus {
    /// The condition of the given type, if reported.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// True when the condition is reported with status "True".
    pub fn is_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }
}
