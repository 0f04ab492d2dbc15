//! End to end: the real binary in a real terminal (tmux) at the sizes an on-call
//! operator has (80x24 and 120x30). The Nodes, Pending and Disruption tables keep their
//! operator columns; after a tiny scenario's timeline ends the header says so and its
//! clock keeps moving while the cluster is quiet. Needs tmux (.ci/run installs it).

#[path = "peers/tmux.rs"]
mod tmux;

use std::process::Command;
use std::time::Duration;

use tmux::Tmux;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

/// One pool, two small pods, one pod no instance type fits (it stays pending with the
/// scheduler's reason), and a timeline whose last event is at 2 s.
const SCENARIO: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-tiny
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: tiny}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: tiny}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: web
          resources: {requests: {cpu: 250m, memory: 256Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: too-big}
spec:
  containers:
    - name: big
      image: big
      resources: {requests: {cpu: "500", memory: 1Gi}}
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata:
  name: tiny
spec:
  seed: 1
  duration: 10m
  start: "2026-01-05T09:00:00Z"
  cloud:
    launchLatency: 1s
    instanceTypes: [m5.large, m5.xlarge]
  timeline:
    - at: 2s
      scale: {deployment: web, replicas: 3}
"#;

fn resize(tmux: &Tmux, w: u16, h: u16) {
    let ok = Command::new("tmux")
        .args([
            "-S",
            &tmux.socket,
            "resize-window",
            "-x",
            &w.to_string(),
            "-y",
            &h.to_string(),
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "resize-window");
    tmux.wait_for(
        &format!("the console at {w}x{h}"),
        Duration::from_secs(10),
        |s| {
            s.lines()
                .any(|l| l.ends_with('┐') && l.chars().count() == w as usize)
        },
    );
}

/// The table's heading line: the line under the top border that starts with `first`.
fn heading<'a>(screen: &'a str, first: &str) -> Option<&'a str> {
    screen
        .lines()
        .find(|l| l.trim_start_matches('│').starts_with(first))
}

fn has_columns(screen: &str, first: &str, columns: &[&str]) -> bool {
    heading(screen, first).is_some_and(|h| columns.iter().all(|c| h.contains(c)))
}

/// The header's clock ("09:00:12"): the first HH:MM:SS on the first line.
fn clock(screen: &str) -> Option<String> {
    let header = screen.lines().next()?;
    header
        .split_whitespace()
        .find(|w| w.len() == 8 && w.as_bytes()[2] == b':' && w.as_bytes()[5] == b':')
        .map(str::to_string)
}

#[test]
fn narrow_terminals_keep_the_operators_columns_and_the_clock_moves_after_the_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("tiny.yaml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={} XDG_STATE_HOME={} {BIN} --scenario {} --speed 1 \
         --approve manual; sleep 60",
        dir.path().join("config").display(),
        dir.path().join("state").display(),
        scenario.display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview")
    });

    for (w, h, nodes) in [
        (
            120u16,
            30u16,
            &["NODE", "STATE", "ZONE", "AGE", "DISRUPTION"][..],
        ),
        (80, 24, &["NODE", "STATE", "AGE", "DISRUPTION"][..]),
    ] {
        resize(&tmux, w, h);
        tmux.keys("3");
        tmux.wait_for(
            &format!("Nodes at {w}x{h} with {nodes:?}"),
            Duration::from_secs(10),
            |s| has_columns(s, "NODE", nodes),
        );
        tmux.keys("4");
        let screen = tmux.wait_for(
            &format!("Pending at {w}x{h} with its reason"),
            Duration::from_secs(20),
            |s| {
                has_columns(s, "POD", &["POD", "AGE", "WHY PENDING"])
                    && s.contains("default/too-big")
            },
        );
        let row = screen
            .lines()
            .find(|l| l.contains("default/too-big"))
            .unwrap();
        assert!(
            row.contains("nodepool") || row.contains("unschedulable") || row.contains('…'),
            "the reason is on the row: {row}"
        );
        tmux.keys("5");
        tmux.wait_for(
            &format!("Decisions at {w}x{h} with SAVES, BUDGET and AGE"),
            Duration::from_secs(10),
            |s| has_columns(s, "ID", &["ID", "STATE", "SAVES", "BUDGET", "AGE"]),
        );
    }

    // The timeline's last event is at 2 s: the header says so, and its clock keeps
    // moving second by second though nothing happens (and no staleness badge shows).
    let screen = tmux.wait_for("the scenario ended", Duration::from_secs(20), |s| {
        s.lines()
            .next()
            .is_some_and(|l| l.contains("scenario ended"))
    });
    let first = clock(&screen).expect("a clock in the header");
    let later = tmux.wait_for("the clock to move", Duration::from_secs(10), |s| {
        clock(s).is_some_and(|c| c != first)
    });
    let second = clock(&later).unwrap();
    tmux.wait_for("the clock to move again", Duration::from_secs(10), |s| {
        clock(s).is_some_and(|c| c != second && c != first)
    });
    let screen = tmux.capture();
    assert!(
        !screen.lines().next().unwrap_or_default().contains(" old "),
        "a quiet cluster is not stale: {screen}"
    );
    tmux.keys("q");
}
