//! `bench simulate`: what a simulated day costs. The scenario (by default the 1,000-node
//! day, examples/diurnal-1000.yaml) runs flat out on a virtual clock with every
//! disruption auto-approved, as `simulate --approve auto` runs it, and the figures are
//! the simulated time covered, the wall time and the process's CPU time (the machine
//! may be shared: CPU time is the figure that compares across runs), the churn, and how
//! much of it the disruption passes took.

use std::time::Instant;

use chrono::TimeDelta;
use serde::Serialize;

use crate::cluster::scenario::Scenario;
use crate::simulation::{Options, Pace, Simulation};

/// The figures of one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figures {
    /// Simulated seconds covered.
    pub simulated_seconds: f64,
    pub wall_seconds: f64,
    /// User plus system CPU time of the whole process during the run, when the OS
    /// reports it (Linux: /proc/self/stat).
    pub cpu_seconds: Option<f64>,
    /// Controller rounds (one per moment the virtual clock stopped at).
    pub rounds: u64,
    /// Snapshots published to a watching console (only with `watch`: a run without a
    /// console publishes none, as `simulate` does).
    pub snapshots: u64,
    pub nodeclaims_created: usize,
    pub nodeclaims_deleted: usize,
    /// Nodes at the end.
    pub nodes: usize,
    pub evictions: usize,
    /// Dollars spent (price × time), as the run summary reports it.
    pub cost: f64,
    /// Full disruption passes, and the wall time inside them: on the single thread the
    /// simulation runs on, their share of the run's wall time is their share of its CPU.
    pub disruption_passes: usize,
    pub disruption_seconds: f64,
    pub provisioning_rounds: usize,
    pub provisioning_seconds: f64,
    /// Simulations the disruption passes ran, and verdicts they carried over from an
    /// earlier pass instead (what incremental disruption saves).
    pub simulations: usize,
    pub carried: usize,
    /// Planner audits that found a node change the controller had not reported (0
    /// unless change tracking has a hole).
    pub audit_misses: usize,
    /// Audits that found the controller's kept index of the pods wrong (0 expected).
    pub pod_index_misses: usize,
    /// Audits that found the registry's kept set of NodeClaims with records wrong (0
    /// expected).
    pub record_index_misses: usize,
}

impl Figures {
    /// The disruption passes' share of the run (0 to 1).
    pub fn disruption_share(&self) -> f64 {
        if self.wall_seconds > 0.0 {
            (self.disruption_seconds / self.wall_seconds).min(1.0)
        } else {
            0.0
        }
    }
}

/// User plus system CPU seconds this process has used, from /proc/self/stat (fields 14
/// and 15, in the kernel's USER_HZ ticks, 100 a second on every Linux architecture this
/// builds for). None where there is no /proc.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the
    // last ')'. What follows starts at field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    const USER_HZ: f64 = 100.0;
    Some((utime + stime) as f64 / USER_HZ)
}

/// Runs `scenario` for `until` of simulated time with every disruption auto-approved.
/// With `watch`, a receiver of snapshots is held as a console would, so the controller
/// publishes (and the figure counts) them. Fails only on what `Simulation::new` refuses.
pub fn run(scenario: &Scenario, until: TimeDelta, watch: bool) -> Result<Figures, String> {
    let options = Options {
        approval: Some(vec!["auto".into()]),
        ..Options::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let cpu_before = process_cpu_seconds();
    let began = Instant::now();
    let mut sim = Simulation::new(scenario, &options, Pace::Virtual)?;
    let mut receiver = watch.then(|| sim.controller.subscribe());
    let end = sim.start() + until;
    let mut rounds = 0u64;
    let mut snapshots = 0u64;
    rt.block_on(async {
        loop {
            sim.step().await;
            rounds += 1;
            if let Some(r) = receiver.as_mut()
                && r.has_changed().unwrap_or(false)
            {
                r.mark_unchanged();
                snapshots += 1;
            }
            let next = sim.next_time();
            if next > end {
                break;
            }
            sim.wait_until(next).await;
        }
        sim.wait_until(end).await;
        sim.step().await;
        rounds += 1;
    });
    let wall_seconds = began.elapsed().as_secs_f64();
    let cpu_seconds = match (cpu_before, process_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let stats = sim.controller.stats();
    let planner = sim.controller.disruption.planner_stats();
    let nodes = sim
        .controller
        .state()
        .nodes
        .iter()
        .filter(|n| !n.deleting)
        .count();
    Ok(Figures {
        simulated_seconds: (sim.now() - sim.start()).num_milliseconds() as f64 / 1000.0,
        wall_seconds,
        cpu_seconds,
        rounds,
        snapshots,
        nodeclaims_created: stats.nodeclaims_created,
        nodeclaims_deleted: stats.nodeclaims_deleted,
        nodes,
        evictions: stats.evictions,
        cost: (stats.cost * 100.0).round() / 100.0,
        disruption_passes: stats.passes,
        disruption_seconds: stats.pass_seconds,
        provisioning_rounds: stats.provisioning_rounds,
        provisioning_seconds: stats.provisioning_seconds,
        simulations: planner.simulated,
        carried: planner.carried,
        audit_misses: planner.audit_misses,
        pod_index_misses: stats.pod_index_misses,
        record_index_misses: stats.record_index_misses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_reports_its_cpu_time_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(process_cpu_seconds().is_some_and(|s| s >= 0.0));
        }
    }

    /// A short window of the demo: the figures describe the run (time covered, churn)
    /// and a watching console hears snapshots.
    #[test]
    fn a_short_run_covers_the_window_and_counts_its_churn() {
        let scenario = crate::cluster::scenario::parse("demo", crate::cluster::scenario::DEMO)
            .expect("the built-in demo parses");
        let f = run(&scenario, TimeDelta::seconds(90), true).expect("runs");
        assert_eq!(f.simulated_seconds, 90.0);
        assert!(f.nodeclaims_created > 0, "{f:?}");
        assert!(f.snapshots > 0 && f.rounds >= f.snapshots, "{f:?}");
    }
}
