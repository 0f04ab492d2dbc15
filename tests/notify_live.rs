//! Notifications (issue 22) from the headless `controller` on a real HTTP Kubernetes API
//! (the kmock peer on 127.0.0.1 with its kube-scheduler stand-in), to two webhooks named
//! in `KARPENTER_TUI_NOTIFY`: a receiver that fails its first request, and one that never
//! answers. The decision awaiting approval, its execution once an operator approves it
//! with kubectl, and an operator's pause written with kubectl all reach the receiver, in
//! that order; the webhook that hangs holds up neither the loop nor the shutdown.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/wait.rs"]
mod wait;
#[path = "peers/webhook.rs"]
mod webhook;

use std::time::Duration;

use kube_peer::KubePeer;
use objects::nodepool;
use proc::{Proc, controller_with};
use serde_json::Value;
use webhook::Webhook;

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

/// The first notification of `kind` the receiver accepted.
fn notified(hook: &Webhook, kind: &str) -> Option<Value> {
    hook.bodies().into_iter().find(|d| d["kind"] == kind)
}

#[test]
fn an_approval_its_execution_and_a_pause_reach_a_webhook_while_another_hangs() {
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
        // Empty, in a consolidateAfter: Never pool: drift, not emptiness, decides it.
        &objects::empty_node("default-aaaaa", "ip-10-0-0-1.kwok.internal"),
    );
    let hook = Webhook::start(1);
    let hole = Webhook::black_hole();
    let mut run = controller_with(
        &kubeconfig,
        &["--approve", "manual"],
        &[(
            "KARPENTER_TUI_NOTIFY".to_string(),
            format!("{hole},{}", hook.url),
        )],
    );
    eventually("the controller leads", || leads(&run).then_some(()));

    // The node drifts: a decision waits for an operator, and the channel hears of it.
    peer.kubectl(&["apply", "-f", "-"], &nodepool("m5.xlarge", disruption));
    let proposed = eventually("the decision awaiting approval notified", || {
        notified(&hook, "DisruptionProposed")
    });
    let id = proposed["event"]["id"].as_u64().expect("the decision's id");
    let text = proposed["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "karpenter-tui: decision #{id} awaits approval: drift (Drifted) of ip-10-0-0-1.kwok.internal"
        )),
        "{text}"
    );

    // An operator approves it with kubectl: the execution is notified.
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
    let executed = eventually("the execution notified", || {
        notified(&hook, "DisruptionExecuted")
    });
    assert_eq!(executed["event"]["id"], id);

    // An operator pauses the pool with kubectl.
    peer.kubectl(
        &[
            "annotate",
            "nodepool",
            "default",
            "karpenter-tui.dev/paused=alice",
        ],
        "",
    );
    let paused = eventually("the pause notified", || notified(&hook, "DisruptionPaused"));
    assert_eq!(
        paused["text"], "karpenter-tui: alice paused disruption of nodepool/default",
        "{paused}"
    );
    let kinds: Vec<String> = hook
        .bodies()
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "DisruptionProposed",
            "DisruptionExecuted",
            "DisruptionPaused"
        ],
        "in order, each once (the first try of the first failed)"
    );
    assert_eq!(hook.requests(), 4);
    // The hanging webhook costs the shutdown at most its few seconds of grace.
    assert_eq!(run.terminate(), Some(0), "{}", run.stderr());
}
