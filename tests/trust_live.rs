//! Decisions an operator can trust, on a real HTTP Kubernetes API (the kmock peer on
//! 127.0.0.1) with its kube-scheduler and kubelet stand-ins: pods are bound seconds after
//! a node can take them, and Nodes register NotReady and turn Ready later, as on a live
//! cluster. Each case was seen there:
//!
//! - a new node deleted as Empty seconds after it registered while pods were nominated to
//!   it; a NodeClaim launched twice; two Nodes carrying one NodeClaim;
//! - after SIGKILL of the leader mid-replace, the standby refused the operator's approval
//!   and left the replacement to be deleted as Empty.
//!
//! And the circuit breaker (issue 22): a replacement that goes NotReady pauses its pool
//! in the cluster, the pause outlives the controller, and only an operator lifts it.
//!
//! `KARPENTER_TUI_BIN=/path/to/other/build cargo test --test trust_live` runs the same
//! cases against another build.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/recorder.rs"]
mod recorder;
#[path = "peers/wait.rs"]
mod wait;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kube_peer::KubePeer;
use objects::{nodepool, pending_pod};
use proc::{Proc, controller};
use recorder::{Recorder, Seen};
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

/// NodeClaim name -> every provider id it was seen with.
fn provider_ids(seen: &[Seen]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in seen.iter().filter(|s| s.kind == "NodeClaim") {
        if let Some(p) = s.object["status"]["providerID"].as_str() {
            out.entry(s.name().to_string())
                .or_default()
                .insert(p.to_string());
        }
    }
    out
}

/// NodeClaim name -> every Node that carried it (the KWOK cloud's annotation).
fn nodes_of_claims(seen: &[Seen]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in seen.iter().filter(|s| s.kind == "Node") {
        if let Some(c) = s.object["metadata"]["annotations"]["karpenter-tui.dev/nodeclaim"].as_str()
        {
            out.entry(c.to_string())
                .or_default()
                .insert(s.name().to_string());
        }
    }
    out
}

/// Pods arrive in four batches 15 s apart, each filling one m5.large exactly; nodes
/// register NotReady and turn Ready a second later; the kube-scheduler binds 4-8 s after
/// a pod could go. Nothing may be deleted: every node is full and every pod lands. Seen: a
/// node deleted as Empty 1.8-9 s after it registered while pods were nominated to it
/// (5 times in 50 s), a NodeClaim launched again ("provisioning (retry)"), two Nodes
/// carrying one NodeClaim.
#[test]
fn no_node_is_deleted_while_pods_are_on_their_way_and_each_nodeclaim_launches_once() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(4.0, 8.0);
    peer.start_kubelet(1.0);
    peer.kubectl(
        &["apply", "-f", "-"],
        &nodepool(
            "m5.large",
            "    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 0s",
        ),
    );
    let recorder = Recorder::start(peer.kubeconfig_path());
    let mut run = controller(&kubeconfig, &[]);
    eventually("the controller leads", || leads(&run).then_some(()));
    const BATCHES: usize = 4;
    for batch in 0..BATCHES {
        if batch > 0 {
            std::thread::sleep(Duration::from_secs(15));
        }
        for i in 0..3 {
            peer.kubectl(
                &["create", "-f", "-"],
                &pending_pod(&format!("web-{batch}-{i}"), "500m", "512Mi"),
            );
        }
    }
    eventually("every pod bound", || {
        (peer.pods_bound() >= 3 * BATCHES as u64).then_some(())
    });
    // Until a minute after the last batch: nothing may go.
    let minute = Instant::now() + Duration::from_secs(30);
    if let Some(left) = minute.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
    let seen = recorder.seen();
    let deleted: Vec<String> = seen
        .iter()
        .filter(|s| s.kind == "NodeClaim" || s.kind == "Node")
        .filter(|s| s.deleted || !s.object["metadata"]["deletionTimestamp"].is_null())
        .map(|s| format!("{} {}", s.kind, s.name()))
        .collect();
    assert_eq!(
        deleted,
        Vec::<String>::new(),
        "nothing deleted in the first minute; controller log:\n{}",
        run.stderr()
    );
    for (claim, ids) in provider_ids(&seen) {
        assert_eq!(ids.len(), 1, "NodeClaim {claim} launched as {ids:?}");
    }
    let nodes = nodes_of_claims(&seen);
    for (claim, n) in &nodes {
        assert_eq!(n.len(), 1, "NodeClaim {claim} carried by Nodes {n:?}");
    }
    assert_eq!(nodes.len(), BATCHES, "one full node per batch: {nodes:?}");
    assert!(
        !run.stdout().contains("retry") && !run.stderr().contains("provisioning (retry)"),
        "{}",
        run.stderr()
    );
    assert_eq!(run.terminate(), Some(0), "{}", run.stderr());
}

/// A launched, registered NodeClaim of the KWOK cloud with one pod bound to it.
fn busy_node(claim: &str, node: &str) -> String {
    format!(
        r#"{}---
apiVersion: v1
kind: Pod
metadata: {{name: app-0, namespace: default, labels: {{app: app}}}}
spec:
  nodeName: {node}
  containers:
  - name: main
    image: nginx
    resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
status:
  phase: Running
  conditions:
  - {{type: PodScheduled, status: "True"}}
  - {{type: Ready, status: "True"}}
"#,
        objects::empty_node(claim, node)
    )
}

/// Two controller replicas, every decision manual. A node drifts; the operator approves
/// the drift with an annotation, and the leader is killed (SIGKILL) right after. The
/// standby must carry the approval out, once: one replacement, the drifted node gone, no
/// refusal, and the replacement kept. Seen: the standby refused the approval ("no pending
/// decision #23"), launched the replacement, then deleted it as Empty.
#[test]
fn an_approval_recorded_before_the_leader_is_killed_is_carried_out_once() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(0.5, 1.0);
    let disruption = "    consolidationPolicy: WhenEmpty\n    consolidateAfter: Never\n    budgets: [{nodes: \"100%\"}]";
    peer.kubectl(
        &["apply", "-f", "-"],
        &nodepool("m5.large, m5.xlarge", disruption),
    );
    peer.kubectl(
        &["create", "-f", "-"],
        &busy_node("default-aaaaa", "ip-10-0-0-1.kwok.internal"),
    );
    let recorder = Recorder::start(peer.kubeconfig_path());
    let mut a = controller(&kubeconfig, &["--approve", "manual"]);
    let mut b = controller(&kubeconfig, &["--approve", "manual"]);
    eventually("a leader", || (leads(&a) || leads(&b)).then_some(()));
    let a_leads = leads(&a);

    // The pool no longer allows m5.large: the node has drifted.
    peer.kubectl(&["apply", "-f", "-"], &nodepool("m5.xlarge", disruption));
    let id = eventually("the drift decision recorded on the NodeClaim", || {
        peer.items(&["get", "nodeclaims"])
            .into_iter()
            .find_map(|c| {
                (c["metadata"]["name"] == "default-aaaaa")
                    .then(|| {
                        c["metadata"]["annotations"]["karpenter-tui.dev/decision"]
                            .as_str()
                            .map(str::to_string)
                    })
                    .flatten()
            })
    });
    peer.kubectl(
        &[
            "annotate",
            "nodeclaim",
            "default-aaaaa",
            &format!("karpenter-tui.dev/approve={id}"),
            "karpenter-tui.dev/actor=alice",
        ],
        "",
    );
    let (leader, standby) = if a_leads {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    leader.kill();
    eventually("the standby leads", || leads(standby).then_some(()));

    let replacement = format!("default-replacement-{id}-0");
    eventually("the drifted NodeClaim replaced and gone", || {
        let claims = peer.items(&["get", "nodeclaims"]);
        let old = claims
            .iter()
            .any(|c| c["metadata"]["name"] == "default-aaaaa");
        let new = claims.iter().any(|c| {
            c["metadata"]["name"] == replacement.as_str() && c["status"]["providerID"].is_string()
        });
        (!old && new).then_some(())
    });
    // The replacement stays: nothing deletes it afterwards.
    std::thread::sleep(Duration::from_secs(15));
    let seen = recorder.seen();
    let claims: BTreeSet<String> = seen
        .iter()
        .filter(|s| s.kind == "NodeClaim" && s.name() != "default-aaaaa")
        .map(|s| s.name().to_string())
        .collect();
    assert_eq!(
        claims,
        BTreeSet::from([replacement.clone()]),
        "exactly one replacement; standby log:\n{}",
        standby.stderr()
    );
    let gone: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.kind == "NodeClaim" && s.name() == replacement)
        .filter(|s| s.deleted || !s.object["metadata"]["deletionTimestamp"].is_null())
        .collect();
    assert!(gone.is_empty(), "the replacement was deleted: {gone:?}");
    let events = peer.items(&["get", "events.v1.events.k8s.io", "-A"]);
    let refused: Vec<&Value> = events
        .iter()
        .filter(|e| e["reason"] == "DisruptionRequestRefused")
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    assert!(
        events.iter().any(|e| e["reason"] == "DisruptionApproved"
            && e["note"].as_str().is_some_and(|n| n.contains("alice"))),
        "the approval is recorded with its actor"
    );
    assert_eq!(standby.terminate(), Some(0), "{}", standby.stderr());
}

/// The NodePool `default` (m5.large and m5.xlarge, or as given) with the circuit breaker
/// at 1 of the last 3 replacements.
fn breaker_pool(instance_types: &str) -> String {
    let disruption = "    consolidationPolicy: WhenEmpty\n    consolidateAfter: Never\n    budgets: [{nodes: \"100%\"}]";
    nodepool(instance_types, disruption).replacen(
        "  name: default\n",
        "  name: default\n  annotations: {karpenter-tui.dev/circuit-breaker: \"1/3\"}\n",
        1,
    )
}

/// The pool's annotation `key`, if set.
fn pool_annotation(peer: &KubePeer, key: &str) -> Option<String> {
    peer.get_json(&["get", "nodepool", "default"])["metadata"]["annotations"][key]
        .as_str()
        .map(str::to_string)
}

/// Every NodeClaim's name.
fn claim_names(peer: &KubePeer) -> BTreeSet<String> {
    peer.items(&["get", "nodeclaims"])
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .map(str::to_string)
        .collect()
}

/// Replacement NodeClaims the controller created.
fn replacements(peer: &KubePeer) -> BTreeSet<String> {
    claim_names(peer)
        .into_iter()
        .filter(|n| n.contains("-replacement-"))
        .collect()
}

/// A busy m5.large node of the pool, with its pod named `pod`.
fn busy(claim: &str, node: &str, pod: &str) -> String {
    busy_node(claim, node).replacen("name: app-0,", &format!("name: {pod},"), 1)
}

/// A drifted node is replaced, and the replacement's node goes NotReady: the breaker (1 of
/// 3) pauses the pool with actor circuit-breaker and the evidence, on the NodePool. A new
/// controller (the first killed) keeps it: another drifted node waits. The operator lifts
/// the pause with kubectl; that node is disrupted, and the breaker does not trip again on
/// the old evidence.
#[test]
fn the_circuit_breaker_pauses_the_pool_in_the_cluster_until_an_operator_resumes() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(0.5, 1.0);
    peer.start_kubelet(1.0);
    peer.kubectl(&["apply", "-f", "-"], &breaker_pool("m5.large, m5.xlarge"));
    peer.kubectl(
        &["create", "-f", "-"],
        &busy("default-aaaaa", "ip-10-0-0-1.kwok.internal", "app-0"),
    );
    let mut first = controller(&kubeconfig, &["--approve", "auto"]);
    eventually("the controller leads", || leads(&first).then_some(()));

    // A new generation: m5.large drifts.
    peer.kubectl(&["apply", "-f", "-"], &breaker_pool("m5.xlarge"));
    let (replacement, node) =
        eventually("the drifted node replaced by an initialized node", || {
            peer.items(&["get", "nodeclaims"])
                .into_iter()
                .find_map(|c| {
                    let name = c["metadata"]["name"].as_str()?;
                    let initialized = c["status"]["conditions"]
                        .as_array()?
                        .iter()
                        .any(|x| x["type"] == "Initialized" && x["status"] == "True");
                    (name.contains("-replacement-") && initialized)
                        .then(|| {
                            Some((
                                name.to_string(),
                                c["status"]["nodeName"].as_str()?.to_string(),
                            ))
                        })
                        .flatten()
                })
        });
    // The new image's node dies.
    peer.kubectl(
        &[
            "patch",
            "node",
            &node,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"container runtime is down"}]}}"#,
        ],
        "",
    );
    let note = eventually("the breaker's pause on the NodePool", || {
        (pool_annotation(&peer, "karpenter-tui.dev/paused").as_deref() == Some("circuit-breaker"))
            .then(|| pool_annotation(&peer, "karpenter-tui.dev/paused-note"))
            .flatten()
    });
    assert!(
        note.starts_with("1 of the last 1 replacements failed: ")
            && note.contains(&replacement)
            && note.contains("went NotReady"),
        "{note}"
    );

    // The pause outlives the controller: a new one holds a newly drifted node.
    first.kill();
    peer.kubectl(
        &["create", "-f", "-"],
        &busy("default-bbbbb", "ip-10-0-0-2.kwok.internal", "app-1"),
    );
    let mut second = controller(&kubeconfig, &["--approve", "auto"]);
    eventually("the new controller leads", || leads(&second).then_some(()));
    // Three polls and a validation delay.
    std::thread::sleep(Duration::from_secs(35));
    assert!(claim_names(&peer).contains("default-bbbbb"));
    assert_eq!(
        replacements(&peer),
        BTreeSet::from([replacement.clone()]),
        "nothing replaced while tripped; log:\n{}",
        second.stderr()
    );
    assert_eq!(
        pool_annotation(&peer, "karpenter-tui.dev/paused").as_deref(),
        Some("circuit-breaker")
    );

    // The operator lifts it.
    peer.kubectl(
        &[
            "annotate",
            "nodepool",
            "default",
            "karpenter-tui.dev/paused-",
            "karpenter-tui.dev/paused-note-",
        ],
        "",
    );
    // Drift acts on it now (its pod fits on the dead node, so it may go without a
    // replacement, as upstream's simulation would decide).
    eventually("the held node disrupted", || {
        (!claim_names(&peer).contains("default-bbbbb")).then_some(())
    });
    assert_eq!(
        pool_annotation(&peer, "karpenter-tui.dev/paused"),
        None,
        "tripped again on old evidence; log:\n{}",
        second.stderr()
    );
    assert_eq!(second.terminate(), Some(0), "{}", second.stderr());
}
