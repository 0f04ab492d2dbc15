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
