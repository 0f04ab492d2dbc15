//! Node repair (issue 22) on a real HTTP Kubernetes API (the kmock peer on 127.0.0.1, its
//! kube-scheduler and kubelet stand-ins), with the headless `controller` and upstream's
//! `NodeRepair` feature gate: a node monitoring agent's condition written on the Node
//! through the status subresource, as the agent writes it. An operator's veto on a Node
//! holds its repair, more than a fifth of the pool unhealthy holds every repair, each
//! reported as upstream's `NodeRepairBlocked` Event; once within the cap, the unhealthy
//! node is replaced (replacement first, then the node goes).

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/wait.rs"]
mod wait;

use std::collections::BTreeSet;
use std::time::Duration;

use kube_peer::KubePeer;
use objects::nodepool;
use proc::{Proc, controller};
use serde_json::Value;

/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(90);

fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, PATIENCE, probe)
}

fn leads(p: &Proc) -> bool {
    p.stderr()
        .lines()
        .any(|l| l.starts_with("karpenter-tui: ") && l.ends_with(" leads"))
}

/// A launched, registered NodeClaim of the KWOK cloud whose m5.large is filled by one
/// pod: repairing it needs a new node first.
fn busy(claim: &str, node: &str, pod: &str) -> String {
    format!(
        r#"{}---
apiVersion: v1
kind: Pod
metadata: {{name: {pod}, namespace: default, labels: {{app: app}}}}
spec:
  nodeName: {node}
  containers:
  - name: main
    image: nginx
    resources: {{requests: {{cpu: "1500m", memory: 1Gi}}}}
status:
  phase: Running
  conditions:
  - {{type: PodScheduled, status: "True"}}
  - {{type: Ready, status: "True"}}
"#,
        objects::empty_node(claim, node)
    )
}

/// What a node monitoring agent writes: the kubelet's Ready, and KernelReady (`status`)
/// since `since` (RFC 3339).
fn report_kernel(peer: &KubePeer, node: &str, status: &str, since: &str) {
    let patch = serde_json::json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "KernelReady", "status": status, "reason": "KernelDeadlock",
         "message": "task blocked for more than 120 seconds", "lastTransitionTime": since},
    ]}});
    peer.kubectl(
        &[
            "patch",
            "node",
            node,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
        "",
    );
}

fn claim_names(peer: &KubePeer) -> BTreeSet<String> {
    peer.items(&["get", "nodeclaims"])
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .map(str::to_string)
        .collect()
}

/// The notes of the `NodeRepairBlocked` Events on Node `name`.
fn repair_blocked(peer: &KubePeer, name: &str) -> Vec<String> {
    peer.items(&["get", "events.v1.events.k8s.io", "-A"])
        .into_iter()
        .filter(|e: &Value| {
            e["reason"] == "NodeRepairBlocked"
                && e["regarding"]["kind"] == "Node"
                && e["regarding"]["name"] == name
        })
        .map(|e| {
            assert_eq!(e["type"], "Warning", "{e}");
            e["note"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

#[test]
fn an_unhealthy_node_is_repaired_in_the_cluster_unless_vetoed_or_the_fault_is_widespread() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(0.5, 1.0);
    peer.start_kubelet(1.0);
    let disruption = "    consolidationPolicy: WhenEmpty\n    consolidateAfter: Never\n    budgets: [{nodes: \"100%\"}]";
    peer.kubectl(&["apply", "-f", "-"], &nodepool("m5.large", disruption));
    let (a, b) = ("ip-10-0-0-1.kwok.internal", "ip-10-0-0-2.kwok.internal");
    peer.kubectl(&["create", "-f", "-"], &busy("default-aaaaa", a, "app-0"));
    peer.kubectl(&["create", "-f", "-"], &busy("default-bbbbb", b, "app-1"));
    let mut run = controller(
        &kubeconfig,
        &["--approve", "auto", "--feature-gates", "NodeRepair=true"],
    );
    eventually("the controller leads", || leads(&run).then_some(()));
    // Long past the 30 minutes KernelReady is tolerated.
    let long_ago = (chrono::Utc::now() - chrono::TimeDelta::hours(1)).to_rfc3339();

    // The operator distrusts the agent on node b: vetoed, and said so.
    peer.kubectl(
        &[
            "annotate",
            "node",
            b,
            "karpenter-tui.dev/do-not-repair=true",
        ],
        "",
    );
    report_kernel(&peer, b, "False", &long_ago);
    let notes = eventually("NodeRepairBlocked on the vetoed node", || {
        Some(repair_blocked(&peer, b)).filter(|n| !n.is_empty())
    });
    assert!(
        notes[0].contains("vetoed by karpenter-tui.dev/do-not-repair on node"),
        "{notes:?}"
    );

    // Node a too: two of two unhealthy is over the cap (one): nothing is repaired.
    report_kernel(&peer, a, "False", &long_ago);
    let notes = eventually("NodeRepairBlocked on the capped node", || {
        Some(repair_blocked(&peer, a)).filter(|n| !n.is_empty())
    });
    assert!(
        notes[0].contains("2 of NodePool default's 2 nodes are"),
        "{notes:?}"
    );
    // Three polls and a validation delay.
    std::thread::sleep(Duration::from_secs(25));
    assert_eq!(
        claim_names(&peer),
        BTreeSet::from(["default-aaaaa".to_string(), "default-bbbbb".to_string()]),
        "nothing repaired while capped or vetoed; log:\n{}",
        run.stderr()
    );

    // Node b's kernel recovers: one of two is within the cap, and node a is replaced.
    report_kernel(&peer, b, "True", &chrono::Utc::now().to_rfc3339());
    let replacement = eventually("a replacement for the unhealthy node", || {
        claim_names(&peer)
            .into_iter()
            .find(|n| n.contains("-replacement-"))
    });
    eventually("the unhealthy node gone", || {
        (!claim_names(&peer).contains("default-aaaaa")).then_some(())
    });
    let left = claim_names(&peer);
    assert!(
        left.contains("default-bbbbb") && left.contains(&replacement),
        "{left:?}"
    );
    assert_eq!(run.terminate(), Some(0), "{}", run.stderr());
}
