//! The simulated cluster's pod index against the plain way: after every round of a
//! scenario, the index kept up to date change by change equals one rebuilt from every
//! pod, and a fixed-seed run reports what it reported before the index existed.

use chrono::TimeDelta;

use super::index::PodIndex;
use crate::cluster::scenario;
use crate::simulation::{Options, Pace, Simulation};

fn check_every_round(name: &str, text: &str, until: TimeDelta, approval: Option<Vec<String>>) {
    let scenario = scenario::parse(name, text).expect("the example parses");
    let options = Options {
        approval,
        ..Options::default()
    };
    let mut sim = Simulation::new(&scenario, &options, Pace::Virtual).expect("builds");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let end = sim.start() + until;
    let mut rounds = 0;
    rt.block_on(async {
        loop {
            sim.step().await;
            rounds += 1;
            let now = sim.now();
            let (cluster, _) = sim.controller.parts_mut();
            assert_eq!(
                cluster.index,
                PodIndex::rebuilt(cluster.pods.values()),
                "{name}: the kept index differs from a rebuilt one at {now}"
            );
            let next = sim.next_time();
            if next > end {
                break;
            }
            sim.wait_until(next).await;
        }
    });
    assert!(rounds > 10, "{name}: {rounds} rounds");
}

/// The demo: Jobs that finish, a spot interruption, a node whose kubelet goes away, pods
/// evicted by consolidation.
#[test]
fn the_kept_pod_index_equals_a_rebuilt_one_through_the_demo() {
    check_every_round(
        "demo",
        scenario::DEMO,
        TimeDelta::minutes(6),
        Some(vec!["auto".into()]),
    );
}

/// The 1,000-node day's first minutes: thousands of pods created, bound, and moved by
/// consolidation.
#[test]
fn the_kept_pod_index_equals_a_rebuilt_one_through_the_diurnal_day() {
    check_every_round(
        "diurnal-1000",
        scenario::DIURNAL_1000,
        TimeDelta::minutes(4),
        Some(vec!["auto".into()]),
    );
}

/// The first ten minutes of `simulate examples/diurnal-1000.yaml --approve auto`, as the
/// straightforward stand-ins (rebuilding their input from every pod each round) reported
/// them: indexing must not change what the simulation does.
#[test]
fn ten_minutes_of_the_diurnal_day_report_what_they_did_before_the_index() {
    let scenario = scenario::parse("diurnal-1000", scenario::DIURNAL_1000).expect("parses");
    let options = Options {
        approval: Some(vec!["auto".into()]),
        ..Options::default()
    };
    let mut sim = Simulation::new(&scenario, &options, Pace::Virtual).expect("builds");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let end = sim.start() + TimeDelta::minutes(10);
    let mut events = 0usize;
    rt.block_on(sim.run_until(end, |_| events += 1));
    let summary = serde_json::to_value(sim.summary()).expect("serializes");
    let expected = serde_json::json!({
        "t": 600.0, "kind": "Summary", "nodes": 298, "pods": 3026, "podsPending": 0,
        "costPerHour": 59.042, "cost": 9.8,
        "disruptions": {"single-node consolidation": 9},
        "nodeclaimsCreated": 306, "nodeclaimsDeleted": 8, "evictions": 78,
        "evictionsByReason": {"underutilized": 78}
    });
    assert_eq!(summary, expected);
    assert_eq!(events, EVENTS_IN_TEN_MINUTES);
}

/// Events `simulate` printed for those ten minutes before the index (the summary line
/// aside).
const EVENTS_IN_TEN_MINUTES: usize = 13_951;
