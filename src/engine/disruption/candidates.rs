//! Which nodes a pass may disrupt, what blocks the others, and in which order candidates
//! are tried.
//!
//! Mirrors upstream `disruption/types.go` `NewCandidate` and `ValidatePodsDisruptable`: a
//! candidate is initialized, not deleting, not nominated in the last 20 s, has no
//! `karpenter.sh/do-not-disrupt` node annotation, and no pod with an active do-not-disrupt
//! annotation or a PDB that forbids its eviction (one PDB allowing 0, or two PDBs selecting
//! it, which the eviction API refuses). Drift of a node with a terminationGracePeriod
//! ignores the pod-level blocks (upstream's "eventual" disruption class). Candidates are
//! ranked by disruption cost (`disruptionutils.ReschedulingCost` times
//! `LifetimeRemaining`), cheapest first.

use crate::engine::fast_hash::FastMap;

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::duration::GoDuration;
use crate::api::nodepool::NodePool;
use crate::engine::pod::Pod;
use crate::engine::selector::SelectorIndex;
use crate::engine::state::{ClusterState, Pdb, StateNode, is_reschedulable};

use super::drift::DriftReason;
use super::outcome::Block;

/// A node the pass may disrupt, with what each method needs to know about it.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Index into `ClusterState::nodes`.
    pub node: usize,
    /// Reschedulable pods (indices into `ClusterState::pods`): what must find a new home.
    pub pods: Vec<usize>,
    /// Disruption cost: lower is disrupted first.
    pub cost: f64,
    /// The pods' eviction costs before scaling by the lifetime left: `cost` at another
    /// moment is this times [`lifetime_remaining`] then.
    pub eviction: f64,
    /// Consolidation may consider it (consolidateAfter has passed since the last pod event).
    pub consolidatable: Result<(), Block>,
    /// A do-not-disrupt pod or a PDB that blocks eviction, if any.
    pub pod_block: Option<Block>,
    pub drift: Option<DriftReason>,
}

impl Candidate {
    /// Node `node` (its pods `pods`, indices into the state's) as a candidate that no
    /// pod, timer or policy holds: expiration and repair act on it whatever those say.
    pub fn forced(state: &ClusterState, node: usize, pods: &[usize]) -> Candidate {
        Candidate {
            node,
            pods: pods
                .iter()
                .copied()
                .filter(|&p| is_reschedulable(&state.pods[p]))
                .collect(),
            cost: 0.0,
            eviction: 0.0,
            consolidatable: Ok(()),
            pod_block: None,
            drift: None,
        }
    }

    /// No pod would need a new home.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// The pod-level block that applies to a method: drift of a node with a
    /// terminationGracePeriod drains it regardless (the grace period bounds the wait).
    pub fn pod_block_for_drift<'a>(&'a self, node: &StateNode) -> Option<&'a Block> {
        if node.termination_grace_period.is_some() {
            None
        } else {
            self.pod_block.as_ref()
        }
    }
}

/// Per-pod cost of eviction (upstream `EvictionCost`): 1, plus the pod-deletion-cost
/// annotation over 2^27, plus the priority over 2^25, clamped to [-10, 10].
pub fn eviction_cost(p: &Pod) -> f64 {
    let cost =
        1.0 + p.deletion_cost() as f64 / 2f64.powi(27) + f64::from(p.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// The fraction of `expireAfter` the node has left (1 without expiry), upstream
/// `LifetimeRemaining`: nodes close to expiry are cheaper to disrupt.
pub fn lifetime_remaining(node: &StateNode, now: DateTime<Utc>) -> f64 {
    match node.expire_after {
        Some(total) if total > TimeDelta::zero() => {
            // Time left, in durations only: adding `total` to a time is calendar work.
            let left = (total - (now - node.created)).num_milliseconds() as f64;
            (left / total.num_milliseconds() as f64).clamp(0.0, 1.0)
        }
        _ => 1.0,
    }
}

/// The active do-not-disrupt protection of a pod: `"true"` protects it for as long as it
/// runs; a positive Go duration protects it for that long after it started
/// (`status.startTime`), and a pod not started yet is protected (fail safe). Other values
/// do not protect it ([`do_not_disrupt_problem`] says why). Mirrors upstream
/// `pkg/utils/pod/scheduling.go` `IsDoNotDisruptActive`.
pub fn do_not_disrupt_until(p: &Pod, now: DateTime<Utc>) -> Option<Option<DateTime<Utc>>> {
    holds_at(do_not_disrupt_window(p), now)
}

/// What a pod's do-not-disrupt annotation holds it for, whatever the moment: `None`
/// when it has none (or one that is ignored), `Some(None)` for ever, `Some(Some(t))` until
/// `t`. Kept per node between passes ([`NodePods`]), so a pass reads no pod for it.
fn do_not_disrupt_window(p: &Pod) -> Option<Option<DateTime<Utc>>> {
    let v = p.do_not_disrupt()?;
    if v == "true" {
        return Some(None);
    }
    let d = positive_duration(v).ok()?;
    // Not started yet: the window has not begun, and the pod is held.
    Some(p.started.map(|started| started + d))
}

/// A [`do_not_disrupt_window`] at `now`: what [`do_not_disrupt_until`] says.
fn holds_at(
    window: Option<Option<DateTime<Utc>>>,
    now: DateTime<Utc>,
) -> Option<Option<DateTime<Utc>>> {
    match window? {
        None => Some(None),
        Some(until) => (now < until).then_some(Some(until)),
    }
}

/// Why a pod's do-not-disrupt annotation is ignored, if it is: neither `"true"` nor a
/// positive Go duration. Upstream publishes this as `InvalidDoNotDisruptAnnotation`.
pub fn do_not_disrupt_problem(p: &Pod) -> Option<String> {
    let v = p.do_not_disrupt()?;
    if v == "true" {
        return None;
    }
    positive_duration(v).err()
}

/// A do-not-disrupt duration (upstream `parseDoNotDisrupt`: Go's `time.ParseDuration`,
/// positive).
fn positive_duration(v: &str) -> Result<TimeDelta, String> {
    let d = GoDuration::parse(v)
        .ok()
        .and_then(|d| d.value())
        .and_then(|d| TimeDelta::from_std(d).ok())
        .ok_or_else(|| format!("failed to parse {v:?} as a duration"))?;
    if d <= TimeDelta::zero() {
        return Err(format!("duration {v:?} must be positive"));
    }
    Ok(d)
}

/// PDBs indexed by namespace and by a label their selector requires, built once per
/// pass: 50,000 pods against hundreds of PDBs look at a handful each.
pub struct PdbIndex<'a> {
    pdbs: &'a [Pdb],
    /// Hashed fast: one lookup per pod of every candidate node, each poll.
    by_namespace: FastMap<&'a str, SelectorIndex>,
}

impl<'a> PdbIndex<'a> {
    pub fn new(pdbs: &'a [Pdb]) -> Self {
        let mut by_namespace: FastMap<&str, SelectorIndex> = FastMap::default();
        for (i, p) in pdbs.iter().enumerate() {
            by_namespace
                .entry(p.namespace.as_str())
                .or_default()
                .insert(&p.selector, i);
        }
        PdbIndex { pdbs, by_namespace }
    }

    /// The PDBs selecting a pod, in the order they were given.
    pub fn matching(&self, pod: &Pod) -> Vec<&'a Pdb> {
        self.matching_indices(pod)
            .into_iter()
            .map(|i| &self.pdbs[i])
            .collect()
    }

    /// [`PdbIndex::matching`] as positions in the slice the index was built from.
    pub fn matching_indices(&self, pod: &Pod) -> Vec<usize> {
        let Some(index) = self.by_namespace.get(pod.key.namespace.as_str()) else {
            return Vec::new();
        };
        let mut out = index.candidates(&pod.labels);
        out.retain(|&i| self.pdbs[i].selects(pod));
        out
    }

    /// Why evicting the pod would be refused, if it would.
    pub fn eviction_block(&self, pod: &Pod) -> Option<Block> {
        Self::block_of(pod, self.matching(pod).into_iter())
    }

    /// Why evicting `pod`, which exactly `pdbs` select, would be refused, if it would.
    fn block_of<'p>(pod: &Pod, mut pdbs: impl Iterator<Item = &'p Pdb>) -> Option<Block> {
        let one = pdbs.next()?;
        let rest: Vec<&Pdb> = pdbs.collect();
        if rest.is_empty() {
            return (one.disruptions_allowed <= 0).then(|| Block::PdbAllowsZero {
                pdb: format!("{}/{}", one.namespace, one.name),
                pod: pod.key.clone(),
            });
        }
        Some(Block::MultiplePdbs {
            pod: pod.key.clone(),
            pdbs: std::iter::once(one)
                .chain(rest)
                .map(|p| format!("{}/{}", p.namespace, p.name))
                .collect(),
        })
    }
}

/// The node-level reasons a node cannot be a candidate at all.
pub fn node_block(node: &StateNode, pool: Option<&NodePool>, now: DateTime<Utc>) -> Option<Block> {
    if node.going_away() {
        return Some(Block::Deleting);
    }
    let Some(pool) = pool else {
        return Some(Block::NoNodePool);
    };
    if let Some(why) = pool.validation_failure() {
        return Some(Block::InvalidNodePool {
            nodepool: pool.metadata.name.clone().unwrap_or_default(),
            why: why.to_string(),
        });
    }
    if !node.initialized {
        return Some(Block::NotInitialized);
    }
    if let Some(until) = node.nominated_until
        && now < until
    {
        return Some(Block::Nominated { until });
    }
    if node.do_not_disrupt() {
        return Some(Block::NodeDoNotDisrupt);
    }
    None
}

/// When consolidation may consider the node: `consolidateAfter` after its initialization
/// or its last pod event, whichever is later (upstream's Consolidatable condition, set
/// by `nodeclaim/disruption/consolidation.go`; never counted from creation: a node that
/// took minutes to join is not consolidatable the moment it does). None when
/// consolidation is disabled (`Never`).
pub fn consolidatable_at(node: &StateNode, pool: &NodePool) -> Option<DateTime<Utc>> {
    consolidatable_from(
        node.initialized_at.unwrap_or(node.created),
        node.last_pod_event,
        pool,
    )
}

/// [`consolidatable_at`] from the two times it reads: the NodeClaim status writer has
/// them before the node is in a disruption pass's state.
pub fn consolidatable_from(
    initialized: DateTime<Utc>,
    last_pod_event: Option<DateTime<Utc>>,
    pool: &NodePool,
) -> Option<DateTime<Utc>> {
    let after = match &pool.spec.disruption.consolidate_after {
        Some(d) if d.is_never() => return None,
        Some(d) => d
            .value()
            .and_then(|v| TimeDelta::from_std(v).ok())
            .unwrap_or_default(),
        None => TimeDelta::zero(),
    };
    let since = last_pod_event.map_or(initialized, |t| t.max(initialized));
    Some(since + after)
}

/// Whether consolidation may consider the node now (see [`consolidatable_at`]).
pub fn consolidatable(node: &StateNode, pool: &NodePool, now: DateTime<Utc>) -> Result<(), Block> {
    let Some(ready) = consolidatable_at(node, pool) else {
        return Err(Block::ConsolidationDisabled);
    };
    if now < ready {
        let ms = (ready - now).num_milliseconds();
        return Err(Block::ConsolidateAfter {
            seconds_left: (ms + 999) / 1000,
        });
    }
    Ok(())
}

/// What a candidate reads of its node's pods that changes only when the pods do (or the
/// PDBs' selectors): the disruption planner keeps it per node between passes, so a pass
/// over nodes whose pods did not change does not look at each pod again (matching every
/// pod against the PDBs was a tenth of a simulated day). What depends on the moment
/// (do-not-disrupt windows, a PDB's disruptions allowed) is read at each pass.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePods {
    /// Reschedulable pods (indices into `ClusterState::pods`).
    pods: Vec<usize>,
    /// Their eviction costs, summed.
    eviction: f64,
    /// In the node's pod order, the evictable pods that could block the node: those with a
    /// do-not-disrupt annotation or selected by a PDB.
    blockers: Vec<Blocker>,
}

/// An evictable pod that could block its node.
#[derive(Clone, Debug, PartialEq)]
struct Blocker {
    /// Index into `ClusterState::pods`.
    pod: usize,
    /// The PDBs selecting it (indices into `ClusterState::pdbs`).
    pdbs: Vec<usize>,
    /// Its [`do_not_disrupt_window`]: reading the annotation of every such pod at every
    /// pass was 2.5% of the 1,000-node day.
    window: Option<Option<DateTime<Utc>>>,
}

impl NodePods {
    pub fn new(state: &ClusterState, pods_on_node: &[usize], pdbs: &PdbIndex) -> NodePods {
        let mut out = NodePods {
            pods: Vec::new(),
            eviction: 0.0,
            blockers: Vec::new(),
        };
        for &i in pods_on_node {
            let p = &state.pods[i];
            if p.is_terminal() || p.deleting.is_some() || p.is_static() {
                continue;
            }
            let matching = pdbs.matching_indices(p);
            if !matching.is_empty() || p.do_not_disrupt().is_some() {
                out.blockers.push(Blocker {
                    pod: i,
                    pdbs: matching,
                    window: do_not_disrupt_window(p),
                });
            }
            if is_reschedulable(p) {
                out.eviction += eviction_cost(p);
                out.pods.push(i);
            }
        }
        out
    }

    /// The first pod (in the node's order) that blocks eviction at `now`: an active
    /// do-not-disrupt, else a PDB that allows no disruption or several PDBs (upstream
    /// refuses to evict a pod more than one PDB selects).
    fn block(&self, state: &ClusterState, now: DateTime<Utc>) -> Option<Block> {
        self.blockers.iter().find_map(|b| {
            // Kept from an earlier pass over the same state: the pod is where it was.
            let p = || state.pods.get(b.pod);
            if let Some(until) = holds_at(b.window, now) {
                return Some(Block::PodDoNotDisrupt {
                    pod: p()?.key.clone(),
                    until,
                });
            }
            let mut pdbs = b.pdbs.iter().filter_map(|&m| state.pdbs.get(m)).peekable();
            pdbs.peek()?;
            PdbIndex::block_of(p()?, pdbs)
        })
    }
}

/// Builds the candidate for a node that passed [`node_block`], with its drift verdict
/// (see [`super::drift::drift`]) and what it reads of its pods (see [`NodePods`]).
pub fn candidate(
    state: &ClusterState,
    node_idx: usize,
    pods: &NodePods,
    pool: &NodePool,
    drift: Option<DriftReason>,
    now: DateTime<Utc>,
) -> Candidate {
    let node = &state.nodes[node_idx];
    Candidate {
        node: node_idx,
        pods: pods.pods.clone(),
        cost: pods.eviction * lifetime_remaining(node, now),
        eviction: pods.eviction,
        consolidatable: consolidatable(node, pool, now),
        pod_block: pods.block(state, now),
        drift,
    }
}

/// Sorts candidates cheapest to disrupt first; ties by NodeClaim, so passes are
/// deterministic. The sort moves small keys and places each candidate once: sorting
/// the candidates themselves moved a few hundred bytes per step.
pub fn rank(candidates: &mut Vec<Candidate>, state: &ClusterState) {
    let claim = |i: usize| state.nodes[i].nodeclaim.as_str();
    let mut order: Vec<(f64, usize, usize)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (c.cost, c.node, i))
        .collect();
    // Cost, then NodeClaim: a total order (a node is one candidate), so an unstable sort
    // gives what a stable one would.
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then_with(|| claim(a.1).cmp(claim(b.1))));
    let mut taken: Vec<Option<Candidate>> = candidates.drain(..).map(Some).collect();
    candidates.extend(order.iter().filter_map(|&(_, _, i)| taken[i].take()));
}
