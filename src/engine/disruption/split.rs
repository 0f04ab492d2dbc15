//! Split consolidation (ours, behind `--split-consolidation`): one node replaced by two or
//! more cheaper nodes.
//!
//! Upstream's single-node consolidation replaces a node with at most one new node, so a
//! node whose pods fit only a large type together, but two small ones apart, is never
//! consolidated ("Can't remove without creating 2 candidates",
//! kubernetes-sigs/karpenter#1442). Here, when single-node consolidation finds nothing,
//! the candidate's pods are simulated again onto at most [`MAX_NODES`] new nodes, each of
//! a type cheaper than the candidate; the split is proposed when the new nodes together
//! save at least the configured share of the candidate's price (default
//! [`DEFAULT_PERCENT`]%): more nodes mean more to fail and more pods moved, so a split
//! must be worth it. Spot candidates are not split (spot-to-spot has its own rules).

use crate::api::labels;
use crate::engine::catalog::CapacityType;
use crate::engine::fast_hash::FastSet;
use crate::engine::pod::PodKey;
use crate::engine::requirements::Requirement;
use crate::engine::scheduling::Simulator;
use crate::engine::state::ClusterState;

use super::candidates::Candidate;
use super::outcome::Block;
use super::{Movers, Replacement};

/// The most new nodes one split may create.
pub const MAX_NODES: usize = 4;

/// The share of the candidate's price a split must save by default, in percent.
pub const DEFAULT_PERCENT: f64 = 20.0;

/// A split that would work.
#[derive(Clone, Debug)]
pub struct Split {
    pub replacements: Vec<Replacement>,
    /// The candidate's price minus the new nodes' cheapest options, USD/h.
    pub savings: f64,
}

/// Whether single-node consolidation's verdict leaves room for a split: it found no
/// cheaper single node, or the pods needed several.
pub fn applies(block: &Block) -> bool {
    matches!(
        block,
        Block::NoCheaperReplacement | Block::TooManyReplacements { .. }
    )
}

/// Simulates the candidate's pods onto new nodes each cheaper than it; the split, or why
/// not. `percent` is the least share of its price the split must save.
pub fn evaluate(
    sim: &mut Simulator,
    state: &ClusterState,
    candidate: &Candidate,
    movers: &Movers,
    percent: f64,
) -> Result<Split, Block> {
    let node = &state.nodes[candidate.node];
    if node.capacity_type == CapacityType::Spot {
        return Err(Block::NoCheaperReplacement);
    }
    let mut pods: Vec<&crate::engine::pod::Pod> =
        candidate.pods.iter().map(|&i| &state.pods[i]).collect();
    let own: FastSet<&PodKey> = pods.iter().map(|p| &p.key).collect();
    pods.extend(movers.pending.iter().copied());
    let excluded: Vec<usize> = movers.sim_input.index[candidate.node].into_iter().collect();
    let blocking = |k: &PodKey| own.contains(k) || movers.moving.contains(k);
    let Some(results) = sim
        .run_within(&pods, &excluded, Some(node.price), MAX_NODES)
        .filter(|r| !r.errors.keys().any(blocking))
    else {
        return Err(Block::NoCheaperReplacement);
    };
    if movers.sim_input.on_uninitialized(&results, &own).is_some()
        || results.new_nodeclaims.len() < 2
    {
        // Single-node consolidation's verdict stands.
        return Err(Block::NoCheaperReplacement);
    }
    let mut replacements = Vec::with_capacity(results.new_nodeclaims.len());
    for claim in &results.new_nodeclaims {
        // As a single replacement: an on-demand node's may be spot where the pool
        // allows both, so a spot shortage fails the launch rather than buying pricier
        // on-demand (upstream `consolidation.go`).
        let mut requirements = claim.requirements.clone();
        let allows = |ct: &str| {
            requirements
                .get(labels::CAPACITY_TYPE)
                .is_none_or(|r| r.has(ct))
        };
        if allows(labels::CAPACITY_TYPE_SPOT) && allows(labels::CAPACITY_TYPE_ON_DEMAND) {
            requirements.add(Requirement::in_values(
                labels::CAPACITY_TYPE,
                [labels::CAPACITY_TYPE_SPOT.to_string()],
            ));
        }
        let options = super::consolidation::priced_options(
            claim,
            &requirements,
            &[candidate],
            state,
            node.price,
        );
        if options.is_empty() {
            return Err(Block::NoCheaperReplacement);
        }
        replacements.push(Replacement::new(claim, requirements, options));
    }
    let new: f64 = replacements.iter().map(Replacement::price).sum();
    let savings = node.price - new;
    if savings < node.price * percent / 100.0 {
        return Err(Block::SplitSavesTooLittle {
            count: replacements.len(),
            savings,
            price: node.price,
            percent,
        });
    }
    Ok(Split {
        replacements,
        savings,
    })
}
