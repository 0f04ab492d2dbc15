//! What a pass decides, in the words the gate, the journal and the console use: the
//! candidates a command disrupts, the replacements it launches and what it saves.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::catalog::CapacityType;
use crate::engine::pod::PodKey;
use crate::engine::requirements::Requirements;
use crate::engine::resources::Resources;
use crate::engine::scheduling::{NewNodeClaim, offering_allowed};
use crate::engine::state::ClusterState;

use super::candidates::Candidate;
use super::{Method, Reason};

/// A node a command disrupts, with what the operator needs to judge it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateSummary {
    /// The node's identity.
    pub nodeclaim: String,
    /// Its Node's name (the NodeClaim's before it registered), for people.
    pub node: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    /// USD per hour.
    pub price: f64,
    pub pods: Vec<PodKey>,
}

/// One instance type a replacement may launch as.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplacementOption {
    pub instance_type: String,
    pub price: f64,
    pub capacity_type: CapacityType,
    pub zone: String,
}

/// A NodeClaim a command creates before deleting its candidates.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replacement {
    pub nodepool: String,
    /// Cheapest first.
    pub options: Vec<ReplacementOption>,
    pub capacity_types: Vec<String>,
    #[serde(skip)]
    pub requirements: Requirements,
    #[serde(skip)]
    pub requests: Resources,
    pub pods: Vec<PodKey>,
}

impl Replacement {
    /// The price of the cheapest option, USD/h.
    pub fn price(&self) -> f64 {
        self.options.first().map(|o| o.price).unwrap_or(0.0)
    }
}

/// One disruption decision: what goes, what replaces it, what it saves.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Command {
    pub method: Method,
    pub reason: Reason,
    pub candidates: Vec<CandidateSummary>,
    pub replacements: Vec<Replacement>,
    /// USD per hour: the candidates' price minus the replacements' cheapest options.
    pub savings_per_hour: f64,
    /// Nodes the command takes from each pool's budget for its reason.
    pub budget: BTreeMap<String, usize>,
}

impl Command {
    /// The NodeClaims it disrupts: the candidates' identities.
    pub fn nodeclaims(&self) -> impl Iterator<Item = &str> {
        self.candidates.iter().map(|c| c.nodeclaim.as_str())
    }

    /// The candidates' Node names, for people.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.candidates.iter().map(|c| c.node.as_str())
    }

    /// True when it only deletes.
    pub fn is_delete(&self) -> bool {
        self.replacements.is_empty()
    }
}

/// A Kubernetes event the pass would emit (upstream reasons).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// The NodeClaim the event is about.
    pub nodeclaim: String,
    /// `DisruptionBlocked`, `Unconsolidatable`, `DisruptionLaunching`, ...
    pub reason: String,
    pub message: String,
}

impl Replacement {
    /// The replacement for a planned NodeClaim, launched under `requirements` (the
    /// claim's own, or narrowed to spot) as one of `options`.
    pub(crate) fn new(
        claim: &NewNodeClaim,
        requirements: Requirements,
        options: Vec<ReplacementOption>,
    ) -> Replacement {
        Replacement {
            nodepool: claim.nodepool.clone(),
            capacity_types: requirements
                .get(crate::api::labels::CAPACITY_TYPE)
                .map(|r| r.values().to_vec())
                .unwrap_or_default(),
            options,
            requirements,
            requests: claim.requests.clone(),
            pods: claim.pods.clone(),
        }
    }
}

/// The claim's instance types at their cheapest offering `requirements` allow, cheapest
/// first (ties by name, so the order is stable).
pub(crate) fn options_of(
    claim: &NewNodeClaim,
    requirements: &Requirements,
) -> Vec<ReplacementOption> {
    let mut out: Vec<ReplacementOption> = claim
        .instance_types
        .iter()
        .filter_map(|it| {
            let o = it.cheapest_offering(|o| offering_allowed(o, requirements))?;
            Some(ReplacementOption {
                instance_type: it.name.clone(),
                price: o.price,
                capacity_type: o.capacity_type,
                zone: o.zone.clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
    });
    out
}

impl CandidateSummary {
    /// The summary of a state node whose pods that must move are `pods`.
    pub fn of(n: &crate::engine::state::StateNode, pods: Vec<PodKey>) -> CandidateSummary {
        CandidateSummary {
            nodeclaim: n.nodeclaim.clone(),
            node: n.name.clone(),
            nodepool: n.nodepool.clone(),
            instance_type: n.instance_type.clone(),
            zone: n.zone.clone(),
            capacity_type: n.capacity_type,
            price: n.price,
            pods,
        }
    }
}

pub(crate) fn summary(state: &ClusterState, c: &Candidate) -> CandidateSummary {
    CandidateSummary::of(
        &state.nodes[c.node],
        c.pods.iter().map(|&p| state.pods[p].key.clone()).collect(),
    )
}

pub(crate) fn command(
    state: &ClusterState,
    method: Method,
    reason: Reason,
    cands: &[&Candidate],
    replacements: Vec<Replacement>,
) -> Command {
    let candidates: Vec<CandidateSummary> = cands.iter().map(|c| summary(state, c)).collect();
    let price: f64 = candidates.iter().map(|c| c.price).sum();
    let new: f64 = replacements.iter().map(Replacement::price).sum();
    let mut budget = BTreeMap::new();
    for c in &candidates {
        *budget.entry(c.nodepool.clone()).or_insert(0) += 1;
    }
    Command {
        method,
        reason,
        savings_per_hour: if matches!(method, Method::Drift | Method::Expiration | Method::Repair) {
            0.0
        } else {
            price - new
        },
        candidates,
        replacements,
        budget,
    }
}
