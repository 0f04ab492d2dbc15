//! The binary against a real HTTP Kubernetes API (the kmock peer on 127.0.0.1, driven by
//! kubectl as an independent client): `run` provisions for a pod kubectl created,
//! `controller` replicas elect one leader, consoles attached with `attach --write`
//! approve, reject and pause through the protocol, and attach mode against "upstream"
//! Karpenter pauses and restores a pool's budgets byte for byte.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/tmux.rs"]
mod tmux;
#[path = "peers/wait.rs"]
mod wait;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kube_peer::KubePeer;
use objects::{empty_node, nodepool};
use proc::{Proc, controller, endpoints_of};
use serde_json::Value;
use tmux::Tmux;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");
/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(60);

/// The pool every test starts with: one Empty disruption at a time, drift held in
/// business hours.
fn default_nodepool() -> String {
    nodepool(
        "m5.large, m5.xlarge",
        r#"    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets:
    - nodes: "1"
      reasons: [Empty]
    - {schedule: "0 9 * * mon-fri", duration: 8h, nodes: "0", reasons: [Drifted]}"#,
    )
}

fn pending_pod(name: &str) -> String {
    objects::pending_pod(name, "1", "1Gi")
}

fn json(peer: &KubePeer, args: &[&str]) -> Value {
    peer.get_json(args)
}

/// Polls `probe` until it gives a value; panics naming `what` after PATIENCE.
fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, PATIENCE, probe)
}

/// A plain HTTP/1.1 GET: (status, body).
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the endpoints");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// A fresh peer holding the NodePool `default`, and the path of its kubeconfig.
fn peer_with_pool() -> (KubePeer, String) {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.kubectl(&["apply", "-f", "-"], &default_nodepool());
    (peer, kubeconfig)
}

fn events(peer: &KubePeer, reason: &str) -> Vec<Value> {
    peer.items(&["get", "events.v1.events.k8s.io", "-A"])
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect()
}

#[test]
fn run_provisions_a_nodeclaim_and_a_node_for_a_pod_kubectl_created() {
    let (peer, kubeconfig) = peer_with_pool();
    peer.kubectl(&["create", "-f", "-"], &pending_pod("web-1"));

    // Not on a terminal: the controller without the console, events as JSON lines.
    let mut run = Proc::start(&["run", "--kubeconfig", &kubeconfig, "--namespace", "default"]);
    let claim = eventually("a NodeClaim for the pending pod", || {
        peer.items(&["get", "nodeclaims"])
            .into_iter()
            .find(|c| c["status"]["providerID"].is_string())
    });
    let name = claim["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("default-"), "{name}");
    assert_eq!(claim["metadata"]["generateName"], "default-");
    assert_eq!(
        claim["metadata"]["labels"]["karpenter.sh/nodepool"],
        "default"
    );
    let owner = &claim["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("NodePool"), Some("default"))
    );
    assert!(
        claim["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "karpenter.sh/termination")),
        "{claim}"
    );
    let itype = claim["metadata"]["labels"]["node.kubernetes.io/instance-type"]
        .as_str()
        .unwrap_or_default();
    assert!(itype == "m5.large" || itype == "m5.xlarge", "{claim}");
    let launched = claim["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Launched" && c["status"] == "True");
    assert!(launched, "{claim}");

    // The simulated cloud registered a Ready Node for it, like Karpenter's KWOK provider.
    let provider = claim["status"]["providerID"].as_str().unwrap().to_string();
    let node = eventually("the Node of the NodeClaim", || {
        peer.items(&["get", "nodes"])
            .into_iter()
            .find(|n| n["spec"]["providerID"] == provider.as_str())
    });
    assert_eq!(
        node["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        itype
    );
    // The pod's Event says where it should go (upstream's Nominated).
    eventually("a Nominated event for the pod", || {
        events(&peer, "Nominated")
            .into_iter()
            .find(|e| e["regarding"]["name"] == "web-1")
    });
    assert!(
        run.stdout().contains("NodeClaimCreated"),
        "{}",
        run.stdout()
    );
    assert_eq!(run.terminate(), Some(0), "{}", run.stderr());
}

/// The identity of the replica that says it leads.
fn leader_of(p: &Proc) -> Option<String> {
    p.stderr().lines().find_map(|l| {
        l.strip_prefix("karpenter-tui: ")?
            .strip_suffix(" leads")
            .map(str::to_string)
    })
}

#[test]
fn two_controllers_elect_one_leader_and_the_other_takes_over_on_sigterm() {
    let (peer, kubeconfig) = peer_with_pool();
    peer.kubectl(&["create", "-f", "-"], &pending_pod("web-1"));
    let mut a = controller(&kubeconfig, &[]);
    let mut b = controller(&kubeconfig, &[]);
    let (addr_a, addr_b) = (endpoints_of(&a), endpoints_of(&b));
    let first = eventually("a leader", || leader_of(&a).or_else(|| leader_of(&b)));
    let (leader, follower, leader_addr, follower_addr) = if leader_of(&a).is_some() {
        (&mut a, &mut b, addr_a, addr_b)
    } else {
        (&mut b, &mut a, addr_b, addr_a)
    };
    let lease = json(
        &peer,
        &[
            "get",
            "lease",
            "karpenter-tui-leader-election",
            "-n",
            "default",
        ],
    );
    assert_eq!(lease["spec"]["holderIdentity"], first.as_str());

    // Only the leader acts: one pod, one NodeClaim.
    eventually("the leader's NodeClaim", || {
        (!peer.items(&["get", "nodeclaims"]).is_empty()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(peer.items(&["get", "nodeclaims"]).len(), 1);
    assert!(leader_of(follower).is_none(), "{}", follower.stderr());

    // Both are alive and ready (synced); only the leader reports leading.
    assert_eq!(http_get(&leader_addr, "/healthz").0, 200);
    assert_eq!(http_get(&follower_addr, "/healthz").0, 200);
    assert_eq!(http_get(&leader_addr, "/readyz").0, 200);
    assert_eq!(http_get(&follower_addr, "/readyz").0, 200);
    let (_, follower_metrics) = http_get(&follower_addr, "/metrics");
    assert!(
        follower_metrics
            .contains("leader_election_master_status{name=\"karpenter-tui-leader-election\"} 0"),
        "{follower_metrics}"
    );
    let (code, metrics) = http_get(&leader_addr, "/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("karpenter_nodeclaims_created_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("leader_election_master_status{name=\"karpenter-tui-leader-election\"} 1"),
        "{metrics}"
    );

    // SIGTERM: the leader stops, releases the lease, and the other takes over.
    assert_eq!(leader.terminate(), Some(0), "{}", leader.stderr());
    let second = eventually("the follower to take over", || leader_of(follower));
    assert_ne!(first, second);
    let lease = json(
        &peer,
        &[
            "get",
            "lease",
            "karpenter-tui-leader-election",
            "-n",
            "default",
        ],
    );
    assert_eq!(lease["spec"]["holderIdentity"], second.as_str());
    assert_eq!(follower.terminate(), Some(0), "{}", follower.stderr());
}

/// The exact text of a NodePool's `spec.disruption.budgets`, as the API server sends it.
fn raw_budgets(peer: &KubePeer) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", peer.port())).unwrap();
    write!(
        s,
        "GET /apis/karpenter.sh/v1/nodepools/default HTTP/1.1\r\nHost: peer\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    // Chunked or not, the JSON object is the part between the first '{' and the last '}'.
    let body = &body[body.find('{').unwrap()..=body.rfind('}').unwrap()];
    let start = body.find(r#""budgets""#).expect("budgets in the pool");
    let rest = &body[start + r#""budgets""#.len()..];
    let rest = rest.trim_start().trim_start_matches(':').trim_start();
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return rest[..=i].to_string();
                }
            }
            _ => {}
        }
    }
    panic!("unterminated budgets in {body}");
}

#[test]
fn attach_to_upstream_pauses_a_pool_and_restores_its_budgets_byte_for_byte() {
    let (peer, _) = peer_with_pool();
    let before = raw_budgets(&peer);
    assert!(before.contains("mon-fri"), "{before}");

    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {BIN} attach --write \
         --kubeconfig {1} --namespace default; sleep 30",
        dir.path().display(),
        peer.kubeconfig_path().display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    tmux.wait_for("the attached console", PATIENCE, |s| {
        s.contains("upstream Karpenter") && s.contains("write")
    });
    // NodePools view, the one pool selected: pause it (P pauses the selected pool).
    tmux.keys("2");
    tmux.wait_for("the pool listed", PATIENCE, |s| s.contains("default"));
    tmux.keys("P");
    tmux.wait_for("the pause's answer", PATIENCE, |s| {
        s.contains("originals saved")
    });
    let paused = json(&peer, &["get", "nodepool", "default"]);
    assert_eq!(
        paused["spec"]["disruption"]["budgets"],
        serde_json::json!([{"nodes": "0"}])
    );
    assert_eq!(
        paused["metadata"]["annotations"]["karpenter-tui.dev/saved-budgets"],
        before.as_str()
    );
    assert_eq!(
        paused["metadata"]["annotations"]["karpenter-tui.dev/paused-by"],
        "peer"
    );

    // The console sees the pause come back from the API server; `P` again resumes.
    tmux.wait_for("the pool shown paused", PATIENCE, |s| {
        s.contains("PAUSED: nodepool/default")
    });
    tmux.keys("P");
    tmux.wait_for("the resume's answer", PATIENCE, |s| s.contains("restored"));
    assert_eq!(raw_budgets(&peer), before, "the budgets' bytes came back");
    let resumed = json(&peer, &["get", "nodepool", "default"]);
    let annotations = resumed["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        !annotations.contains_key("karpenter-tui.dev/saved-budgets"),
        "{resumed}"
    );
    tmux.wait_for("the pause gone from the console", PATIENCE, |s| {
        !s.contains("PAUSED: nodepool/default")
    });

    // Paused again, and someone edits the budgets meanwhile: resume must not put the
    // saved ones back over that edit (seen: it did, silently); it shows both instead.
    tmux.keys("P");
    tmux.wait_for("the second pause", PATIENCE, |s| {
        s.contains("PAUSED: nodepool/default")
    });
    peer.kubectl(
        &[
            "patch",
            "nodepool",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"disruption":{"budgets":[{"nodes":"3"}]}}}"#,
        ],
        "",
    );
    eventually("the edit seen", || {
        raw_budgets(&peer).contains(r#""3""#).then_some(())
    });
    tmux.keys("P");
    tmux.wait_for("the refusal", PATIENCE, |s| s.contains("edited during"));
    let edited = json(&peer, &["get", "nodepool", "default"]);
    assert_eq!(
        edited["spec"]["disruption"]["budgets"],
        serde_json::json!([{"nodes": "3"}]),
        "the edit stays"
    );
    assert!(
        edited["metadata"]["annotations"]["karpenter-tui.dev/saved-budgets"].is_string(),
        "the saved budgets stay for the operator to choose: {edited}"
    );
    tmux.keys("q");
}

#[test]
fn read_only_attach_refuses_to_pause() {
    let (peer, _) = peer_with_pool();
    let before = raw_budgets(&peer);
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {BIN} attach \
         --kubeconfig {1} --namespace default; sleep 30",
        dir.path().display(),
        peer.kubeconfig_path().display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    tmux.wait_for("the attached console", PATIENCE, |s| {
        s.contains("read-only")
    });
    tmux.keys("2");
    tmux.keys("P");
    tmux.wait_for("the refusal", PATIENCE, |s| s.contains("refused"));
    assert_eq!(raw_budgets(&peer), before);
    tmux.keys("q");
}

/// The console's row for a decision awaiting approval: its id.
fn awaiting(screen: &str) -> Vec<u64> {
    screen
        .lines()
        .filter(|l| l.contains("awaiting"))
        .filter_map(|l| {
            let l = l.trim_start_matches(['│', ' ']);
            l.strip_prefix('#')?.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

fn recorded(peer: &KubePeer) -> Vec<(String, String)> {
    peer.items(&["get", "nodeclaims"])
        .into_iter()
        .filter_map(|c| {
            let id = c["metadata"]["annotations"]["karpenter-tui.dev/decision"].as_str()?;
            Some((c["metadata"]["name"].as_str()?.to_string(), id.to_string()))
        })
        .collect()
}

#[test]
fn two_attached_consoles_approve_reject_and_pause_through_the_controller() {
    let (peer, kubeconfig) = peer_with_pool();
    // Every decision waits for an operator and holds its budget while it waits; with a
    // budget of two, two empty nodes that appear one after the other make two decisions.
    peer.kubectl(
        &[
            "patch",
            "nodepool",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"disruption":{"budgets":[{"nodes":"2","reasons":["Empty"]}]}}}"#,
        ],
        "",
    );
    peer.kubectl(
        &["create", "-f", "-"],
        &empty_node("default-aaaaa", "ip-10-0-0-1.kwok.internal"),
    );
    let mut controller = controller(&kubeconfig, &["--approve", "manual"]);
    eventually("the first decision recorded", || {
        (recorded(&peer).len() == 1).then_some(())
    });
    peer.kubectl(
        &["create", "-f", "-"],
        &empty_node("default-bbbbb", "ip-10-0-0-2.kwok.internal"),
    );
    let records = eventually("both decisions recorded on their NodeClaims", || {
        let r = recorded(&peer);
        (r.len() == 2 && r[0].1 != r[1].1).then_some(r)
    });
    let awaiting_event = events(&peer, "DisruptionAwaitingApproval");
    assert!(!awaiting_event.is_empty());

    let start_console = |name: &str| {
        let dir = tempfile::tempdir().unwrap();
        let command = format!(
            "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {BIN} attach --write \
             --kubeconfig {kubeconfig} --namespace default; sleep 30",
            dir.path().display()
        );
        let tmux = Tmux::start(dir.path(), &command);
        tmux.wait_for(name, PATIENCE, |s| s.contains("karpenter-tui controller"));
        tmux.keys("5");
        (dir, tmux)
    };
    let (_da, a) = start_console("console A");
    let (_db, b) = start_console("console B");
    let screen = a.wait_for("A shows both decisions", PATIENCE, |s| {
        awaiting(s).len() == 2
    });
    let ids = awaiting(&screen);
    let recorded_ids: Vec<u64> = records.iter().map(|(_, id)| id.parse().unwrap()).collect();
    for id in &ids {
        assert!(
            recorded_ids.contains(id),
            "console ids {ids:?} vs recorded {records:?}"
        );
    }

    // A approves the selected (first) decision.
    let first = ids[0];
    let first_claim = records
        .iter()
        .find(|(_, id)| *id == first.to_string())
        .unwrap()
        .0
        .clone();
    a.keys("a");
    a.wait_for("the approval sent", PATIENCE, |s| {
        s.contains(&format!("approval of #{first} sent"))
    });
    eventually("the approved NodeClaim deleted", || {
        let gone = !peer.items(&["get", "nodeclaims"]).iter().any(|c| {
            c["metadata"]["name"] == first_claim.as_str()
                && c["metadata"]["deletionTimestamp"].is_null()
        });
        gone.then_some(())
    });
    let approved = eventually("a DisruptionApproved event naming the actor", || {
        events(&peer, "DisruptionApproved").into_iter().next()
    });
    assert!(
        approved["note"].as_str().unwrap().contains("peer approved"),
        "{approved}"
    );

    // B rejects the other one.
    let second = *ids.iter().find(|id| **id != first).unwrap();
    b.wait_for("B shows the other decision", PATIENCE, |s| {
        awaiting(s).contains(&second)
    });
    // Select it (it may not be the first row any more) with the filter.
    b.keys(&format!("/#{second}\r"));
    b.keys("x");
    b.wait_for("the confirmation or the answer", PATIENCE, |s| {
        s.contains("Reject") || s.contains("rejection")
    });
    if !b
        .capture()
        .contains(&format!("rejection of #{second} sent"))
    {
        // Enter confirms (the popup's reason field takes every other key as text).
        b.keys("\r");
    }
    b.wait_for("the rejection sent", PATIENCE, |s| {
        s.contains(&format!("rejection of #{second} sent"))
    });
    let rejected = eventually("a DisruptionRejected event", || {
        events(&peer, "DisruptionRejected").into_iter().next()
    });
    assert!(
        rejected["note"].as_str().unwrap().contains("peer rejected"),
        "{rejected}"
    );
    eventually("the rejected decision's record cleared", || {
        recorded(&peer).is_empty().then_some(())
    });

    // B pauses every pool; the settings object says so, and A shows it.
    b.keys("p");
    b.wait_for("the pause confirmation or answer", PATIENCE, |s| {
        s.contains("Pause") || s.contains("paused")
    });
    if !b.capture().contains("paused disruption: all") {
        b.keys("\r");
    }
    b.wait_for("the pause sent", PATIENCE, |s| {
        s.contains("paused disruption: all")
    });
    let cm = json(
        &peer,
        &["get", "configmap", "karpenter-tui", "-n", "default"],
    );
    assert_eq!(
        cm["metadata"]["annotations"]["karpenter-tui.dev/paused"],
        "peer"
    );
    eventually("a DisruptionPaused event", || {
        events(&peer, "DisruptionPaused").into_iter().next()
    });
    a.wait_for("A shows the pause", PATIENCE, |s| s.contains("PAUSED: all"));
    assert_eq!(controller.terminate(), Some(0), "{}", controller.stderr());
}

/// An upstream-shaped m5.xlarge node (NodeClaim hashed by upstream Karpenter, labels as
/// its registration writes them) running one small pod, in a pool that also allows
/// m5.large: consolidation replaces it with a cheaper node.
fn upstream_xlarge_with_a_pod() -> String {
    let node = "ip-10-0-9-9.ec2.internal";
    let provider = "aws:///us-east-1a/i-0upstream";
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-upstr
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.xlarge
    topology.kubernetes.io/zone: us-east-1a
    karpenter.sh/capacity-type: on-demand
  annotations:
    karpenter.sh/nodepool-hash: "4781265392761829175"
    karpenter.sh/nodepool-hash-version: v3
  finalizers: [karpenter.sh/termination]
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements:
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}}
status:
  providerID: {provider}
  nodeName: {node}
  capacity: {{cpu: "4", memory: 16Gi, pods: "58"}}
  allocatable: {{cpu: 3920m, memory: 14162Mi, pods: "58"}}
  conditions:
  - {{type: Launched, status: "True", reason: Launched, lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Registered, status: "True", reason: Registered, lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Initialized, status: "True", reason: Initialized, lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Ready, status: "True", reason: Ready, lastTransitionTime: "2026-01-01T00:00:00Z"}}
---
apiVersion: v1
kind: Node
metadata:
  name: {node}
  labels:
    karpenter.sh/nodepool: default
    karpenter.sh/initialized: "true"
    karpenter.sh/registered: "true"
    node.kubernetes.io/instance-type: m5.xlarge
    topology.kubernetes.io/zone: us-east-1a
    karpenter.sh/capacity-type: on-demand
    kubernetes.io/hostname: {node}
spec:
  providerID: {provider}
status:
  capacity: {{cpu: "4", memory: 16Gi, pods: "58"}}
  allocatable: {{cpu: 3920m, memory: 14162Mi, pods: "58"}}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, lastTransitionTime: "2026-01-01T00:00:00Z"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-small
  namespace: default
  labels: {{app: web}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f, uid: 0f0e0d0c-0000-4000-8000-00000000000a, controller: true}}
spec:
  nodeName: {node}
  containers:
  - name: main
    image: nginx
    resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}
status:
  phase: Running
"#
    )
}

/// Seen: approving a replace against upstream Karpenter deleted the candidate at once, so
/// the replace became break-before-make. Now the replacement NodeClaim is created first
/// (as upstream's provisioner would, with the hash upstream stamped on the NodePool) and
/// the candidate is deleted only once the replacement is Initialized.
#[test]
fn approving_a_replace_against_upstream_is_make_before_break() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.kubectl(
        &["apply", "-f", "-"],
        &nodepool(
            "m5.large, m5.xlarge",
            "    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 0s",
        ),
    );
    peer.kubectl(
        &[
            "annotate",
            "nodepool",
            "default",
            "karpenter.sh/nodepool-hash=4781265392761829175",
            "karpenter.sh/nodepool-hash-version=v3",
        ],
        "",
    );
    peer.kubectl(&["create", "-f", "-"], &upstream_xlarge_with_a_pod());

    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {BIN} attach --write \
         --kubeconfig {kubeconfig} --namespace default; sleep 30",
        dir.path().display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    tmux.wait_for("the attached console", PATIENCE, |s| {
        s.contains("upstream Karpenter") && s.contains("write")
    });
    tmux.keys("5");
    let screen = tmux.wait_for("the replace proposed", PATIENCE, |s| {
        !awaiting(s).is_empty()
    });
    let id = awaiting(&screen)[0];
    tmux.keys("a");
    tmux.wait_for("the replacement created", PATIENCE, |s| {
        s.contains("created replacement")
    });
    let replacement = eventually("the replacement NodeClaim", || {
        peer.items(&["get", "nodeclaims"])
            .into_iter()
            .find(|c| c["metadata"]["name"] != "default-upstr")
    });
    let rname = replacement["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let annotations = &replacement["metadata"]["annotations"];
    assert_eq!(
        annotations["karpenter.sh/nodepool-hash"], "4781265392761829175",
        "upstream's hash from the NodePool, so upstream does not call it drifted"
    );
    assert_eq!(annotations["karpenter.sh/nodepool-hash-version"], "v3");
    assert_eq!(annotations["karpenter-tui.dev/replaces"], "default-upstr");
    assert_eq!(
        replacement["metadata"]["ownerReferences"][0]["kind"], "NodePool",
        "{replacement}"
    );
    let types = replacement["spec"]["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "node.kubernetes.io/instance-type")
        .map(|r| r["values"].clone())
        .unwrap();
    assert_eq!(types, serde_json::json!(["m5.large"]), "{replacement}");

    // Until the replacement initializes, the candidate stays.
    std::thread::sleep(Duration::from_secs(3));
    let candidate = json(&peer, &["get", "nodeclaim", "default-upstr"]);
    assert!(
        candidate["metadata"]["deletionTimestamp"].is_null(),
        "deleted before its replacement initialized: {candidate}"
    );
    let record = candidate["metadata"]["annotations"]["karpenter-tui.dev/replaced-by"]
        .as_str()
        .unwrap();
    assert!(record.contains(&rname), "{record}");
    assert!(record.contains(&format!("\"decision\":{id}")), "{record}");

    // Upstream launches it and it initializes: then the candidate goes.
    let status = serde_json::json!({"status": {"conditions": [
        {"type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
         "lastTransitionTime": "2026-01-01T00:10:00Z"},
    ]}});
    // A merge patch of the status subresource (kubectl 1.20 has no --subresource).
    let body = status.to_string();
    let mut s = TcpStream::connect(("127.0.0.1", peer.port())).unwrap();
    write!(
        s,
        "PATCH /apis/karpenter.sh/v1/nodeclaims/{rname}/status HTTP/1.1\r\nHost: peer\r\n\
         Content-Type: application/merge-patch+json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    eventually("the candidate deleted", || {
        let gone = !peer.items(&["get", "nodeclaims"]).iter().any(|c| {
            c["metadata"]["name"] == "default-upstr" && c["metadata"]["deletionTimestamp"].is_null()
        });
        gone.then_some(())
    });
    tmux.keys("q");
}
