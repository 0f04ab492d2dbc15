//! Conversions from objects written the way kubectl and the API server send them, and
//! their malformed variants. NodeClaims, their round trip through a stand-in API server
//! and pods have their own files; NodePools and Nodes are here.

mod nodeclaim;
mod pod;
mod round_trip;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::*;
use crate::api::labels;
use crate::engine::catalog::CapacityType;

/// Breaks one field of a fixture, for the malformed-object cases.
type Breakage = fn(&mut Value);

fn yaml(text: &str) -> Value {
    serde_norway::from_str(text).expect("test YAML parses")
}

fn at_secs(s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(s, 0).expect("in range")
}

/// A deterministic price per offering, so a round trip can check the callback's use.
fn price_of(instance_type: &str, zone: &str, ct: CapacityType) -> f64 {
    let base = (instance_type.len() * 7 + zone.len()) as f64 / 100.0;
    match ct {
        CapacityType::Spot => base / 3.0,
        CapacityType::OnDemand => base,
        CapacityType::Reserved => base / 2.0,
    }
}

fn known_price(it: &str, zone: &str, ct: CapacityType) -> Option<f64> {
    Some(price_of(it, zone, ct))
}

fn no_price(_: &str, _: &str, _: CapacityType) -> Option<f64> {
    None
}

fn label_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// NodePool

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
  uid: 11111111-2222-3333-4444-555555555555
  managedFields:
    - {manager: kubectl-client-side-apply, operation: Update, apiVersion: karpenter.sh/v1, fieldsType: FieldsV1, fieldsV1: {"f:spec": {}}}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets: [{nodes: "10%"}]
  limits: {cpu: "1000"}
"#;

#[test]
fn a_nodepool_loses_managed_fields_and_keeps_the_rest() {
    let np: NodePool = decode("NodePool", yaml(POOL)).unwrap();
    assert!(np.metadata.managed_fields.is_some());
    let kept = nodepool(np.clone());
    assert_eq!(kept.validation_failure(), None);
    assert_eq!(kept.metadata.managed_fields, None);
    assert_eq!(kept.spec, np.spec);
    assert_eq!(kept.metadata.uid, np.metadata.uid);
    // Defaults the API server would apply are there for fields the object left out.
    assert_eq!(kept.spec.template.spec.expire_after.text(), "720h");
}

#[test]
fn an_invalid_nodepool_is_kept_marked_invalid_with_every_path() {
    let mut v = yaml(POOL);
    v["spec"]["limits"]["cpu"] = json!("lots");
    v["spec"]["template"]["spec"]["requirements"][0]["values"] = json!([]);
    let np: NodePool = decode("NodePool", v).unwrap();
    let kept = nodepool(np);
    let why = kept
        .validation_failure()
        .expect("marked ValidationSucceeded=False");
    assert!(why.contains("spec.limits[cpu]"), "{why}");
    assert!(why.contains("spec.template.spec.requirements[0]"), "{why}");
}

#[test]
fn a_balanced_nodepool_decodes() {
    // Issue 17: a NodePool with `consolidationPolicy: Balanced` failed to decode and was
    // dropped.
    let mut v = yaml(POOL);
    v["spec"]["disruption"]["consolidationPolicy"] = json!("Balanced");
    let np = nodepool_value(v).unwrap();
    assert_eq!(
        np.spec.disruption.consolidation_policy,
        crate::api::nodepool::ConsolidationPolicy::Balanced
    );
    assert_eq!(np.validation_failure(), None);
}

#[test]
fn a_nodepool_with_an_unknown_policy_is_kept_with_its_problem() {
    let mut v = yaml(POOL);
    v["spec"]["disruption"]["consolidationPolicy"] = json!("Sometimes");
    v["spec"]["someFieldFromTheFuture"] = json!({"a": 1});
    let np = nodepool_value(v).unwrap();
    assert_eq!(np.metadata.name.as_deref(), Some("default"));
    let why = np
        .validation_failure()
        .expect("marked ValidationSucceeded=False");
    assert!(
        why.starts_with(
            "spec.disruption.consolidationPolicy: unknown consolidationPolicy Sometimes (expected one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced)"
        ),
        "{why}"
    );
    // The rest of the pool is read as written.
    assert_eq!(np.spec.limits["cpu"].0, "1000");
}

#[test]
fn a_bad_requirement_sets_aside_that_requirement_only() {
    let mut v = yaml(POOL);
    v["spec"]["template"]["spec"]["requirements"][0]["operator"] = json!("Maybe");
    let np = nodepool_value(v).unwrap();
    let why = np.validation_failure().expect("invalid");
    assert!(
        why.contains("spec.template.spec.requirements[0].operator"),
        "{why}"
    );
}

#[test]
fn a_nodepool_without_a_template_is_an_error_naming_it() {
    let mut v = yaml(POOL);
    v["spec"].as_object_mut().unwrap().remove("template");
    let e = nodepool_value(v).unwrap_err();
    assert!(e.message.contains("spec.template"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Node

const NODE: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-23.ec2.internal
  uid: 5a5a5a5a-0000-4000-8000-000000000003
  resourceVersion: "777"
  creationTimestamp: "2024-05-01T10:00:55Z"
  labels:
    kubernetes.io/hostname: ip-10-0-1-23.ec2.internal
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.large
  annotations:
    karpenter.sh/nodepool-hash: "6821555240594823858"
    node.alpha.kubernetes.io/ttl: "0"
    volumes.kubernetes.io/controller-managed-attach-detach: "true"
  finalizers: [karpenter.sh/termination]
  managedFields:
    - {manager: kubelet, operation: Update, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {"f:status": {}}}
spec:
  providerID: aws:///us-east-1a/i-0abc123
  podCIDR: 10.244.1.0/24
  taints:
    - {key: dedicated, value: web, effect: NoSchedule}
    - {key: karpenter.sh/disrupted, effect: NoSchedule, timeAdded: "2024-05-02T00:00:00Z"}
status:
  capacity: {cpu: "2", memory: 7910Mi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7134Mi, pods: "29", ephemeral-storage: "18242267924"}
  addresses:
    - {type: InternalIP, address: 10.0.1.23}
  conditions:
    - {type: MemoryPressure, status: "False", reason: KubeletHasSufficientMemory, message: ok, lastHeartbeatTime: "2024-05-01T11:00:00Z", lastTransitionTime: "2024-05-01T10:00:55Z"}
    - {type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status, lastHeartbeatTime: "2024-05-01T11:00:00Z", lastTransitionTime: "2024-05-01T10:01:05Z"}
  images:
    - {names: ["public.ecr.aws/eks-distro/kubernetes/pause:3.9"], sizeBytes: 300000}
  nodeInfo: {architecture: amd64, bootID: b, containerRuntimeVersion: "containerd://1.7", kernelVersion: "6.1", kubeProxyVersion: v1.30.0, kubeletVersion: v1.30.0, machineID: m, operatingSystem: linux, osImage: Amazon Linux 2023, systemUUID: s}
"#;

fn node_from(v: Value) -> core::Node {
    decode("Node", v).expect("fixture decodes")
}

#[test]
fn a_node_reads_as_the_kubelet_reports_it() {
    let n = node(&node_from(yaml(NODE))).unwrap();
    assert_eq!(n.name, "ip-10-0-1-23.ec2.internal");
    assert_eq!(n.provider_id, "aws:///us-east-1a/i-0abc123");
    assert_eq!(n.labels.len(), 3);
    assert_eq!(n.annotations.len(), 3);
    assert_eq!(n.taints.len(), 2);
    assert_eq!(n.taints[0].value.as_deref(), Some("web"));
    assert_eq!(n.taints[1].key, labels::DISRUPTED_TAINT_KEY);
    assert!(n.taints[1].time_added.is_some());
    assert_eq!(n.allocatable.cpu, 1930);
    assert_eq!(n.allocatable.ephemeral_storage, 18_242_267_924_000);
    assert!(n.ready);
    assert_eq!(n.created, at_secs(1_714_557_655));

    let mut v = yaml(NODE);
    v["status"]["conditions"][1]["status"] = json!("Unknown");
    assert!(!node(&node_from(v)).unwrap().ready);
}

#[test]
fn malformed_nodes_name_the_field() {
    let cases: [(Breakage, &str); 4] = [
        (
            |v| v["spec"]["taints"][1]["effect"] = json!("NoWay"),
            "spec.taints[1].effect: unknown taint effect \"NoWay\"",
        ),
        (
            |v| v["spec"]["taints"][0]["key"] = json!(""),
            "spec.taints[0].key: required",
        ),
        (
            |v| v["status"]["allocatable"]["cpu"] = json!("1.9 cores"),
            "status.allocatable[cpu]: invalid quantity \"1.9 cores\"",
        ),
        (
            |v| v["metadata"]["name"] = json!(""),
            "metadata.name: required",
        ),
    ];
    for (break_it, expected) in cases {
        let mut v = yaml(NODE);
        break_it(&mut v);
        let e = node(&node_from(v)).unwrap_err();
        assert_eq!(e.kind, "Node");
        assert!(e.message.starts_with(expected), "{e}");
    }
}

#[test]
fn a_trimmed_node_converts_the_same_and_keeps_karpenters_annotations() {
    let original = node_from(yaml(NODE));
    let mut trimmed = original.clone();
    trim_node(&mut trimmed);
    let mut want = node(&original).unwrap();
    want.annotations
        .retain(|k, _| k.starts_with("karpenter.sh/"));
    assert_eq!(node(&trimmed).unwrap(), want);
    assert_eq!(want.annotations.len(), 1);
    assert_eq!(trimmed.metadata.managed_fields, None);
    assert_eq!(trimmed.metadata.resource_version.as_deref(), Some("777"));
    let status = trimmed.status.as_ref().unwrap();
    assert_eq!(status.images, None);
    assert_eq!(status.node_info, None);
    assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
    let size = |n: &core::Node| serde_json::to_string(n).unwrap().len();
    assert!(
        size(&trimmed) * 2 < size(&original),
        "{} vs {}",
        size(&trimmed),
        size(&original)
    );
}
