//! Scenario tests, through the real `simulate` binary, of the incident controls upstream
//! does not have (issue 22): the circuit breaker stopping a bad image's rollout, budget
//! schedules read in the pool's own time zone across a daylight-saving change, and a
//! minimum saving below which consolidation is not proposed.

#[path = "peers/webhook.rs"]
mod webhook;

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

/// `examples/bad-ami-rollout.yaml`, with the pool's breaker set to `breaker`.
fn bad_ami_rollout(breaker: &str) -> String {
    let text = std::fs::read_to_string("examples/bad-ami-rollout.yaml").expect("the example");
    let line = "karpenter-tui.dev/circuit-breaker: \"3/5\"";
    assert!(text.contains(line), "the example sets its breaker");
    text.replace(
        line,
        &format!("karpenter-tui.dev/circuit-breaker: \"{breaker}\""),
    )
}

/// Times of the drift commands that started.
fn drift_executions(events: &[Value]) -> Vec<f64> {
    events
        .iter()
        .filter(|e| e["kind"] == "DisruptionExecuted" && e["method"] == "drift")
        .filter_map(|e| e["t"].as_f64())
        .collect()
}

#[test]
fn the_circuit_breaker_stops_a_bad_images_rollout_until_an_operator_resumes() {
    let events = simulate(&bad_ami_rollout("3/5"), "1h");
    let paused: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "DisruptionPaused")
        .collect();
    assert_eq!(paused.len(), 1, "{paused:#?}");
    let trip = paused[0];
    assert_eq!(trip["actor"], "circuit-breaker");
    assert_eq!(trip["scope"], "nodepool/web");
    let evidence = trip["reason"].as_str().expect("evidence");
    assert!(
        evidence.starts_with("3 of the last ") && evidence.matches("went NotReady").count() == 3,
        "{evidence}"
    );
    let tripped = trip["t"].as_f64().unwrap();
    let resumed = events
        .iter()
        .find(|e| e["kind"] == "DisruptionResumed")
        .and_then(|e| e["t"].as_f64())
        .expect("the operator resumes at 20m");
    let drifts = drift_executions(&events);
    // Nothing is replaced between the trip and the operator's resume; after it the rest
    // of the pool is, on the mended image.
    assert!(
        drifts.iter().all(|t| *t < tripped || *t >= resumed),
        "drift ran while tripped: {drifts:?} (tripped {tripped}, resumed {resumed})"
    );
    let before = drifts.iter().filter(|t| **t < tripped).count();
    assert!(before < 8, "the breaker came too late: {drifts:?}");
    assert_eq!(
        drifts.len(),
        8,
        "every node replaced in the end: {drifts:?}"
    );

    // Without the breaker the whole pool goes onto the broken image.
    let off = simulate(&bad_ami_rollout("off"), "1h");
    assert!(!off.iter().any(|e| e["kind"] == "DisruptionPaused"));
    let drifts = drift_executions(&off);
    assert_eq!(drifts.len(), 8);
    assert!(
        drifts.iter().filter(|t| **t >= tripped).count() > 0,
        "{drifts:?}"
    );
    assert!(
        drifts.iter().all(|t| *t < 15.0 * 60.0),
        "all before the image was mended"
    );
}

/// Runs `simulate` over `scenario` (written to a temp file) and returns its events.
fn simulate(scenario: &str, until: &str) -> Vec<Value> {
    simulate_with(scenario, until, &[])
}

fn simulate_with(scenario: &str, until: &str, extra: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, scenario).expect("write scenario");
    let out = Command::new(BIN)
        .args(["simulate", &file.display().to_string(), "--until", until])
        .args(["--approve", "auto"])
        .args(extra)
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

const NODECLASS: &str = r#"---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
"#;

/// A pool whose nodes may not be removed while empty from 09:00 for 8 hours, read in
/// `zone` (UTC without one); four pods that go away at `scale_down`.
fn office_hours(zone: Option<&str>, start: &str, scale_down: &str) -> String {
    let annotations = zone
        .map(|z| format!("  annotations: {{karpenter-tui.dev/budget-timezone: {z}}}\n"))
        .unwrap_or_default();
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: office
{annotations}spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets:
      - {{nodes: "0", schedule: "0 9 * * *", duration: 8h}}
      - {{nodes: "100%"}}
{NODECLASS}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: web, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {{name: office-hours}}
spec:
  start: "{start}"
  cloud: {{instanceTypes: [m5.large, m5.xlarge, m5.2xlarge]}}
  timeline:
    - at: {scale_down}
      scale: {{deployment: web, replicas: 0}}
"#
    )
}

/// Seconds into the run of the first emptiness command.
fn first_emptiness(events: &[Value]) -> f64 {
    events
        .iter()
        .find(|e| e["kind"] == "DisruptionExecuted" && e["method"] == "emptiness")
        .and_then(|e| e["t"].as_f64())
        .unwrap_or_else(|| panic!("no emptiness ran: {events:#?}"))
}

#[test]
fn a_budget_zone_holds_empty_nodes_through_its_local_office_hours_on_both_sides_of_dst() {
    const HOUR: f64 = 3600.0;
    // The nodes go empty at 08:30 UTC, two hours after a 06:30 UTC start.
    // Saturday 2026-03-28, CET (UTC+1): 09:00-17:00 Berlin is 08:00-16:00 UTC.
    let before = simulate(
        &office_hours(Some("Europe/Berlin"), "2026-03-28T06:30:00Z", "2h"),
        "10h",
    );
    let t = first_emptiness(&before);
    assert!(
        (9.5 * HOUR..9.5 * HOUR + 120.0).contains(&t),
        "CET: the window closes at 16:00 UTC (9.5 h in), emptiness ran at {t} s"
    );
    // Sunday 2026-03-29, after the change to CEST (UTC+2): 07:00-15:00 UTC.
    let after = simulate(
        &office_hours(Some("Europe/Berlin"), "2026-03-29T06:30:00Z", "2h"),
        "10h",
    );
    let t = first_emptiness(&after);
    assert!(
        (8.5 * HOUR..8.5 * HOUR + 120.0).contains(&t),
        "CEST: the window closes at 15:00 UTC (8.5 h in), emptiness ran at {t} s"
    );
    // While held, the nodes say which budget holds them.
    assert!(
        after.iter().any(|e| e["kind"] == "DisruptionBlocked"
            && e["reason"].as_str().is_some_and(|r| r
                .contains("budget for Empty in office exhausted until 2026-03-29 15:00:00 UTC"))),
        "no budget block reported"
    );
    // Upstream's reading (UTC): 08:30 UTC is before the 09:00 UTC window; the nodes go at
    // once.
    let utc = simulate(&office_hours(None, "2026-03-29T06:30:00Z", "2h"), "10h");
    let t = first_emptiness(&utc);
    assert!(
        (2.0 * HOUR..2.0 * HOUR + 120.0).contains(&t),
        "UTC: emptiness ran at {t} s"
    );
}

/// One pool whose three 1-cpu pods fill an m5.2xlarge ($0.384/h); at 1m two go, and the
/// last one fits an m5.large ($0.096/h): a replace saving $0.288/h, 75%.
fn shrinking(annotations: &[(&str, &str)]) -> String {
    let annotations = if annotations.is_empty() {
        String::new()
    } else {
        let pairs: Vec<String> = annotations
            .iter()
            .map(|(k, v)| format!("{k}: \"{v}\""))
            .collect();
        format!("  annotations: {{{}}}\n", pairs.join(", "))
    };
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
{annotations}spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
{NODECLASS}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: web, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {{name: shrinking}}
spec:
  cloud: {{instanceTypes: [m5.large, m5.2xlarge]}}
  timeline:
    - at: 1m
      scale: {{deployment: web, replicas: 1}}
"#
    )
}

fn consolidations(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| {
            e["kind"] == "DisruptionProposed"
                && e["method"]
                    .as_str()
                    .is_some_and(|m| m.ends_with("consolidation"))
        })
        .collect()
}

fn blocked_for_savings(events: &[Value]) -> Option<String> {
    events
        .iter()
        .filter(|e| e["kind"] == "DisruptionBlocked")
        .filter_map(|e| e["reason"].as_str())
        .find(|r| r.contains("below the minimum savings"))
        .map(str::to_string)
}

#[test]
fn consolidation_below_the_pools_minimum_savings_is_not_proposed() {
    use karpenter_tui::api::pool_settings::{MIN_SAVINGS_PER_HOUR, MIN_SAVINGS_PERCENT};
    // Without a threshold: the replace is proposed, and what it saves is the figure the
    // thresholds below are set around.
    let free = simulate(&shrinking(&[]), "5m");
    let proposed = consolidations(&free);
    assert_eq!(proposed.len(), 1, "{proposed:#?}");
    let savings = proposed[0]["savings"].as_f64().expect("savings");
    assert!((savings - 0.288).abs() < 1e-6, "saves {savings}");

    // Just under what it saves: still proposed.
    let under = format!("{:.4}", savings - 0.001);
    let ok = simulate(&shrinking(&[(MIN_SAVINGS_PER_HOUR, &under)]), "5m");
    assert_eq!(consolidations(&ok).len(), 1);
    assert_eq!(blocked_for_savings(&ok), None);

    // Just over it, or a share over 75%: not proposed, and the node says why.
    let over = format!("{:.4}", savings + 0.001);
    for settings in [
        [(MIN_SAVINGS_PER_HOUR, over.as_str())],
        [(MIN_SAVINGS_PERCENT, "80")],
    ] {
        let held = simulate(&shrinking(&settings), "5m");
        assert!(consolidations(&held).is_empty(), "{settings:?}");
        let why = blocked_for_savings(&held).unwrap_or_else(|| panic!("{settings:?}: no block"));
        assert!(
            why.starts_with("saves $0.2880/h (75.0% of $0.3840/h), below the minimum savings of NodePool default ("),
            "{why}"
        );
    }
}

/// Ten nodes of pool `web` (one 3-cpu pod each, budget 10%: one at a time), repair on
/// unless `gates` says otherwise; at 10m a node monitoring agent reports KernelReady=False
/// on `faulty` nodes (toleration 30 minutes).
fn kernel_faults(faulty: usize, gates: &str, annotations: &str) -> String {
    let faults: String = (0..faulty)
        .map(|_| "    - {at: 10m, nodeCondition: {nodepool: web, condition: KernelReady}}\n")
        .collect();
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: web
  annotations: {{{annotations}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 1m
{NODECLASS}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 10
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: web, resources: {{requests: {{cpu: "3", memory: 4Gi}}}}}}]
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {{name: kernel-faults}}
spec:
  featureGates: "{gates}"
  cloud: {{instanceTypes: [m5.xlarge]}}
  timeline:
{faults}"#
    )
}

fn repairs(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "DisruptionExecuted" && e["method"] == "repair")
        .collect()
}

fn blocked_saying<'a>(events: &'a [Value], words: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "DisruptionBlocked")
        .filter(|e| e["reason"].as_str().is_some_and(|r| r.contains(words)))
        .collect()
}

#[test]
fn a_node_unhealthy_past_its_toleration_is_replaced_through_the_gate_unless_vetoed_or_widespread() {
    // One faulty node: replaced (not just deleted: its pod moves first) once KernelReady
    // has been False for 30 minutes, and only then.
    let one = simulate(&kernel_faults(1, "NodeRepair=true", ""), "1h");
    let done = repairs(&one);
    assert_eq!(done.len(), 1, "{done:#?}");
    let t = done[0]["t"].as_f64().unwrap();
    assert!(
        (39.5 * 60.0..42.0 * 60.0).contains(&t),
        "repaired at {t} s, the toleration ends 30 minutes after 10m"
    );
    assert_eq!(done[0]["reason"], "Unhealthy");
    assert!(
        one.iter().any(|e| e["kind"] == "NodeClaimCreated"
            && e["nodeclaim"]
                .as_str()
                .is_some_and(|n| n.contains("replacement"))),
        "the repair launches a replacement"
    );

    // Upstream's gate is off by default: nothing is repaired.
    let off = simulate(&kernel_faults(1, "", ""), "1h");
    assert!(repairs(&off).is_empty());

    // The pool's veto holds it, and says so.
    let vetoed = simulate(
        &kernel_faults(
            1,
            "NodeRepair=true",
            "karpenter-tui.dev/do-not-repair: \"true\"",
        ),
        "1h",
    );
    assert!(repairs(&vetoed).is_empty());
    assert!(
        !blocked_saying(
            &vetoed,
            "vetoed by karpenter-tui.dev/do-not-repair on NodePool web"
        )
        .is_empty()
    );

    // Three of ten unhealthy is more than 20% (2): a fault that wide is not the nodes'.
    let wide = simulate(&kernel_faults(3, "NodeRepair=true", ""), "1h");
    assert!(repairs(&wide).is_empty(), "{:#?}", repairs(&wide));
    assert!(
        !blocked_saying(&wide, "3 of NodePool web's 10 nodes are").is_empty(),
        "the cap is reported"
    );
    // Two of ten is within it: both are repaired, one at a time (budget 10%: 1).
    let two = simulate(&kernel_faults(2, "NodeRepair=true", ""), "1h");
    let done = repairs(&two);
    assert_eq!(done.len(), 2, "{done:#?}");
}

/// The bad-AMI rollout with two webhooks: one that fails its first two requests (a chat
/// service having a bad moment), and one that never answers. Every execution, the
/// breaker's trip and the operator's resume reach the first, in order, despite both; the
/// run is not held up by the one that hangs.
#[test]
fn the_breakers_trip_and_every_execution_reach_a_webhook_that_fails_at_first() {
    let hook = webhook::Webhook::start(2);
    let hole = webhook::Webhook::black_hole();
    let events = simulate_with(
        &bad_ami_rollout("3/5"),
        "30m",
        &["--notify", &hook.url, "--notify", &hole],
    );
    let expected: Vec<(String, String)> = events
        .iter()
        .filter(|e| {
            matches!(
                e["kind"].as_str(),
                Some(
                    "DisruptionExecuted"
                        | "DisruptionFailed"
                        | "DisruptionPaused"
                        | "DisruptionResumed"
                )
            )
        })
        .map(|e| (e["kind"].as_str().unwrap().to_string(), e["t"].to_string()))
        .collect();
    let got = hook.bodies();
    assert_eq!(hook.requests(), got.len() + 2, "two failures, retried");
    let kinds: Vec<(String, String)> = got
        .iter()
        .map(|d| {
            // The document's time is the simulated clock's.
            assert!(d["at"].as_str().is_some_and(|a| a.ends_with('Z')), "{d}");
            (d["kind"].as_str().unwrap().to_string(), String::new())
        })
        .collect();
    assert_eq!(
        kinds.iter().map(|k| &k.0).collect::<Vec<_>>(),
        expected.iter().map(|k| &k.0).collect::<Vec<_>>(),
        "{got:#?}"
    );
    let trip = got
        .iter()
        .find(|d| d["kind"] == "DisruptionPaused")
        .expect("the trip");
    let text = trip["text"].as_str().unwrap();
    assert!(
        text.starts_with("karpenter-tui: circuit breaker tripped, nodepool/web paused until an operator resumes it: 3 of the last"),
        "{text}"
    );
    assert_eq!(trip["event"]["actor"], "circuit-breaker");
    let executed = got
        .iter()
        .find(|d| d["kind"] == "DisruptionExecuted")
        .unwrap();
    assert!(
        executed["text"]
            .as_str()
            .unwrap()
            .contains("runs: drift (Drifted) of "),
        "{executed}"
    );
}

/// Three 1.5-cpu pods share an m5.2xlarge ($0.384/h; an m5.large, $0.096/h, holds one).
/// At 1m one goes: the other two fit no cheaper single node, but two m5.large ($0.192/h)
/// save half.
fn split_candidate(percent: Option<&str>) -> String {
    let split = percent
        .map(|p| format!("  splitConsolidation: {p}\n"))
        .unwrap_or_default();
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
{NODECLASS}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: web, resources: {{requests: {{cpu: 1500m, memory: 1Gi}}}}}}]
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {{name: split}}
spec:
{split}  cloud: {{instanceTypes: [m5.large, m5.2xlarge]}}
  timeline:
    - at: 1m
      scale: {{deployment: web, replicas: 2}}
"#
    )
}

#[test]
fn a_node_no_single_cheaper_node_can_replace_is_split_behind_the_flag_when_it_saves_enough() {
    let splits = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["kind"] == "DisruptionProposed" && e["method"] == "split consolidation")
            .cloned()
            .collect()
    };
    // Upstream's consolidation (no flag): nothing cheaper on one node, so nothing.
    let off = simulate(&split_candidate(None), "10m");
    assert!(splits(&off).is_empty());
    assert!(
        !off.iter()
            .any(|e| e["kind"] == "DisruptionExecuted" && e["reason"] == "Underutilized"),
        "upstream consolidates nothing here"
    );

    // Asking 20%: two m5.large replace the m5.2xlarge, saving $0.192/h (50%).
    let on = simulate(&split_candidate(Some("20")), "10m");
    let proposed = splits(&on);
    assert_eq!(proposed.len(), 1, "{proposed:#?}");
    let replacements = proposed[0]["replacement"].as_array().unwrap();
    assert_eq!(replacements.len(), 2, "{proposed:#?}");
    assert!((proposed[0]["savings"].as_f64().unwrap() - 0.192).abs() < 1e-6);
    assert!(
        on.iter()
            .any(|e| e["kind"] == "DisruptionCompleted" && e["id"] == proposed[0]["id"]),
        "the split runs to the end"
    );

    // Asking 60%: the node says why not.
    let strict = simulate(&split_candidate(Some("60")), "10m");
    assert!(splits(&strict).is_empty());
    assert!(
        !blocked_saying(
            &strict,
            "a split onto 2 nodes saves $0.1920/h (50.0% of $0.3840/h), under the 60.0% split consolidation asks"
        )
        .is_empty()
    );
}

/// The embedded cluster (no subcommand; event lines when not on a terminal) posts its
/// notifications too.
#[test]
fn the_embedded_cluster_notifies_as_the_controller_does() {
    let hook = webhook::Webhook::start(0);
    let mut child = Command::new(BIN)
        .args([
            "--scenario",
            "examples/bad-ami-rollout.yaml",
            "--speed",
            "100",
        ])
        .args(["--approve", "auto", "--notify", &hook.url])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary runs");
    let start = std::time::Instant::now();
    let executed = loop {
        if let Some(d) = hook
            .bodies()
            .into_iter()
            .find(|d| d["kind"] == "DisruptionExecuted")
        {
            break Some(d);
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    let executed = executed.expect("a drift execution notified within 60 s");
    assert!(
        executed["text"]
            .as_str()
            .unwrap()
            .contains("runs: drift (Drifted)"),
        "{executed}"
    );
}
