//! Disruption: which nodes to remove or replace, when, and why not.
//!
//! A pass (upstream's 10 s disruption poll) evaluates every node and returns at most one
//! voluntary command, tried in upstream's order: emptiness (every empty candidate within
//! budget, one command), drift (oldest first, one node per command, replacements as
//! needed), multi-node consolidation (binary search over the ranked candidates, at least
//! 2, at most one replacement), single-node consolidation. Expired nodes are deleted
//! without waiting for budgets (upstream's NodeClaim expiration controller) but count
//! against them once deleting. Unlike upstream, which stops at the first command and gives
//! up after 1 min (multi-node) or 3 min (single-node), every candidate is evaluated every
//! pass so that every node has an explanation.
//!
//! Pure: the pass reads a [`ClusterState`] and a time and returns plans.

pub mod balanced;
pub mod budgets;
pub mod candidates;
mod command;
pub mod consolidation;
pub mod drift;
pub mod fixture;
mod images;
pub mod incremental;
pub mod min_savings;
pub mod outcome;
pub mod repair;
mod sim_input;
pub mod split;
mod topology_counts;
pub mod validation;

use std::collections::BTreeMap;

use crate::engine::fast_hash::{FastMap, FastSet};

use chrono::{DateTime, Utc};

use crate::api::nodepool::{ConsolidationPolicy, DisruptionReason};
use crate::engine::state::{ClusterState, StateNode};

pub use budgets::{PoolBudgets, evaluate_budgets};
use candidates::{Candidate, PdbIndex};
use command::command;
pub use command::{CandidateSummary, Command, Event, Replacement, ReplacementOption};
pub use incremental::Planner;
pub use outcome::{Block, Method, Outcome, Reason};
pub use sim_input::{Movers, Prepared, SimInput, SimSlot, moving_pods, pending_pods};

/// Upstream caps multi-node consolidation at the 100 cheapest candidates.
pub const MAX_MULTI_NODE_CANDIDATES: usize = 100;

/// Knobs of a pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Allow replacing spot nodes with cheaper spot nodes (upstream feature gate
    /// `SpotToSpotConsolidation`, default off).
    pub spot_to_spot: bool,
    /// Repair nodes unhealthy past their toleration (upstream feature gate `NodeRepair`,
    /// default off), as `Unhealthy` decisions (`engine::repair`).
    pub repair: bool,
    /// Split consolidation (`split`; ours, off by default): the least share of a node's
    /// price, in percent, a replacement by several cheaper nodes must save.
    pub split_percent: Option<f64>,
    /// NodeClaims the approval gate or the orchestrator holds (pending decision, rejected
    /// by an operator, in flight), with the words to show.
    pub held: FastMap<String, String>,
    /// NodeClaims that already count against their pool's budgets although nothing shows
    /// it yet on the nodes: decisions waiting for approval or validation, and commands in
    /// flight whose taint has not come back from the cluster.
    pub reserved: FastSet<String>,
    /// Why nothing may be disrupted now: the controller's view of the cluster is not
    /// complete (upstream waits for `cluster.Synced`: every NodeClaim launched, every
    /// object listed). Expiration still runs.
    pub unsynced: Option<String>,
    /// Pods are nominated to a NodeClaim that is not initialized yet (the cluster is
    /// scaling up): drift and consolidation would count on capacity that is not there, so
    /// they wait. Names the NodeClaim.
    pub scaling_up: Option<String>,
    /// Upstream's pace: stop evaluating at the first command and do not re-simulate
    /// failures just to explain them. Candidates left unevaluated get
    /// [`Block::NotEvaluated`]. The controller runs this when no console is watching;
    /// the decisions are the same, only the explanations are thinner.
    pub fast: bool,
    /// Where a fast pass starts in the ranked single-node candidates.
    pub single_node_start: usize,
}

/// How many single-node consolidation candidates a fast pass evaluates.
pub const SINGLE_NODE_BATCH: usize = 50;

/// Everything one pass decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    pub at: DateTime<Utc>,
    pub budgets: Vec<PoolBudgets>,
    /// Expired nodes, one command each: not budgeted, not pausable by budgets (only by an
    /// operator pause).
    pub expirations: Vec<Command>,
    /// The voluntary command this pass acts on, if any.
    pub command: Option<Command>,
    /// Every node's outcome, by NodeClaim.
    pub outcomes: BTreeMap<String, Outcome>,
    /// Every drifted node (by NodeClaim) and why, whatever else holds it: the controller
    /// records since when each has been drifted.
    pub drifted: BTreeMap<String, String>,
    /// The first moment after `at` when time alone may change an outcome: a
    /// `consolidateAfter`, nomination, do-not-disrupt or expiry running out, a budget
    /// window opening or closing. A pass is due then, whatever else happens.
    pub next_change: Option<DateTime<Utc>>,
    /// Candidates for which a method ran a check (the benchmark's "no candidate skipped").
    pub candidates_evaluated: usize,
    /// Candidates eligible per reason (`karpenter_voluntary_disruption_eligible_nodes`).
    pub eligible: BTreeMap<Reason, usize>,
    /// Single-node consolidation candidates this pass looked at (a fast pass looks at a
    /// batch; the next one resumes after it).
    pub single_node_evaluated: usize,
    /// Single-node consolidation candidates there were.
    pub single_node_candidates: usize,
    pub events: Vec<Event>,
    /// Balanced scores of the chosen move that passed (upstream `balanced.go` publishes
    /// `ConsolidationApproved` for each).
    pub balanced_approvals: Vec<BalancedApproval>,
}

impl Pass {
    /// Makes a one-candidate consolidation move (single-node or split) the pass's
    /// command: its Balanced approvals go on the node, and the node's outcome is Chosen
    /// (delete-only when nothing replaces it).
    fn choose_one(
        &mut self,
        state: &ClusterState,
        method: Method,
        c: &Candidate,
        replacements: Vec<Replacement>,
        scores: Vec<(String, balanced::Score)>,
    ) {
        let name = state.nodes[c.node].nodeclaim.clone();
        let delete_only = replacements.is_empty();
        let cmd = command(state, method, Reason::Underutilized, &[c], replacements);
        self.balanced_approvals
            .extend(scores.into_iter().map(|(pool, score)| BalancedApproval {
                nodepool: pool,
                nodeclaim: Some(name.clone()),
                score,
            }));
        self.outcomes.insert(
            name,
            Outcome::Chosen {
                method,
                savings: cmd.savings_per_hour,
                delete_only,
            },
        );
        self.command = Some(cmd);
    }
}

/// A consolidation plan and the Balanced scores it passed, by pool.
type ScoredPlan = (consolidation::Plan, Vec<(String, balanced::Score)>);

/// A passing Balanced score of a chosen consolidation: on its node (single-node moves) or
/// on its pool (multi-node moves), as upstream reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct BalancedApproval {
    pub nodepool: String,
    /// The candidate of a single-node move.
    pub nodeclaim: Option<String>,
    pub score: balanced::Score,
}

/// Budget left per pool for one reason, drawn down as a pass assigns candidates.
struct Allowance<'a> {
    budgets: &'a [PoolBudgets],
    left: FastMap<&'a str, usize>,
    reason: DisruptionReason,
}

impl<'a> Allowance<'a> {
    fn new(budgets: &'a [PoolBudgets], reason: DisruptionReason) -> Self {
        Allowance {
            budgets,
            left: budgets
                .iter()
                .map(|b| (b.nodepool.as_str(), b.allowed(reason)))
                .collect(),
            reason,
        }
    }

    fn has(&self, pool: &str) -> bool {
        self.left.get(pool).copied().unwrap_or(0) > 0
    }

    fn take(&mut self, pool: &str) {
        if let Some(l) = self.left.get_mut(pool) {
            *l = l.saturating_sub(1);
        }
    }

    fn block(&self, pool: &str) -> Block {
        let until = self
            .budgets
            .iter()
            .find(|b| b.nodepool == pool)
            .and_then(|b| b.reason(self.reason).next_change);
        Block::Budget {
            reason: self.reason,
            nodepool: pool.to_string(),
            until,
        }
    }
}

/// The earliest of some future instants.
struct Soonest {
    now: DateTime<Utc>,
    at: Option<DateTime<Utc>>,
}

impl Soonest {
    fn add(&mut self, t: Option<DateTime<Utc>>) {
        if let Some(t) = t.filter(|t| *t > self.now) {
            self.at = Some(self.at.map_or(t, |a| a.min(t)));
        }
    }
}

/// Runs one disruption pass over the state at `now`, simulating everything afresh (a
/// [`Planner`] carries simulations over from pass to pass and says the same).
pub fn plan(state: &ClusterState, now: DateTime<Utc>, options: &Options) -> Pass {
    plan_with(
        &Prepared::new(state),
        &mut None,
        now,
        options,
        &mut incremental::Verdicts::default(),
    )
}

/// A pass that takes the simulation verdicts `cache` holds and adds those it computes.
/// The simulator in `slot` is built on the first verdict the cache does not hold, unless
/// an earlier simulation over the same `prepared` state built it already.
fn plan_with<'p>(
    prepared: &'p Prepared<'p>,
    slot: &mut SimSlot<'p>,
    now: DateTime<Utc>,
    options: &Options,
    cache: &mut incremental::Verdicts,
) -> Pass {
    let state = prepared.state;
    let budgets = evaluate_budgets(state, now, &options.reserved);
    let pods_by_node = prepared.pods_by_node();
    let pdbs = PdbIndex::new(&state.pdbs);
    let pool_drift: FastMap<&str, drift::PoolDrift> = state
        .nodepools
        .iter()
        .map(|(n, p)| (n.as_str(), drift::PoolDrift::new(p)))
        .collect();
    let mut pass = Pass {
        at: now,
        budgets: Vec::new(),
        expirations: Vec::new(),
        command: None,
        outcomes: BTreeMap::new(),
        drifted: BTreeMap::new(),
        next_change: None,
        candidates_evaluated: 0,
        eligible: BTreeMap::new(),
        single_node_evaluated: 0,
        single_node_candidates: 0,
        events: Vec::new(),
        balanced_approvals: Vec::new(),
    };
    let mut soon = Soonest { now, at: None };
    for b in &budgets {
        for r in &b.reasons {
            soon.add(r.next_change);
        }
    }

    // Node-level blocks, expiration, drift verdicts, and the candidate list.
    let mut cands: Vec<Candidate> = Vec::with_capacity(state.nodes.len());
    // Nodes unhealthy past their toleration, for repair: no other method considers them.
    let mut unhealthy: Vec<usize> = Vec::new();
    for (i, node) in state.nodes.iter().enumerate() {
        let key = &node.nodeclaim;
        let pool = state.nodepools.get(&node.nodepool);
        let drifted = if node.deleting {
            None
        } else {
            let fresh = || {
                pool_drift
                    .get(node.nodepool.as_str())
                    .and_then(|d| d.of(node))
            };
            match cache.drifted.get(key) {
                Some(kept) => {
                    #[cfg(test)]
                    assert_eq!(kept, &fresh(), "kept drift verdict of {key}");
                    kept.clone()
                }
                None => {
                    let d = fresh();
                    cache.drifted.insert(key.clone(), d.clone());
                    d
                }
            }
        };
        if let Some(d) = &drifted {
            pass.drifted.insert(key.clone(), d.to_string());
        }
        let expires = node.expires_at();
        soon.add(expires);
        soon.add(node.nominated_until);
        if let Some(why) = options.held.get(key) {
            pass.outcomes.insert(
                key.clone(),
                Outcome::Blocked(Block::Held { why: why.clone() }),
            );
            continue;
        }
        if let Some(at) = expires
            && now >= at
            && !node.going_away()
        {
            let c = Candidate::forced(state, i, &pods_by_node[i]);
            pass.expirations.push(command(
                state,
                Method::Expiration,
                Reason::Expired,
                &[&c],
                vec![],
            ));
            *pass.eligible.entry(Reason::Expired).or_default() += 1;
            pass.outcomes.insert(
                key.clone(),
                Outcome::Chosen {
                    method: Method::Expiration,
                    savings: 0.0,
                    delete_only: true,
                },
            );
            continue;
        }
        if options.repair
            && !node.going_away()
            && let Some(fault) = crate::engine::repair::first_due(node)
        {
            if fault.repair_at() <= now {
                unhealthy.push(i);
                continue;
            }
            soon.add(Some(fault.repair_at()));
        }
        if let Some(b) = candidates::node_block(node, pool, now) {
            pass.outcomes.insert(key.clone(), Outcome::Blocked(b));
            continue;
        }
        let Some(pool) = pool else { continue };
        // What the node's pods say is kept from the last pass unless they changed.
        if !cache.node_pods.contains_key(key) {
            let pods = candidates::NodePods::new(state, &pods_by_node[i], &pdbs);
            cache.node_pods.insert(key.clone(), pods);
        }
        let c = candidates::candidate(state, i, &cache.node_pods[key], pool, drifted, now);
        if c.consolidatable.is_err() {
            soon.add(candidates::consolidatable_at(node, pool));
        }
        if let Some(Block::PodDoNotDisrupt { until, .. }) = &c.pod_block {
            soon.add(*until);
        }
        cands.push(c);
    }
    pass.next_change = soon.at;
    candidates::rank(&mut cands, state);
    cache.ranked = cands.iter().map(|c| (c.node, c.eviction)).collect();
    let node = |c: &Candidate| -> &StateNode { &state.nodes[c.node] };
    let key = |c: &Candidate| -> String { state.nodes[c.node].nodeclaim.clone() };

    if let Some(why) = &options.unsynced {
        // Nothing voluntary until the view of the cluster is whole.
        let all = cands
            .iter()
            .map(|c| c.node)
            .chain(unhealthy.iter().copied());
        for i in all {
            pass.outcomes.insert(
                state.nodes[i].nodeclaim.clone(),
                Outcome::Blocked(Block::Unsynced { why: why.clone() }),
            );
        }
        pass.budgets = budgets;
        cache.countdown = true;
        return pass;
    }
    let scaling = options.scaling_up.as_ref().map(|claim| Block::ScalingUp {
        nodeclaim: claim.clone(),
    });

    // The simulator and its input are built on the first verdict the cache does not
    // hold: a pass over an unchanged cluster simulates nothing.
    let movers = || prepared.movers();
    let pool_of = |c: &Candidate| &state.nodepools[&state.nodes[c.node].nodepool];
    let static_block = |c: &Candidate| {
        pool_of(c).spec.replicas.map(|_| Block::StaticNodePool {
            nodepool: node(c).nodepool.clone(),
        })
    };
    let balanced_totals = balanced::pool_totals(state, pods_by_node);
    let min_savings = min_savings::Thresholds::new(state);

    // 0. Repair: before everything else (mending a broken node outranks a discretionary
    // move), oldest fault first, one node per command, replacements as needed.
    if !unhealthy.is_empty() {
        repair::step(prepared, slot, &budgets, &unhealthy, &mut pass);
    }

    // 1. Emptiness: every empty, consolidatable, unblocked candidate within budget. It
    // simulates nothing, so a scale-up in progress does not hold it.
    let mut empty_allow = Allowance::new(&budgets, DisruptionReason::Empty);
    let mut empties: Vec<&Candidate> = Vec::new();
    for c in cands.iter().filter(|c| c.is_empty()) {
        pass.candidates_evaluated += 1;
        // A static pool keeps its replicas: emptiness never removes them (upstream
        // `emptiness.go` skips `OwnedByStaticNodePool`).
        if let Some(b) = static_block(c) {
            pass.outcomes.insert(key(c), Outcome::Blocked(b));
            continue;
        }
        if let Some(b) = &c.pod_block {
            pass.outcomes.insert(key(c), Outcome::Blocked(b.clone()));
            continue;
        }
        // A drifted node emptiness cannot take (consolidateAfter has not passed, or is
        // Never; no Empty budget) is drift's to decide: upstream's methods each filter
        // every candidate, and drift deletes an empty drifted node whatever
        // consolidateAfter says.
        if let Err(b) = &c.consolidatable {
            if c.drift.is_none() {
                pass.outcomes.insert(key(c), Outcome::Blocked(b.clone()));
            }
            continue;
        }
        *pass.eligible.entry(Reason::Empty).or_default() += 1;
        if !empty_allow.has(&node(c).nodepool) {
            if c.drift.is_none() {
                pass.outcomes.insert(
                    key(c),
                    Outcome::Blocked(empty_allow.block(&node(c).nodepool)),
                );
            }
            continue;
        }
        empty_allow.take(&node(c).nodepool);
        empties.push(c);
    }
    if pass.command.is_some() {
        // A repair came first.
        for c in &empties {
            pass.outcomes.insert(
                key(c),
                Outcome::Eligible {
                    method: Method::Emptiness,
                    detail: "empty, after the repair this pass chose".into(),
                },
            );
        }
    } else if !empties.is_empty() {
        let cmd = command(state, Method::Emptiness, Reason::Empty, &empties, vec![]);
        for c in &empties {
            pass.outcomes.insert(
                key(c),
                Outcome::Chosen {
                    method: Method::Emptiness,
                    savings: node(c).price,
                    delete_only: true,
                },
            );
        }
        pass.command = Some(cmd);
    }

    // 2. Drift: in the order nodes drifted (upstream sorts by the Drifted condition's
    // transition), empty ones first (their pods would otherwise move twice), one node per
    // command, any number of replacements.
    let mut drifted: Vec<&Candidate> = cands
        .iter()
        .filter(|c| c.drift.is_some() && !pass.outcomes.contains_key(&node(c).nodeclaim))
        .collect();
    drifted.sort_by(|a, b| {
        let since = |c: &Candidate| node(c).drifted_since.unwrap_or(now);
        since(a)
            .cmp(&since(b))
            .then_with(|| node(a).created.cmp(&node(b).created))
            .then_with(|| node(a).nodeclaim.cmp(&node(b).nodeclaim))
    });
    drifted.sort_by_key(|c| !c.is_empty());
    let drift_allow = Allowance::new(&budgets, DisruptionReason::Drifted);
    for c in drifted {
        pass.candidates_evaluated += 1;
        let name = key(c);
        let why = c
            .drift
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        if let Some(b) = c.pod_block_for_drift(node(c)) {
            pass.outcomes.insert(name, Outcome::Blocked(b.clone()));
            continue;
        }
        *pass.eligible.entry(Reason::Drifted).or_default() += 1;
        if !drift_allow.has(&node(c).nodepool) {
            pass.outcomes
                .insert(name, Outcome::Blocked(drift_allow.block(&node(c).nodepool)));
            continue;
        }
        if pass.command.is_some() {
            if options.fast {
                break;
            }
            pass.outcomes.insert(
                name,
                Outcome::Eligible {
                    method: Method::Drift,
                    detail: why,
                },
            );
            continue;
        }
        if let Some(b) = &scaling {
            pass.outcomes.insert(name, Outcome::Blocked(b.clone()));
            continue;
        }
        let replacements = match incremental::Verdicts::get_or(
            &mut cache.drift,
            (&mut cache.simulated, &mut cache.carried),
            name.clone(),
            || {
                let sim = prepared.simulator(slot);
                drift::replacements(sim, state, c, &movers())
            },
        ) {
            Ok(r) => r.clone(),
            Err(b) => {
                pass.outcomes.insert(name, Outcome::Blocked(b.clone()));
                continue;
            }
        };
        let delete_only = replacements.is_empty();
        pass.command = Some(command(
            state,
            Method::Drift,
            Reason::Drifted,
            &[c],
            replacements,
        ));
        pass.outcomes.insert(
            name,
            Outcome::Chosen {
                method: Method::Drift,
                savings: 0.0,
                delete_only,
            },
        );
    }

    // Consolidation candidates: consolidatable, unblocked, policy allows, not decided yet.
    let mut consolidatable: Vec<&Candidate> = Vec::new();
    for c in &cands {
        let name = &node(c).nodeclaim;
        if pass.outcomes.contains_key(name) {
            continue;
        }
        if let Err(b) = &c.consolidatable {
            pass.outcomes
                .insert(name.clone(), Outcome::Blocked(b.clone()));
            continue;
        }
        if let Some(b) = &c.pod_block {
            pass.outcomes
                .insert(name.clone(), Outcome::Blocked(b.clone()));
            continue;
        }
        if let Some(b) = static_block(c) {
            pass.outcomes.insert(name.clone(), Outcome::Blocked(b));
            continue;
        }
        if pool_of(c).spec.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty {
            pass.outcomes.insert(
                name.clone(),
                Outcome::Blocked(Block::WhenEmptyPolicy { pods: c.pods.len() }),
            );
            continue;
        }
        if let Some(b) = &scaling {
            pass.outcomes
                .insert(name.clone(), Outcome::Blocked(b.clone()));
            continue;
        }
        consolidatable.push(c);
    }
    let under_allow = Allowance::new(&budgets, DisruptionReason::Underutilized);

    // 3. Multi-node consolidation: the longest ranked prefix (within budget, at most 100)
    // that consolidates into at most one new node, by binary search (upstream
    // `firstNConsolidationOption`).
    let mut prefix: Vec<&Candidate> = Vec::new();
    {
        let mut allow = Allowance::new(&budgets, DisruptionReason::Underutilized);
        for c in &consolidatable {
            if prefix.len() == MAX_MULTI_NODE_CANDIDATES {
                break;
            }
            if allow.has(&node(c).nodepool) {
                allow.take(&node(c).nodepool);
                prefix.push(c);
            }
        }
    }
    let mut multi: Option<(usize, ScoredPlan)> = None;
    if pass.command.is_none() && prefix.len() >= 2 {
        let (mut lo, mut hi) = (1usize, prefix.len() - 1);
        while lo <= hi {
            let mid = (lo + hi) / 2;
            let set = &prefix[..=mid];
            pass.candidates_evaluated += set.len();
            // A Balanced pool may reject a move that works (upstream
            // `multinodeconsolidation.go` scores each valid window).
            let set_key: Vec<String> = set.iter().map(|c| key(c)).collect();
            match incremental::Verdicts::get_or(
                &mut cache.sets,
                (&mut cache.simulated, &mut cache.carried),
                set_key,
                || {
                    let sim = prepared.simulator(slot);
                    consolidation::evaluate(
                        sim,
                        state,
                        set,
                        &movers(),
                        options.spot_to_spot,
                        !options.fast,
                    )
                },
            )
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|p| {
                min_savings.check(state, set, p.savings)?;
                balanced::approve(state, set, p.savings, &balanced_totals).map(|s| (p.clone(), s))
            }) {
                Ok(p) => {
                    multi = Some((mid + 1, p));
                    lo = mid + 1;
                }
                Err(_) => {
                    if mid == 0 {
                        break;
                    }
                    hi = mid - 1;
                }
            }
        }
    }
    if let Some((n, (p, scores))) = multi {
        let set = &prefix[..n];
        // Upstream puts a multi-node move's approval on each Balanced pool it touches.
        pass.balanced_approvals
            .extend(scores.into_iter().map(|(pool, score)| BalancedApproval {
                nodepool: pool,
                nodeclaim: None,
                score,
            }));
        let delete_only = p.replacement.is_none();
        let cmd = command(
            state,
            Method::MultiNodeConsolidation,
            Reason::Underutilized,
            set,
            p.replacement.into_iter().collect(),
        );
        for c in set {
            pass.outcomes.insert(
                key(c),
                Outcome::Chosen {
                    method: Method::MultiNodeConsolidation,
                    savings: cmd.savings_per_hour,
                    delete_only,
                },
            );
        }
        pass.command = Some(cmd);
    }

    // 4. Single-node consolidation: every remaining candidate is evaluated; the cheapest
    // to disrupt that works acts if nothing else did. A fast pass evaluates at most
    // SINGLE_NODE_BATCH candidates, starting where the last fast pass stopped (upstream
    // bounds this method with a timeout and resumes from the candidates it has not seen).
    pass.single_node_candidates = consolidatable.len();
    let single: Vec<&Candidate> = if options.fast && consolidatable.len() > SINGLE_NODE_BATCH {
        let start = options.single_node_start % consolidatable.len();
        consolidatable
            .iter()
            .cycle()
            .skip(start)
            .take(SINGLE_NODE_BATCH)
            .copied()
            .collect()
    } else {
        consolidatable
    };
    pass.single_node_evaluated = single.len();
    pass.single_node_candidates = pass.single_node_candidates.max(single.len());
    // Candidates no single node could replace, in rank order, for split consolidation.
    let mut unsplit: Vec<&Candidate> = Vec::new();
    for c in single {
        if options.fast && pass.command.is_some() {
            break;
        }
        let name = key(c);
        if pass.outcomes.contains_key(&name) {
            continue;
        }
        if !under_allow.has(&node(c).nodepool) {
            pass.outcomes
                .insert(name, Outcome::Blocked(under_allow.block(&node(c).nodepool)));
            continue;
        }
        // Balanced: skip what even a delete could not pass, then score the move
        // (upstream `singlenodeconsolidation.go` CanPassThreshold and ApproveCommand).
        if let Err(b) = balanced::can_pass(state, c, &balanced_totals) {
            pass.outcomes.insert(name, Outcome::Blocked(b));
            continue;
        }
        pass.candidates_evaluated += 1;
        match incremental::Verdicts::get_or(
            &mut cache.single,
            (&mut cache.simulated, &mut cache.carried),
            name.clone(),
            || {
                let sim = prepared.simulator(slot);
                consolidation::evaluate(
                    sim,
                    state,
                    &[c],
                    &movers(),
                    options.spot_to_spot,
                    !options.fast,
                )
            },
        )
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|p| {
            min_savings.check(state, &[c], p.savings)?;
            balanced::approve(state, &[c], p.savings, &balanced_totals).map(|s| (p, s))
        }) {
            Ok((p, scores)) => {
                *pass.eligible.entry(Reason::Underutilized).or_default() += 1;
                let delete_only = p.replacement.is_none();
                if pass.command.is_none() {
                    pass.choose_one(
                        state,
                        Method::SingleNodeConsolidation,
                        c,
                        p.replacement.iter().cloned().collect(),
                        scores,
                    );
                } else {
                    let verb = if delete_only { "delete" } else { "replace" };
                    pass.outcomes.insert(
                        name,
                        Outcome::Eligible {
                            method: Method::SingleNodeConsolidation,
                            detail: format!("{verb}, saves ${:.4}/h", p.savings),
                        },
                    );
                }
            }
            Err(b) => {
                if options.split_percent.is_some() && split::applies(&b) {
                    unsplit.push(c);
                }
                pass.outcomes.insert(name, Outcome::Blocked(b));
            }
        }
    }

    // 5. Split consolidation (ours, behind a flag): a node single-node consolidation
    // could not replace with one cheaper node, replaced by several.
    if let Some(percent) = options.split_percent {
        for c in unsplit {
            if options.fast && pass.command.is_some() {
                break;
            }
            let name = key(c);
            let movers = prepared.movers();
            let verdict = split::evaluate(prepared.simulator(slot), state, c, &movers, percent)
                .and_then(|p| {
                    min_savings.check(state, &[c], p.savings)?;
                    balanced::approve(state, &[c], p.savings, &balanced_totals).map(|s| (p, s))
                });
            let (plan, scores) = match verdict {
                Ok(v) => v,
                // Single-node consolidation's words stand unless the split got as far
                // as a price.
                Err(b) if split::applies(&b) => continue,
                Err(b) => {
                    pass.outcomes.insert(name, Outcome::Blocked(b));
                    continue;
                }
            };
            *pass.eligible.entry(Reason::Underutilized).or_default() += 1;
            if pass.command.is_some() {
                pass.outcomes.insert(
                    name,
                    Outcome::Eligible {
                        method: Method::SplitConsolidation,
                        detail: format!(
                            "onto {} nodes, saves ${:.4}/h",
                            plan.replacements.len(),
                            plan.savings
                        ),
                    },
                );
                continue;
            }
            pass.choose_one(
                state,
                Method::SplitConsolidation,
                c,
                plan.replacements,
                scores,
            );
        }
    }

    for c in &cands {
        pass.outcomes
            .entry(key(c))
            .or_insert(Outcome::Blocked(Block::NotEvaluated));
    }
    cache.countdown = pass
        .outcomes
        .values()
        .any(|o| matches!(o, Outcome::Blocked(Block::ConsolidateAfter { .. })));
    for (name, o) in &pass.outcomes {
        if let Outcome::Blocked(b) = o {
            if b.is_transient() {
                continue;
            }
            pass.events.push(Event {
                nodeclaim: name.clone(),
                reason: b.event_reason().to_string(),
                message: b.to_string(),
            });
        }
    }
    pass.budgets = budgets;
    pass
}

#[cfg(test)]
mod tests;
