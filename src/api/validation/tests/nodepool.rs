//! NodePool rules: each has edits that pass and edits that fail at an exact path.

use super::{all_bad, all_ok, assert_bad, assert_ok, check, edit, load_one};
use crate::api::manifest::load;
use crate::api::validation::validate_nodepool;

pub(super) const POOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  weight: 10
  limits:
    cpu: "1000"
    memory: 1000Gi
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: "10%"
  template:
    metadata:
      labels:
        team: web
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: node.kubernetes.io/instance-type
          operator: Exists
      expireAfter: 720h
"#;

#[test]
fn base_fixture_is_valid() {
    assert_eq!(check(POOL), vec![]);
}

#[test]
fn name() {
    all_ok(POOL, &[("name: default", "name: gpu-pool.v2")]);
    all_bad(
        POOL,
        &[
            (
                "metadata:\n  name: default",
                "metadata:\n  labels: {a: b}",
                "metadata.name",
                "required",
            ),
            ("name: default", "name: \"\"", "metadata.name", "required"),
            (
                "name: default",
                "name: Default_Pool",
                "metadata.name",
                "DNS subdomain",
            ),
        ],
    );
}

#[test]
fn weight() {
    all_ok(
        POOL,
        &[("weight: 10", "weight: 1"), ("weight: 10", "weight: 100")],
    );
    all_bad(
        POOL,
        &[
            (
                "weight: 10",
                "weight: 0",
                "spec.weight",
                "between 1 and 100, found 0",
            ),
            (
                "weight: 10",
                "weight: 101",
                "spec.weight",
                "between 1 and 100, found 101",
            ),
        ],
    );
}

#[test]
fn limits_are_quantities() {
    all_ok(
        POOL,
        &[
            ("cpu: \"1000\"", "cpu: 100m"),
            ("cpu: \"1000\"", "cpu: 1000"),
            ("cpu: \"1000\"", "nvidia.com/gpu: 8"),
        ],
    );
    all_bad(
        POOL,
        &[
            (
                "cpu: \"1000\"",
                "cpu: 4GB",
                "spec.limits[cpu]",
                "invalid quantity \"4GB\"",
            ),
            (
                "memory: 1000Gi",
                "memory: lots",
                "spec.limits[memory]",
                "invalid quantity",
            ),
        ],
    );
}

#[test]
fn budget_nodes() {
    let b = "- nodes: \"10%\"";
    all_ok(
        POOL,
        &[
            (b, "- nodes: \"5\""),
            (b, "- nodes: \"0\""),
            (b, "- nodes: \"100%\""),
        ],
    );
    let path = "spec.disruption.budgets[0].nodes";
    all_bad(
        POOL,
        &[
            (b, "- nodes: \"101%\"", path, "percentage from 0% to 100%"),
            (b, "- nodes: ten", path, "invalid nodes \"ten\""),
            (b, "- nodes: \"-1\"", path, "node count"),
        ],
    );
}

#[test]
fn budget_schedule_needs_duration_and_vice_versa() {
    let b = "- nodes: \"10%\"";
    let both = "- nodes: \"0\"\n        schedule: \"0 9 * * 1-5\"\n        duration: 8h";
    all_ok(POOL, &[(b, both)]);
    all_bad(
        POOL,
        &[
            (
                b,
                "- nodes: \"0\"\n        schedule: \"@daily\"",
                "spec.disruption.budgets[0].duration",
                "'schedule' must be set with 'duration'",
            ),
            (
                b,
                "- nodes: \"0\"\n        duration: 8h",
                "spec.disruption.budgets[0].schedule",
                "'schedule' must be set with 'duration'",
            ),
        ],
    );
}

#[test]
fn budget_schedule_is_cron() {
    let b = "- nodes: \"10%\"";
    let sched =
        |s: &str| format!("- nodes: \"0\"\n        schedule: \"{s}\"\n        duration: 1h");
    let ok: Vec<String> = [
        "@daily",
        "@midnight",
        "@hourly",
        "*/30 0-6 * JAN-MAR sat,sun",
        "0 0 1,15 * 1",
    ]
    .iter()
    .map(|s| sched(s))
    .collect();
    for s in &ok {
        assert_ok(POOL, b, s);
    }
    let path = "spec.disruption.budgets[0].schedule";
    for (s, msg) in [
        ("0 25 * * *", "hour field"),
        ("@every 1h", "unknown descriptor"),
        ("0 0 * *", "expected exactly 5 fields"),
        (
            "TZ=Europe/Berlin 0 0 * * *",
            "karpenter-tui.dev/budget-timezone",
        ),
    ] {
        assert_bad(
            POOL,
            b,
            &sched(s),
            path,
            &format!("invalid cron schedule {s:?}: "),
        );
        assert_bad(POOL, b, &sched(s), path, msg);
    }
}

#[test]
fn our_pool_settings_are_checked_by_validate_but_do_not_invalidate_the_pool() {
    let with = |annotations: &str| {
        edit(
            POOL,
            "  name: default\n",
            &format!("  name: default\n  annotations:\n{annotations}"),
        )
    };
    all_ok(
        &with(
            "    karpenter-tui.dev/budget-timezone: Europe/Berlin\n    karpenter-tui.dev/min-savings-percent: \"20\"\n    karpenter-tui.dev/min-savings-per-hour: \"0.05\"\n",
        ),
        &[],
    );
    assert_ok(
        &with("    karpenter-tui.dev/budget-timezone: America/New_York\n"),
        "",
        "",
    );
    let bad = with(
        "    karpenter-tui.dev/budget-timezone: Mars/Olympus\n    karpenter-tui.dev/min-savings-percent: \"lots\"\n",
    );
    assert_bad(
        &bad,
        "",
        "",
        "metadata.annotations[karpenter-tui.dev/budget-timezone]",
        "\"Mars/Olympus\" is not an IANA time zone",
    );
    assert_bad(
        &bad,
        "",
        "",
        "metadata.annotations[karpenter-tui.dev/min-savings-percent]",
        "not a number from 0 to 100",
    );
    // Upstream ignores these annotations, so a live pool is not marked invalid for them.
    let crate::api::manifest::Object::NodePool(np) = load_one(&bad) else {
        panic!("a NodePool")
    };
    assert_eq!(validate_nodepool(&np), vec![]);
}

#[test]
fn budget_duration_is_hours_and_minutes() {
    let b = "- nodes: \"10%\"";
    let dur =
        |d: &str| format!("- nodes: \"0\"\n        schedule: \"@daily\"\n        duration: {d}");
    for d in ["30m", "8h", "1h30m", "1h30m0s"] {
        assert_ok(POOL, b, &dur(d));
    }
    for d in ["30s", "1h30m30s", "90s"] {
        assert_bad(
            POOL,
            b,
            &dur(d),
            "spec.disruption.budgets[0].duration",
            "hours and minutes only",
        );
    }
}

#[test]
fn at_most_50_budgets() {
    let b = "      - nodes: \"10%\"\n";
    assert_ok(POOL, b, &b.repeat(50));
    assert_bad(
        POOL,
        b,
        &b.repeat(51),
        "spec.disruption.budgets",
        "at most 50 budgets are allowed, found 51",
    );
}

#[test]
fn budget_reasons_are_a_closed_set() {
    let ok = edit(
        POOL,
        "- nodes: \"10%\"",
        "- nodes: \"10%\"\n        reasons: [Underutilized, Empty, Drifted]",
    );
    assert_eq!(check(&ok), vec![]);
    let bad = edit(
        POOL,
        "- nodes: \"10%\"",
        "- nodes: \"10%\"\n        reasons: [Expired]",
    );
    let loaded = load("np.yaml", &bad);
    assert!(loaded.has_errors());
    assert_eq!(
        loaded.diagnostics[0].path,
        "spec.disruption.budgets[0].reasons[0]"
    );
}

#[test]
fn consolidate_after() {
    let c = "consolidateAfter: 1m";
    all_ok(
        POOL,
        &[
            (c, "consolidateAfter: Never"),
            (c, "consolidateAfter: 30s"),
            (c, "consolidateAfter: 1h30m"),
            (c, "consolidateAfter: 0s"),
        ],
    );
    // Without a disruption block upstream defaults consolidateAfter to 0s.
    let no_block = edit(
        POOL,
        "  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 1m\n    budgets:\n      - nodes: \"10%\"\n",
        "",
    );
    assert_eq!(check(&no_block), vec![]);
    let path = "spec.disruption.consolidateAfter";
    all_bad(
        POOL,
        &[
            (
                "    consolidateAfter: 1m\n",
                "",
                path,
                "required when spec.disruption is set",
            ),
            (
                c,
                "consolidateAfter: 1.5h",
                path,
                "invalid duration \"1.5h\"",
            ),
            (c, "consolidateAfter: 300ms", path, "or Never"),
        ],
    );
}

#[test]
fn expire_after_and_termination_grace_period() {
    let e = "expireAfter: 720h";
    let tgp = |d: &str| format!("expireAfter: 720h\n      terminationGracePeriod: {d}");
    all_ok(
        POOL,
        &[
            (e, "expireAfter: Never"),
            (e, "expireAfter: 24h30m"),
            (e, &tgp("48h")),
            (e, &tgp("90s")),
        ],
    );
    all_bad(
        POOL,
        &[
            (
                e,
                "expireAfter: 1.5h",
                "spec.template.spec.expireAfter",
                "invalid duration \"1.5h\"",
            ),
            (
                e,
                "expireAfter: 100ms",
                "spec.template.spec.expireAfter",
                "or Never",
            ),
            (
                e,
                &tgp("Never"),
                "spec.template.spec.terminationGracePeriod",
                "\"Never\" is not allowed",
            ),
            (
                e,
                &tgp("1.5h"),
                "spec.template.spec.terminationGracePeriod",
                "whole hours, minutes and seconds",
            ),
        ],
    );
}

#[test]
fn node_class_ref() {
    let base = "spec.template.spec.nodeClassRef";
    all_ok(POOL, &[("kind: EC2NodeClass", "kind: MyNodeClass")]);
    all_bad(
        POOL,
        &[
            (
                "group: karpenter.k8s.aws",
                "group: \"\"",
                &format!("{base}.group"),
                "group may not be empty",
            ),
            (
                "group: karpenter.k8s.aws",
                "group: karpenter.k8s.aws/v1",
                &format!("{base}.group"),
                "must not contain '/'",
            ),
            (
                "kind: EC2NodeClass",
                "kind: \"\"",
                &format!("{base}.kind"),
                "kind may not be empty",
            ),
            (
                "        name: default\n",
                "        name: \"\"\n",
                &format!("{base}.name"),
                "name may not be empty",
            ),
        ],
    );
}

#[test]
fn template_labels() {
    let l = "team: web";
    all_ok(
        POOL,
        &[
            (l, "example.com/team: web"),
            (l, "topology.kubernetes.io/zone: us-west-2a"),
            (l, "node.kubernetes.io/lifecycle: spot"),
            (l, "karpenter.sh/capacity-type: spot"),
            (l, "team: \"\""),
        ],
    );
    let at = |k: &str| format!("spec.template.metadata.labels[{k}]");
    all_bad(
        POOL,
        &[
            (
                l,
                "kubernetes.io/hostname: x",
                &at("kubernetes.io/hostname"),
                "label \"kubernetes.io/hostname\" is restricted",
            ),
            (
                l,
                "karpenter.sh/nodepool: x",
                &at("karpenter.sh/nodepool"),
                "label \"karpenter.sh/nodepool\" is restricted",
            ),
            (
                l,
                "karpenter.sh/team: x",
                &at("karpenter.sh/team"),
                "label domain \"karpenter.sh\" is restricted",
            ),
            (
                l,
                "kubernetes.io/team: x",
                &at("kubernetes.io/team"),
                "label domain \"kubernetes.io\" is restricted",
            ),
            (
                l,
                "k8s.io/team: x",
                &at("k8s.io/team"),
                "label domain \"k8s.io\" is restricted",
            ),
            (l, "a/b/c: x", &at("a/b/c"), "invalid label key"),
            (
                l,
                "team: web app",
                &at("team"),
                "invalid label value \"web app\"",
            ),
        ],
    );
    let labels = |n: usize| {
        (0..n)
            .map(|i| format!("team{i}: web"))
            .collect::<Vec<_>>()
            .join("\n        ")
    };
    assert_ok(POOL, l, &labels(100));
    assert_bad(
        POOL,
        l,
        &labels(101),
        "spec.template.metadata.labels",
        "at most 100 labels are allowed, found 101",
    );
}

#[test]
fn taints() {
    let e = "expireAfter: 720h";
    let with = |field: &str, items: &str| format!("expireAfter: 720h\n      {field}:\n{items}");
    let taint = |key: &str, value: &str, effect: &str| {
        format!(
            "        - key: \"{key}\"\n          value: \"{value}\"\n          effect: {effect}\n"
        )
    };
    let ok = format!(
        "{}      startupTaints:\n{}",
        with("taints", &taint("dedicated", "gpu", "NoSchedule")),
        taint("example.com/agent-not-ready", "", "NoExecute")
    );
    all_ok(
        POOL,
        &[
            (e, &ok),
            (
                e,
                &with(
                    "taints",
                    &(taint("a", "x", "NoSchedule") + &taint("a", "x", "NoExecute")),
                ),
            ),
        ],
    );
    let at = "spec.template.spec";
    all_bad(
        POOL,
        &[
            (
                e,
                &with("taints", &taint("", "x", "NoSchedule")),
                &format!("{at}.taints[0].key"),
                "taint key may not be empty",
            ),
            (
                e,
                &with("taints", &taint("bad key", "x", "NoSchedule")),
                &format!("{at}.taints[0].key"),
                "invalid taint key",
            ),
            (
                e,
                &with("startupTaints", &taint("ok", "bad value", "NoSchedule")),
                &format!("{at}.startupTaints[0].value"),
                "invalid taint value",
            ),
            (
                e,
                &format!(
                    "{}      startupTaints:\n{}",
                    with("taints", &taint("dedicated", "gpu", "NoSchedule")),
                    taint("dedicated", "other", "NoSchedule")
                ),
                &format!("{at}.startupTaints[0]"),
                "duplicate taint key/effect pair dedicated=NoSchedule: already set at spec.template.spec.taints[0]",
            ),
        ],
    );
}

#[test]
fn all_problems_are_reported_together() {
    let yaml = edit(
        &edit(POOL, "weight: 10", "weight: 0"),
        "cpu: \"1000\"",
        "cpu: x",
    );
    let crate::api::manifest::Object::NodePool(np) = load_one(&yaml) else {
        panic!("not a NodePool")
    };
    let paths: Vec<String> = validate_nodepool(&np).into_iter().map(|v| v.path).collect();
    assert_eq!(paths, vec!["spec.weight", "spec.limits[cpu]"]);
}
