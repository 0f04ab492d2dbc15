//! Repair as a disruption method: whether an unhealthy node may be repaired now, for the
//! pass and for the revalidation before a repair runs (`engine::repair` has the policies).

use crate::api::nodepool::NodePool;
use crate::api::pool_settings;
use crate::engine::fast_hash::FastMap;
use crate::engine::repair::{self, PoolHealth};
use crate::engine::state::StateNode;

use super::Block;

/// Why an unhealthy node is not repaired, whatever the budgets say: its NodePool is gone
/// or invalid, an operator vetoed repair on it or its pool, or too much of its pool is
/// unhealthy for replacing nodes to help (upstream's 20%, per pool).
pub fn block(
    node: &StateNode,
    pool: Option<&NodePool>,
    health: &FastMap<&str, PoolHealth>,
) -> Option<Block> {
    if node.going_away() {
        return Some(Block::Deleting);
    }
    let Some(pool) = pool else {
        return Some(Block::NoNodePool);
    };
    let nodepool = pool.metadata.name.clone().unwrap_or_default();
    if let Some(why) = pool.validation_failure() {
        return Some(Block::InvalidNodePool {
            nodepool,
            why: why.to_string(),
        });
    }
    if pool_settings::node_vetoes_repair(&node.annotations) {
        return Some(Block::RepairVetoed {
            on: format!("node {}", node.name),
        });
    }
    match pool_settings::do_not_repair(pool) {
        Ok(true) => {
            return Some(Block::RepairVetoed {
                on: format!("NodePool {nodepool}"),
            });
        }
        Ok(false) => {}
        Err(e) => {
            return Some(Block::InvalidPoolSetting {
                nodepool,
                why: e.to_string(),
            });
        }
    }
    let h = health
        .get(node.nodepool.as_str())
        .copied()
        .unwrap_or_default();
    if h.capped() {
        return Some(Block::RepairCapped {
            nodepool,
            unhealthy: h.unhealthy,
            nodes: h.nodes,
            cap: repair::cap(h.nodes),
        });
    }
    None
}
