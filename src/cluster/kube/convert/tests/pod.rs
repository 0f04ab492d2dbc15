//! Pods, DaemonSet templates and PodDisruptionBudgets as kubectl writes them, their
//! malformed variants, and what trimming a Pod keeps.

use serde_json::{Value, json};

use k8s_openapi::api::apps::v1::DaemonSet;

use super::super::*;
use super::{Breakage, label_map, yaml};
use crate::engine::selector::Selector;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web-7d9f8-abcde
  namespace: shop
  uid: 9b9b9b9b-0000-4000-8000-000000000004
  resourceVersion: "1001"
  creationTimestamp: "2024-05-01T09:59:00Z"
  labels: {app: web, pod-template-hash: 7d9f8}
  annotations:
    karpenter.sh/do-not-disrupt: "true"
    controller.kubernetes.io/pod-deletion-cost: "5"
    kubectl.kubernetes.io/restartedAt: "2024-05-01T09:58:00Z"
  ownerReferences:
    - {apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9f8, uid: r, controller: true, blockOwnerDeletion: true}
  managedFields:
    - {manager: kube-controller-manager, operation: Update, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {"f:spec": {}}}
spec:
  priorityClassName: high
  priority: 1000
  terminationGracePeriodSeconds: 45
  nodeSelector: {kubernetes.io/arch: amd64}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 50
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector: {matchLabels: {app: web}}
  tolerations:
    - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
    - {operator: Exists, effect: NoExecute, key: node.kubernetes.io/not-ready, tolerationSeconds: 300}
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
  initContainers:
    - name: migrate
      image: shop/migrate:1
      command: [/bin/migrate, --all]
      resources: {requests: {cpu: "2"}}
  containers:
    - name: app
      image: shop/web:1
      command: [/bin/web]
      args: [--port=8080]
      env:
        - {name: MODE, value: production}
        - {name: SECRET, valueFrom: {secretKeyRef: {name: s, key: k}}}
      ports:
        - {containerPort: 8080, protocol: TCP}
        - {containerPort: 9100, hostPort: 9100, protocol: TCP}
      resources: {requests: {cpu: 500m, memory: 512Mi}, limits: {memory: 1Gi}}
      volumeMounts: [{name: data, mountPath: /data}]
      readinessProbe: {httpGet: {path: /healthz, port: 8080}}
    - name: sidecar
      image: envoy:1
      resources: {limits: {cpu: 250m, memory: 128Mi}}
  volumes:
    - {name: data, emptyDir: {}}
status:
  phase: Pending
  conditions:
    - {type: PodScheduled, status: "False", reason: Unschedulable, message: "0/12 nodes are available: 12 Insufficient cpu.", lastTransitionTime: "2024-05-01T09:59:01Z"}
"#;

fn pod_from(v: Value) -> core::Pod {
    decode("Pod", v).expect("fixture decodes")
}

#[test]
fn a_pod_reads_as_the_engine_needs_it() {
    let p = pod(&pod_from(yaml(POD))).unwrap();
    assert_eq!(p.key.to_string(), "shop/web-7d9f8-abcde");
    // Init container's 2 CPU beats the app containers' 750m.
    assert_eq!(p.requests.cpu, 2000);
    assert_eq!(p.requests.memory, (512 + 128) * 1024 * 1024 * 1000);
    assert!(p.unschedulable && p.is_provisionable());
    assert_eq!(p.do_not_disrupt(), Some("true"));
    assert_eq!(p.deletion_cost(), 5);
    assert_eq!(p.tolerations.len(), 2);
    assert_eq!(p.host_ports.len(), 1);
    assert_eq!(p.preferred_anti_affinity.len(), 1);
    assert_eq!(p.spread.len(), 1);
    assert_eq!(p.termination_grace_period_seconds, 45);
    assert_eq!(
        p.owner.as_ref().map(|o| o.kind.as_str()),
        Some("ReplicaSet")
    );
}

#[test]
fn malformed_pods_name_the_field() {
    let cases: [(Breakage, &str); 6] = [
        (
            |v| v["spec"]["containers"][1]["resources"]["limits"]["cpu"] = json!("fast"),
            "spec.containers[1].resources.limits[cpu]: invalid quantity \"fast\"",
        ),
        (
            |v| v["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = json!("2 cores"),
            "spec.initContainers[0].resources.requests[cpu]: invalid quantity",
        ),
        (
            |v| v["spec"]["tolerations"][1]["effect"] = json!("NoWay"),
            "spec.tolerations[1].effect: unknown taint effect \"NoWay\"",
        ),
        (
            |v| v["spec"]["tolerations"][0]["operator"] = json!("Like"),
            "spec.tolerations[0].operator: unknown operator \"Like\"",
        ),
        (
            |v| {
                v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                    ["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] = json!("Foo")
            },
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]: key \"karpenter.sh/capacity-type\": unknown operator \"Foo\"",
        ),
        (
            |v| {
                v["spec"]["topologySpreadConstraints"][0]["labelSelector"] =
                    json!({"matchExpressions": [{"key": "app", "operator": "Near"}]})
            },
            "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator: unknown operator \"Near\"",
        ),
    ];
    for (break_it, expected) in cases {
        let mut v = yaml(POD);
        break_it(&mut v);
        let e = pod(&pod_from(v)).unwrap_err();
        assert_eq!((e.kind, e.name.as_str()), ("Pod", "shop/web-7d9f8-abcde"));
        assert!(e.message.starts_with(expected), "{e}");
    }
    let mut v = yaml(POD);
    v["metadata"].as_object_mut().unwrap().remove("name");
    let e = pod(&pod_from(v)).unwrap_err();
    assert_eq!(e.to_string(), "Pod shop/<unnamed>: metadata.name: required");
}

#[test]
fn a_trimmed_pod_converts_the_same_and_sheds_what_the_engine_ignores() {
    let original = pod_from(yaml(POD));
    let mut trimmed = original.clone();
    trim_pod(&mut trimmed);
    let mut want = pod(&original).unwrap();
    want.annotations.remove("kubectl.kubernetes.io/restartedAt");
    assert_eq!(pod(&trimmed).unwrap(), want);
    assert_eq!(want.annotations.len(), 2);
    assert_eq!(trimmed.metadata.managed_fields, None);
    let spec = trimmed.spec.as_ref().unwrap();
    assert_eq!(spec.volumes, None);
    let app = &spec.containers[0];
    assert_eq!(
        (app.env.as_ref(), app.command.as_ref(), app.image.as_ref()),
        (None, None, None)
    );
    assert_eq!(app.readiness_probe, None);
    assert_eq!(app.ports.as_ref().map(Vec::len), Some(1));
    let cond = &trimmed
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()[0];
    assert_eq!(cond.message, None);
    let size = |p: &core::Pod| serde_json::to_string(p).unwrap().len();
    assert!(
        size(&trimmed) < size(&original),
        "{} vs {}",
        size(&trimmed),
        size(&original)
    );
}

const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-exporter
  namespace: monitoring
  uid: dddddddd-0000-4000-8000-000000000005
spec:
  selector: {matchLabels: {app: node-exporter}}
  template:
    metadata:
      labels: {app: node-exporter}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      tolerations: [{operator: Exists}]
      containers:
        - name: exporter
          image: prom/node-exporter:1
          resources: {requests: {cpu: 100m, memory: 64Mi}}
"#;

#[test]
fn a_daemonset_template_becomes_a_daemon_pod() {
    let d: DaemonSet = decode("DaemonSet", yaml(DAEMONSET)).unwrap();
    let ds = daemonset(&d).unwrap();
    assert_eq!(
        (ds.namespace.as_str(), ds.name.as_str()),
        ("monitoring", "node-exporter")
    );
    let p = &ds.template;
    assert_eq!(p.key.to_string(), "monitoring/node-exporter");
    assert!(p.is_daemonset());
    assert!(!p.is_provisionable());
    assert_eq!(p.requests.cpu, 100);
    assert_eq!(p.requests.pods, 1000);
    assert_eq!(
        p.labels.get("app").map(String::as_str),
        Some("node-exporter")
    );
    assert_eq!(p.tolerations.len(), 1);
}

#[test]
fn malformed_daemonsets_name_the_field() {
    let mut v = yaml(DAEMONSET);
    v["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] =
        json!("64MB");
    let e = daemonset(&decode("DaemonSet", v).unwrap()).unwrap_err();
    assert_eq!(e.name, "monitoring/node-exporter");
    assert!(
        e.message.starts_with(
            "spec.template.spec.containers[0].resources.requests[memory]: invalid quantity"
        ),
        "{e}"
    );
    let mut v = yaml(DAEMONSET);
    v.as_object_mut().unwrap().remove("spec");
    let e = daemonset(&decode("DaemonSet", v).unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "DaemonSet monitoring/node-exporter: spec: required"
    );
}

const PDB: &str = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop, generation: 2}
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: web}
    matchExpressions: [{key: tier, operator: NotIn, values: [canary]}]
status:
  observedGeneration: 2
  disruptionsAllowed: 1
  currentHealthy: 3
  desiredHealthy: 2
  expectedPods: 3
"#;

#[test]
fn a_pdb_reads_its_selector_and_allowance() {
    let p = pdb(&decode("PodDisruptionBudget", yaml(PDB)).unwrap()).unwrap();
    assert_eq!((p.namespace.as_str(), p.name.as_str()), ("shop", "web"));
    assert_eq!(p.disruptions_allowed, 1);
    assert!(p.selector.matches(&label_map(&[("app", "web")])));
    assert!(
        !p.selector
            .matches(&label_map(&[("app", "web"), ("tier", "canary")]))
    );

    // Not yet processed by the disruption controller: nothing may be evicted.
    let mut v = yaml(PDB);
    v["metadata"]["generation"] = json!(3);
    assert_eq!(
        pdb(&decode("PodDisruptionBudget", v).unwrap())
            .unwrap()
            .disruptions_allowed,
        0
    );
    let mut v = yaml(PDB);
    v.as_object_mut().unwrap().remove("status");
    assert_eq!(
        pdb(&decode("PodDisruptionBudget", v).unwrap())
            .unwrap()
            .disruptions_allowed,
        0
    );

    // policy/v1: a missing selector selects nothing, an empty one the whole namespace.
    let mut v = yaml(PDB);
    v["spec"].as_object_mut().unwrap().remove("selector");
    assert_eq!(
        pdb(&decode("PodDisruptionBudget", v).unwrap())
            .unwrap()
            .selector,
        Selector::Nothing
    );
    let mut v = yaml(PDB);
    v["spec"]["selector"] = json!({});
    assert!(
        pdb(&decode("PodDisruptionBudget", v).unwrap())
            .unwrap()
            .selector
            .is_everything()
    );
}

#[test]
fn a_pdb_with_an_unknown_selector_operator_is_reported() {
    let mut v = yaml(PDB);
    v["spec"]["selector"]["matchExpressions"][0]["operator"] = json!("Besides");
    let e = pdb(&decode("PodDisruptionBudget", v).unwrap()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "PodDisruptionBudget shop/web: spec.selector.matchExpressions[0].operator: unknown operator \"Besides\" (expected In, NotIn, Exists or DoesNotExist)"
    );
}
