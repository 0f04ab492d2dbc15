//! `karpenter.sh/v1` NodePool: what nodes may exist, how they are disrupted, and how much
//! capacity a pool may hold.
//!
//! Field names, defaults and CRD markers mirror `sigs.k8s.io/karpenter/pkg/apis/v1/nodepool.go`.

// kube's `printcolumn(...)` repeats `type_` and `priority` once per column; clippy reads
// the repeats as duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::GoDuration;
use super::nodeclaim::{
    NodeClassReference, NodeSelectorRequirementWithMinValues, Taint, default_expire_after,
};
use super::quantity::Quantity;

/// The default budget when a NodePool names none: 10% of its nodes at a time.
pub const DEFAULT_BUDGET_NODES: &str = "10%";

/// A NodePool launches nodes for pods that cannot schedule, within its requirements and
/// limits, and disrupts them again under its disruption policy and budgets.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    category = "karpenter",
    status = "NodePoolStatus",
    derive = "PartialEq",
    doc = "NodePool is the Schema for the NodePools API",
    printcolumn(
        json_path = ".spec.template.spec.nodeClassRef.name",
        name = "NodeClass",
        type_ = "string"
    ),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.nodes"
    ),
    printcolumn(json_path = ".status.nodes", name = "Nodes", type_ = "string"),
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
        json_path = ".spec.weight",
        name = "Weight",
        type_ = "integer",
        priority = "1"
    ),
    printcolumn(
        json_path = ".status.resources.cpu",
        name = "CPU",
        type_ = "string",
        priority = "1"
    ),
    printcolumn(
        json_path = ".status.resources.memory",
        name = "Memory",
        type_ = "string",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.replicas) == has(oldSelf.replicas)").message("Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"))]
#[x_kube(validation = Rule::new("!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))").message("only 'limits.nodes' is supported on static NodePools"))]
#[x_kube(validation = Rule::new("!has(self.replicas) || !has(self.weight)").message("'weight' is not supported on static NodePools"))]
pub struct NodePoolSpec {
    /// The template every NodeClaim of this pool starts from.
    pub template: NodeClaimTemplate,
    /// When and how fast Karpenter may remove or replace this pool's nodes.
    #[serde(default)]
    #[schemars(extend("default" = {"consolidateAfter": "0s"}))]
    pub disruption: Disruption,
    /// Upper bounds on the total capacity of the pool (cpu, memory, nodes, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    /// Priority among pools that fit a pod: higher first (1..100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
    /// A static pool: keep exactly this many nodes whatever the pods need (upstream alpha,
    /// `pkg/apis/v1/nodepool.go` Replicas). Its consolidation policy and consolidateAfter
    /// are ignored; only `limits.nodes` applies; weight is not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("format" = "int64"))]
    pub replicas: Option<i64>,
}

/// Template for NodeClaims: labels and annotations, plus the claim spec.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    /// Labels and annotations copied onto every node.
    #[serde(default)]
    pub metadata: TemplateMetadata,
    /// The NodeClaim spec, minus resources (filled in per launch).
    pub spec: NodeClaimTemplateSpec,
}

/// The subset of ObjectMeta a template may carry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels applied to launched nodes; restricted domains are rejected like upstream.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[x_kube(validation = Rule::new(r#"self.all(x, x in ["beta.kubernetes.io/instance-type", "failure-domain.beta.kubernetes.io/region", "beta.kubernetes.io/os", "beta.kubernetes.io/arch", "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/windows-build"] || x.find("^([^/]+)").endsWith("node.kubernetes.io") || x.find("^([^/]+)").endsWith("node-restriction.kubernetes.io") || !x.find("^([^/]+)").endsWith("kubernetes.io"))"#).message(r#"label domain "kubernetes.io" is restricted"#))]
    #[x_kube(validation = Rule::new(r#"self.all(x, x.find("^([^/]+)").endsWith("kops.k8s.io") || !x.find("^([^/]+)").endsWith("k8s.io"))"#).message(r#"label domain "k8s.io" is restricted"#))]
    #[x_kube(validation = Rule::new(r#"self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith("karpenter.sh"))"#).message(r#"label domain "karpenter.sh" is restricted"#))]
    #[x_kube(validation = Rule::new(r#"self.all(x, x != "karpenter.sh/nodepool")"#).message(r#"label "karpenter.sh/nodepool" is restricted"#))]
    #[x_kube(validation = Rule::new(r#"self.all(x, x != "kubernetes.io/hostname")"#).message(r#"label "kubernetes.io/hostname" is restricted"#))]
    #[schemars(extend("maxProperties" = 100))]
    #[schemars(extend("additionalProperties" = {"type": "string", "maxLength": 63, "pattern": "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}))]
    pub labels: BTreeMap<String, String>,
    /// Annotations applied to launched nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The NodeClaim spec as a NodePool template holds it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Label requirements every launched node satisfies.
    #[x_kube(validation = Rule::new("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)").message("requirements with operator 'In' must have a value defined"))]
    #[x_kube(validation = Rule::new("self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)").message("requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"))]
    #[x_kube(validation = Rule::new("self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)").message("requirements with 'minValues' must have at least that many values specified in the 'values' field"))]
    #[x_kube(validation = Rule::new(r#"self.all(x, x.key != "karpenter.sh/nodepool")"#).message(r#"label "karpenter.sh/nodepool" is restricted"#))]
    #[schemars(length(max = 100))]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Taints applied to every launched node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints present at startup and removed by a daemon; ignored by scheduling simulation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// The provider-specific configuration. Its group and kind are immutable upstream:
    /// switching providers means a new pool.
    #[x_kube(validation = Rule::new("self.group == oldSelf.group").message("nodeClassRef.group is immutable"))]
    #[x_kube(validation = Rule::new("self.kind == oldSelf.kind").message("nodeClassRef.kind is immutable"))]
    pub node_class_ref: NodeClassReference,
    /// Node lifetime; "Never" disables expiration. Default 720h.
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    #[schemars(extend("default" = "720h"))]
    pub expire_after: GoDuration,
    /// Maximum drain time before pods are force-deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<GoDuration>,
}

/// Disruption policy of a NodePool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long after the last pod event a node may be consolidated; "Never" disables
    /// consolidation. Required when the disruption block is present (upstream marks it so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    pub consolidate_after: Option<GoDuration>,
    /// Which nodes consolidation may consider.
    #[serde(default)]
    #[schemars(extend("default" = "WhenEmptyOrUnderutilized"))]
    pub consolidation_policy: ConsolidationPolicy,
    /// At most how many nodes may be disrupted at once; the most restrictive active budget
    /// wins.
    #[serde(default = "default_budgets")]
    #[schemars(extend("default" = [{"nodes": "10%"}]))]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.all(x, has(x.schedule) == has(x.duration))", "message": "'schedule' must be set with 'duration'"}]))]
    pub budgets: Vec<Budget>,
}

impl NodePool {
    /// A pool that allows every instance type the cloud offers, on the EC2NodeClass
    /// "default", with upstream's defaults everywhere else: the starting point of
    /// benchmarks, tests and scenarios that add only what they exercise.
    pub fn unconstrained(name: &str) -> NodePool {
        NodePool::new(
            name,
            NodePoolSpec {
                template: NodeClaimTemplate {
                    metadata: TemplateMetadata::default(),
                    spec: NodeClaimTemplateSpec {
                        requirements: Vec::new(),
                        taints: Vec::new(),
                        startup_taints: Vec::new(),
                        node_class_ref: NodeClassReference {
                            group: super::labels::AWS_GROUP.to_string(),
                            kind: "EC2NodeClass".to_string(),
                            name: "default".to_string(),
                        },
                        expire_after: default_expire_after(),
                        termination_grace_period: None,
                    },
                },
                disruption: Disruption::default(),
                limits: BTreeMap::new(),
                weight: None,
                replicas: None,
            },
        )
    }
}

/// Upstream's NodePool condition saying whether the pool passed validation
/// (`pkg/controllers/nodepool/validation/controller.go`); False means nothing is launched
/// from the pool.
pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// The reason upstream gives a False `ValidationSucceeded`.
pub const REASON_VALIDATION_FAILED: &str = "NodePoolValidationFailed";

impl NodePool {
    /// Why the pool failed validation, if it did (`ValidationSucceeded=False`, written by
    /// upstream or set when we read a pool we cannot fully understand): such a pool stays
    /// visible but launches nothing and its nodes are not voluntarily disrupted.
    pub fn validation_failure(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_VALIDATION_SUCCEEDED && c.status == "False")
            .map(|c| c.message.as_str())
    }

    /// Marks the pool `ValidationSucceeded=False` with `message`, replacing any earlier
    /// verdict.
    pub fn mark_invalid(&mut self, message: String) {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let status = self.status.get_or_insert_with(NodePoolStatus::default);
        status
            .conditions
            .retain(|c| c.type_ != CONDITION_VALIDATION_SUCCEEDED);
        status.conditions.push(Condition {
            type_: CONDITION_VALIDATION_SUCCEEDED.to_string(),
            status: "False".to_string(),
            reason: REASON_VALIDATION_FAILED.to_string(),
            message,
            // Decoding has no clock; the pool's creation is the earliest the verdict holds.
            last_transition_time: self
                .metadata
                .creation_timestamp
                .clone()
                .unwrap_or(Time(Default::default())),
            observed_generation: self.metadata.generation,
        });
    }
}

impl Default for Disruption {
    /// The disruption block upstream defaults when it is absent: consolidateAfter 0s.
    fn default() -> Self {
        Disruption {
            consolidate_after: Some(GoDuration::from_std(std::time::Duration::ZERO)),
            consolidation_policy: ConsolidationPolicy::default(),
            budgets: default_budgets(),
        }
    }
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget {
        nodes: DEFAULT_BUDGET_NODES.to_string(),
        schedule: None,
        duration: None,
        reasons: Vec::new(),
    }]
}

fn default_budget_nodes() -> String {
    DEFAULT_BUDGET_NODES.to_string()
}

/// Which nodes consolidation may act on.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes and nodes whose pods fit elsewhere or on a cheaper replacement.
    #[default]
    WhenEmptyOrUnderutilized,
    /// As WhenEmptyOrUnderutilized, but a move must save a share of the pool's cost at
    /// least half the share of the pool's disruption it causes (upstream's `BalancedK`
    /// scoring; see `engine::disruption::balanced`).
    Balanced,
}

impl ConsolidationPolicy {
    /// Upstream `IsBalanced`: moves of this pool are scored.
    pub fn is_balanced(self) -> bool {
        self == ConsolidationPolicy::Balanced
    }

    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsolidationPolicy::WhenEmpty => "WhenEmpty",
            ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
            ConsolidationPolicy::Balanced => "Balanced",
        }
    }
}

/// A limit on simultaneous voluntary disruptions, optionally only in a cron window and only
/// for some reasons.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// A node count ("5") or a percentage of the pool's nodes ("10%", rounded up).
    #[serde(default = "default_budget_nodes")]
    #[schemars(regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    #[schemars(extend("default" = "10%"))]
    pub nodes: String,
    /// Cron schedule (UTC, five fields or @daily-style) at which the budget becomes active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
    ))]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit (hours and minutes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"))]
    pub duration: Option<GoDuration>,
    /// The disruption reasons the budget limits; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<DisruptionReason>,
}

/// Reasons a budget can be scoped to.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
pub enum DisruptionReason {
    Underutilized,
    Empty,
    Drifted,
    /// Node repair (`engine::repair`). Not a value a budget may list: upstream v1.14.1's
    /// CRD does not accept it, so a NodePool written for one applies to the other. The
    /// budgets that list no reasons govern repairs.
    #[serde(skip)]
    #[schemars(skip)]
    Unhealthy,
}

impl DisruptionReason {
    /// All reasons, in upstream order, then repair.
    pub const ALL: [DisruptionReason; 4] = [
        DisruptionReason::Underutilized,
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
        DisruptionReason::Unhealthy,
    ];

    /// The reasons a budget may list (upstream's): all but repair.
    pub const LISTABLE: [DisruptionReason; 3] = [
        DisruptionReason::Underutilized,
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
    ];

    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionReason::Underutilized => "Underutilized",
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Drifted => "Drifted",
            DisruptionReason::Unhealthy => "Unhealthy",
        }
    }
}

/// Observed state of a NodePool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Total resources of the pool's nodes, plus `nodes`: the count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Readiness conditions (Ready, NodeClassReady, ValidationSucceeded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How many NodeClaims the pool has: the scale subresource's status replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0, "format" = "int64"))]
    pub nodes: Option<i64>,
    /// The NodeClass generation the pool last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unconstrained_pool_is_valid_and_carries_upstream_defaults() {
        let np = NodePool::unconstrained("default");
        assert!(crate::api::validation::validate_nodepool(&np).is_empty());
        assert_eq!(np.spec.template.spec.expire_after.text(), "720h");
        assert_eq!(np.spec.disruption.budgets[0].nodes, "10%");
        assert_eq!(
            np.spec.disruption.consolidation_policy,
            ConsolidationPolicy::WhenEmptyOrUnderutilized
        );
    }
}

#[cfg(test)]
mod v1_14_fields {
    use super::*;

    /// A static, Balanced NodePool with status.nodes, as upstream v1.14.1 writes it, reads
    /// without unknown fields and writes back unchanged.
    #[test]
    fn an_upstream_v1_14_1_nodepool_round_trips_with_every_field() {
        let v = serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "static"},
            "spec": {
                "replicas": 3,
                "limits": {"nodes": "5"},
                "disruption": {"consolidateAfter": "30s", "consolidationPolicy": "Balanced", "budgets": [{"nodes": "10%"}]},
                "template": {
                    "metadata": {},
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                        "expireAfter": "720h"
                    }
                }
            },
            "status": {"nodes": 3, "resources": {"cpu": "12", "nodes": "3"}}
        });
        let (np, unknown) = crate::api::manifest::typed::<NodePool>(v.clone()).unwrap();
        // apiVersion and kind are read by kube's type, not by the spec model.
        assert_eq!(unknown, ["apiVersion", "kind"]);
        assert_eq!(np.spec.replicas, Some(3));
        assert!(np.spec.disruption.consolidation_policy.is_balanced());
        assert_eq!(serde_json::to_value(&np).unwrap(), v);
        assert!(crate::api::validation::validate_nodepool(&np).is_empty());
    }

    #[test]
    fn a_static_pool_takes_only_limits_nodes_and_no_weight() {
        let mut np = NodePool::unconstrained("static");
        np.spec.replicas = Some(3);
        np.spec.weight = Some(10);
        np.spec
            .limits
            .insert("cpu".into(), super::super::quantity::Quantity("10".into()));
        let paths: Vec<String> = crate::api::validation::validate_nodepool(&np)
            .into_iter()
            .map(|v| format!("{}: {}", v.path, v.message))
            .collect();
        assert_eq!(
            paths,
            [
                "spec.limits.cpu: only 'limits.nodes' is supported on static NodePools",
                "spec.weight: 'weight' is not supported on static NodePools"
            ]
        );
    }
}
