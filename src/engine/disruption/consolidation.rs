//! Consolidation: can these nodes go, with their pods moving to the rest of the cluster or
//! to one cheaper new node?
//!
//! Mirrors upstream `disruption/consolidation.go` `computeConsolidation`: simulate
//! scheduling the candidates' pods without the candidates; delete when every pod fits
//! elsewhere; replace with exactly one NodeClaim only if it is strictly cheaper than the
//! candidates together; an on-demand candidate's replacement is constrained to spot when
//! the pool allows spot (so a spot shortage fails the launch instead of buying pricier
//! on-demand); spot-to-spot replacement only behind a flag and, for a single node, only
//! with at least 15 cheaper spot types, sending the 15 cheapest.
//!
//! As upstream's `SimulateScheduling`, the simulation also places the pods that are
//! pending (and those on nodes being deleted): they compete for the same free capacity.
//! A pending pod that fits nowhere does not block consolidation, but the new nodes they
//! need count, so consolidation waits while the cluster is scaling up instead of
//! deleting capacity the pending pods are about to take. A candidate's pod may not count
//! on a node that is not initialized (upstream's "would schedule against uninitialized
//! nodeclaim"), and pods of deleting nodes that would fit nowhere block a command as the
//! candidates' own do.

use crate::engine::fast_hash::FastSet;

use crate::api::labels;
use crate::engine::catalog::CapacityType;
use crate::engine::pod::PodKey;
use crate::engine::requirements::Requirement;
use crate::engine::scheduling::{NewNodeClaim, Simulator};
use crate::engine::state::ClusterState;

use super::candidates::Candidate;
use super::command::options_of;
use super::outcome::Block;
use super::{Movers, Replacement, ReplacementOption};

/// Upstream's minimum number of cheaper spot types for single-node spot-to-spot.
pub const MIN_SPOT_TO_SPOT_TYPES: usize = 15;

/// A consolidation that would work: delete, or replace with one node.
#[derive(Clone, Debug)]
pub struct Plan {
    pub replacement: Option<Replacement>,
    /// Candidates' price minus the replacement's cheapest option, USD/h.
    pub savings: f64,
}

/// Simulates the candidates away and decides delete / replace / nothing.
pub fn evaluate(
    sim: &mut Simulator,
    state: &ClusterState,
    candidates: &[&Candidate],
    movers: &Movers,
    spot_to_spot: bool,
    explain: bool,
) -> Result<Plan, Block> {
    let mut pods: Vec<&crate::engine::pod::Pod> = candidates
        .iter()
        .flat_map(|c| c.pods.iter().map(|&i| &state.pods[i]))
        .collect();
    let own = pods.len();
    let excluded: Vec<usize> = candidates
        .iter()
        .filter_map(|c| movers.sim_input.index[c.node])
        .collect();
    let price: f64 = candidates.iter().map(|c| state.nodes[c.node].price).sum();
    if pods.is_empty() {
        return Ok(Plan {
            replacement: None,
            savings: price,
        });
    }
    let own_keys: FastSet<&PodKey> = pods.iter().map(|p| &p.key).collect();
    debug_assert_eq!(own_keys.len(), own);
    pods.extend(movers.pending.iter().copied());
    // Pods that were pending may fail without blocking the command; the candidates' and
    // those of deleting nodes may not (upstream `AllNonPendingPodsScheduled`).
    let blocking = |k: &PodKey| own_keys.contains(k) || movers.moving.contains(k);
    let failed = |r: &crate::engine::scheduling::Results| r.errors.keys().any(&blocking);
    // Only types cheaper than the candidates can replace them, and only one new node
    // can: the capped simulation stops at a second. When it fails, the uncapped
    // simulation says why (pods would not fit, several nodes, or nothing cheaper), so
    // the explanation is the one upstream would give.
    let capped = sim
        .run_within(&pods, &excluded, Some(price), 1)
        .filter(|r| !failed(r));
    let results = match capped {
        Some(r) => r,
        // The capped and the uncapped simulation reach the same decision (nothing
        // cheaper works); only the words would differ.
        None if !explain => return Err(Block::NoCheaperReplacement),
        None => sim.run(&pods, &excluded),
    };
    if let Some((pod, why)) = results.errors.iter().find(|(k, _)| blocking(k)) {
        return Err(Block::PodsWouldNotFit {
            pod: pod.clone(),
            why: why.clone(),
        });
    }
    if let Some((pod, claim)) = movers.sim_input.on_uninitialized(&results, &own_keys) {
        return Err(Block::WouldUseUninitialized {
            pod: pod.clone(),
            nodeclaim: claim.to_string(),
        });
    }
    match results.new_nodeclaims.len() {
        0 => {
            return Ok(Plan {
                replacement: None,
                savings: price,
            });
        }
        1 => {}
        n => return Err(Block::TooManyReplacements { count: n }),
    }
    let claim = &results.new_nodeclaims[0];
    let all_spot = candidates
        .iter()
        .all(|c| state.nodes[c.node].capacity_type == CapacityType::Spot);
    let mut requirements = claim.requirements.clone();
    let allows = |ct: &str| {
        requirements
            .get(labels::CAPACITY_TYPE)
            .is_none_or(|r| r.has(ct))
    };
    let spot_ok = allows(labels::CAPACITY_TYPE_SPOT);
    let od_ok = allows(labels::CAPACITY_TYPE_ON_DEMAND);
    let spot_to_spot_move = all_spot && spot_ok;
    if spot_to_spot_move || (spot_ok && od_ok) {
        requirements.add(Requirement::in_values(
            labels::CAPACITY_TYPE,
            [labels::CAPACITY_TYPE_SPOT.to_string()],
        ));
    }
    if spot_to_spot_move && !spot_to_spot {
        return Err(Block::SpotToSpotDisabled);
    }
    let mut options = priced_options(claim, &requirements, candidates, state, price);
    if options.is_empty() {
        return Err(Block::NoCheaperReplacement);
    }
    if spot_to_spot_move && candidates.len() == 1 {
        if options.len() < MIN_SPOT_TO_SPOT_TYPES {
            return Err(Block::TooFewCheaperSpotTypes {
                count: options.len(),
            });
        }
        options.truncate(MIN_SPOT_TO_SPOT_TYPES);
    }
    let cheapest = options[0].price;
    Ok(Plan {
        replacement: Some(Replacement::new(claim, requirements, options)),
        savings: price - cheapest,
    })
}

/// The claim's instance types that are strictly cheaper than the candidates together,
/// cheapest first. When an option is a type some candidate already runs, every option
/// must also be cheaper than the cheapest such candidate (upstream
/// `filterOutSameInstanceType`): replacing [2xlarge, 2xlarge, large] with an xlarge is
/// worse than deleting the two 2xlarges and keeping the large.
pub(super) fn priced_options(
    claim: &NewNodeClaim,
    requirements: &crate::engine::requirements::Requirements,
    candidates: &[&Candidate],
    state: &ClusterState,
    price: f64,
) -> Vec<ReplacementOption> {
    let mut out = options_of(claim, requirements);
    let same_type_cap = candidates
        .iter()
        .map(|c| &state.nodes[c.node])
        .filter(|n| out.iter().any(|o| o.instance_type == n.instance_type))
        .map(|n| n.price)
        .fold(f64::INFINITY, f64::min);
    let cap = price.min(same_type_cap);
    out.retain(|o| o.price < cap);
    out
}
