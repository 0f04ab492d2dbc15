//! Minimum savings: a pool may ask that consolidation act only when it saves enough
//! (kubernetes-sigs/karpenter#2883; upstream has no such threshold and consolidates for any
//! saving).
//!
//! The threshold is the pool's `karpenter-tui.dev/min-savings-per-hour` (USD/h) and
//! `karpenter-tui.dev/min-savings-percent` (of the candidates' price), read by
//! `api::pool_settings`; both apply when both are set. It applies to both consolidation
//! methods, deletes included (a delete saves 100% of its price, so only the absolute part
//! can hold it back). Emptiness, drift and expiration are not about savings and never
//! wait for it. A move over several pools must satisfy the strictest of them.

use crate::api::pool_settings::{self, MinSavings, SettingError};
use crate::engine::fast_hash::FastMap;
use crate::engine::state::ClusterState;

use super::candidates::Candidate;
use super::outcome::Block;

/// Every pool's threshold, read once per pass.
pub struct Thresholds<'a>(FastMap<&'a str, Result<MinSavings, SettingError>>);

impl<'a> Thresholds<'a> {
    pub fn new(state: &'a ClusterState) -> Self {
        Thresholds(
            state
                .nodepools
                .iter()
                .map(|(name, pool)| (name.as_str(), pool_settings::min_savings(pool)))
                .collect(),
        )
    }

    /// Whether a consolidation of `set` saving `savings` USD/h may be proposed.
    pub fn check(
        &self,
        state: &ClusterState,
        set: &[&Candidate],
        savings: f64,
    ) -> Result<(), Block> {
        let mut min = MinSavings::default();
        let mut pools: Vec<&str> = Vec::new();
        for c in set {
            let pool = state.nodes[c.node].nodepool.as_str();
            match self.0.get(pool) {
                Some(Ok(m)) if m.is_set() => {
                    min = min.strictest(*m);
                    if !pools.contains(&pool) {
                        pools.push(pool);
                    }
                }
                Some(Err(e)) => {
                    return Err(Block::InvalidPoolSetting {
                        nodepool: pool.to_string(),
                        why: e.to_string(),
                    });
                }
                _ => {}
            }
        }
        let price: f64 = set.iter().map(|c| state.nodes[c.node].price).sum();
        if min.admits(savings, price) {
            return Ok(());
        }
        Err(Block::BelowMinimumSavings {
            nodepools: pools.join(", "),
            savings,
            price,
            min_per_hour: min.per_hour,
            min_percent: min.percent,
        })
    }
}
