//! `export` (issue 22) against a real HTTP Kubernetes API (the kmock peer on 127.0.0.1):
//! a cluster with running nodes, a Deployment's pods (bound and pending), a bare pod, a
//! static pod, a DaemonSet, a PodDisruptionBudget, a NodeClaim that has not launched and
//! a finished pod is written as a scenario that the scenario reader accepts, that starts with the
//! cluster's nodes, and whose future `whatif` plays.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/tmux.rs"]
mod tmux;

use std::process::Command;
use std::time::Duration;

use kube_peer::KubePeer;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

/// A pod of the ReplicaSet `web-5d8f7` (Deployment `web`), on `node` or pending.
fn web_pod(name: &str, node: Option<&str>) -> String {
    let bound = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
    let status = if node.is_some() {
        "status: {phase: Running}"
    } else {
        "status:\n  phase: Pending\n  conditions:\n  - {type: PodScheduled, status: \"False\", reason: Unschedulable}"
    };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: web, pod-template-hash: 5d8f7}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f7, uid: 0b5c7c4e-1111-4a4a-9e9e-000000000001, controller: true}}
spec:
{bound}  containers:
  - name: web
    image: nginx
    resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}
{status}
"#
    )
}

const OTHERS: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: etcd-ip-10-0-0-1.kwok.internal
  namespace: kube-system
  ownerReferences:
  - {apiVersion: v1, kind: Node, name: ip-10-0-0-1.kwok.internal, uid: 0b5c7c4e-1111-4a4a-9e9e-000000000002, controller: true}
spec:
  nodeName: ip-10-0-0-1.kwok.internal
  containers:
  - {name: etcd, image: etcd, resources: {requests: {cpu: 100m}}}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: debug, namespace: default, labels: {app: debug}}
spec:
  containers:
  - {name: sh, image: busybox, resources: {requests: {cpu: 100m, memory: 64Mi}}}
status: {phase: Pending}
---
apiVersion: v1
kind: Pod
metadata: {name: migrate-1, namespace: default}
spec:
  containers:
  - {name: m, image: migrate, resources: {requests: {cpu: 100m}}}
status: {phase: Succeeded}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: agent, resources: {requests: {cpu: 100m, memory: 128Mi}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-zzzzz, labels: {karpenter.sh/nodepool: default}}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
  - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"#;

#[test]
fn a_cluster_exports_as_a_scenario_that_starts_with_its_nodes_and_plays_a_whatif() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    let disruption = "    consolidationPolicy: WhenEmpty\n    consolidateAfter: 1m\n    budgets: [{nodes: \"100%\"}]";
    peer.kubectl(
        &["apply", "-f", "-"],
        &objects::nodepool("m5.large, m5.xlarge", disruption),
    );
    peer.kubectl(
        &["create", "-f", "-"],
        &objects::empty_node("default-aaaaa", "ip-10-0-0-1.kwok.internal"),
    );
    peer.kubectl(
        &["create", "-f", "-"],
        &objects::empty_node("default-bbbbb", "ip-10-0-0-2.kwok.internal"),
    );
    for (name, node) in [
        ("web-5d8f7-a", Some("ip-10-0-0-1.kwok.internal")),
        ("web-5d8f7-b", Some("ip-10-0-0-2.kwok.internal")),
        ("web-5d8f7-c", None),
    ] {
        peer.kubectl(&["create", "-f", "-"], &web_pod(name, node));
    }
    peer.kubectl(&["create", "-f", "-"], OTHERS);

    let out = Command::new(BIN)
        .args(["export", "--kubeconfig", &kubeconfig])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let yaml = String::from_utf8(out.stdout).unwrap();
    // What it could not carry over, it says.
    for note in [
        "NodeClaim default-zzzzz has not launched",
        "EC2NodeClass default is not in the cluster",
        "1 finished or deleting pod(s) left out",
    ] {
        assert!(stderr.contains(note), "{note:?} missing:\n{stderr}");
    }

    let scenario = karpenter_tui::cluster::scenario::parse("export.yaml", &yaml)
        .unwrap_or_else(|e| panic!("{e:?}\n{yaml}"));
    let nodes: Vec<(&str, &str)> = scenario
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.instance_type.as_str()))
        .collect();
    assert_eq!(
        nodes,
        [("default-aaaaa", "m5.large"), ("default-bbbbb", "m5.large")]
    );
    let deployments: Vec<(&str, &str)> = scenario
        .deployments
        .iter()
        .map(|d| (d.namespace.as_str(), d.name.as_str()))
        .collect();
    assert_eq!(deployments, [("default", "web")]);
    assert!(yaml.contains("replicas: 3"), "{yaml}");
    assert_eq!(scenario.pods.len(), 1, "the bare pod");
    assert_eq!(scenario.daemonsets.len(), 1);
    assert_eq!(scenario.pdbs.len(), 1);
    assert_eq!(scenario.nodepools.len(), 1);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let file = file.display().to_string();

    // The exported nodes run from the first instant; the pending pod gets a node.
    let sim = Command::new(BIN)
        .args(["simulate", &file, "--until", "2m"])
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let events: Vec<Value> = String::from_utf8(sim.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let registered_at = |claim: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "NodeRegistered" && e["nodeclaim"] == claim)
            .and_then(|e| e["t"].as_f64())
    };
    assert_eq!(registered_at("default-aaaaa"), Some(0.0));
    assert_eq!(registered_at("default-bbbbb"), Some(0.0));
    let summary = events.last().unwrap();
    assert_eq!(summary["kind"], "Summary");
    assert_eq!(summary["podsPending"], 0, "{summary}");

    // Its future, with the pool consolidating underutilized nodes too.
    let whatif = Command::new(BIN)
        .args([
            "whatif",
            &file,
            "--json",
            "1h",
            "default",
            "disruption.consolidationPolicy=WhenEmptyOrUnderutilized",
        ])
        .output()
        .unwrap();
    assert!(
        whatif.status.success(),
        "{}",
        String::from_utf8_lossy(&whatif.stderr)
    );
    let c: Value = serde_json::from_slice(&whatif.stdout).unwrap();
    assert_eq!(c["nodepool"], "default");
    assert!(c["unchanged"]["cost"].as_f64().unwrap() > 0.0, "{c}");
    assert!(
        c["edited"]["cost"].as_f64().unwrap() <= c["unchanged"]["cost"].as_f64().unwrap(),
        "{c}"
    );

    // The same question from a console attached read-only: it exports the cluster
    // itself and answers in a popup, changing nothing.
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {BIN} attach \
         --kubeconfig {kubeconfig} --namespace default; sleep 30",
        dir.path().display(),
    );
    let tmux = tmux::Tmux::start(dir.path(), &command);
    tmux.wait_for("the attached console", Duration::from_secs(60), |s| {
        s.contains("read-only")
    });
    let pools_before = peer.get_json(&["get", "nodepool", "default"]);
    tmux.keys(":whatif 1h default disruption.consolidationPolicy=WhenEmptyOrUnderutilized");
    tmux.key("Enter");
    let screen = tmux.wait_for("the answer", Duration::from_secs(60), |s| {
        s.contains("what-if: NodePool default, the next 1h") && s.contains("pending at the end")
    });
    assert!(screen.contains("cost over 1h"), "{screen}");
    assert_eq!(
        peer.get_json(&["get", "nodepool", "default"])["spec"],
        pools_before["spec"]
    );
    tmux.key("Escape");
    tmux.keys("q");
}
