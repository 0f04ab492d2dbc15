//! The controller reports every node it changes to the disruption planner, which then
//! fingerprints only those nodes. A missed report would let a stale verdict stand, so
//! these runs audit the reports at every pass against a full look and expect no miss. The
//! controller's kept index of the pods is audited at every full poll of a unit-test build
//! (and every answer it gives checked against the definitions).

use chrono::TimeDelta;

use super::{run_for, sim};

/// Runs `text` for `d` with every pass audited; the audits found nothing unreported and
/// the planner did refresh (the run changed the cluster).
fn audited(text: &str, d: TimeDelta) {
    let mut s = sim(text, "auto");
    s.controller.disruption.audit_changes_always();
    run_for(&mut s, d);
    let stats = s.controller.disruption.planner_stats();
    assert!(stats.simulated > 0, "{stats:?}");
    assert_eq!(stats.audit_misses, 0, "{stats:?}");
    // The kept index of the pods was audited at every full poll too.
    assert_eq!(s.controller.stats().pod_index_misses, 0);
    assert_eq!(s.controller.stats().record_index_misses, 0);
}

/// The demo: drift, expiry, spot, pools with limits, pods coming, going and moving.
#[test]
fn the_demo_reports_every_node_change() {
    audited(crate::cluster::scenario::DEMO, TimeDelta::hours(3));
}

/// The day's morning: hundreds of nodes launched and consolidated, thousands of pods
/// scaled up and down, deleted from the middle of the pod list.
#[test]
fn the_diurnal_day_reports_every_node_change() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/diurnal-1000.yaml"
    ))
    .expect("the example is there");
    audited(&text, TimeDelta::minutes(90));
}
