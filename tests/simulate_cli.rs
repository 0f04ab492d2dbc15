//! Acceptance tests of `karpenter-tui simulate`: the real binary over scenario files.
//!
//! - The demo (examples/demo.yaml) through `--until 10m` shows every event kind the
//!   contract in docs/simulate.md lists, in the documented line format.
//! - The same file and seed give byte-identical output.
//! - Bad scenario files fail before the run starts: exit 1, nothing on stdout, and every
//!   problem on stderr as `FILE:LINE: field.path: message`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

fn simulate(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .arg("simulate")
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn the_demo_shows_every_event_kind_in_the_documented_format() {
    let (code, stdout, stderr) = simulate(&["examples/demo.yaml", "--until", "10m"]);
    assert_eq!(code, Some(0), "{stderr}");
    let events = lines(&stdout);
    let mut last_t = 0.0;
    for e in &events {
        let t = e["t"]
            .as_f64()
            .unwrap_or_else(|| panic!("no numeric t: {e}"));
        assert!(t >= last_t, "time goes backwards at {e}");
        last_t = t;
        assert!(e["kind"].is_string(), "no kind: {e}");
    }
    let seen: BTreeSet<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let required = [
        "PodPending",
        "NodeClaimCreated",
        "NodeRegistered",
        "NodeInitialized",
        "PodNominated",
        "PodBound",
        "DisruptionProposed",
        "DisruptionApproved",
        "DisruptionRejected",
        "DisruptionWithdrawn",
        "DisruptionExecuted",
        "DisruptionBlocked",
        "NodeClaimDeleted",
        "PodEvicted",
        "Summary",
    ];
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|k| !seen.contains(k))
        .collect();
    assert!(missing.is_empty(), "missing event kinds: {missing:?}");

    // The fields the contract promises.
    let first = |kind: &str| {
        events
            .iter()
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    let created = first("NodeClaimCreated");
    for f in [
        "nodeclaim",
        "nodepool",
        "instanceType",
        "zone",
        "capacityType",
    ] {
        assert!(created[f].is_string(), "NodeClaimCreated.{f}: {created}");
    }
    assert!(
        created["instanceTypes"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
    assert!(created["price"].as_f64().is_some_and(|p| p > 0.0));
    let proposed = first("DisruptionProposed");
    assert!(proposed["id"].is_u64());
    for f in ["method", "reason", "policy"] {
        assert!(
            proposed[f].is_string(),
            "DisruptionProposed.{f}: {proposed}"
        );
    }
    assert!(proposed["candidates"][0]["node"].is_string(), "{proposed}");
    assert!(proposed["replacement"].is_array() && proposed["savings"].is_number());
    let blocked = first("DisruptionBlocked");
    assert!(blocked["node"].is_string() && blocked["reason"].is_string());
    assert!(
        events.iter().any(|e| e["kind"] == "DisruptionBlocked"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("do-not-disrupt"))),
        "the do-not-disrupt pod explains why its node stays"
    );
    assert!(
        events.iter().any(|e| e["kind"] == "DisruptionBlocked"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("budget for"))),
        "the budget window holds back disruption"
    );
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "DisruptionProposed" && e["reason"] == "Drifted"),
        "the NodePool edit causes drift"
    );
    let summary = events.last().expect("output");
    assert_eq!(summary["kind"], "Summary", "Summary comes last");
    assert_eq!(summary["t"].as_f64(), Some(600.0));
    for f in ["nodes", "pods", "podsPending", "nodeclaimsCreated"] {
        assert!(summary[f].is_u64(), "Summary.{f}: {summary}");
    }
    assert!(summary["costPerHour"].as_f64().is_some_and(|c| c > 0.0));
    assert!(summary["disruptions"].is_object());
}

#[test]
fn the_same_file_and_seed_give_the_same_output() {
    let a = simulate(&["examples/demo.yaml", "--until", "4m", "--seed", "11"]);
    let b = simulate(&["examples/demo.yaml", "--until", "4m", "--seed", "11"]);
    assert_eq!(a.0, Some(0), "{}", a.2);
    assert!(a.1 == b.1, "two runs with seed 11 differ");
    let c = simulate(&["examples/demo.yaml", "--until", "4m", "--seed", "12"]);
    assert!(a.1 != c.1, "the seed changes the run (names, addresses)");
}

#[test]
fn approve_auto_runs_every_decision_without_an_operator() {
    let (code, stdout, stderr) =
        simulate(&["examples/demo.yaml", "--until", "3m", "--approve", "auto"]);
    assert_eq!(code, Some(0), "{stderr}");
    let events = lines(&stdout);
    let proposed: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "DisruptionProposed")
        .collect();
    assert!(!proposed.is_empty());
    assert!(proposed.iter().all(|e| e["policy"] == "auto"));
    assert!(events.iter().any(|e| e["kind"] == "DisruptionExecuted"));
}

/// Writes a scenario file and returns its path.
fn scenario_file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write scenario");
    p.display().to_string()
}

/// An on-demand NodePool and its EC2NodeClass, the start of every scenario here.
macro_rules! pool_and_class {
    () => {
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
---
"#
    };
}

const HEADER: &str = concat!(
    pool_and_class!(),
    r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web}]
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {name: broken}
spec:
"#
);

#[test]
fn bad_scenarios_fail_before_the_run_with_file_line_and_field_path() {
    // The first line after the header.
    let first_spec_line = HEADER.lines().count() + 1;
    let dir = tempfile::tempdir().expect("tempdir");
    // (file body after the header, expected line offset from FIRST_SPEC_LINE, path, words)
    let cases: &[(&str, &str, usize, &str, &str)] = &[
        (
            "typo.yaml",
            "  timeline:\n    - at: 1m\n      scael: {deployment: web, replicas: 2}\n",
            2,
            "spec.timeline[0].scael",
            "unknown field `scael`",
        ),
        (
            "duration.yaml",
            "  timeline:\n    - at: 5 minutes\n      scale: {deployment: web, replicas: 2}\n",
            1,
            "spec.timeline[0].at",
            "",
        ),
        (
            "deployment.yaml",
            "  timeline:\n    - at: 1m\n      scale: {deployment: api, replicas: 2}\n",
            2,
            "spec.timeline[0].scale.deployment",
            "no Deployment default/api",
        ),
        (
            "operator.yaml",
            "  timeline:\n    - at: 1m\n      operator: {action: aprove}\n",
            2,
            "spec.timeline[0].operator.action",
            "expected approve, reject, pause or resume",
        ),
        (
            "patch.yaml",
            "  timeline:\n    - at: 1m\n      patchNodePool: {name: default, patch: {spec: {disruption: {budgets: [{nodes: lots}]}}}}\n",
            2,
            "spec.timeline[0].patchNodePool.patch",
            "invalid",
        ),
        (
            "gates.yaml",
            "  featureGates: SpotToSpotConsolidation=maybe\n",
            0,
            "spec.featureGates",
            "expected true or false",
        ),
        (
            "policy.yaml",
            "  minValuesPolicy: Loose\n",
            0,
            "spec.minValuesPolicy",
            "expected Strict or BestEffort",
        ),
        (
            "replicas.yaml",
            "  replicas:\n    web: {diurnal: {min: 9, max: 3}}\n",
            1,
            "spec.replicas.web.diurnal.min",
            "above max",
        ),
    ];
    let mut failures = Vec::new();
    for (name, body, offset, path, words) in cases {
        let file = scenario_file(dir.path(), name, &format!("{HEADER}{body}"));
        let (code, stdout, stderr) = simulate(&[&file]);
        let want = format!("{file}:{}: {path}: ", first_spec_line + offset);
        let ok = code == Some(1)
            && stdout.is_empty()
            && stderr
                .lines()
                .any(|l| l.starts_with(&want) && l.contains(words));
        if !ok {
            failures.push(format!(
                "{name}: want exit 1 and a line starting {want:?} containing {words:?}; got exit {code:?}, stderr:\n{stderr}"
            ));
        }
    }
    // An invalid NodePool names its own document's line.
    let bad_pool = HEADER.replace(
        "      nodeClassRef:",
        "      expireAfter: soon\n      nodeClassRef:",
    );
    let file = scenario_file(dir.path(), "pool.yaml", &format!("{bad_pool}  seed: 1\n"));
    let (code, _, stderr) = simulate(&[&file]);
    if code != Some(1) || !stderr.contains(&format!("{file}:8: spec.template.spec.expireAfter")) {
        failures.push(format!("pool.yaml: exit {code:?}, stderr:\n{stderr}"));
    }
    // Malformed YAML says where.
    let file = scenario_file(dir.path(), "syntax.yaml", "spec: [unclosed\n");
    let (code, _, stderr) = simulate(&[&file]);
    if code != Some(1) || !stderr.contains(&format!("{file}:2:1: malformed YAML: ")) {
        failures.push(format!("syntax.yaml: exit {code:?}, stderr:\n{stderr}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A scenario with pods arriving at 0 s, 3 s and 6 s (1.5 CPU each: two fit on the
/// m5.xlarge they prefer, three do not), and `extra` under the Scenario's spec.
fn arrivals(extra: &str) -> String {
    let rest = format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 10
              preference:
                matchExpressions: [{{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}}]
      containers: [{{name: web, image: web, resources: {{requests: {{cpu: 1500m}}}}}}]
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {{name: arrivals}}
spec:
  duration: 1m
  timeline:
    - at: 3s
      scale: {{deployment: web, replicas: 2}}
    - at: 6s
      scale: {{deployment: web, replicas: 3}}
{extra}"#
    );
    [pool_and_class!(), &rest].concat()
}

/// Upstream's `BATCH_IDLE_DURATION`, `BATCH_MAX_DURATION` and `PREFERENCE_POLICY`, as a
/// scenario sets them (the flags and environment of `run` and `controller` read the same
/// words through the same parser). Under the default 1 s idle window the first pod's
/// node launches within a second or two, and the third pod, which no longer fits there,
/// gets its own after it arrives; with a 5 s idle window the three pods are one batch,
/// launched together 5 s after the last. The pods prefer m5.xlarge: respected, every
/// NodeClaim allows that type alone; ignored, the NodeClaim may be any type that fits.
#[test]
fn batch_windows_and_the_preference_policy_change_what_is_launched_and_when() {
    let dir = tempfile::tempdir().expect("tempdir");
    let created = |name: &str, extra: &str| {
        let path = scenario_file(dir.path(), name, &arrivals(extra));
        let (code, stdout, stderr) = simulate(&[&path]);
        assert_eq!(code, Some(0), "{stderr}");
        lines(&stdout)
            .into_iter()
            .filter(|e| e["kind"] == "NodeClaimCreated")
            .collect::<Vec<_>>()
    };
    let allowed = |e: &Value| e["instanceTypes"].as_array().map_or(0, Vec::len);

    let default = created("default.yaml", "");
    assert_eq!(default.len(), 2, "{default:?}");
    assert!(default[0]["t"].as_f64().unwrap() < 3.0, "{default:?}");
    assert!(default[1]["t"].as_f64().unwrap() > 6.0, "{default:?}");
    assert!(
        default
            .iter()
            .all(|e| allowed(e) == 1 && e["instanceType"] == "m5.xlarge")
    );

    let batched = created(
        "batched.yaml",
        "  batchIdleDuration: 5s\n  batchMaxDuration: 30s\n",
    );
    assert!(!batched.is_empty());
    let t = batched[0]["t"].as_f64().unwrap();
    // 5 s without a new pending pod after the last arrival (a pod's status change
    // counts as an arrival, as upstream's batcher is triggered by pod events), within
    // the 30 s maximum.
    assert!(
        (11.0..=30.0).contains(&t),
        "closes 5 s after the 6 s arrival: {t}"
    );
    assert!(
        batched.iter().all(|e| e["t"] == batched[0]["t"]),
        "{batched:?}"
    );

    // The longest window caps the idle one: closed 4 s after the first arrival.
    let capped = created(
        "capped.yaml",
        "  batchIdleDuration: 5s\n  batchMaxDuration: 4s\n",
    );
    let t = capped[0]["t"].as_f64().unwrap();
    assert!((4.0..6.0).contains(&t), "{capped:?}");

    let ignored = created("ignored.yaml", "  preferencePolicy: Ignore\n");
    assert!(!ignored.is_empty());
    assert!(ignored.iter().all(|e| allowed(e) > 1), "{ignored:?}");

    // A value upstream would refuse is refused at its line, by its field.
    let path = scenario_file(
        dir.path(),
        "bad.yaml",
        &arrivals("  preferencePolicy: Prefer\n"),
    );
    let (code, stdout, stderr) = simulate(&[&path]);
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("spec.preferencePolicy") && stderr.contains("Respect or Ignore"),
        "{stderr}"
    );
}
