//! Re-validation of a decision before it runs: the cluster may have moved on while it
//! waited for an operator or for upstream's 15 s validation delay.
//!
//! Mirrors upstream `disruption/validation.go`: the candidates must still be candidates
//! with the same pods and not nominated, the budgets must still allow them (counting
//! every other waiting decision, but not this one's own reservation), and a fresh
//! simulation must reach the same decision. A decision that fails is never executed
//! stale.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use crate::engine::state::{ClusterState, is_reschedulable};

use super::candidates::{self, Candidate, PdbIndex};
use super::{Command, Method, Options, Prepared, SimSlot, consolidation, evaluate_budgets};

/// Checks the command against the state at `now`; the error says what changed.
pub fn revalidate(
    cmd: &Command,
    state: &ClusterState,
    now: DateTime<Utc>,
    options: &Options,
) -> Result<(), String> {
    revalidate_in(cmd, &Prepared::new(state), &mut None, now, options)
}

/// [`revalidate`] against a state `prepared` for other simulations too (a poll checks
/// every waiting decision and runs a pass over the same state), with its simulator in
/// `slot`.
pub fn revalidate_in<'p>(
    cmd: &Command,
    prepared: &'p Prepared<'p>,
    slot: &mut SimSlot<'p>,
    now: DateTime<Utc>,
    options: &Options,
) -> Result<(), String> {
    let state = prepared.state;
    let pods_by_node = prepared.pods_by_node();
    let index = state.node_index();
    let pdbs = PdbIndex::new(&state.pdbs);
    let mut cands: Vec<Candidate> = Vec::new();
    for summary in &cmd.candidates {
        let Some(&i) = index.get(summary.nodeclaim.as_str()) else {
            return Err(format!("node {} is gone", summary.node));
        };
        let node = &state.nodes[i];
        if cmd.method == Method::Expiration {
            // Expiration does not depend on pods or budgets; only a node already on its
            // way out makes it moot.
            if node.deleting {
                return Err(format!("node {} is already being deleted", node.name));
            }
            continue;
        }
        let pool = state.nodepools.get(&node.nodepool);
        if cmd.method == Method::Repair {
            // A repair needs the node still unhealthy past its toleration, and nothing
            // since vetoing or capping it; its pods' blocks do not hold it.
            if crate::engine::repair::due(node, now).is_none() {
                return Err(format!("node {} is healthy again", node.name));
            }
            let health = crate::engine::repair::pool_health(state);
            if let Some(b) = super::repair::block(node, pool, &health) {
                return Err(format!("node {}: {b}", node.name));
            }
        } else if let Some(b) = candidates::node_block(node, pool, now) {
            return Err(format!("node {}: {b}", node.name));
        }
        let Some(pool) = pool else {
            return Err(format!("node {}: its NodePool no longer exists", node.name));
        };
        let now_pods: BTreeSet<_> = pods_by_node[i]
            .iter()
            .map(|&p| &state.pods[p])
            .filter(|p| is_reschedulable(p))
            .map(|p| &p.key)
            .collect();
        let then_pods: BTreeSet<_> = summary.pods.iter().collect();
        if let Some(p) = now_pods.difference(&then_pods).next() {
            return Err(format!("node {} gained pod {p}", node.name));
        }
        if let Some(p) = then_pods.difference(&now_pods).next() {
            return Err(format!("pod {p} left node {}", node.name));
        }
        let drift = super::drift::drift(node, pool);
        let pods = candidates::NodePods::new(state, &pods_by_node[i], &pdbs);
        let c = candidates::candidate(state, i, &pods, pool, drift, now);
        match cmd.method {
            Method::Repair => {
                let mut c = c;
                c.pod_block = None;
                cands.push(c);
                continue;
            }
            Method::Drift => {
                if c.drift.is_none() {
                    return Err(format!("node {} is no longer drifted", node.name));
                }
                if let Some(b) = c.pod_block_for_drift(node) {
                    return Err(format!("node {}: {b}", node.name));
                }
            }
            _ => {
                if let Err(b) = &c.consolidatable {
                    return Err(format!("node {}: {b}", node.name));
                }
                if let Some(b) = &c.pod_block {
                    return Err(format!("node {}: {b}", node.name));
                }
            }
        }
        cands.push(c);
    }

    if let Some(reason) = cmd.reason.budget_reason() {
        // Every other waiting decision holds its budget; this one's own does not count
        // against it.
        let mut reserved = options.reserved.clone();
        for c in cmd.nodeclaims() {
            reserved.remove(c);
        }
        let budgets = evaluate_budgets(state, now, &reserved);
        for (pool, &n) in &cmd.budget {
            let allowed = budgets
                .iter()
                .find(|b| &b.nodepool == pool)
                .map(|b| b.allowed(reason))
                .unwrap_or(0);
            if n > allowed {
                return Err(format!(
                    "budget for {} in {pool} now allows {allowed}, the decision needs {n}",
                    reason.as_str()
                ));
            }
        }
    }

    match cmd.method {
        Method::Expiration | Method::Emptiness => Ok(()),
        Method::Drift | Method::Repair => {
            let movers = prepared.movers();
            let sim = prepared.simulator(slot);
            for c in &cands {
                match super::drift::replacements(sim, state, c, &movers) {
                    Ok(_) => {}
                    Err(super::Block::PodsWouldNotFit { pod, why }) => {
                        return Err(format!("pods would no longer fit: {pod} ({why})"));
                    }
                    Err(b) => return Err(b.to_string()),
                }
            }
            Ok(())
        }
        Method::SplitConsolidation => {
            let percent = options
                .split_percent
                .ok_or("split consolidation is off now")?;
            let movers = prepared.movers();
            let split = super::split::evaluate(
                prepared.simulator(slot),
                state,
                &cands[0],
                &movers,
                percent,
            )
            .map_err(|b| format!("a fresh simulation disagrees: {b}"))?;
            let old: f64 = cmd.replacements.iter().map(|r| r.price()).sum();
            let new: f64 = split.replacements.iter().map(|r| r.price()).sum();
            if new > old + 1e-9 {
                return Err(format!(
                    "the cheapest split now costs ${new:.4}/h, not ${old:.4}/h"
                ));
            }
            Ok(())
        }
        Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
            let refs: Vec<&Candidate> = cands.iter().collect();
            let movers = prepared.movers();
            let plan = consolidation::evaluate(
                prepared.simulator(slot),
                state,
                &refs,
                &movers,
                options.spot_to_spot,
                true,
            )
            .and_then(|p| {
                let totals = super::balanced::pool_totals(state, pods_by_node);
                super::balanced::approve(state, &refs, p.savings, &totals).map(|_| p)
            })
            .map_err(|b| format!("a fresh simulation disagrees: {b}"))?;
            match (cmd.replacements.first(), &plan.replacement) {
                (None, None) => Ok(()),
                (Some(_), None) => {
                    Err("a fresh simulation deletes without a replacement; proposing anew".into())
                }
                (None, Some(_)) => Err("a fresh simulation needs a replacement node now".into()),
                (Some(old), Some(new)) => {
                    if new.price() > old.price() + 1e-9 {
                        Err(format!(
                            "the cheapest replacement now costs ${:.4}/h, not ${:.4}/h",
                            new.price(),
                            old.price()
                        ))
                    } else {
                        Ok(())
                    }
                }
            }
        }
    }
}
