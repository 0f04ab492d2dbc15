//! The console attached to a cluster upstream Karpenter v1.14.1 manages, read from the
//! user's seat (the real binary in tmux, the kmock peer on 127.0.0.1, kubectl writing the
//! objects as upstream would have). Seen before: every node got a drift decision while
//! its detail pane said `Drifted False`, because the console compared its own hash of the
//! NodePool with the one upstream stamped (`karpenter.sh/nodepool-hash`, version `v3`).
//! Upstream's verdict is its Drifted condition: no node is drifted until one gets
//! `Drifted=True`, then exactly that one, in the table, the decisions and the detail pane.
//!
//! `KARPENTER_TUI_BIN=/path/to/other/build cargo test --test attach_upstream_live` runs
//! the same case against another build.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/tmux.rs"]
mod tmux;
#[path = "peers/upstream_objects.rs"]
mod upstream_objects;

use std::time::Duration;

use kube_peer::KubePeer;
use tmux::Tmux;
use upstream_objects::{UpstreamNode, nodeclaim_conditions};

/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(60);

/// This build's binary, or the one `$KARPENTER_TUI_BIN` names.
fn binary() -> String {
    std::env::var("KARPENTER_TUI_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_karpenter-tui").to_string())
}

const NODES: [UpstreamNode; 3] = [
    UpstreamNode {
        claim: "default-7k2pq",
        node: "ip-10-0-1-11.ec2.internal",
        instance: "i-0a1b2c3d4e5f60011",
    },
    UpstreamNode {
        claim: "default-m4xzt",
        node: "ip-10-0-1-12.ec2.internal",
        instance: "i-0a1b2c3d4e5f60012",
    },
    UpstreamNode {
        claim: "default-rw9bc",
        node: "ip-10-0-1-13.ec2.internal",
        instance: "i-0a1b2c3d4e5f60013",
    },
];

/// The screen line of `node`'s row in the Nodes table.
fn row<'a>(screen: &'a str, node: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.contains(node))
}

/// Every node's row carries the disruption pass's verdict (not "-", not looked at yet).
fn all_judged(screen: &str) -> bool {
    NODES.iter().all(|n| {
        row(screen, n.node).is_some_and(|l| {
            ["blocked", "chosen", "eligible"]
                .iter()
                .any(|w| l.contains(w))
        })
    })
}

/// Whether a row says the node is drifted or in a decision: its state ("drifted",
/// "awaiting #N", "disrupting #N"), or the pass's verdict naming drift.
fn says_drifted(line: &str) -> bool {
    let line = line.to_lowercase();
    ["drift", "awaiting", "disrupting"]
        .iter()
        .any(|w| line.contains(w))
}

/// The decision rows (`#ID ...`) of the Decisions view.
fn decisions(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .map(|l| l.trim_start_matches(['│', ' ']))
        .filter(|l| {
            l.strip_prefix('#')
                .and_then(|r| r.split_whitespace().next())
                .is_some_and(|id| id.parse::<u64>().is_ok())
        })
        .collect()
}

/// Opens `node`'s detail pane from the Nodes view, returns its `Drifted` condition line,
/// and closes the pane and the filter again.
fn drifted_condition(tmux: &Tmux, node: &str) -> String {
    tmux.keys("3");
    tmux.keys(&format!("/{node}\r"));
    tmux.wait_for("the filtered Nodes table", PATIENCE, |s| {
        NODES.iter().all(|n| (n.node == node) == s.contains(n.node))
    });
    tmux.keys("\r");
    let screen = tmux.wait_for("the detail pane's conditions", PATIENCE, |s| {
        s.contains("Conditions") && s.contains("Initialized")
    });
    // One Escape per screen change: two ESC bytes arriving in one read are a single
    // Esc key to crossterm's parser (ESC ESC), so the second press would be lost.
    tmux.key("Escape");
    tmux.wait_for("the detail pane closed", PATIENCE, |s| {
        !s.contains("Conditions")
    });
    tmux.key("Escape");
    tmux.wait_for("the filter cleared", PATIENCE, |s| {
        NODES.iter().all(|n| s.contains(n.node))
    });
    screen
        .lines()
        .find(|l| l.contains("Drifted") && (l.contains("True") || l.contains("False")))
        .unwrap_or_else(|| panic!("no Drifted condition in the detail pane:\n{screen}"))
        .to_string()
}

#[test]
fn attached_to_upstream_no_node_is_drifted_until_upstream_says_so_then_exactly_that_one() {
    let peer = KubePeer::start();
    peer.kubectl(&["apply", "-f", "-"], &upstream_objects::ec2nodeclass());
    peer.kubectl(&["apply", "-f", "-"], &upstream_objects::nodepool());
    for n in &NODES {
        peer.kubectl(&["create", "-f", "-"], &n.objects());
    }
    // kubectl reads them as upstream left them: Ready, nothing drifted.
    for c in peer.items(&["get", "nodeclaims"]) {
        let types: Vec<&str> = c["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "True")
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert!(!types.contains(&"Drifted"), "{c}");
        assert_eq!(
            c["metadata"]["annotations"]["karpenter.sh/nodepool-hash-version"],
            "v3"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {1} attach \
         --kubeconfig {2} --namespace default; sleep 30",
        dir.path().display(),
        binary(),
        peer.kubeconfig_path().display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    tmux.wait_for("the console attached to upstream", PATIENCE, |s| {
        s.contains("upstream Karpenter")
    });

    // Nodes: once the pass has judged every node, none is drifted.
    tmux.keys("3");
    let screen = tmux.wait_for(
        "every node judged by a disruption pass",
        PATIENCE,
        all_judged,
    );
    for n in &NODES {
        let line = row(&screen, n.node).unwrap();
        assert!(!says_drifted(line), "{} shown drifted:\n{screen}", n.node);
    }
    // Decisions: none.
    tmux.keys("5");
    let screen = tmux.wait_for("the Decisions view", PATIENCE, |s| s.contains("Decisions"));
    assert!(decisions(&screen).is_empty(), "{screen}");
    // The detail pane agrees.
    let line = drifted_condition(&tmux, NODES[1].node);
    assert!(line.contains("False"), "{line}");

    // Upstream's drift controller marks one NodeClaim drifted.
    let drifted = &NODES[1];
    let mut conditions = nodeclaim_conditions();
    conditions.push(serde_json::json!({
        "type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
        "message": "", "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": 1
    }));
    let body = serde_json::json!({"status": {"conditions": conditions}});
    let path = format!("/apis/karpenter.sh/v1/nodeclaims/{}/status", drifted.claim);
    let (status, _, answer) = peer.http("PATCH", &path, Some(&body));
    assert_eq!(status, 200, "{answer}");

    // Exactly that node: its row says drift, the others' do not.
    tmux.keys("3");
    let screen = tmux.wait_for("the drifted node's row", PATIENCE, |s| {
        all_judged(s) && row(s, drifted.node).is_some_and(says_drifted)
    });
    for n in NODES.iter().filter(|n| n.claim != drifted.claim) {
        let line = row(&screen, n.node).unwrap();
        assert!(!says_drifted(line), "{} shown drifted:\n{screen}", n.node);
    }
    // One decision: drift of that node.
    tmux.keys("5");
    let screen = tmux.wait_for("the drift decision", PATIENCE, |s| !decisions(s).is_empty());
    let rows = decisions(&screen);
    assert_eq!(rows.len(), 1, "{screen}");
    assert!(
        rows[0].contains("drift") && rows[0].contains(drifted.node),
        "{screen}"
    );
    // The detail pane agrees with the table: that node Drifted True with upstream's
    // reason, another still False.
    let line = drifted_condition(&tmux, drifted.node);
    assert!(
        line.contains("True") && line.contains("NodePoolDrifted"),
        "{line}"
    );
    let line = drifted_condition(&tmux, NODES[0].node);
    assert!(line.contains("False"), "{line}");
    tmux.keys("q");
}
