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
