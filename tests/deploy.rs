//! The in-cluster manifests in deploy/: the CRDs match what `karpenter-tui crds` prints,
//! the ClusterRole and Role grant exactly what the controller needs (every needed verb
//! present, nothing beyond it), the bindings reach the ServiceAccount the Deployment runs
//! as, and the Deployment and Service are wired the way the controller expects (two
//! replicas, downward-API identity, probes and metrics on the endpoints' port, a locked-down
//! container).

#[path = "peers/rbac.rs"]
mod rbac;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use karpenter_tui::api::crds::crds_yaml;
use rbac::{grants, strings};
use serde::Deserialize;
use serde_json::Value;

const NAMESPACE: &str = "karpenter-tui";
const ACCOUNT: &str = "karpenter-tui";

fn read(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(file);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every YAML document of a deploy/ file (empty documents skipped).
fn docs(file: &str) -> Vec<Value> {
    let text = read(file);
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("deploy/{file}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn all_docs() -> Vec<Value> {
    ["crds.yaml", "rbac.yaml", "controller.yaml"]
        .into_iter()
        .flat_map(docs)
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/"))
}

fn needed(table: &[(&str, &str, &[&str], &str)]) -> BTreeSet<(String, String, String, String)> {
    table
        .iter()
        .flat_map(|(group, resource, verbs, name)| {
            verbs.iter().map(move |verb| {
                (
                    group.to_string(),
                    resource.to_string(),
                    verb.to_string(),
                    name.to_string(),
                )
            })
        })
        .collect()
}

const READ: &[&str] = &["get", "list", "watch"];

#[test]
fn crds_yaml_is_what_the_crds_command_prints() {
    assert!(
        read("crds.yaml") == crds_yaml(),
        "deploy/crds.yaml is stale: regenerate it with \
         `cargo run --release -- crds > deploy/crds.yaml`"
    );
    let kinds: Vec<_> = docs("crds.yaml")
        .iter()
        .map(|d| d["spec"]["names"]["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["NodePool", "NodeClaim", "EC2NodeClass"]);
}

#[test]
fn every_object_is_well_formed_and_namespaced_where_it_must_be() {
    let docs = all_docs();
    let cluster_scoped = [
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
    ];
    for d in &docs {
        let kind = d["kind"].as_str().expect("every document has a kind");
        assert!(d["apiVersion"].is_string(), "{kind} without apiVersion");
        assert!(d["metadata"]["name"].is_string(), "{kind} without a name");
        let ns = &d["metadata"]["namespace"];
        if cluster_scoped.contains(&kind) {
            assert!(ns.is_null(), "{kind} is cluster-scoped but has a namespace");
        } else {
            assert_eq!(
                ns, NAMESPACE,
                "{kind} {} outside {NAMESPACE}",
                d["metadata"]["name"]
            );
        }
    }
    let kinds: BTreeSet<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
    ] {
        assert!(kinds.contains(kind), "deploy/ has no {kind}");
    }
}

/// `kubectl apply -f deploy/` takes the files in name order and fails an object whose
/// namespace does not exist yet: each file's namespaced objects need the Namespace in that
/// file (before them) or in a file applied earlier.
#[test]
fn applying_the_directory_creates_the_namespace_before_anything_in_it() {
    let mut files: Vec<String> = fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".yaml"))
        .collect();
    files.sort();
    assert_eq!(files, ["controller.yaml", "crds.yaml", "rbac.yaml"]);
    let mut created = false;
    for file in &files {
        for d in docs(file) {
            if d["kind"] == "Namespace" && d["metadata"]["name"] == NAMESPACE {
                created = true;
            }
            if d["metadata"]["namespace"] == NAMESPACE {
                assert!(
                    created,
                    "{file}: {} {} comes before its Namespace",
                    d["kind"], d["metadata"]["name"]
                );
            }
        }
    }
}

#[test]
fn the_cluster_role_grants_exactly_what_the_controller_needs() {
    let docs = all_docs();
    let role = find(&docs, "ClusterRole", ACCOUNT);
    let want = needed(&[
        (
            "karpenter.sh",
            "nodepools",
            &["get", "list", "watch", "patch"],
            "",
        ),
        (
            "karpenter.sh",
            "nodeclaims",
            &["get", "list", "watch", "create", "patch", "delete"],
            "",
        ),
        ("karpenter.sh", "nodeclaims/status", &["patch"], ""),
        ("karpenter.sh", "nodepools/status", &["patch"], ""),
        ("karpenter.k8s.aws", "ec2nodeclasses", READ, ""),
        ("karpenter.k8s.aws", "ec2nodeclasses/status", &["patch"], ""),
        ("", "nodes", &["get", "list", "watch", "patch"], ""),
        ("", "pods", &["get", "list", "watch", "delete"], ""),
        ("", "pods/eviction", &["create"], ""),
        ("apps", "daemonsets", READ, ""),
        ("policy", "poddisruptionbudgets", READ, ""),
        ("events.k8s.io", "events", &["create", "patch"], ""),
        ("", "events", &["create", "patch"], ""),
        (
            "coordination.k8s.io",
            "leases",
            &["get", "list"],
            "karpenter-leader-election",
        ),
    ]);
    let have = grants(role);
    let missing: Vec<_> = want.difference(&have).collect();
    let extra: Vec<_> = have.difference(&want).collect();
    assert!(missing.is_empty(), "the ClusterRole lacks {missing:?}");
    assert!(
        extra.is_empty(),
        "the ClusterRole grants more than needed: {extra:?}"
    );
}

#[test]
fn the_namespaced_role_covers_the_lease_and_the_pause_object_only() {
    let docs = all_docs();
    let role = find(&docs, "Role", ACCOUNT);
    let lease = karpenter_tui::cluster::kube::lease::DEFAULT_LEASE_NAME;
    let want = needed(&[
        ("coordination.k8s.io", "leases", &["create"], ""),
        ("coordination.k8s.io", "leases", &["get", "update"], lease),
        (
            "",
            "configmaps",
            &["get", "list", "watch", "patch"],
            ACCOUNT,
        ),
    ]);
    assert_eq!(grants(role), want);
    // The pause object the Role names ships with the controller.
    find(&docs, "ConfigMap", ACCOUNT);
}

#[test]
fn the_bindings_give_the_roles_to_the_controllers_service_account() {
    let docs = all_docs();
    find(&docs, "ServiceAccount", ACCOUNT);
    for (binding, role) in [
        ("ClusterRoleBinding", "ClusterRole"),
        ("RoleBinding", "Role"),
    ] {
        let b = find(&docs, binding, ACCOUNT);
        assert_eq!(b["roleRef"]["kind"], role, "{binding}");
        assert_eq!(b["roleRef"]["name"], ACCOUNT, "{binding}");
        assert_eq!(b["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        let subjects = b["subjects"].as_array().expect("subjects");
        assert!(
            subjects.iter().any(|s| s["kind"] == "ServiceAccount"
                && s["name"] == ACCOUNT
                && s["namespace"] == NAMESPACE),
            "{binding} does not name the ServiceAccount"
        );
    }
    let deployment = find(&docs, "Deployment", ACCOUNT);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        ACCOUNT
    );
}

#[test]
fn the_deployment_runs_two_locked_down_replicas_with_probes_on_the_endpoints_port() {
    let docs = all_docs();
    let d = find(&docs, "Deployment", ACCOUNT);
    assert_eq!(d["spec"]["replicas"], 2);
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    let selector = d["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    for (k, v) in selector {
        assert_eq!(&labels[k], v, "the selector does not match the pod labels");
    }
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let spread = pod["topologySpreadConstraints"]
        .as_array()
        .expect("topologySpreadConstraints");
    assert!(!spread.is_empty());
    for c in spread {
        for (k, v) in c["labelSelector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(&labels[k], v, "a spread constraint selects other pods");
        }
    }

    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(strings(&c["args"]), ["controller", "--cloud", "aws"]);
    for (var, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        let env = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == var)
            .unwrap_or_else(|| panic!("no {var}"));
        assert_eq!(env["valueFrom"]["fieldRef"]["fieldPath"], field, "{var}");
    }
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    for part in ["requests", "limits"] {
        assert!(
            c["resources"][part]["memory"].is_string(),
            "no memory {part}"
        );
    }

    // The probes and the metrics port are the endpoints' (control::endpoints, 8080).
    let default_port: u16 = karpenter_tui::control::endpoints::DEFAULT_ADDR
        .rsplit_once(':')
        .unwrap()
        .1
        .parse()
        .unwrap();
    let port = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["containerPort"] == default_port)
        .expect("a containerPort for the endpoints");
    let port_name = port["name"].as_str().expect("a named port");
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"], port_name, "{probe}");
    }

    let service = docs
        .iter()
        .find(|d| d["kind"] == "Service")
        .expect("a Service");
    for (k, v) in service["spec"]["selector"].as_object().expect("a selector") {
        assert_eq!(&labels[k], v, "the Service selects other pods");
    }
    let ports = service["spec"]["ports"].as_array().unwrap();
    assert!(
        ports.iter().any(|p| p["targetPort"] == port_name),
        "the Service does not expose the metrics port"
    );
}
