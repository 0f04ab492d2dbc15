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
