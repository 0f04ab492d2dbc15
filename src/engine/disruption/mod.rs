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

pub mod budgets;
pub mod candidates;
mod command;
pub mod consolidation;
pub mod drift;
pub mod fixture;
pub mod outcome;
pub mod validation;

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::api::nodepool::{ConsolidationPolicy, DisruptionReason};
use crate::engine::pod::PodKey;
use crate::engine::resources::Resources;
use crate::engine::scheduling::{BoundPod, NodeInput, PoolInput, SolveInput};
use crate::engine::state::{ClusterState, StateNode};

pub use budgets::PoolBudgets;
use candidates::{Candidate, PdbIndex};
pub use command::{CandidateSummary, Command, Event, Replacement, ReplacementOption};
use command::{command, options_of};
pub use outcome::{Block, Method, Outcome, Reason};

/// Upstream caps multi-node consolidation at the 100 cheapest candidates.
pub const MAX_MULTI_NODE_CANDIDATES: usize = 100;

/// Knobs of a pass.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Allow replacing spot nodes with cheaper spot nodes (upstream feature gate
    /// `SpotToSpotConsolidation`, default off).
    pub spot_to_spot: bool,
    /// NodeClaims the approval gate or the orchestrator holds (pending decision, rejected
    /// by an operator, in flight), with the words to show.
    pub held: HashMap<String, String>,
    /// NodeClaims that already count against their pool's budgets although nothing shows
    /// it yet on the nodes: decisions waiting for approval or validation, and commands in
    /// flight whose taint has not come back from the cluster.
    pub reserved: HashSet<String>,
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
#[derive(Clone, Debug)]
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
}

/// Counts per pool: managed initialized nodes, and of those NotReady, deleting or held
/// (`reserved`), and of those the reserved ones.
fn pool_counts<'a>(
    state: &'a ClusterState,
    reserved: &HashSet<String>,
) -> HashMap<&'a str, (usize, usize, usize)> {
    let mut counts: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    for n in &state.nodes {
        if !n.initialized {
            continue;
        }
        let c = counts.entry(n.nodepool.as_str()).or_default();
        c.0 += 1;
        if !n.ready || n.deleting || n.is_disrupted_tainted() {
            c.1 += 1;
        } else if reserved.contains(&n.nodeclaim) {
            c.1 += 1;
            c.2 += 1;
        }
    }
    counts
}

/// Every pool's budgets at `now`, with the `reserved` NodeClaims counted as disrupting
/// (upstream `BuildDisruptionBudgetMapping`).
pub fn evaluate_budgets(
    state: &ClusterState,
    now: DateTime<Utc>,
    reserved: &HashSet<String>,
) -> Vec<PoolBudgets> {
    let counts = pool_counts(state, reserved);
    state
        .nodepools
        .iter()
        .map(|(name, pool)| {
            let (total, disrupting, held) = counts.get(name.as_str()).copied().unwrap_or_default();
            let mut b = PoolBudgets::evaluate(pool, total, disrupting, now);
            b.reserved = held;
            b
        })
        .collect()
}

/// The scheduling input of a pass: every pool, every node not being deleted (uninitialized
/// ones included: their capacity is on its way), every bound pod.
pub struct SimInput<'a> {
    pub input: SolveInput<'a>,
    /// State node index -> index into `input.nodes`.
    pub index: Vec<Option<usize>>,
    /// Node name -> NodeClaim of the nodes that are not initialized: a pod a simulation
    /// places there is counting on capacity that is not there yet.
    pub uninitialized: HashMap<String, String>,
}

impl<'a> SimInput<'a> {
    pub fn new(state: &'a ClusterState, pods_by_node: &[Vec<usize>]) -> SimInput<'a> {
        let mut input = SolveInput {
            daemonsets: state.daemonsets.clone(),
            ..Default::default()
        };
        for (name, pool) in &state.nodepools {
            let mut in_use = Resources::default();
            for n in state.nodes.iter().filter(|n| &n.nodepool == name) {
                in_use.add(&n.allocatable);
            }
            input.pools.push(PoolInput {
                nodepool: pool,
                instance_types: state.instance_types.get(name).cloned().unwrap_or_default(),
                in_use,
            });
        }
        let mut index = vec![None; state.nodes.len()];
        let mut uninitialized = HashMap::new();
        for (i, n) in state.nodes.iter().enumerate() {
            if n.deleting || n.is_disrupted_tainted() {
                continue;
            }
            if !n.initialized {
                uninitialized.insert(n.name.clone(), n.nodeclaim.clone());
            }
            let mut requested = Resources::default();
            let mut host_ports = Vec::new();
            for &p in &pods_by_node[i] {
                let p = &state.pods[p];
                if p.is_terminal() {
                    continue;
                }
                requested.add(&p.requests);
                host_ports.extend(p.host_ports.iter().cloned());
                input.bound.push(BoundPod {
                    pod: p,
                    node_labels: &n.labels,
                    node_taints: &n.taints,
                });
            }
            index[i] = Some(input.nodes.len());
            input.nodes.push(NodeInput {
                name: n.name.clone(),
                labels: n.labels.clone(),
                taints: n.taints.clone(),
                allocatable: n.allocatable.clone(),
                requested,
                host_ports,
                initialized: n.initialized,
            });
        }
        SimInput {
            input,
            index,
            uninitialized,
        }
    }

    /// The first of `pods` a simulation placed on a node that is not initialized, and
    /// that node's NodeClaim (upstream `UninitializedNodeError`: "would schedule against
    /// uninitialized nodeclaim").
    pub fn on_uninitialized<'p>(
        &self,
        results: &'p crate::engine::scheduling::Results,
        pods: &HashSet<&crate::engine::pod::PodKey>,
    ) -> Option<(&'p crate::engine::pod::PodKey, &str)> {
        if self.uninitialized.is_empty() {
            return None;
        }
        results.nominations.iter().find_map(|n| {
            let claim = self.uninitialized.get(&n.node)?;
            let pod = n.pods.iter().find(|p| pods.contains(p))?;
            Some((pod, claim.as_str()))
        })
    }
}

/// Budget left per pool for one reason, drawn down as a pass assigns candidates.
struct Allowance<'a> {
    budgets: &'a [PoolBudgets],
    left: HashMap<&'a str, usize>,
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

/// Pods that will need capacity whatever the pass decides: pending pods the provisioner
/// would schedule, and pods on nodes being deleted or marked for deletion by a command in
/// flight (upstream `SimulateScheduling` adds both to every consolidation simulation;
/// without the second, two commands in a row count on the same free capacity).
pub fn pending_pods(state: &ClusterState) -> Vec<&crate::engine::pod::Pod> {
    let deleting: HashSet<&str> = state
        .nodes
        .iter()
        .filter(|n| n.deleting || n.is_disrupted_tainted())
        .map(|n| n.name.as_str())
        .collect();
    crate::engine::provisioning::pods_to_schedule(&state.pods, |n| deleting.contains(n))
}

/// Of [`pending_pods`], those still bound to a node (it is going away). Upstream counts
/// their scheduling failures against a command (`NonPendingPodSchedulingErrors`); only
/// pods that were already pending may fail without blocking it.
pub fn moving_pods<'a>(pending: &[&'a crate::engine::pod::Pod]) -> HashSet<&'a PodKey> {
    pending
        .iter()
        .filter(|p| p.node_name.is_some())
        .map(|p| &p.key)
        .collect()
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

/// Runs one disruption pass over the state at `now`.
pub fn plan(state: &ClusterState, now: DateTime<Utc>, options: &Options) -> Pass {
    let budgets = evaluate_budgets(state, now, &options.reserved);
    let pods_by_node = state.pods_by_node();
    let pdbs = PdbIndex::new(&state.pdbs);
    let hashes: HashMap<&str, String> = state
        .nodepools
        .iter()
        .map(|(n, p)| (n.as_str(), drift::nodepool_hash(p)))
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
    };
    let mut soon = Soonest { now, at: None };
    for b in &budgets {
        for r in &b.reasons {
            soon.add(r.next_change);
        }
    }

    // Node-level blocks, expiration, drift verdicts, and the candidate list.
    let mut cands: Vec<Candidate> = Vec::new();
    for (i, node) in state.nodes.iter().enumerate() {
        let key = &node.nodeclaim;
        let pool = state.nodepools.get(&node.nodepool);
        let drifted = pool.filter(|_| !node.deleting).and_then(|p| {
            let hash = hashes
                .get(node.nodepool.as_str())
                .map_or("", String::as_str);
            drift::drift(node, p, hash)
        });
        if let Some(d) = &drifted {
            pass.drifted.insert(key.clone(), d.to_string());
        }
        soon.add(node.expires_at());
        soon.add(node.nominated_until);
        if let Some(why) = options.held.get(key) {
            pass.outcomes.insert(
                key.clone(),
                Outcome::Blocked(Block::Held { why: why.clone() }),
            );
            continue;
        }
        if let Some(at) = node.expires_at()
            && now >= at
            && !node.deleting
            && !node.is_disrupted_tainted()
        {
            let c = Candidate {
                node: i,
                pods: pods_by_node[i]
                    .iter()
                    .copied()
                    .filter(|&p| crate::engine::state::is_reschedulable(&state.pods[p]))
                    .collect(),
                cost: 0.0,
                consolidatable: Ok(()),
                pod_block: None,
                drift: None,
            };
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
        if let Some(b) = candidates::node_block(node, pool, now) {
            pass.outcomes.insert(key.clone(), Outcome::Blocked(b));
            continue;
        }
        let Some(pool) = pool else { continue };
        let c = candidates::candidate(state, i, &pods_by_node[i], pool, drifted, &pdbs, now);
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
    let node = |c: &Candidate| -> &StateNode { &state.nodes[c.node] };
    let key = |c: &Candidate| -> String { state.nodes[c.node].nodeclaim.clone() };

    if let Some(why) = &options.unsynced {
        // Nothing voluntary until the view of the cluster is whole.
        for c in &cands {
            pass.outcomes.insert(
                key(c),
                Outcome::Blocked(Block::Unsynced { why: why.clone() }),
            );
        }
        pass.budgets = budgets;
        return pass;
    }
    let scaling = options.scaling_up.as_ref().map(|claim| Block::ScalingUp {
        nodeclaim: claim.clone(),
    });

    let sim_input = SimInput::new(state, &pods_by_node);
    let mut sim = crate::engine::scheduling::Simulator::new(&sim_input.input);
    let pending = pending_pods(state);
    let moving = moving_pods(&pending);
    let pool_of = |c: &Candidate| &state.nodepools[&state.nodes[c.node].nodepool];

    // 1. Emptiness: every empty, consolidatable, unblocked candidate within budget. It
    // simulates nothing, so a scale-up in progress does not hold it.
    let mut empty_allow = Allowance::new(&budgets, DisruptionReason::Empty);
    let mut empties: Vec<&Candidate> = Vec::new();
    for c in cands.iter().filter(|c| c.is_empty()) {
        pass.candidates_evaluated += 1;
        if let Some(b) = &c.pod_block {
            pass.outcomes.insert(key(c), Outcome::Blocked(b.clone()));
            continue;
        }
        if let Err(b) = &c.consolidatable {
            pass.outcomes.insert(key(c), Outcome::Blocked(b.clone()));
            continue;
        }
        *pass.eligible.entry(Reason::Empty).or_default() += 1;
        if !empty_allow.has(&node(c).nodepool) {
            pass.outcomes.insert(
                key(c),
                Outcome::Blocked(empty_allow.block(&node(c).nodepool)),
            );
            continue;
        }
        empty_allow.take(&node(c).nodepool);
        empties.push(c);
    }
    if !empties.is_empty() {
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
        let own: HashSet<&PodKey> = c.pods.iter().map(|&p| &state.pods[p].key).collect();
        let results = if c.pods.is_empty() {
            Default::default()
        } else {
            // Upstream `SimulateScheduling`: the pending pods and those of deleting nodes
            // compete for the same room.
            let mut pods: Vec<_> = c.pods.iter().map(|&p| &state.pods[p]).collect();
            pods.extend(pending.iter().copied());
            let excluded: Vec<usize> = sim_input.index[c.node].into_iter().collect();
            sim.run(&pods, &excluded)
        };
        let blocking = |k: &PodKey| own.contains(k) || moving.contains(k);
        if let Some((pod, e)) = results.errors.iter().find(|(k, _)| blocking(k)) {
            pass.outcomes.insert(
                name,
                Outcome::Blocked(Block::PodsWouldNotFit {
                    pod: pod.clone(),
                    why: e.clone(),
                }),
            );
            continue;
        }
        if let Some((pod, claim)) = sim_input.on_uninitialized(&results, &own) {
            pass.outcomes.insert(
                name,
                Outcome::Blocked(Block::WouldUseUninitialized {
                    pod: pod.clone(),
                    nodeclaim: claim.to_string(),
                }),
            );
            continue;
        }
        // Only the NodeClaims the candidate's pods need: the provisioner launches for
        // the pending pods on its own.
        let replacements = results
            .new_nodeclaims
            .iter()
            .filter(|nc| nc.pods.iter().any(|p| own.contains(p)))
            .map(|nc| {
                Replacement::new(
                    nc,
                    nc.requirements.clone(),
                    options_of(nc, &nc.requirements),
                )
            })
            .collect::<Vec<_>>();
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
    let movers = Movers {
        sim_input: &sim_input,
        pending: &pending,
        moving: &moving,
    };

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
    let mut multi: Option<(usize, consolidation::Plan)> = None;
    if pass.command.is_none() && prefix.len() >= 2 {
        let (mut lo, mut hi) = (1usize, prefix.len() - 1);
        while lo <= hi {
            let mid = (lo + hi) / 2;
            let set = &prefix[..=mid];
            pass.candidates_evaluated += set.len();
            match consolidation::evaluate(
                &mut sim,
                state,
                set,
                &movers,
                options.spot_to_spot,
                !options.fast,
            ) {
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
    if let Some((n, p)) = multi {
        let set = &prefix[..n];
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
        pass.candidates_evaluated += 1;
        match consolidation::evaluate(
            &mut sim,
            state,
            &[c],
            &movers,
            options.spot_to_spot,
            !options.fast,
        ) {
            Ok(p) => {
                *pass.eligible.entry(Reason::Underutilized).or_default() += 1;
                let delete_only = p.replacement.is_none();
                if pass.command.is_none() {
                    let cmd = command(
                        state,
                        Method::SingleNodeConsolidation,
                        Reason::Underutilized,
                        &[c],
                        p.replacement.into_iter().collect(),
                    );
                    pass.outcomes.insert(
                        name,
                        Outcome::Chosen {
                            method: Method::SingleNodeConsolidation,
                            savings: cmd.savings_per_hour,
                            delete_only,
                        },
                    );
                    pass.command = Some(cmd);
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
                pass.outcomes.insert(name, Outcome::Blocked(b));
            }
        }
    }

    for c in &cands {
        pass.outcomes
            .entry(key(c))
            .or_insert(Outcome::Blocked(Block::NotEvaluated));
    }
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

/// What a consolidation simulation moves besides the candidates' pods, and where it must
/// not count on room.
pub struct Movers<'a> {
    pub sim_input: &'a SimInput<'a>,
    /// [`pending_pods`]: they compete for the same room.
    pub pending: &'a [&'a crate::engine::pod::Pod],
    /// [`moving_pods`]: their failures block a command.
    pub moving: &'a HashSet<&'a PodKey>,
}

#[cfg(test)]
mod tests;
