//! The headless `controller` against a real HTTP Kubernetes API (the kmock peer on
//! 127.0.0.1, with its kube-scheduler and kubelet stand-ins), read as an operator reads
//! upstream Karpenter: `kubectl get events` shows upstream's reasons and types on the
//! objects upstream puts them on, and `/metrics` carries the series upstream's
//! dashboards query, labelled with the live cluster's names.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/wait.rs"]
mod wait;

use std::time::Duration;

use kube_peer::KubePeer;
use objects::{named_nodepool, nodepool, pending_pod};
use proc::{controller, endpoints_of, scrape};
use serde_json::Value;

/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(90);

fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, PATIENCE, probe)
}

/// The Events with `reason` on the object of `kind` named `name`, as kubectl lists them.
fn events_on(peer: &KubePeer, reason: &str, kind: &str, name: &str) -> Vec<Value> {
    peer.items(&["get", "events.v1.events.k8s.io", "-A"])
        .into_iter()
        .filter(|e| {
            e["reason"] == reason
                && e["regarding"]["kind"] == kind
                && e["regarding"]["name"] == name
        })
        .collect()
}

/// Waits for one such Event and checks its type.
fn expect_event(peer: &KubePeer, reason: &str, kind: &str, name: &str, type_: &str) -> Value {
    let e = eventually(&format!("{reason} on {kind}/{name}"), || {
        events_on(peer, reason, kind, name).into_iter().next()
    });
    assert_eq!(e["type"], type_, "{e}");
    e
}

/// The value of the first sample whose series starts with `prefix` and contains every
/// one of `labels`.
fn sample(body: &str, prefix: &str, labels: &[&str]) -> Option<f64> {
    body.lines()
        .filter(|l| l.starts_with(prefix) && labels.iter().all(|x| l.contains(x)))
        .find_map(|l| l.rsplit_once(' ')?.1.parse().ok())
}

#[test]
fn events_land_on_upstreams_objects_and_metrics_name_the_live_nodes() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(0.5, 1.0);
    peer.start_kubelet(0.5);
    // WhenEmpty: a node with a pod is Unconsolidatable; drift is held by a zero budget.
    peer.kubectl(
        &["apply", "-f", "-"],
        &nodepool(
            "m5.large",
            r#"    consolidationPolicy: WhenEmpty
    consolidateAfter: 0s
    budgets:
    - nodes: "0"
      reasons: [Drifted]
    - nodes: "1""#,
        ),
    );
    // A pool whose requirements name no instance type the cloud offers.
    peer.kubectl(
        &["apply", "-f", "-"],
        &named_nodepool(
            "nowhere",
            "no-such.type",
            "    consolidationPolicy: WhenEmpty\n    consolidateAfter: 0s",
        ),
    );
    let mut run = controller(&kubeconfig, &[]);
    let addr = endpoints_of(&run);
    // "yes" is no do-not-disrupt value upstream knows: it protects nothing, and says so.
    peer.kubectl(
        &["create", "-f", "-"],
        &pending_pod("web-1", "500m", "512Mi").replace(
            "labels: {app: web}}",
            "labels: {app: web}, annotations: {karpenter.sh/do-not-disrupt: \"yes\"}}",
        ),
    );
    // Nothing in the pool can hold 500 CPUs.
    peer.kubectl(&["create", "-f", "-"], &pending_pod("huge", "500", "1Gi"));

    let claim = eventually("a launched NodeClaim", || {
        peer.items(&["get", "nodeclaims"])
            .into_iter()
            .find(|c| c["status"]["providerID"].is_string())
    });
    let claim = claim["metadata"]["name"].as_str().unwrap().to_string();
    let nominated = expect_event(&peer, "Nominated", "Pod", "web-1", "Normal");
    assert!(
        nominated["note"]
            .as_str()
            .is_some_and(|n| n.contains(&format!("nodeclaim/{claim}"))),
        "{nominated}"
    );
    let invalid = expect_event(
        &peer,
        "InvalidDoNotDisruptAnnotation",
        "Pod",
        "web-1",
        "Warning",
    );
    assert!(
        invalid["note"]
            .as_str()
            .is_some_and(|n| n.contains(r#"failed to parse "yes" as a duration"#)),
        "{invalid}"
    );
    let failed = expect_event(&peer, "FailedScheduling", "Pod", "huge", "Warning");
    expect_event(
        &peer,
        "NoCompatibleInstanceTypes",
        "NodePool",
        "nowhere",
        "Warning",
    );
    assert!(
        failed["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("Failed to schedule pod, ")),
        "{failed}"
    );

    let node = eventually("web-1 bound to the new node", || {
        let pod = peer.get_json(&["get", "pod", "web-1", "-n", "default"]);
        pod["spec"]["nodeName"].as_str().map(str::to_string)
    });
    // The node runs a pod under WhenEmpty: on both its Node and its NodeClaim.
    for (kind, name) in [("Node", node.as_str()), ("NodeClaim", claim.as_str())] {
        let e = expect_event(&peer, "Unconsolidatable", kind, name, "Normal");
        assert!(
            e["note"].as_str().is_some_and(|n| n.contains("WhenEmpty")),
            "{e}"
        );
    }
    let blocked = expect_event(&peer, "DisruptionBlocked", "NodePool", "default", "Normal");
    assert!(
        blocked["note"]
            .as_str()
            .is_some_and(|n| n.contains("Drifted")),
        "{blocked}"
    );

    // The scrape names the live node and counts it.
    let body = eventually("the node in karpenter_nodes_allocatable", || {
        let b = scrape(&addr);
        b.contains(&format!(
            "karpenter_nodes_allocatable{{node_name=\"{node}\""
        ))
        .then_some(b)
    });
    assert_eq!(
        sample(
            &body,
            "karpenter_nodes_created_total{",
            &["nodepool=\"default\""]
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "karpenter_nodes_allocatable{",
            &[
                &format!("node_name=\"{node}\""),
                "instance_type=\"m5.large\"",
                "nodepool=\"default\"",
                "resource_type=\"cpu\""
            ]
        )
        .map(|v| v > 1.0),
        Some(true),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "karpenter_pods_state{",
            &[
                "name=\"web-1\"",
                &format!("node=\"{node}\""),
                "nodepool=\"default\""
            ]
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "karpenter_nodepools_allowed_disruptions{",
            &["nodepool=\"default\"", "reason=\"Drifted\""]
        ),
        Some(0.0),
        "{body}"
    );

    // Empty now: the node goes, said on both objects.
    peer.kubectl(
        &["delete", "pod", "web-1", "-n", "default", "--wait=false"],
        "",
    );
    for (kind, name, what) in [
        ("Node", node.as_str(), "Node"),
        ("NodeClaim", claim.as_str(), "NodeClaim"),
    ] {
        let e = expect_event(&peer, "DisruptionTerminating", kind, name, "Normal");
        assert_eq!(e["note"], format!("Disrupting {what}: Empty"), "{e}");
    }
    eventually("the NodeClaim gone", || {
        peer.items(&["get", "nodeclaims"])
            .iter()
            .all(|c| c["metadata"]["name"] != claim.as_str())
            .then_some(())
    });
    let body = eventually("the node counted as terminated", || {
        let b = scrape(&addr);
        sample(
            &b,
            "karpenter_nodes_terminated_total{",
            &["nodepool=\"default\""],
        )
        .is_some_and(|v| v >= 1.0)
        .then_some(b)
    });
    assert!(
        body.contains("karpenter_nodes_termination_duration_seconds_count{nodepool=\"default\"} 1"),
        "{body}"
    );
    assert_eq!(run.terminate(), Some(0), "{}", run.stderr());
}
