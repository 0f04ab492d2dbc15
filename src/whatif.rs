//! What-if runs: the embedded world forked at an instant into two independent copies,
//! one left as it is and one with a NodePool edit, each played ahead on its own virtual
//! clock, and their figures compared (`crate::control::whatif` holds the question and
//! the answer). The console's `:whatif` forks the simulation it shows; the `whatif`
//! subcommand plays a scenario file (one written by `export` too) to an instant first.
//!
//! Both copies restart the controller at the fork (nothing it held in memory carries
//! over: pending decisions, timers) and approve every decision, so the figures compare
//! what the autoscaler would do, not what an operator would still have to approve.
//! Pauses are in the cluster, so they hold in both.

use chrono::{DateTime, TimeDelta, Utc};

use crate::cluster::scenario::timeline::patch_nodepool;
use crate::control::whatif::{Comparison, Figures, Query};
use crate::simulation::Simulation;

/// The two copies of the world, ready to run.
pub struct Forks {
    unchanged: Simulation,
    edited: Simulation,
    query: Query,
    from: DateTime<Utc>,
    start: DateTime<Utc>,
}

impl Forks {
    /// Forks `sim` now. Fails, before anything runs, on an edit that does not apply: no
    /// such NodePool, or a patched NodePool the Karpenter v1 rules refuse.
    pub fn prepare(sim: &Simulation, query: &Query) -> Result<Forks, String> {
        let edit = &query.edit;
        let pool = sim
            .controller
            .parts()
            .0
            .nodepool(&edit.nodepool)
            .ok_or_else(|| format!("no NodePool {:?} in this cluster", edit.nodepool))?;
        let patched = patch_nodepool(pool, &edit.patch)
            .map_err(|e| format!("NodePool {}: {e}", edit.nodepool))?;
        let unchanged = sim.fork();
        let mut edited = sim.fork();
        edited.controller.parts_mut().0.apply_nodepool(patched);
        Ok(Forks {
            from: unchanged.now(),
            start: sim.start(),
            unchanged,
            edited,
            query: query.clone(),
        })
    }

    /// Plays both copies `horizon` ahead, each on a thread of its own with its own
    /// runtime (they share nothing; the caller's thread may be inside a runtime), and
    /// compares them. Blocks: call it off the console's and the live simulation's
    /// threads.
    pub fn run(self) -> Comparison {
        let until = self.from + self.query.horizon;
        let (unchanged, edited) = std::thread::scope(|s| {
            let a = s.spawn(|| play(self.unchanged, until));
            let b = s.spawn(|| play(self.edited, until));
            let join = |h: std::thread::ScopedJoinHandle<'_, Figures>| {
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            };
            (join(a), join(b))
        });
        Comparison {
            from_seconds: seconds(self.from - self.start),
            horizon_seconds: seconds(self.query.horizon),
            nodepool: self.query.edit.nodepool.clone(),
            edit: self.query.edit.text.clone(),
            unchanged,
            edited,
        }
    }
}

fn seconds(d: TimeDelta) -> f64 {
    d.num_milliseconds() as f64 / 1000.0
}

/// Pods waiting for a node now (DaemonSet pods too: a node without its agent is not
/// ready for work either).
fn pending(sim: &Simulation) -> usize {
    sim.controller
        .state()
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .count()
}

/// Runs one copy to `until` on a runtime of its own, integrating pending pods over time.
fn play(mut sim: Simulation, until: DateTime<Utc>) -> Figures {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds (no I/O driver needed beyond the timer)");
    let mut pod_seconds = 0.0;
    let mut peak = 0;
    rt.block_on(async {
        loop {
            sim.step().await;
            let now = sim.now();
            let waiting = pending(&sim);
            peak = peak.max(waiting);
            let next = sim.next_time();
            let to = next.min(until);
            pod_seconds += waiting as f64 * seconds(to - now).max(0.0);
            if next > until {
                break;
            }
            sim.wait_until(next).await;
        }
        sim.wait_until(until).await;
        sim.step().await;
    });
    let state = sim.controller.state();
    let stats = sim.controller.stats();
    let waiting = pending(&sim);
    Figures {
        cost: (stats.cost * 100.0).round() / 100.0,
        // Rounded as `simulate`'s summary rounds them; `+ 0.0` turns an empty sum's -0.0
        // into 0.
        cost_per_hour: (state.nodes.iter().map(|n| n.price).sum::<f64>() * 10_000.0).round()
            / 10_000.0
            + 0.0,
        nodes: state.nodes.iter().filter(|n| !n.deleting).count(),
        launched: stats.nodeclaims_created,
        deleted: stats.nodeclaims_deleted,
        disruptions: stats.disruptions.clone(),
        evictions: stats.evictions,
        pending_pod_hours: (pod_seconds / 3600.0 * 10_000.0).round() / 10_000.0,
        peak_pending: peak.max(waiting),
        pending_at_end: waiting,
    }
}
