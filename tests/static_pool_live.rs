//! A static NodePool (`spec.replicas`) kept at its count by the headless controller, as
//! upstream v1.14.1's static provisioning and deprovisioning controllers keep it
//! (`pkg/controllers/static/`), and scaled with `kubectl scale` through the scale
//! subresource our CRD declares (the kmock peer, items 21-24, with kubectl as the reader).
//!
//! Upstream's scale-down (`static/deprovisioning/controller.go`) deletes, with no
//! disruption budget, NodeClaims that have not launched first, then empty nodes, then the
//! cheapest to disrupt: the node running a pod is the one kept.
//!
//! `KARPENTER_TUI_BIN=/path/to/other/build cargo test --test static_pool_live` runs it
//! against another build.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/wait.rs"]
mod wait;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use kube_peer::KubePeer;
use objects::pending_pod;
use proc::controller;
use serde_json::Value;

/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(120);
const POOL: &str = "static";

const STATIC_POOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: static
spec:
  replicas: 3
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
"#;

/// What the test has seen of the pool's NodeClaims: every name, and the most alive at once.
#[derive(Default)]
struct Seen {
    names: BTreeSet<String>,
    most_alive: usize,
}

impl Seen {
    /// The pool's NodeClaims not being deleted, noting what was seen.
    fn alive(&mut self, peer: &KubePeer) -> Vec<Value> {
        let claims = peer.items(&[
            "get",
            "nodeclaims",
            "-l",
            &format!("karpenter.sh/nodepool={POOL}"),
        ]);
        for c in &claims {
            self.names
                .insert(c["metadata"]["name"].as_str().unwrap_or("").to_string());
        }
        let alive: Vec<Value> = claims
            .into_iter()
            .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
            .collect();
        self.most_alive = self.most_alive.max(alive.len());
        alive
    }
}

/// `kubectl get nodepool static -o jsonpath={.status.nodes}`.
fn status_nodes(peer: &KubePeer) -> Option<u64> {
    peer.kubectl(
        &["get", "nodepool", POOL, "-o", "jsonpath={.status.nodes}"],
        "",
    )
    .trim()
    .parse()
    .ok()
}

/// Waits until the pool has exactly `n` NodeClaims, none left being deleted, every one
/// with a Ready node, and the NodePool reports `status.nodes` n; returns the claims.
fn settles_at(peer: &KubePeer, seen: &mut Seen, n: usize) -> Vec<Value> {
    wait::eventually(
        &format!("{n} Ready NodeClaims in {POOL} and status.nodes {n}"),
        PATIENCE,
        || {
            let alive = seen.alive(peer);
            let all = peer.items(&[
                "get",
                "nodeclaims",
                "-l",
                &format!("karpenter.sh/nodepool={POOL}"),
            ]);
            let ready = alive.iter().all(|c| {
                c["status"]["nodeName"].is_string()
                    && c["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|k| k["type"] == "Ready" && k["status"] == "True")
            });
            (alive.len() == n && all.len() == n && ready && status_nodes(peer) == Some(n as u64))
                .then_some(alive)
        },
    )
}

fn install_our_crds(peer: &KubePeer) {
    let bin = std::env::var("KARPENTER_TUI_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_karpenter-tui").to_string());
    let out = Command::new(&bin).arg("crds").output().expect("run crds");
    assert!(out.status.success(), "{bin} crds failed");
    peer.kubectl(
        &["apply", "-f", "-"],
        &String::from_utf8(out.stdout).expect("UTF-8"),
    );
}

#[test]
fn a_static_pool_keeps_its_replicas_and_scales_with_kubectl_scale() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(0.2, 0.5);
    peer.start_kubelet(0.5);
    install_our_crds(&peer);
    peer.kubectl(&["apply", "-f", "-"], STATIC_POOL);
    let mut run = controller(&kubeconfig, &[]);
    let mut seen = Seen::default();

    settles_at(&peer, &mut seen, 3);
    assert_eq!(
        (seen.names.len(), seen.most_alive),
        (3, 3),
        "replicas 3 made exactly 3 NodeClaims: {:?}",
        seen.names
    );

    let scaled = peer.kubectl(&["scale", "nodepool", POOL, "--replicas", "5"], "");
    assert!(scaled.contains("scaled"), "{scaled}");
    settles_at(&peer, &mut seen, 5);
    assert_eq!(
        (seen.names.len(), seen.most_alive),
        (5, 5),
        "scaling to 5 added exactly 2 NodeClaims: {:?}",
        seen.names
    );

    // A pod on one of the nodes: upstream scales down empty nodes first.
    peer.kubectl(
        &["create", "-f", "-"],
        &pending_pod("web-1", "500m", "512Mi"),
    );
    let busy_node = wait::eventually("web-1 bound to a static node", PATIENCE, || {
        let pod = peer.get_json(&["get", "pod", "web-1", "-n", "default"]);
        pod["spec"]["nodeName"].as_str().map(str::to_string)
    });

    peer.kubectl(&["scale", "nodepool", POOL, "--replicas", "1"], "");
    let left = settles_at(&peer, &mut seen, 1);
    assert_eq!(
        left[0]["status"]["nodeName"].as_str(),
        Some(busy_node.as_str()),
        "the node running web-1 is the one kept"
    );
    let pod = peer.get_json(&["get", "pod", "web-1", "-n", "default"]);
    assert_eq!(
        pod["spec"]["nodeName"].as_str(),
        Some(busy_node.as_str()),
        "web-1 was not moved"
    );
    let nodes: Vec<String> = peer
        .items(&[
            "get",
            "nodes",
            "-l",
            &format!("karpenter.sh/nodepool={POOL}"),
        ])
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(nodes, [busy_node], "the scaled-down nodes are gone");
    assert_eq!(seen.names.len(), 5, "scaling down created nothing");
    assert_eq!(run.terminate(), Some(0), "{}", run.stderr());
}
