//! `consolidationPolicy: Balanced` against a real HTTP API (the kmock peer on 127.0.0.1
//! with its kube-scheduler and kubelet stand-ins, our controller (`run`) with the KWOK-style
//! cloud, kubectl as the reader). Seen before: a Balanced NodePool failed to decode and
//! vanished. Upstream v1.14.1 (`pkg/controllers/disruption/balanced.go`) consolidates a
//! Balanced pool only when the move's share of the pool's cost saved is at least half
//! its share of the pool's disruption; WhenEmptyOrUnderutilized takes any saving.
//!
//! Three pools side by side, each with one node left running one small pod after its big
//! pod went:
//! - `underutilized` (WhenEmptyOrUnderutilized): m5.large -> c5.large saves 11% of the
//!   pool for all of its disruption; replaced.
//! - `balanced` (Balanced), the same move: score 0.11 < 0.5; kept, and the controller
//!   says why.
//! - `balanced-big` (Balanced): m5.2xlarge -> m5.large saves 75% for all of its
//!   disruption, score 0.75; replaced.
//!
//! `KARPENTER_TUI_BIN=/path/to/other/build cargo test --test balanced_live` runs the same
//! case against another build.

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
use proc::Proc;
use serde_json::Value;

/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(120);

fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, PATIENCE, probe)
}

/// A pool of on-demand `types`, consolidating at once under `policy`, one node at a time.
fn pool(name: &str, policy: &str, types: &str) -> String {
    objects::named_nodepool(
        name,
        types,
        &format!(
            "    consolidationPolicy: {policy}\n    consolidateAfter: 0s\n    budgets:\n    - nodes: \"1\""
        ),
    )
}

/// A pending pod of a ReplicaSet that only `pool`'s nodes may run.
fn pod(name: &str, pool: &str, cpu: &str, memory: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: {pool}}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: {pool}-5d8f9c, uid: 0f0e0d0c-0000-4000-8000-00000000000b, controller: true}}
spec:
  nodeSelector: {{karpenter.sh/nodepool: {pool}}}
  containers:
  - name: main
    image: nginx
    resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}
status:
  phase: Pending
  conditions:
  - {{type: PodScheduled, status: "False", reason: Unschedulable, message: "0/0 nodes are available"}}
"#
    )
}

/// The pool's NodeClaims not being deleted: (name, instance type).
fn live_claims(peer: &KubePeer, pool: &str) -> Vec<(String, String)> {
    peer.items(&["get", "nodeclaims"])
        .into_iter()
        .filter(|c| c["metadata"]["labels"]["karpenter.sh/nodepool"] == pool)
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .map(|c| {
            (
                c["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                c["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn condition_true(obj: &Value, type_: &str) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    })
}

/// The reasons of the controller's DisruptionBlocked records for `claim` (JSON lines on
/// its stdout), oldest first.
fn blocked_records(run: &Proc, claim: &str) -> Vec<String> {
    run.stdout()
        .lines()
        .filter_map(|l| {
            let e: Value = serde_json::from_str(l).ok()?;
            (e["kind"] == "DisruptionBlocked" && e["nodeclaim"] == claim)
                .then(|| e["reason"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// Waits until `pool` has exactly one NodeClaim, launched as `instance_type`, and returns
/// its name.
fn one_node(peer: &KubePeer, pool: &str, instance_type: &str) -> String {
    eventually(&format!("one {instance_type} launched in {pool}"), || {
        let claims: Vec<Value> = peer
            .items(&["get", "nodeclaims"])
            .into_iter()
            .filter(|c| c["metadata"]["labels"]["karpenter.sh/nodepool"] == pool)
            .collect();
        match &claims[..] {
            [c] if c["status"]["providerID"].is_string()
                && c["metadata"]["labels"]["node.kubernetes.io/instance-type"] == instance_type =>
            {
                c["metadata"]["name"].as_str().map(str::to_string)
            }
            _ => None,
        }
    })
}

#[test]
fn a_balanced_pool_consolidates_only_moves_worth_their_disruption() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(0.2, 0.5);
    peer.start_kubelet(0.5);
    for (name, policy, types) in [
        (
            "underutilized",
            "WhenEmptyOrUnderutilized",
            "m5.large, c5.large",
        ),
        ("balanced", "Balanced", "m5.large, c5.large"),
        ("balanced-big", "Balanced", "m5.large, m5.2xlarge"),
    ] {
        peer.kubectl(&["apply", "-f", "-"], &pool(name, policy, types));
    }
    // Each pool's first node is sized by a big pod: 5Gi needs an m5.large (a c5.large
    // has 4 GiB), 3 CPUs an m5.2xlarge. A small pod shares it.
    for (pool, big_cpu, big_memory) in [
        ("underutilized", "100m", "5Gi"),
        ("balanced", "100m", "5Gi"),
        ("balanced-big", "3", "1Gi"),
    ] {
        peer.kubectl(
            &["create", "-f", "-"],
            &pod(&format!("big-{pool}"), pool, big_cpu, big_memory),
        );
        peer.kubectl(
            &["create", "-f", "-"],
            &pod(&format!("small-{pool}"), pool, "100m", "256Mi"),
        );
    }
    // `run` off a terminal: the controller, its records as JSON lines on stdout.
    let mut run = Proc::start(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        "default",
        "--approve",
        "auto",
        "--lease",
        "3,2,0.5",
    ]);

    let first_u = one_node(&peer, "underutilized", "m5.large");
    let first_b = one_node(&peer, "balanced", "m5.large");
    let first_bb = one_node(&peer, "balanced-big", "m5.2xlarge");
    eventually("all six pods bound", || {
        let pods = peer.items(&["get", "pods", "-n", "default"]);
        (pods.len() == 6 && pods.iter().all(|p| p["spec"]["nodeName"].is_string())).then_some(())
    });

    // The big pods go: each node now runs one small pod, and a cheaper type would do.
    for pool in ["underutilized", "balanced", "balanced-big"] {
        peer.kubectl(
            &["delete", "pod", &format!("big-{pool}"), "-n", "default"],
            "",
        );
    }

    // WhenEmptyOrUnderutilized takes the small saving; Balanced the large one.
    eventually("underutilized's m5.large replaced by a c5.large", || {
        let claims = live_claims(&peer, "underutilized");
        (claims.len() == 1 && claims[0].1 == "c5.large" && claims[0].0 != first_u).then_some(())
    });
    eventually("balanced-big's m5.2xlarge replaced by an m5.large", || {
        let claims = live_claims(&peer, "balanced-big");
        (claims.len() == 1 && claims[0].1 == "m5.large" && claims[0].0 != first_bb).then_some(())
    });

    // Balanced does not take the small one, and the controller says why in its record.
    let why = eventually("the balanced pool's node explained", || {
        blocked_records(&run, &first_b)
            .into_iter()
            .find(|r| r.contains("Balanced pool"))
    });
    assert!(
        why.contains("Balanced pool balanced") && why.contains("score 0.11"),
        "{why}"
    );
    assert_eq!(
        live_claims(&peer, "balanced"),
        vec![(first_b.clone(), "m5.large".to_string())],
        "the balanced pool's node stays as it is"
    );

    // Upstream's Events: the replaced nodes' disruption is on their NodeClaims; a move a
    // Balanced score rejects gets none (upstream counts rejections in a metric only).
    let events = peer.items(&["get", "events.v1.events.k8s.io", "-A"]);
    let about = |claim: &str, reason: &str| {
        events
            .iter()
            .filter(|e| e["regarding"]["name"] == claim && e["reason"] == reason)
            .filter_map(|e| e["note"].as_str())
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    for claim in [&first_u, &first_bb] {
        assert!(
            !about(claim, "DisruptionTerminating").is_empty(),
            "no DisruptionTerminating on {claim}: {events:?}"
        );
    }
    // The Balanced move that passed says its score, as upstream's ConsolidationApproved.
    let approved = about(&first_bb, "ConsolidationApproved");
    assert!(
        approved
            .iter()
            .any(|n| n.contains(">= threshold 0.50 (k: 2, savings 75.0%")),
        "no ConsolidationApproved on {first_bb}: {events:?}"
    );
    assert!(
        about(&first_u, "ConsolidationApproved").is_empty(),
        "not a Balanced pool"
    );
    // Every consolidation decision names its candidates as upstream's command string does.
    for claim in [&first_u, &first_bb] {
        let candidate = about(claim, "ConsolidationCandidate");
        assert!(
            candidate
                .iter()
                .any(|n| n.starts_with("Consolidation candidate: Underutilized/")
                    && n.contains(": replace: nodepools=[")
                    && n.contains("-> [1 replacement]")),
            "no ConsolidationCandidate on {claim}: {candidate:?}"
        );
    }
    let balanced_events: Vec<String> = about(&first_b, "Unconsolidatable")
        .into_iter()
        .filter(|n| n.contains("Balanced"))
        .collect();
    assert!(balanced_events.is_empty(), "{balanced_events:?}");

    // The pools stay visible with their policy, valid.
    for name in ["underutilized", "balanced", "balanced-big"] {
        let pool = peer.get_json(&["get", "nodepool", name]);
        assert!(condition_true(&pool, "ValidationSucceeded"), "{pool}");
    }
    let balanced = peer.get_json(&["get", "nodepool", "balanced"]);
    assert_eq!(
        balanced["spec"]["disruption"]["consolidationPolicy"],
        "Balanced"
    );
    assert_eq!(run.terminate(), Some(0), "{}", run.stderr());
}
