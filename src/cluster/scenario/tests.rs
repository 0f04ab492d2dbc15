//! Scenario files: the demo parses; every kind of mistake is reported with its line.

use super::*;

#[test]
fn the_demo_parses() {
    let s = parse("demo", DEMO).unwrap_or_else(|e| {
        panic!(
            "{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    assert_eq!(s.name, "demo");
    assert_eq!(s.nodepools.len(), 3);
    assert!(s.timeline.len() > 5);
}

#[test]
fn upstreams_settings_are_scenario_settings() {
    let head = "kind: Scenario\nmetadata:\n  name: demo\nspec:\n";
    assert!(DEMO.contains(head));
    let text = DEMO.replacen(
        head,
        &format!(
            "{head}  featureGates: SpotToSpotConsolidation=true\n  minValuesPolicy: BestEffort\n"
        ),
        1,
    );
    let s = parse("demo", &text).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(s.features.spot_to_spot);
    assert_eq!(
        s.features.min_values_policy,
        crate::engine::scheduling::MinValuesPolicy::BestEffort
    );
    assert_eq!(
        parse("demo", DEMO).unwrap().features,
        crate::engine::features::Features::default()
    );
}

/// `spec.start: "+262142-12-31T23:59:59Z"` parsed, then panicked with "`DateTime +
/// TimeDelta` overflowed" when the run added its duration; it is now an error at its line.
#[test]
fn a_start_beyond_kubernetes_times_is_an_error_at_its_line() {
    let line = "  start: \"2026-01-05T09:00:00Z\"\n";
    assert!(DEMO.contains(line));
    let at = DEMO[..DEMO.find(line).unwrap()].lines().count() + 1;
    for start in [
        "+262142-12-31T23:59:59Z",
        "1969-12-31T23:59:59Z",
        "-0001-01-01T00:00:00Z",
    ] {
        let text = DEMO.replacen(line, &format!("  start: \"{start}\"\n"), 1);
        let errors = parse("demo.yaml", &text).expect_err(start);
        let e = errors
            .iter()
            .map(|e| e.to_string())
            .find(|e| e.contains("spec.start"))
            .unwrap_or_else(|| panic!("{start}: {errors:?}"));
        assert!(e.contains(&format!("demo.yaml:{at}:")), "{e}");
        assert!(e.contains("outside the years 1970 to 9999"), "{e}");
    }
    let text = DEMO.replacen(line, "  start: \"9999-12-31T00:00:00Z\"\n", 1);
    let s = parse("demo.yaml", &text).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(s.start.checked_add_signed(s.duration).is_some());
}

/// A NodeClaim document is a node running at the start (an exported cluster's), read by
/// the labels its launch gave it; one that cannot run here is named at its line.
#[test]
fn nodeclaim_documents_are_running_nodes_checked_at_their_lines() {
    let claim = |name: &str, labels: &str| {
        format!(
            "---\napiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {name}\n  labels:\n{labels}spec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements:\n    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}\n"
        )
    };
    let labels = |pool: &str, it: &str, zone: &str, ct: &str| {
        format!(
            "    karpenter.sh/nodepool: {pool}\n    node.kubernetes.io/instance-type: {it}\n    topology.kubernetes.io/zone: {zone}\n    karpenter.sh/capacity-type: {ct}\n"
        )
    };
    let good = format!(
        "{DEMO}{}{}",
        claim(
            "general-aaaaa",
            &labels("general", "m5.large", "us-east-1a", "on-demand")
        ),
        claim(
            "spot-bbbbb",
            &labels("spot", "c5.xlarge", "us-east-1b", "spot")
        ),
    );
    let s = parse("demo", &good).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        s.nodes,
        [
            RunningNode {
                name: "general-aaaaa".into(),
                nodepool: "general".into(),
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: crate::engine::catalog::CapacityType::OnDemand,
            },
            RunningNode {
                name: "spot-bbbbb".into(),
                nodepool: "spot".into(),
                instance_type: "c5.xlarge".into(),
                zone: "us-east-1b".into(),
                capacity_type: crate::engine::catalog::CapacityType::Spot,
            },
        ]
    );
    let bad = format!(
        "{DEMO}{}{}{}{}{}",
        claim("a", &labels("api", "m5.large", "us-east-1a", "on-demand")),
        claim(
            "b",
            &labels("general", "m5.huge", "us-east-1a", "on-demand")
        ),
        claim(
            "c",
            &labels("general", "m5.large", "us-east-1a", "reserved")
        ),
        claim("d", "    karpenter.sh/nodepool: general\n"),
        claim(
            "a",
            &labels("general", "m5.large", "us-east-1a", "on-demand")
        ),
    );
    let errors: Vec<String> = parse("demo", &bad)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    // The line of `needle` in the document of the nth NodeClaim called `name`.
    let line_of = |name: &str, nth: usize, needle: &str| {
        let doc = bad
            .match_indices(&format!("  name: {name}\n"))
            .nth(nth)
            .unwrap()
            .0;
        let at = doc + bad[doc..].find(needle).unwrap();
        bad[..at].lines().count()
    };
    for (name, nth, needle, says) in [
        (
            "a",
            0,
            "nodepool: api",
            "metadata.labels.karpenter.sh/nodepool: no NodePool \"api\"",
        ),
        (
            "b",
            0,
            "instance-type: m5.huge",
            "metadata.labels.node.kubernetes.io/instance-type: no on-demand m5.huge in us-east-1a",
        ),
        (
            "c",
            0,
            "capacity-type: reserved",
            "metadata.labels.karpenter.sh/capacity-type: \"reserved\": a running node of a scenario is on-demand or spot",
        ),
        (
            "d",
            0,
            "labels:",
            "metadata.labels.node.kubernetes.io/instance-type: a NodeClaim in a scenario is a node running at the start",
        ),
        ("a", 1, "name: a", "metadata.name: a second NodeClaim \"a\""),
    ] {
        let want = format!("demo:{}: {says}", line_of(name, nth, needle));
        assert!(
            errors.iter().any(|e| e.starts_with(&want)),
            "{want:?} not in {errors:#?}"
        );
    }
}
