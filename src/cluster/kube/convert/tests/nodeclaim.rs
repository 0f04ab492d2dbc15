//! Reading NodeClaims as upstream leaves them, the manifest that creates one, and the
//! merge patches that record its launch.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use serde_json::{Value, json};

use super::super::*;
use super::{Breakage, at_secs, known_price, label_map, no_price, price_of, yaml};
use crate::api::labels;
use crate::api::nodeclaim::{NodeClaim, TaintEffect};
use crate::cluster::{Launched, NodeClaimObject};
use crate::engine::catalog::CapacityType;
use crate::engine::requirements::{Requirement, Requirements};

/// A NodeClaim as upstream Karpenter leaves it once launched and registered.
const LAUNCHED_CLAIM: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x7k2p
  generateName: default-
  uid: 7f1e2c1a-0000-4000-8000-000000000001
  resourceVersion: "4242"
  generation: 1
  creationTimestamp: "2024-05-01T10:00:00Z"
  finalizers: [karpenter.sh/termination]
  labels:
    karpenter.sh/nodepool: default
    karpenter.sh/capacity-type: spot
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-east-1a
    kubernetes.io/arch: amd64
    team: web
  annotations:
    karpenter.sh/nodepool-hash: "6821555240594823858"
    karpenter.sh/nodepool-hash-version: v3
  ownerReferences:
    - {apiVersion: karpenter.sh/v1, kind: NodePool, name: default, uid: 11111111-2222-3333-4444-555555555555, blockOwnerDeletion: true}
  managedFields:
    - {manager: karpenter, operation: Update, apiVersion: karpenter.sh/v1, fieldsType: FieldsV1, fieldsV1: {"f:spec": {}}}
spec:
  expireAfter: 720h
  terminationGracePeriod: 1h30m
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge], minValues: 2}
    - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["1"]}
    - {key: karpenter.sh/nodepool, operator: In, values: [default]}
  resources:
    requests: {cpu: 1500m, memory: 3Gi, pods: "3"}
  taints:
    - {key: dedicated, value: web, effect: NoSchedule}
  startupTaints:
    - {key: node.cilium.io/agent-not-ready, effect: NoExecute}
status:
  providerID: aws:///us-east-1a/i-0abc123
  imageID: ami-0123456789
  nodeName: ip-10-0-1-23.ec2.internal
  capacity: {cpu: "2", memory: 7910Mi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7134Mi, pods: "29"}
  conditions:
    - {type: Initialized, status: "True", reason: Initialized, message: "", lastTransitionTime: "2024-05-01T10:01:10Z", observedGeneration: 1}
    - {type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "2024-05-01T10:00:04Z", observedGeneration: 1}
    - {type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2024-05-01T10:01:10Z", observedGeneration: 1}
    - {type: Registered, status: "True", reason: Registered, message: "", lastTransitionTime: "2024-05-01T10:00:55Z", observedGeneration: 1}
"#;

pub(super) fn decode_claim(v: Value) -> Result<NodeClaim, Malformed> {
    decode::<NodeClaim>("NodeClaim", v)
}

pub(super) fn claim_from(text: &str) -> NodeClaim {
    decode_claim(yaml(text)).expect("fixture decodes")
}

#[test]
fn a_launched_nodeclaim_reads_as_the_controller_builds_it() {
    let c = nodeclaim(&claim_from(LAUNCHED_CLAIM), &known_price).unwrap();
    assert_eq!(c.name, "default-x7k2p");
    assert_eq!(c.nodepool, "default");
    let it = c.requirements.get(labels::INSTANCE_TYPE).unwrap();
    assert_eq!(it.values(), ["m5.large", "m5.xlarge"]);
    assert_eq!(it.min_values(), Some(2));
    // Gt 1 is canonicalised to an inclusive bound, as upstream.
    assert_eq!(
        c.requirements.get(labels::INSTANCE_CPU).unwrap().bounds(),
        (Some(2), None)
    );
    assert_eq!(
        c.requests,
        Resources::parse([("cpu", "1500m"), ("memory", "3Gi"), ("pods", "3")]).unwrap()
    );
    assert_eq!(c.labels.get("team").map(String::as_str), Some("web"));
    assert_eq!(c.annotations.len(), 2);
    assert_eq!(c.taints.len(), 1);
    assert_eq!(c.startup_taints[0].effect, TaintEffect::NoExecute);
    assert_eq!(c.expire_after, Some(TimeDelta::hours(720)));
    assert_eq!(c.termination_grace_period, Some(TimeDelta::minutes(90)));
    assert_eq!(c.created, at_secs(1_714_557_600));
    assert_eq!(c.deleting, None);
    assert!(c.finalizer);
    let l = c.launched.expect("Launched=True with a providerID");
    assert_eq!(l.provider_id, "aws:///us-east-1a/i-0abc123");
    assert_eq!(l.instance_type, "m5.large");
    assert_eq!(l.zone, "us-east-1a");
    assert_eq!(l.capacity_type, CapacityType::Spot);
    assert_eq!(
        l.price,
        price_of("m5.large", "us-east-1a", CapacityType::Spot)
    );
    assert_eq!(l.allocatable.cpu, 1930);
    assert_eq!(l.allocatable.memory, 7134 * 1024 * 1024 * 1000);
    assert_eq!(l.labels, c.labels);
    assert_eq!(l.hostname, "ip-10-0-1-23.ec2.internal");
    assert_eq!(l.at, at_secs(1_714_557_604));
}

#[test]
fn an_unknown_price_reads_as_zero() {
    let c = nodeclaim(&claim_from(LAUNCHED_CLAIM), &no_price).unwrap();
    assert_eq!(c.launched.unwrap().price, 0.0);
}

#[test]
fn a_nodeclaim_is_launched_only_with_the_condition_true_and_a_provider_id() {
    let mut v = yaml(LAUNCHED_CLAIM);
    v["status"]["conditions"][1]["status"] = json!("Unknown");
    let c = nodeclaim(&decode_claim(v).unwrap(), &known_price).unwrap();
    assert_eq!(c.launched, None);

    let mut v = yaml(LAUNCHED_CLAIM);
    v["status"].as_object_mut().unwrap().remove("providerID");
    let c = nodeclaim(&decode_claim(v).unwrap(), &known_price).unwrap();
    assert_eq!(c.launched, None);

    let mut v = yaml(LAUNCHED_CLAIM);
    v.as_object_mut().unwrap().remove("status");
    let c = nodeclaim(&decode_claim(v).unwrap(), &known_price).unwrap();
    assert_eq!(c.launched, None);
}

#[test]
fn an_unregistered_claim_has_no_hostname_and_a_deleting_one_reads_as_deleting() {
    let mut v = yaml(LAUNCHED_CLAIM);
    v["status"].as_object_mut().unwrap().remove("nodeName");
    v["metadata"]["deletionTimestamp"] = json!("2024-05-02T00:00:00Z");
    v["metadata"]["finalizers"] = json!([]);
    let c = nodeclaim(&decode_claim(v).unwrap(), &known_price).unwrap();
    assert_eq!(c.launched.unwrap().hostname, "");
    assert_eq!(c.deleting, Some(at_secs(1_714_608_000)));
    assert!(!c.finalizer);
}

#[test]
fn an_unknown_operator_names_the_requirement() {
    let mut v = yaml(LAUNCHED_CLAIM);
    v["spec"]["requirements"][1]["operator"] = json!("Foo");
    let e = decode_claim(v).unwrap_err();
    assert_eq!(e.kind, "NodeClaim");
    assert_eq!(e.name, "default-x7k2p");
    assert!(
        e.message.starts_with(
            "spec.requirements[1].operator: unknown operator Foo (expected one of In, NotIn"
        ),
        "{e}"
    );
}

#[test]
fn an_unknown_taint_effect_in_a_nodeclaim_names_the_taint() {
    let mut v = yaml(LAUNCHED_CLAIM);
    v["spec"]["taints"][0]["effect"] = json!("NoWay");
    let e = decode_claim(v).unwrap_err();
    assert!(
        e.message
            .starts_with("spec.taints[0].effect: unknown taint effect NoWay"),
        "{e}"
    );
}

#[test]
fn malformed_nodeclaims_name_the_field() {
    let cases: [(&str, Breakage, &str); 7] = [
        (
            "numeric operator without an integer",
            |v| v["spec"]["requirements"][2]["values"] = json!(["two"]),
            "spec.requirements[2]: key \"karpenter.k8s.aws/instance-cpu\": operator Gt needs exactly one integer value",
        ),
        (
            "bad request",
            |v| v["spec"]["resources"]["requests"]["cpu"] = json!("lots"),
            "spec.resources.requests[cpu]: invalid quantity \"lots\"",
        ),
        (
            "bad allocatable",
            |v| v["status"]["allocatable"]["memory"] = json!("7GB"),
            "status.allocatable[memory]: invalid quantity \"7GB\"",
        ),
        (
            "unknown capacity type",
            |v| v["metadata"]["labels"]["karpenter.sh/capacity-type"] = json!("cheap"),
            "metadata.labels[karpenter.sh/capacity-type]: unknown capacity type \"cheap\"",
        ),
        (
            "launched without a zone",
            |v| {
                v["metadata"]["labels"]
                    .as_object_mut()
                    .unwrap()
                    .remove("topology.kubernetes.io/zone");
            },
            "metadata.labels[topology.kubernetes.io/zone]: required once the NodeClaim is launched",
        ),
        (
            "no creation time",
            |v| {
                v["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("creationTimestamp");
            },
            "metadata.creationTimestamp: required",
        ),
        (
            "no name",
            |v| {
                v["metadata"].as_object_mut().unwrap().remove("name");
            },
            "metadata.name: required",
        ),
    ];
    for (what, break_it, expected) in cases {
        let mut v = yaml(LAUNCHED_CLAIM);
        break_it(&mut v);
        let e = nodeclaim(&decode_claim(v).unwrap(), &known_price).unwrap_err();
        assert_eq!(e.kind, "NodeClaim", "{what}");
        assert!(e.message.starts_with(expected), "{what}: {e}");
        let name = if what == "no name" {
            UNNAMED
        } else {
            "default-x7k2p"
        };
        assert_eq!(e.name, name, "{what}");
    }
}

pub(super) fn pool_with_uid(name: &str) -> NodePool {
    let mut p = NodePool::unconstrained(name);
    p.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into());
    p
}

pub(super) fn sample_claim(name: &str) -> NodeClaimObject {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::in_values(
        labels::CAPACITY_TYPE,
        ["spot", "on-demand"],
    ));
    requirements.add(
        Requirement::in_values(labels::INSTANCE_TYPE, ["m5.large", "m5.xlarge", "c5.large"])
            .with_min_values(Some(2)),
    );
    requirements.add(Requirement::not_in_values("example.com/team", ["db"]));
    requirements.add(
        Requirement::gt(labels::INSTANCE_CPU, 1)
            .intersection(&Requirement::lt(labels::INSTANCE_CPU, 64)),
    );
    NodeClaimObject {
        name: name.into(),
        nodepool: "default".into(),
        requirements,
        requests: Resources::parse([
            ("cpu", "1500m"),
            ("memory", "1.5Gi"),
            ("pods", "3"),
            ("nvidia.com/gpu", "1"),
        ])
        .unwrap(),
        labels: label_map(&[(labels::NODEPOOL, "default"), ("team", "web")]),
        annotations: label_map(&[(labels::NODEPOOL_HASH, "123")]),
        taints: vec![Taint {
            key: "dedicated".into(),
            value: Some("web".into()),
            effect: TaintEffect::NoSchedule,
            time_added: None,
        }],
        startup_taints: vec![Taint {
            key: "node.cilium.io/agent-not-ready".into(),
            value: None,
            effect: TaintEffect::NoExecute,
            time_added: None,
        }],
        expire_after: Some(TimeDelta::hours(720)),
        termination_grace_period: None,
        created: at_secs(1_714_557_600),
        deleting: None,
        finalizer: true,
        launched: None,
        initialized_at: None,
        conditions: Vec::new(),
        last_pod_event: None,
    }
}

pub(super) fn sample_launch() -> Launched {
    Launched {
        provider_id: "aws:///us-east-1b/i-0def".into(),
        instance_type: "m5.xlarge".into(),
        zone: "us-east-1b".into(),
        capacity_type: CapacityType::OnDemand,
        price: price_of("m5.xlarge", "us-east-1b", CapacityType::OnDemand),
        capacity: Resources::parse([("cpu", "4"), ("memory", "16Gi"), ("pods", "58")]).unwrap(),
        allocatable: Resources::parse([("cpu", "3920m"), ("memory", "14162Mi"), ("pods", "58")])
            .unwrap(),
        labels: label_map(&[
            (labels::ARCH, "amd64"),
            (labels::OS, "linux"),
            (labels::INSTANCE_FAMILY, "m5"),
        ]),
        hostname: "ip-10-0-2-7.ec2.internal".into(),
        at: at_secs(1_714_557_605),
        image_id: None,
        annotations: BTreeMap::new(),
    }
}

#[test]
fn the_manifest_is_what_upstream_creates() {
    let claim = sample_claim("default-abcde");
    let nc = nodeclaim_manifest(&claim, &pool_with_uid("default"));
    assert!(crate::api::validation::validate_nodeclaim(&nc).is_empty());
    let v = serde_json::to_value(&nc).unwrap();
    assert_eq!(v["apiVersion"], "karpenter.sh/v1");
    assert_eq!(v["kind"], "NodeClaim");
    assert_eq!(v["metadata"]["name"], "default-abcde");
    assert_eq!(v["metadata"]["generateName"], "default-");
    assert_eq!(v["metadata"]["labels"]["karpenter.sh/nodepool"], "default");
    assert_eq!(
        v["metadata"]["finalizers"],
        json!(["karpenter.sh/termination"])
    );
    assert_eq!(
        v["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "default",
            "uid": "11111111-2222-3333-4444-555555555555",
            "blockOwnerDeletion": true,
        }])
    );
    assert_eq!(
        v["spec"]["nodeClassRef"],
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
    );
    assert_eq!(v["spec"]["expireAfter"], "720h");
    assert!(v["spec"].get("terminationGracePeriod").is_none());
    assert_eq!(
        v["spec"]["resources"]["requests"],
        json!({"cpu": "1500m", "memory": "1536Mi", "pods": "3", "nvidia.com/gpu": "1"})
    );
    let reqs = v["spec"]["requirements"].as_array().unwrap();
    let cpu: Vec<&Value> = reqs
        .iter()
        .filter(|r| r["key"] == labels::INSTANCE_CPU)
        .collect();
    assert_eq!(
        cpu,
        [
            &json!({"key": labels::INSTANCE_CPU, "operator": "Gte", "values": ["2"]}),
            &json!({"key": labels::INSTANCE_CPU, "operator": "Lte", "values": ["63"]}),
        ]
    );
    assert!(
        reqs.iter()
            .any(|r| r["key"] == labels::INSTANCE_TYPE && r["minValues"] == 2)
    );
    assert_eq!(v["spec"]["taints"][0]["key"], "dedicated");
    assert_eq!(v["spec"]["startupTaints"][0]["effect"], "NoExecute");
    assert!(v.get("status").is_none());
}

#[test]
fn an_unnamed_claim_leaves_naming_to_generate_name_and_a_pool_without_uid_gets_no_owner() {
    let mut claim = sample_claim("");
    claim.expire_after = None;
    claim.termination_grace_period = Some(TimeDelta::seconds(150));
    let nc = nodeclaim_manifest(&claim, &NodePool::unconstrained("default"));
    assert_eq!(nc.metadata.name, None);
    assert_eq!(nc.metadata.generate_name.as_deref(), Some("default-"));
    assert_eq!(nc.metadata.owner_references, None);
    assert_eq!(nc.spec.expire_after.text(), "Never");
    assert_eq!(
        nc.spec.termination_grace_period.as_ref().map(|d| d.text()),
        Some("2m30s")
    );
    assert!(crate::api::validation::validate_nodeclaim(&nc).is_empty());
}

#[test]
fn the_launch_status_patch_holds_upstreams_conditions() {
    let v = launched_status(&Launched {
        image_id: Some("ami-0123".into()),
        ..sample_launch()
    });
    let s = &v["status"];
    assert_eq!(s["providerID"], "aws:///us-east-1b/i-0def");
    assert_eq!(s["imageID"], "ami-0123");
    assert_eq!(
        s["allocatable"],
        json!({"cpu": "3920m", "memory": "14162Mi", "pods": "58"})
    );
    assert_eq!(
        s["capacity"],
        json!({"cpu": "4", "memory": "16Gi", "pods": "58"}),
        "kubectl get nodeclaims reads the instance's capacity"
    );
    let conds = s["conditions"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str)> = conds
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("Initialized", "Unknown", "AwaitingReconciliation"),
            ("Launched", "True", "Launched"),
            ("Ready", "Unknown", "ReconcilingDependents"),
            ("Registered", "Unknown", "AwaitingReconciliation"),
        ]
    );
    assert!(
        conds
            .iter()
            .all(|c| c["lastTransitionTime"] == "2024-05-01T10:00:05Z")
    );
    let without_image = launched_status(&sample_launch());
    assert!(without_image["status"].get("imageID").is_none());
}

#[test]
fn the_launch_label_patch_adds_the_offering() {
    let v = launched_labels(&sample_launch());
    assert_eq!(
        v,
        json!({"metadata": {"labels": {
            labels::ARCH: "amd64",
            labels::OS: "linux",
            labels::INSTANCE_FAMILY: "m5",
            labels::INSTANCE_TYPE: "m5.xlarge",
            labels::ZONE: "us-east-1b",
            labels::CAPACITY_TYPE: "on-demand",
        }}})
    );
}

#[test]
fn quantities_round_trip_exactly() {
    for (name, q) in [
        ("memory", "1.5Gi"),
        ("memory", "1537"),
        ("memory", "1.5"),
        ("cpu", "1500m"),
        ("cpu", "3"),
        ("ephemeral-storage", "20Gi"),
        ("hugepages-2Mi", "4Mi"),
        ("nvidia.com/gpu", "2"),
    ] {
        let r = Resources::parse([(name, q)]).unwrap();
        let back = quantities(&r);
        assert_eq!(
            Resources::from_map(&back).unwrap(),
            r,
            "{name}={q} -> {back:?}"
        );
    }
    assert_eq!(
        exact_quantity("memory", 1536 * 1024 * 1024 * 1000),
        "1536Mi"
    );
    assert_eq!(exact_quantity("cpu", 1500), "1500m");
    assert_eq!(exact_quantity("pods", 110_000), "110");
}

// --- property: any claim the controller could build round trips -------------------------
