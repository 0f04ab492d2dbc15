//! The budget-aware queue: for each NodePool and disruption reason, how many nodes the
//! budget allows now, how many are in flight and how many wait, and for each waiting
//! decision whether it would run if approved now or would not fit in the budget. The
//! overview's queue lines and its "to save" figure come from here, and the Disruption view
//! can show the same verdicts through [`Queue::state`].
//!
//! The budget's limit comes from the snapshot's [`PoolBudgets`]; what already holds it is
//! counted from the state (nodes NotReady, being deleted, tainted for disruption or in a
//! command in flight), not from the pass's `disrupting`, which also counts the waiting
//! decisions themselves and may predate the newest of them. Waiting decisions then take
//! the rest in queue order (oldest first), as the controller would run them.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::api::nodepool::DisruptionReason;
use crate::control::approvals::Decision;
use crate::control::controller::Snapshot;
use crate::engine::approval::{Policy, Scope};
use crate::engine::disruption::PoolBudgets;
use crate::tui::widgets::table::Tone;

/// One pool and reason: the budget and what stands against it.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub nodepool: String,
    pub reason: DisruptionReason,
    /// Nodes the budget lets this reason disrupt besides what is already disrupting
    /// (None: no active budget limits it).
    pub allowed: Option<usize>,
    /// Nodes of this pool in commands of this reason in flight.
    pub in_flight: usize,
    /// Nodes of this pool in decisions of this reason waiting (for an operator, the
    /// validation delay, or a pause to lift).
    pub waiting: usize,
    /// Of `waiting`, the nodes of decisions that would not fit in the budget now.
    pub over: usize,
}

impl Lane {
    /// "allowed 1 · in flight 0 · waiting 3".
    pub fn figures(&self) -> String {
        let allowed = match self.allowed {
            Some(n) => n.to_string(),
            None => "any".into(),
        };
        format!(
            "allowed {allowed} · in flight {} · waiting {}",
            self.in_flight, self.waiting
        )
    }
}

/// Whether a waiting decision would run now.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// It fits in every budget it takes from (or takes from none).
    Fits,
    /// A pause covers it: it runs when the pause lifts.
    Paused(Scope),
    /// The decisions ahead of it and the commands in flight leave too little of this
    /// pool's budget for its reason.
    OverBudget {
        nodepool: String,
        reason: DisruptionReason,
        /// What the budget allows in all (besides what is already disrupting).
        allowed: usize,
    },
}

/// The queue of one snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Queue {
    /// Pools and reasons with something in flight or waiting, by pool then reason.
    pub lanes: Vec<Lane>,
    verdicts: HashMap<u64, Verdict>,
    /// USD per hour the decisions that would run now save.
    pub runnable_savings: f64,
    /// USD per hour every waiting decision saves, runnable or not.
    pub waiting_savings: f64,
}

/// Nodes of each pool that already hold budget: NotReady, deleting, tainted for
/// disruption, or a candidate of a command in flight (as the budget pass counts them,
/// without the waiting decisions).
fn disrupting(s: &Snapshot) -> HashMap<&str, usize> {
    let in_flight: HashSet<&str> = s
        .running
        .iter()
        .flat_map(|e| e.command.nodeclaims())
        .collect();
    let mut out: HashMap<&str, usize> = HashMap::new();
    for n in &s.state.nodes {
        if !n.initialized {
            continue;
        }
        if !n.ready || n.going_away() || in_flight.contains(n.nodeclaim.as_str()) {
            *out.entry(n.nodepool.as_str()).or_default() += 1;
        }
    }
    out
}

fn limit(budgets: &[PoolBudgets], pool: &str, reason: DisruptionReason) -> Option<usize> {
    budgets
        .iter()
        .find(|b| b.nodepool == pool)
        .and_then(|b| b.reason(reason).limit)
}

impl Queue {
    pub fn build(s: &Snapshot) -> Queue {
        let held = disrupting(s);
        let mut lanes: BTreeMap<(String, usize), Lane> = BTreeMap::new();
        let rank = |r: DisruptionReason| DisruptionReason::ALL.iter().position(|x| *x == r);
        let mut lane = |pool: &str, reason: DisruptionReason| -> (String, usize) {
            let key = (pool.to_string(), rank(reason).unwrap_or(0));
            lanes.entry(key.clone()).or_insert_with(|| Lane {
                nodepool: pool.to_string(),
                reason,
                allowed: limit(&s.budgets, pool, reason)
                    .map(|l| l.saturating_sub(held.get(pool).copied().unwrap_or(0))),
                in_flight: 0,
                waiting: 0,
                over: 0,
            });
            key
        };
        let mut keys = Vec::new();
        for e in &s.running {
            if let Some(reason) = e.command.reason.budget_reason() {
                for (pool, n) in &e.command.budget {
                    keys.push((lane(pool, reason), *n, true));
                }
            }
        }
        for d in &s.pending {
            if let Some(reason) = d.command.reason.budget_reason() {
                for (pool, n) in &d.command.budget {
                    keys.push((lane(pool, reason), *n, false));
                }
            }
        }
        for (key, n, running) in keys {
            let l = lanes.get_mut(&key).expect("lane made above");
            if running {
                l.in_flight += n;
            } else {
                l.waiting += n;
            }
        }

        // Waiting decisions take what is left, oldest first.
        let mut left: HashMap<(String, usize), Option<usize>> =
            lanes.iter().map(|(k, l)| (k.clone(), l.allowed)).collect();
        let mut q = Queue::default();
        for d in &s.pending {
            q.waiting_savings += d.command.savings_per_hour;
            let verdict = match s.pauses.iter().find(|sc| sc.covers(&d.command)) {
                Some(scope) => Verdict::Paused(scope.clone()),
                None => match d.command.reason.budget_reason() {
                    None => Verdict::Fits,
                    Some(reason) => {
                        let r = rank(reason).unwrap_or(0);
                        let short = d.command.budget.iter().find(|(pool, n)| {
                            left.get(&((*pool).clone(), r))
                                .copied()
                                .flatten()
                                .is_some_and(|room| room < **n)
                        });
                        match short {
                            Some((pool, _)) => Verdict::OverBudget {
                                nodepool: pool.clone(),
                                reason,
                                allowed: lanes[&(pool.clone(), r)].allowed.unwrap_or(0),
                            },
                            None => {
                                for (pool, n) in &d.command.budget {
                                    if let Some(Some(room)) = left.get_mut(&(pool.clone(), r)) {
                                        *room -= n;
                                    }
                                }
                                Verdict::Fits
                            }
                        }
                    }
                },
            };
            if let Verdict::OverBudget { .. } = verdict
                && let Some(reason) = d.command.reason.budget_reason()
            {
                let r = rank(reason).unwrap_or(0);
                for (pool, n) in &d.command.budget {
                    if let Some(l) = lanes.get_mut(&(pool.clone(), r)) {
                        l.over += n;
                    }
                }
            }
            if verdict == Verdict::Fits {
                q.runnable_savings += d.command.savings_per_hour;
            }
            q.verdicts.insert(d.id, verdict);
        }
        q.lanes = lanes.into_values().collect();
        q
    }

    /// The verdict on a waiting decision (None: not waiting in this snapshot).
    pub fn verdict(&self, id: u64) -> Option<&Verdict> {
        self.verdicts.get(&id)
    }

    /// True when the decision would run if approved now.
    pub fn fits(&self, id: u64) -> bool {
        matches!(self.verdict(id), Some(Verdict::Fits))
    }

    /// Waiting decisions that would not fit in their budget now.
    pub fn over_budget(&self) -> usize {
        self.verdicts
            .values()
            .filter(|v| matches!(v, Verdict::OverBudget { .. }))
            .count()
    }

    /// The lanes of one pool.
    pub fn lanes_of<'a>(&'a self, pool: &'a str) -> impl Iterator<Item = &'a Lane> + 'a {
        self.lanes.iter().filter(move |l| l.nodepool == pool)
    }

    /// What holds a waiting decision, for its STATE cell: a pause, the budget, an
    /// operator, or nothing (auto decisions run at the next poll). The Disruption view
    /// and the overview word it alike.
    pub fn state(&self, d: &Decision) -> (String, Tone) {
        match self.verdict(d.id) {
            Some(Verdict::Paused(scope)) => (format!("paused ({scope})"), Tone::Warn),
            Some(Verdict::OverBudget {
                nodepool,
                reason,
                allowed,
            }) => (
                format!(
                    "over budget ({nodepool} allows {allowed} {})",
                    reason.as_str()
                ),
                Tone::Bad,
            ),
            _ => match d.policy {
                Policy::Manual => ("awaiting approval".into(), Tone::Warn),
                Policy::Auto => ("auto: runs next poll".into(), Tone::Muted),
            },
        }
    }
}
