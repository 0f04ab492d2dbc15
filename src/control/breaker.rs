//! The circuit breaker (kubernetes-sigs/karpenter#2497): when a pool's replacements keep
//! failing (a bad image rolled out by drift, a broken NodeClass generation), the pool's
//! voluntary disruption pauses itself instead of replacing node after node.
//!
//! A replacement NodeClaim (one a disruption command created) fails when its command
//! fails while it is not initialized (it did not launch, was deleted, or did not
//! initialize within the orchestrator's timeout), or when its node goes NotReady within
//! [`WATCH`] of initializing (nodes of the new generation do not stay healthy). When N of
//! the pool's last M replacements failed (`karpenter-tui.dev/circuit-breaker: N/M`,
//! default 3/5, `off` to disable), the breaker trips once: the controller pauses the pool
//! with actor `circuit-breaker` and the evidence as the pause's note. It never resumes a
//! pool; an operator's resume starts its count afresh.
//!
//! Upstream has no such breaker; its node repair has a cluster-wide 20% cap, which is a
//! different thing (it stops repairs, not rollouts).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::pool_settings::{self, BreakerSettings};
use crate::engine::state::ClusterState;

use super::orchestration::{Execution, Phase, replacement_name};

/// How long after initializing a replacement's node must stay Ready to count as healthy.
pub const WATCH: TimeDelta = TimeDelta::minutes(10);

/// One replacement's fate.
#[derive(Clone, Debug, PartialEq)]
pub struct Fate {
    pub nodeclaim: String,
    pub decision: u64,
    /// Why it failed; `None` while it is healthy.
    pub failed: Option<String>,
}

/// The breaker tripped for a pool: pause it, with this evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct Trip {
    pub nodepool: String,
    pub evidence: String,
}

/// A replacement that initialized and is watched for [`WATCH`].
#[derive(Clone, Debug)]
struct Watched {
    nodepool: String,
    decision: u64,
    since: DateTime<Utc>,
}

/// Every pool's recent replacement fates.
#[derive(Debug, Default)]
pub struct Breaker {
    /// Per pool, newest last, at most [`BreakerSettings::MAX_WINDOW`].
    recent: BTreeMap<String, VecDeque<Fate>>,
    /// Replacements whose fate is recorded (their command finished or drains), by
    /// decision and position: looked up every round without building names.
    counted: BTreeSet<(u64, usize)>,
    watched: BTreeMap<String, Watched>,
    /// Pools tripped and not resumed since: a pool trips once.
    tripped: BTreeSet<String>,
}

impl Breaker {
    /// Reads the commands' progress and the replacements' nodes; returns the pools that
    /// tripped now.
    pub fn observe<'a>(
        &mut self,
        state: &ClusterState,
        executions: impl Iterator<Item = &'a Execution>,
        now: DateTime<Utc>,
    ) -> Vec<Trip> {
        let node = |claim: &str| state.nodes.iter().find(|n| n.nodeclaim == claim);
        let mut touched: BTreeSet<String> = BTreeSet::new();
        let mut live: BTreeSet<(u64, usize)> = BTreeSet::new();
        for exec in executions {
            for (k, r) in exec.command.replacements.iter().enumerate() {
                live.insert((exec.id, k));
                let failed = match &exec.phase {
                    Phase::WaitingForReplacements { .. } => continue,
                    Phase::Draining { .. } | Phase::Deleted => None,
                    Phase::Failed { reason } => Some(reason),
                };
                if self.counted.contains(&(exec.id, k)) {
                    continue;
                }
                let claim = replacement_name(&r.nodepool, exec.id, k);
                // A sibling may have initialized while another failed.
                let failed = failed
                    .filter(|_| !node(&claim).is_some_and(|n| n.initialized))
                    .cloned();
                if failed.is_none() {
                    self.watched.insert(
                        claim.clone(),
                        Watched {
                            nodepool: r.nodepool.clone(),
                            decision: exec.id,
                            since: now,
                        },
                    );
                }
                self.counted.insert((exec.id, k));
                self.record(
                    &r.nodepool,
                    Fate {
                        nodeclaim: claim,
                        decision: exec.id,
                        failed,
                    },
                );
                touched.insert(r.nodepool.clone());
            }
        }
        // Only what the orchestrator still remembers can come back.
        self.counted.retain(|c| live.contains(c));
        // The watched nodes, in one pass over the state (a few replacements are watched
        // at a time; a cluster has thousands of nodes).
        let mut found: BTreeMap<&str, &crate::engine::state::StateNode> = BTreeMap::new();
        if !self.watched.is_empty() {
            for n in &state.nodes {
                if self.watched.contains_key(n.nodeclaim.as_str()) {
                    found.insert(n.nodeclaim.as_str(), n);
                }
            }
        }
        let mut done = Vec::new();
        let mut died = Vec::new();
        for (claim, w) in &self.watched {
            match found.get(claim.as_str()) {
                Some(n) if n.initialized && !n.ready && !n.going_away() => {
                    let after = (now - w.since).num_seconds().max(0);
                    let why = format!(
                        "its node went NotReady {}m{:02}s after initializing",
                        after / 60,
                        after % 60
                    );
                    died.push((w.clone(), claim.clone(), why));
                    done.push(claim.clone());
                }
                Some(_) if now - w.since < WATCH => {}
                _ => done.push(claim.clone()),
            }
        }
        for (w, claim, why) in died {
            self.mark_failed(&w.nodepool, &claim, w.decision, why);
            touched.insert(w.nodepool);
        }
        for c in done {
            self.watched.remove(&c);
        }
        touched
            .into_iter()
            .filter_map(|pool| {
                let settings = state
                    .nodepools
                    .get(&pool)
                    .map(pool_settings::circuit_breaker)
                    .unwrap_or(Ok(Some(BreakerSettings::DEFAULT)))
                    // A setting that does not parse keeps the default, the safer reading.
                    .unwrap_or(Some(BreakerSettings::DEFAULT))?;
                self.check(&pool, settings)
            })
            .collect()
    }

    fn record(&mut self, pool: &str, fate: Fate) {
        let recent = self.recent.entry(pool.to_string()).or_default();
        recent.push_back(fate);
        while recent.len() > BreakerSettings::MAX_WINDOW {
            recent.pop_front();
        }
    }

    fn mark_failed(&mut self, pool: &str, claim: &str, decision: u64, why: String) {
        let found = self
            .recent
            .get_mut(pool)
            .and_then(|r| r.iter_mut().find(|f| f.nodeclaim == claim));
        match found {
            Some(f) => f.failed = Some(why),
            // Counted before an operator's resume cleared the pool: a new failure.
            None => {
                self.record(
                    pool,
                    Fate {
                        nodeclaim: claim.to_string(),
                        decision,
                        failed: Some(why),
                    },
                );
            }
        }
    }

    fn check(&mut self, pool: &str, settings: BreakerSettings) -> Option<Trip> {
        if self.tripped.contains(pool) {
            return None;
        }
        let recent = self.recent.get(pool)?;
        let last: Vec<&Fate> = recent.iter().rev().take(settings.window).collect();
        let failed: Vec<&Fate> = last
            .iter()
            .filter(|f| f.failed.is_some())
            .copied()
            .collect();
        if failed.len() < settings.failures {
            return None;
        }
        self.tripped.insert(pool.to_string());
        let evidence: Vec<String> = failed
            .iter()
            .rev()
            .map(|f| {
                format!(
                    "{} (#{}): {}",
                    f.nodeclaim,
                    f.decision,
                    f.failed.as_deref().unwrap_or_default()
                )
            })
            .collect();
        Some(Trip {
            nodepool: pool.to_string(),
            evidence: format!(
                "{} of the last {} replacements failed: {}",
                failed.len(),
                last.len(),
                evidence.join("; ")
            ),
        })
    }

    /// An operator resumed the pool: its count starts afresh and it may trip again.
    pub fn reset(&mut self, pool: &str) {
        self.recent.remove(pool);
        self.tripped.remove(pool);
    }

    /// The pool's recent fates, oldest first (for the console and tests).
    pub fn fates(&self, pool: &str) -> impl Iterator<Item = &Fate> {
        self.recent.get(pool).into_iter().flatten()
    }
}
