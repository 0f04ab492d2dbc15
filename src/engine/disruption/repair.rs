//! Repair as a disruption method: the pass's repair step (step 0, before every other
//! method), and whether an unhealthy node may be repaired now, for that step and for the
//! revalidation before a repair runs (`engine::repair` has the policies).

use chrono::{DateTime, Utc};

use crate::api::nodepool::NodePool;
use crate::api::pool_settings;
use crate::engine::fast_hash::FastMap;
use crate::engine::repair::{self, PoolHealth};
use crate::engine::state::StateNode;

use super::{
    Allowance, Block, Candidate, DisruptionReason, Method, Outcome, Pass, PoolBudgets, Prepared,
    Reason, SimSlot, command, drift,
};

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

/// Pass step 0: the first repairable node of `unhealthy` (indices into the state's nodes)
/// becomes the pass's command; the rest are eligible or say why not.
pub(super) fn step<'p>(
    prepared: &'p Prepared<'p>,
    slot: &mut SimSlot<'p>,
    budgets: &[PoolBudgets],
    unhealthy: &[usize],
    pass: &mut Pass,
) {
    let state = prepared.state;
    let health = repair::pool_health(state);
    let allow = Allowance::new(budgets, DisruptionReason::Unhealthy);
    let mut order: Vec<(DateTime<Utc>, &str, usize)> = unhealthy
        .iter()
        .map(|&i| {
            let n = &state.nodes[i];
            let at = repair::first_due(n).map_or(pass.at, |f| f.repair_at());
            (at, n.nodeclaim.as_str(), i)
        })
        .collect();
    order.sort();
    let pods_by_node = prepared.pods_by_node();
    for (_, name, i) in order {
        let node = &state.nodes[i];
        let name = name.to_string();
        pass.candidates_evaluated += 1;
        if let Some(b) = block(node, state.nodepools.get(&node.nodepool), &health) {
            pass.outcomes.insert(name, Outcome::Blocked(b));
            continue;
        }
        *pass.eligible.entry(Reason::Unhealthy).or_default() += 1;
        if !allow.has(&node.nodepool) {
            pass.outcomes
                .insert(name, Outcome::Blocked(allow.block(&node.nodepool)));
            continue;
        }
        let fault = repair::first_due(node)
            .map(ToString::to_string)
            .unwrap_or_default();
        if pass.command.is_some() {
            pass.outcomes.insert(
                name,
                Outcome::Eligible {
                    method: Method::Repair,
                    detail: fault,
                },
            );
            continue;
        }
        // Pod-level blocks do not hold a repair: the pods of a broken node are not
        // serving (upstream's repair forces the drain).
        let c = Candidate::forced(state, i, &pods_by_node[i]);
        let movers = prepared.movers();
        let replacements = match drift::replacements(prepared.simulator(slot), state, &c, &movers) {
            Ok(r) => r,
            Err(b) => {
                pass.outcomes.insert(name, Outcome::Blocked(b));
                continue;
            }
        };
        let delete_only = replacements.is_empty();
        pass.command = Some(command(
            state,
            Method::Repair,
            Reason::Unhealthy,
            &[&c],
            replacements,
        ));
        pass.outcomes.insert(
            name,
            Outcome::Chosen {
                method: Method::Repair,
                savings: 0.0,
                delete_only,
            },
        );
    }
}
