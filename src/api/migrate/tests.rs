//! Whole-input behaviour: document order, the kubelet move across documents, pass-through
//! and errors.

use serde_json::Value;

use super::*;
use crate::api::manifest::{Object, load};

const POOL: &str = "apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: [amd64]
      nodeClassRef:
        apiVersion: karpenter.k8s.aws/v1beta1
        kind: EC2NodeClass
        name: default
      kubelet:
        maxPods: 110
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 720h
";

const CLASS: &str = "apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiFamily: AL2023
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
";

fn docs(yaml: &str) -> Vec<Value> {
    let stream = read_stream("out", yaml);
    assert!(stream.errors.is_empty(), "{:?}\n{yaml}", stream.errors);
    stream.documents.into_iter().map(|d| d.value).collect()
}

fn join_docs(parts: &[&str]) -> String {
    parts.join("---\n")
}

#[test]
fn converts_a_pool_and_its_class_and_the_output_loads_as_v1() {
    let m = migrate("in.yaml", &join_docs(&[POOL, CLASS])).expect("converts");
    let out = docs(&m.yaml);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["kind"], "NodePool");
    assert_eq!(
        out[1]["spec"]["kubelet"],
        serde_json::json!({"maxPods": 110})
    );
    assert!(out[0]["spec"]["template"]["spec"].get("kubelet").is_none());
    let loaded = load("out", &m.yaml);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    // The loader reports apiVersion and kind like unknown fields; nothing else may be unknown.
    let unknown: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.path != "apiVersion" && d.path != "kind")
        .collect();
    assert!(unknown.is_empty(), "no unknown fields: {unknown:?}");
    let Some((_, Object::EC2NodeClass(class))) = loaded.objects.get(1) else {
        panic!("class")
    };
    assert_eq!(
        class.spec.kubelet.as_ref().and_then(|k| k.max_pods),
        Some(110)
    );
    assert_eq!(class.spec.metadata_options.http_put_response_hop_limit, 2);
    let moved = m
        .warnings
        .iter()
        .find(|w| w.path == "spec.template.spec.kubelet")
        .expect("warned");
    assert_eq!(moved.document, 1);
    // The class's document starts on the line after the pool's and the separator.
    let class_line = POOL.lines().count() + 2;
    assert!(
        moved.message.contains(&format!("(line {class_line})")),
        "{moved}"
    );
}

#[test]
fn the_class_may_come_first() {
    let m = migrate("in.yaml", &join_docs(&[CLASS, POOL])).expect("converts");
    let out = docs(&m.yaml);
    assert_eq!(out[0]["kind"], "EC2NodeClass");
    assert_eq!(out[0]["spec"]["kubelet"]["maxPods"], 110);
}

#[test]
fn a_missing_class_gets_a_partial_document_right_after_its_pool() {
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
    let m = migrate("in.yaml", &join_docs(&[POOL, other])).expect("converts");
    let out = docs(&m.yaml);
    assert_eq!(out.len(), 3);
    assert_eq!(out[1]["kind"], "EC2NodeClass");
    assert_eq!(out[1]["apiVersion"], "karpenter.k8s.aws/v1");
    assert_eq!(out[1]["metadata"]["name"], "default");
    assert_eq!(
        out[1]["spec"],
        serde_json::json!({"kubelet": {"maxPods": 110}})
    );
    assert_eq!(out[2]["kind"], "ConfigMap");
    assert!(
        m.warnings
            .iter()
            .any(|w| w.message.contains("merge it into the real one"))
    );
}

#[test]
fn pools_sharing_a_class_with_different_kubelets_are_an_error() {
    let second = POOL
        .replace("name: general", "name: batch")
        .replace("maxPods: 110", "maxPods: 50");
    let errs = migrate("in.yaml", &join_docs(&[POOL, &second, CLASS])).expect_err("conflict");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].document, 2);
    assert_eq!(errs[0].path, "spec.template.spec.kubelet");
    assert!(errs[0].message.contains("split \"default\""), "{}", errs[0]);
}

#[test]
fn pools_sharing_a_class_with_the_same_kubelet_agree() {
    let second = POOL.replace("name: general", "name: batch");
    let m = migrate("in.yaml", &join_docs(&[POOL, &second, CLASS])).expect("converts");
    let out = docs(&m.yaml);
    assert_eq!(out.len(), 3);
    assert_eq!(out[2]["spec"]["kubelet"]["maxPods"], 110);
}

#[test]
fn a_different_kubelet_already_on_the_class_is_an_error() {
    let class = format!("{CLASS}  kubelet:\n    maxPods: 20\n");
    let errs = migrate("in.yaml", &join_docs(&[POOL, &class])).expect_err("conflict");
    assert_eq!(errs[0].path, "spec.template.spec.kubelet");
    assert!(
        errs[0].message.contains("already in EC2NodeClass"),
        "{}",
        errs[0]
    );
}

#[test]
fn kubelet_lands_on_a_v1_class_too() {
    let class = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: R
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
";
    let m = migrate("in.yaml", &join_docs(&[POOL, class])).expect("converts");
    assert_eq!(docs(&m.yaml)[1]["spec"]["kubelet"]["maxPods"], 110);
    assert!(
        m.warnings
            .iter()
            .any(|w| w.document == 2 && w.path == "spec.kubelet")
    );
}

#[test]
fn v1_and_foreign_documents_pass_through_unchanged_with_a_warning() {
    let v1 = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: done}
spec:
  template:
    spec:
      requirements: []
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
";
    let deployment =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n";
    let input = join_docs(&[v1, deployment]);
    let m = migrate("in.yaml", &input).expect("passes through");
    assert_eq!(docs(&m.yaml), docs(&input));
    let notes: Vec<(usize, &str)> = m
        .warnings
        .iter()
        .map(|w| (w.document, w.message.as_str()))
        .collect();
    assert!(
        notes[0].0 == 1 && notes[0].1.contains("nothing to change"),
        "{notes:?}"
    );
    assert!(
        notes[1].0 == 2 && notes[1].1.contains("not a Karpenter object"),
        "{notes:?}"
    );
}

#[test]
fn older_karpenter_apis_are_errors() {
    let errs = migrate(
        "in.yaml",
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\n",
    )
    .expect_err("old");
    assert_eq!(
        errs[0].to_string().split(": ").take(2).collect::<Vec<_>>(),
        vec!["in.yaml:1", "apiVersion"]
    );
}

#[test]
fn nodeclaims_take_their_pools_expiry() {
    let claim = "apiVersion: karpenter.sh/v1beta1
kind: NodeClaim
metadata:
  name: general-abc12
  labels: {karpenter.sh/nodepool: general}
spec:
  requirements: []
  nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: default}
";
    let pool = POOL.replace("expireAfter: 720h", "expireAfter: 168h");
    let m = migrate("in.yaml", &join_docs(&[claim, &pool, CLASS])).expect("converts");
    assert_eq!(docs(&m.yaml)[0]["spec"]["expireAfter"], "168h");
    let m = migrate("in.yaml", claim).expect("converts");
    assert!(docs(&m.yaml)[0]["spec"].get("expireAfter").is_none());
    assert!(
        m.warnings
            .iter()
            .any(|w| w.path == "spec.expireAfter" && w.message.contains("not in this input"))
    );
}

#[test]
fn errors_name_file_document_and_path_and_hide_the_output() {
    let custom = CLASS.replace("AL2023", "Custom");
    let errs = migrate("nc.yaml", &join_docs(&[POOL, &custom])).expect_err("custom without terms");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0]
            .to_string()
            .starts_with("nc.yaml:26: spec.amiSelectorTerms: "),
        "{}",
        errs[0]
    );
}

#[test]
fn malformed_yaml_and_empty_input_are_errors() {
    let errs = migrate("bad.yaml", &format!("{POOL}---\nkind: [unclosed\n")).expect_err("syntax");
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].document, 2);
    assert!(
        errs[0]
            .to_string()
            .starts_with("bad.yaml:23:1: malformed YAML: "),
        "{}",
        errs[0]
    );
    for empty in ["", "---\n# nothing\n"] {
        let errs = migrate("-", empty).expect_err("empty");
        assert!(
            errs[0].to_string().starts_with("-: no Kubernetes objects"),
            "{}",
            errs[0]
        );
    }
    let errs = migrate("-", "- a\n- b\n").expect_err("not an object");
    assert!(errs[0].message.contains("found a list"));
}

#[test]
fn strings_that_look_like_numbers_stay_strings() {
    let pool = POOL
        .replace("values: [amd64]", "values: [\"2\"]")
        .replace(
            "kubernetes.io/arch",
            "karpenter.k8s.aws/instance-generation",
        )
        .replace("operator: In", "operator: Gt");
    let m = migrate("in.yaml", &join_docs(&[&pool, CLASS])).expect("converts");
    assert_eq!(
        docs(&m.yaml)[0]["spec"]["template"]["spec"]["requirements"][0]["values"][0],
        "2"
    );
}
