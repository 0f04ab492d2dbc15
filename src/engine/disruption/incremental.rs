//! Incremental disruption: what one pass simulated, carried into the next.
//!
//! A pass at 5,000 nodes runs thousands of scheduling simulations ("could this node's
//! pods go elsewhere?"), while between two polls only a few nodes change. The
//! [`Planner`] keeps each simulation's verdict with the world it was computed in and, at
//! the next pass, drops exactly the verdicts a change could have altered:
//!
//! - anything the simulations all read (NodePools, their instance types and, where a pool
//!   has limits, its usage; DaemonSets; the pending pods; the pass's knobs) changed:
//!   every verdict goes;
//! - some nodes changed (added, removed, relabelled, retainted, a pod bound, moved or
//!   gone): multi-node and drift verdicts go (they read the whole cluster), and a
//!   single-node verdict goes when its node changed, when its pods could be scheduled on
//!   a changed node (they tolerate its taints, before or after), when its pods or the
//!   pending pods carry topology rules (spread, pod affinity: they count pods
//!   everywhere), or when a changed node holds a pod with anti-affinity (it keeps others
//!   away from its whole domain).
//!
//! Everything time-dependent (timers, budgets, ranking, do-not-disrupt windows) is
//! worked out afresh every pass, so a pass with carried verdicts says word for word what
//! a full pass would (`tests::incremental_passes_match_full_passes` checks that over
//! random change sequences). What is carried is the simulations only; the simulator
//! itself is built only when some verdict must be recomputed.

use crate::engine::fast_hash::{FastMap, FastSet};
use std::hash::Hash;

use chrono::{DateTime, Utc};

use crate::engine::pod::Pod;
use crate::engine::state::ClusterState;

use super::consolidation::Plan;
use super::images::{
    Changed, NodeImage, Shared, admits, all_nodes, diff, has_topology, node_image,
};
use super::{Block, Options, Pass, Prepared, Replacement, SimSlot};

/// More changed nodes than this and single-node verdicts are not worth sorting out: all go.
const MAX_CHANGED_NODES: usize = 64;

/// Carries simulation verdicts from pass to pass (see the module doc).
#[derive(Debug, Default)]
pub struct Planner {
    /// The owner's revision of the state the cached verdicts hold for.
    revision: Option<u64>,
    world: Option<World>,
    /// The nodes the owner reported changed since the last refresh, if it reports them.
    dirty: Dirty,
    /// Refreshes so far: every [`AUDIT_EVERY`]th one of a tracking planner checks the
    /// owner's reports against a full look.
    refreshes: u64,
    /// How many nodes and pods the state had at the last refresh: a state that kept its
    /// revision but not these broke the owner's promise, and is looked at anew.
    sizes: (usize, usize),
    pub(super) cache: Verdicts,
    /// The last pass, to hand out again while nothing it depends on moved.
    last: Option<(Options, Pass)>,
    /// The bound pods' topology counts the simulations needed, kept up to date with the
    /// nodes that change.
    topology: super::topology_counts::TopologyCounts,
    /// Simulations run and verdicts carried over, over the planner's life.
    pub stats: Stats,
}

/// Counts of the planner's work, for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Verdicts computed by simulating.
    pub simulated: usize,
    /// Verdicts taken from an earlier pass.
    pub carried: usize,
    /// Audits that found a node changed that its owner did not report (each one fell
    /// back to a full look, so no verdict was kept wrongly; a test keeps this at zero).
    pub audit_misses: usize,
}

/// How often a tracking planner audits its owner's change reports (one refresh in this
/// many looks at every node, as an untracked planner always does).
const AUDIT_EVERY: u64 = 64;

/// What the owner of the state reported changed since the last refresh.
#[derive(Debug, Default)]
struct Dirty {
    /// The owner reports every change to a node or to the pods bound to it.
    tracked: bool,
    /// Audit at every refresh (tests), not every [`AUDIT_EVERY`]th.
    audit_always: bool,
    /// Nodes by NodeClaim: the node itself changed (added, removed, re-derived).
    claims: FastSet<String>,
    /// Nodes by Node name: a pod bound there came, went or changed (pods name their
    /// node by its Node name, which may not be known to the owner as a NodeClaim yet).
    names: FastSet<String>,
}

/// The verdicts of earlier passes that still hold.
#[derive(Debug, Default)]
pub(super) struct Verdicts {
    /// Single-node consolidation, by NodeClaim.
    pub single: FastMap<String, Result<Plan, Block>>,
    /// Multi-node consolidation, by the candidates' NodeClaims in order.
    pub sets: FastMap<Vec<String>, Result<Plan, Block>>,
    /// Drift replacements, by NodeClaim.
    pub drift: FastMap<String, Result<Vec<Replacement>, Block>>,
    /// What each node's pods say to its candidate, by NodeClaim: dropped when the node
    /// changes (its fingerprint covers its pods and their places in the pod list) and
    /// all at once when the PDBs' selectors change.
    pub node_pods: FastMap<String, super::candidates::NodePods>,
    /// Each node's drift verdict, by NodeClaim: dropped when the node changes (its
    /// fingerprint covers what drift reads of it: NodeClaim labels, annotations, the
    /// recorded and the cloud's verdicts) and all at once when a pool changes.
    pub drifted: FastMap<String, Option<super::drift::DriftReason>>,
    pub simulated: usize,
    pub carried: usize,
    /// The last pass's ranked candidates (node index, eviction cost before lifetime).
    pub ranked: Vec<(usize, f64)>,
    /// The last pass shows a countdown (consolidateAfter's seconds left), which moves
    /// with time alone.
    pub countdown: bool,
}

impl Verdicts {
    fn clear(&mut self) {
        self.single.clear();
        self.sets.clear();
        self.drift.clear();
    }

    /// The cached verdict under `key`, or the one `compute` gives (then cached).
    pub fn get_or<'m, K, V>(
        map: &'m mut FastMap<K, V>,
        counts: (&mut usize, &mut usize),
        key: K,
        compute: impl FnOnce() -> V,
    ) -> &'m V
    where
        K: Eq + Hash,
    {
        let (simulated, carried) = counts;
        match map.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => {
                *carried += 1;
                e.into_mut()
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                *simulated += 1;
                e.insert(compute())
            }
        }
    }
}

impl Planner {
    /// A pass at `now`, re-simulating only what changed since the last one. `revision`
    /// is the owner's count of changes to `state`: the same number promises the same
    /// state (the controller bumps it on every write), so an unchanged cluster costs no
    /// fingerprinting at all.
    pub fn plan(
        &mut self,
        state: &ClusterState,
        revision: u64,
        now: DateTime<Utc>,
        options: &Options,
    ) -> Pass {
        self.plan_in(&Prepared::new(state), &mut None, revision, now, options)
    }

    /// [`Planner::plan`] over a state `prepared` for other simulations too (the
    /// controller's poll re-validates waiting decisions over the same state first), with
    /// its simulator in `slot`.
    pub fn plan_in<'p>(
        &mut self,
        prepared: &'p Prepared<'p>,
        slot: &mut SimSlot<'p>,
        revision: u64,
        now: DateTime<Utc>,
        options: &Options,
    ) -> Pass {
        let state = prepared.state;
        self.prepare(prepared, revision, options);
        if let Some(pass) = self.still_holds(state, now, options) {
            return pass;
        }
        self.cache.simulated = 0;
        self.cache.carried = 0;
        let pass = super::plan_with(prepared, slot, now, options, &mut self.cache);
        self.adopt_groups(prepared, slot);
        self.stats.simulated += self.cache.simulated;
        self.stats.carried += self.cache.carried;
        self.last = Some((options.clone(), pass.clone()));
        pass
    }

    /// Brings the planner up to the state `prepared` (of the owner's `revision`) and
    /// hands `prepared` the topology counts it keeps, so that every simulator built over
    /// it, before the pass too (the controller re-validates waiting decisions first),
    /// starts from them. [`Planner::plan_in`] does this itself.
    pub fn prepare(&mut self, prepared: &Prepared<'_>, revision: u64, options: &Options) {
        let state = prepared.state;
        let knobs = Knobs::of(options);
        let same_knobs = self.world.as_ref().is_some_and(|w| w.shared.knobs == knobs);
        let sizes = (state.nodes.len(), state.pods.len());
        if self.revision != Some(revision) || !same_knobs || self.sizes != sizes {
            self.sizes = sizes;
            self.refresh(state, prepared.pods_by_node(), prepared.pending(), knobs);
            self.revision = Some(revision);
            self.last = None;
        }
        prepared.use_group_counts(self.topology.totals());
    }

    /// Keeps, from now on, the topology counts of every group the simulator in `slot`
    /// (over `prepared`, the state of the last [`Planner::prepare`]) needed, so the
    /// simulators of later passes are handed them instead of counting every bound pod.
    pub fn adopt_groups<'p>(&mut self, prepared: &'p Prepared<'p>, slot: &SimSlot<'p>) {
        if let Some(sim) = slot.as_ref() {
            self.topology.adopt(
                sim.groups_used(),
                prepared.state,
                prepared.pods_by_node(),
                self.refreshes,
            );
        }
    }

    /// The last pass again, at `now`, when the state (same revision) and the options are
    /// the same and time alone changed nothing it says: no instant it named as a change
    /// has come, it shows no countdown, and the candidates still rank in the same order
    /// (their costs shrink with the lifetime they have left, at different rates).
    fn still_holds(
        &mut self,
        state: &ClusterState,
        now: DateTime<Utc>,
        options: &Options,
    ) -> Option<Pass> {
        let (last_options, last) = self.last.as_ref()?;
        if last_options != options
            || now < last.at
            || last.next_change.is_some_and(|t| now >= t)
            || self.cache.countdown
        {
            return None;
        }
        let cost = |&(node, eviction): &(usize, f64)| {
            let n = state.nodes.get(node)?;
            Some((
                eviction * super::candidates::lifetime_remaining(n, now),
                n.nodeclaim.as_str(),
            ))
        };
        let mut prev: Option<(f64, &str)> = None;
        for r in &self.cache.ranked {
            let here = cost(r)?;
            if let Some(p) = prev
                && p.0.total_cmp(&here.0).then_with(|| p.1.cmp(here.1)).is_gt()
            {
                return None;
            }
            prev = Some(here);
        }
        self.stats.carried += self.cache.carried + self.cache.simulated;
        let mut pass = last.clone();
        pass.at = now;
        Some(pass)
    }

    /// Promises that the owner reports, through [`Planner::node_changed`] and
    /// [`Planner::pods_changed_on`], every change to a node or to the pods bound to it:
    /// a refresh then fingerprints only those nodes instead of every pod in the cluster
    /// (a sixth of a simulated day). Every [`AUDIT_EVERY`]th refresh still looks at all
    /// of them and counts what the reports missed in [`Stats::audit_misses`].
    pub fn track_changes(&mut self) {
        self.dirty.tracked = true;
    }

    /// Audits the owner's reports at every refresh (for tests of the owner).
    pub fn audit_always(&mut self) {
        self.dirty.audit_always = true;
    }

    /// The node of this NodeClaim changed, appeared or went.
    pub fn node_changed(&mut self, claim: &str) {
        if self.dirty.tracked && !self.dirty.claims.contains(claim) {
            self.dirty.claims.insert(claim.to_string());
        }
    }

    /// A pod bound to the node of this name came, went or changed.
    pub fn pods_changed_on(&mut self, node: &str) {
        if self.dirty.tracked && !self.dirty.names.contains(node) {
            self.dirty.names.insert(node.to_string());
        }
    }

    /// Looks at the state anew and drops the verdicts its changes could have altered.
    fn refresh(
        &mut self,
        state: &ClusterState,
        pods_by_node: &[Vec<usize>],
        pending: &[&Pod],
        knobs: Knobs,
    ) {
        self.refreshes += 1;
        let claims = std::mem::take(&mut self.dirty.claims);
        let names = std::mem::take(&mut self.dirty.names);
        let shared = Shared::of(state, pending, knobs);
        let Some(old) = self.world.take() else {
            self.cache.clear();
            self.cache.node_pods.clear();
            self.cache.drifted.clear();
            self.topology.clear();
            self.world = Some(World {
                nodes: all_nodes(state, pods_by_node),
                shared,
            });
            return;
        };
        let full_look = || {
            let full = all_nodes(state, pods_by_node);
            let changed = diff(&old.nodes, &full);
            (full, changed)
        };
        let (nodes, changed) = if !self.dirty.tracked {
            full_look()
        } else if self.dirty.audit_always || self.refreshes.is_multiple_of(AUDIT_EVERY) {
            let (nodes, changed) =
                reported(old.nodes.clone(), &claims, &names, state, pods_by_node);
            let (full, full_changed) = full_look();
            if diff(&nodes, &full).is_empty() {
                (nodes, changed)
            } else {
                tracing::warn!(
                    "disruption planner: a node changed that its owner did not report; \
                     this refresh uses a full look instead"
                );
                self.stats.audit_misses += 1;
                (full, full_changed)
            }
        } else {
            reported(old.nodes, &claims, &names, state, pods_by_node)
        };
        if shared.pdbs != old.shared.pdbs {
            self.cache.node_pods.clear();
        }
        if shared.pools != old.shared.pools {
            self.cache.drifted.clear();
        }
        for (claim, _, _) in &changed {
            self.cache.node_pods.remove(claim);
            self.cache.drifted.remove(claim);
        }
        let index = if changed.is_empty() {
            FastMap::default()
        } else {
            state.node_index()
        };
        self.topology.update(
            changed.iter().map(|(claim, _, _)| claim.as_str()),
            &index,
            state,
            pods_by_node,
            self.refreshes,
        );
        if !shared.same(&old.shared) {
            self.cache.clear();
        } else {
            prune(
                &mut self.cache,
                &changed,
                &shared,
                &index,
                state,
                pods_by_node,
            );
        }
        self.world = Some(World { shared, nodes });
    }
}

/// `nodes` brought up to date with the nodes the owner reported changed, and what
/// changed among them.
fn reported(
    mut nodes: FastMap<String, NodeImage>,
    claims: &FastSet<String>,
    names: &FastSet<String>,
    state: &ClusterState,
    pods_by_node: &[Vec<usize>],
) -> (FastMap<String, NodeImage>, Vec<Changed>) {
    let mut claims: FastSet<&str> = claims.iter().map(String::as_str).collect();
    let mut at: FastMap<&str, usize> =
        FastMap::with_capacity_and_hasher(claims.len(), Default::default());
    if !names.is_empty() || !claims.is_empty() {
        for (i, n) in state.nodes.iter().enumerate() {
            if names.contains(&n.name) {
                claims.insert(n.nodeclaim.as_str());
            }
            if claims.contains(n.nodeclaim.as_str()) {
                at.insert(n.nodeclaim.as_str(), i);
            }
        }
    }
    let mut changed = Vec::new();
    for claim in claims {
        match at.get(claim) {
            Some(&i) => {
                let image = node_image(&state.nodes[i], &pods_by_node[i], state);
                let before = nodes.insert(claim.to_string(), image.clone());
                if before
                    .as_ref()
                    .is_none_or(|b| b.fingerprint != image.fingerprint)
                {
                    changed.push((claim.to_string(), before, Some(image)));
                }
            }
            None => {
                if let Some(before) = nodes.remove(claim) {
                    changed.push((claim.to_string(), Some(before), None));
                }
            }
        }
    }
    (nodes, changed)
}

/// The knobs of a pass that change what a simulation concludes or how it explains it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Knobs {
    spot_to_spot: bool,
    fast: bool,
}

impl Knobs {
    fn of(o: &Options) -> Knobs {
        Knobs {
            spot_to_spot: o.spot_to_spot,
            fast: o.fast,
        }
    }
}

/// What every simulation of a pass reads, and each node's image.
#[derive(Debug)]
struct World {
    shared: Shared,
    /// Each node's image, by NodeClaim.
    nodes: FastMap<String, NodeImage>,
}

/// Drops the verdicts that the `changed` nodes could have altered (what every
/// simulation reads, `new`, is the same as before).
fn prune(
    cache: &mut Verdicts,
    changed: &[Changed],
    new: &Shared,
    index: &FastMap<&str, usize>,
    state: &ClusterState,
    pods_by_node: &[Vec<usize>],
) {
    if changed.is_empty() {
        return;
    }
    cache.sets.clear();
    cache.drift.clear();
    let images = || {
        changed
            .iter()
            .flat_map(|(_, o, n)| o.iter().chain(n.iter()))
    };
    let pending_reach = new
        .pending_tolerations
        .iter()
        .any(|t| images().any(|img| admits(img, t)));
    if changed.len() > MAX_CHANGED_NODES
        || images().any(|img| img.anti)
        || (!new.pending_tolerations.is_empty() && (new.pending_topology || pending_reach))
    {
        cache.single.clear();
        return;
    }
    let gone: FastSet<&str> = changed.iter().map(|(k, _, _)| k.as_str()).collect();
    cache.single.retain(|claim, _| {
        if gone.contains(claim.as_str()) {
            return false;
        }
        let Some(&i) = index.get(claim.as_str()) else {
            return false;
        };
        let pods: Vec<&Pod> = pods_by_node[i]
            .iter()
            .map(|&p| &state.pods[p])
            .filter(|p| crate::engine::state::is_reschedulable(p))
            .collect();
        if pods.iter().any(|p| has_topology(p)) {
            return false;
        }
        !pods
            .iter()
            .any(|p| images().any(|img| admits(img, &p.tolerations)))
    });
}
