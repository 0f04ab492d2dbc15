//! The `Balanced` consolidation policy: a consolidation move must save enough of its
//! pool's cost for the share of its pool's disruption it causes.
//!
//! Mirrors upstream `pkg/controllers/disruption/balanced.go` (`computeNodePoolTotals`,
//! `ScoreMove`, `EvaluateBalancedMove`, `CanPassThreshold`) and `types.go`
//! (`ScoreResult`, `PerNodeBaseDisruptionCost`, `computeRescheduleDisruptionCost`), with
//! `BalancedK` from `pkg/apis/v1/nodepool.go`:
//!
//! - a node's disruption cost is 1 (cordon, drain, replacement latency) plus the positive
//!   eviction cost of each pod that must move;
//! - a pool's totals are the price of all its nodes and the disruption cost of all its
//!   nodes (candidates or not);
//! - a move's score per Balanced pool is `(savings / pool cost) / (disruption / pool
//!   disruption)`; it passes at `1 / k` (k = 2). A move spanning several pools passes only
//!   if every Balanced pool in it passes, each credited with the savings in proportion to
//!   its candidates' price. Pools of other policies are not scored.

use std::collections::{BTreeMap, HashMap};

use crate::api::nodepool::NodePool;
use crate::engine::state::{ClusterState, is_reschedulable};

use super::candidates::{Candidate, eviction_cost};
use super::outcome::Block;

/// Upstream's `BalancedK`: a move passes when its score reaches `1 / k`.
pub const BALANCED_K: u32 = 2;

/// Upstream's `PerNodeBaseDisruptionCost`: what draining a node costs with no pods on it.
pub const PER_NODE_BASE_DISRUPTION_COST: f64 = 1.0;

/// A pool's denominators: what all its nodes cost per hour and what disrupting all of
/// them would cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolTotals {
    pub total_cost: f64,
    pub total_disruption_cost: f64,
}

/// A move's score in one pool.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    /// Savings over the pool's total cost.
    pub savings_fraction: f64,
    /// The move's disruption cost over the pool's total disruption cost.
    pub disruption_fraction: f64,
}

impl Score {
    /// Savings fraction over disruption fraction: 0 without savings, infinite without
    /// disruption.
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    /// The score a move needs: `1 / k`.
    pub fn threshold() -> f64 {
        1.0 / f64::from(BALANCED_K)
    }

    pub fn approved(&self) -> bool {
        self.value() >= Self::threshold()
    }
}

/// Upstream `ScoreMove`. Zero totals leave nothing to normalise against: the score is 0.
pub fn score_move(savings: f64, disruption_cost: f64, totals: PoolTotals) -> Score {
    if totals.total_cost <= 0.0 || totals.total_disruption_cost <= 0.0 {
        return Score {
            savings_fraction: 0.0,
            disruption_fraction: 0.0,
        };
    }
    Score {
        savings_fraction: savings / totals.total_cost,
        disruption_fraction: disruption_cost / totals.total_disruption_cost,
    }
}

/// The disruption cost of moving these pods off their node: the base cost plus each
/// pod's eviction cost, negative costs counting as 0.
pub fn disruption_cost<'a>(pods: impl IntoIterator<Item = &'a crate::engine::pod::Pod>) -> f64 {
    PER_NODE_BASE_DISRUPTION_COST
        + pods
            .into_iter()
            .map(|p| eviction_cost(p).max(0.0))
            .sum::<f64>()
}

/// A candidate's disruption cost (its reschedulable pods).
pub fn candidate_disruption_cost(state: &ClusterState, c: &Candidate) -> f64 {
    disruption_cost(c.pods.iter().map(|&i| &state.pods[i]))
}

/// The totals of every Balanced pool, over all its nodes.
pub fn pool_totals(
    state: &ClusterState,
    pods_by_node: &[Vec<usize>],
) -> HashMap<String, PoolTotals> {
    let mut out: HashMap<String, PoolTotals> = HashMap::new();
    for (i, node) in state.nodes.iter().enumerate() {
        let balanced = state.nodepools.get(&node.nodepool).is_some_and(is_balanced);
        if !balanced {
            continue;
        }
        let t = out.entry(node.nodepool.clone()).or_default();
        t.total_cost += node.price;
        t.total_disruption_cost += disruption_cost(
            pods_by_node[i]
                .iter()
                .map(|&p| &state.pods[p])
                .filter(|p| is_reschedulable(p)),
        );
    }
    out
}

/// Whether a pool's consolidation is scored. A static pool (replicas set) ignores its
/// consolidation policy, as upstream documents.
pub fn is_balanced(pool: &NodePool) -> bool {
    pool.spec.replicas.is_none() && pool.spec.disruption.consolidation_policy.is_balanced()
}

/// Upstream `EvaluateBalancedMove`: the move saving `savings` per hour by removing
/// `candidates` passes in every Balanced pool it touches (their passing scores, by pool,
/// for upstream's `ConsolidationApproved`), or the first pool's failing score as the
/// block.
pub fn approve(
    state: &ClusterState,
    candidates: &[&Candidate],
    savings: f64,
    totals: &HashMap<String, PoolTotals>,
) -> Result<Vec<(String, Score)>, Block> {
    let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in candidates {
        by_pool
            .entry(state.nodes[c.node].nodepool.as_str())
            .or_default()
            .push(c);
    }
    let source_cost: f64 = candidates.iter().map(|c| state.nodes[c.node].price).sum();
    let pools = by_pool.len();
    let mut passed = Vec::new();
    for (pool, cands) in by_pool {
        if !state.nodepools.get(pool).is_some_and(is_balanced) {
            continue;
        }
        let pool_cost: f64 = cands.iter().map(|c| state.nodes[c.node].price).sum();
        let pool_savings = if pools > 1 && source_cost > 0.0 {
            savings * (pool_cost / source_cost)
        } else {
            savings
        };
        let disruption: f64 = cands
            .iter()
            .map(|c| candidate_disruption_cost(state, c))
            .sum();
        let score = score_move(
            pool_savings,
            disruption,
            totals.get(pool).copied().unwrap_or_default(),
        );
        if !score.approved() {
            return Err(Block::BalancedScore {
                nodepool: pool.to_string(),
                score: score.value(),
                savings_percent: score.savings_fraction * 100.0,
                disruption_percent: score.disruption_fraction * 100.0,
            });
        }
        passed.push((pool.to_string(), score));
    }
    Ok(passed)
}

/// Upstream `CanPassThreshold`: deleting the node outright (all of its price saved, no
/// replacement) is the best any move of it can score; if even that fails, nothing is
/// simulated for it. Pools without totals pass (upstream: nothing to judge by).
pub fn can_pass(
    state: &ClusterState,
    c: &Candidate,
    totals: &HashMap<String, PoolTotals>,
) -> Result<(), Block> {
    let pool = &state.nodes[c.node].nodepool;
    match totals.get(pool) {
        Some(t) if t.total_cost > 0.0 => {
            approve(state, &[c], state.nodes[c.node].price, totals).map(|_| ())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(cost: f64, disruption: f64) -> PoolTotals {
        PoolTotals {
            total_cost: cost,
            total_disruption_cost: disruption,
        }
    }

    #[test]
    fn a_move_passes_when_its_savings_share_is_at_least_half_its_disruption_share() {
        // Saves 10% of the pool's cost for 20% of its disruption: 0.5, exactly 1/k.
        assert!(score_move(1.0, 2.0, totals(10.0, 10.0)).approved());
        // Saves 10% for 25%: 0.4.
        let s = score_move(1.0, 2.5, totals(10.0, 10.0));
        assert!((s.value() - 0.4).abs() < 1e-9);
        assert!(!s.approved());
    }

    #[test]
    fn no_savings_never_passes_and_no_disruption_always_does() {
        assert!(!score_move(0.0, 1.0, totals(10.0, 10.0)).approved());
        assert!(!score_move(-1.0, 1.0, totals(10.0, 10.0)).approved());
        assert_eq!(
            score_move(1.0, 0.0, totals(10.0, 10.0)).value(),
            f64::INFINITY
        );
    }

    #[test]
    fn zero_totals_score_zero() {
        assert_eq!(score_move(1.0, 1.0, totals(0.0, 10.0)).value(), 0.0);
        assert_eq!(score_move(1.0, 1.0, totals(10.0, 0.0)).value(), 0.0);
    }
}
