//! The scheduling simulation: given pending pods, existing nodes, NodePools and instance
//! types, decide where every pod goes and which NodeClaims to create.
//!
//! Upstream order and rules (`pkg/controllers/provisioning/scheduling/scheduler.go`): pods
//! sorted by CPU then memory, descending; each pod tries existing nodes (initialized
//! first), then NodeClaims planned this round, then a new NodeClaim from the NodePools in
//! weight order; a pod that fails has one preference relaxed and goes to the back of the
//! queue; the loop ends when a whole pass over the queue makes no progress.
//!
//! Two deliberate differences, both for speed without changing outcomes upstream relies
//! on: planned NodeClaims are tried in creation order (first fit; upstream re-sorts them
//! by pod count before every pod), and a NodeClaim whose roomiest option cannot fit the
//! smallest pod of the batch is no longer tried.

pub mod benchmark;
mod claim;
mod node_memo;
mod pinned_claims;
mod preferences;
mod queue;
mod simulator;
mod slot_room;
pub mod template;
pub mod topology;

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::fast_hash::FastMap;
use std::sync::Arc;

use crate::api::labels;
use crate::api::nodeclaim::Taint;
use crate::api::nodepool::NodePool;
use crate::engine::catalog::InstanceType;
use crate::engine::pod::{HostPort, Pod, PodKey};
use crate::engine::requirements::Requirements;
use crate::engine::resources::{NODES, Resources};

pub use claim::{ExistingSlot, PlannedClaim};
use pinned_claims::PinnedClaims;
pub use preferences::WorkPod;
use simulator::SlotIndex;
pub use simulator::{GroupCounts, Simulator};
pub use template::{Template, TypeOption, offering_allowed};

use crate::engine::reservation::Holds;
pub use topology::{BoundPod, Kind as TopologyKind, Topology};

/// Upstream's cap on instance-type options sent to the cloud provider per NodeClaim.
pub const MAX_INSTANCE_TYPES: usize = 60;

/// What to do when a NodeClaim's instance types cannot meet a `minValues` requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MinValuesPolicy {
    /// The pod fails to schedule (upstream default).
    #[default]
    Strict,
    /// The requirement is relaxed to what is available and the NodeClaim annotated.
    BestEffort,
}

/// How the scheduler treats preferences: preferred node and pod (anti-)affinity and
/// ScheduleAnyway topology spreads (upstream `PREFERENCE_POLICY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PreferencePolicy {
    /// Preferences start as requirements and are relaxed one at a time when a pod does
    /// not fit (upstream default).
    #[default]
    Respect,
    /// Preferences are dropped before scheduling: only required constraints shape the
    /// plan, so consolidation is not held back by what a pod merely prefers.
    Ignore,
}

/// A NodePool and the instance types it may launch (already narrowed to its NodeClass;
/// offerings marked unavailable by the ICE cache are skipped).
#[derive(Clone, Debug)]
pub struct PoolInput<'a> {
    pub nodepool: &'a NodePool,
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Capacity of the pool's existing nodes, counted against `spec.limits`.
    pub in_use: Resources,
}

/// A node's labels as a simulator gets them. Shared labels let the simulator's memo of
/// what it derived from them (`node_memo`) tell them unchanged by identity, at no cost;
/// borrowed ones are compared label by label.
#[derive(Clone, Debug)]
pub enum NodeLabels<'a> {
    Shared(Arc<BTreeMap<String, String>>),
    Borrowed(&'a BTreeMap<String, String>),
}

impl std::ops::Deref for NodeLabels<'_> {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &Self::Target {
        match self {
            NodeLabels::Shared(l) => l,
            NodeLabels::Borrowed(l) => l,
        }
    }
}

impl From<BTreeMap<String, String>> for NodeLabels<'_> {
    fn from(labels: BTreeMap<String, String>) -> Self {
        NodeLabels::Shared(Arc::new(labels))
    }
}

/// A node (or launched, not yet registered NodeClaim) pods may be placed on.
#[derive(Clone, Debug)]
pub struct NodeInput<'a> {
    pub name: String,
    /// Shared with or borrowed from the caller's nodes: a disruption poll builds the input
    /// of every node, and copying each node's labels was most of that.
    pub labels: NodeLabels<'a>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// Requests of pods bound or nominated to it (DaemonSet pods included).
    pub requested: Resources,
    pub host_ports: Vec<HostPort>,
    pub initialized: bool,
}

/// Everything a solve reads.
#[derive(Clone, Debug, Default)]
pub struct SolveInput<'a> {
    pub pools: Vec<PoolInput<'a>>,
    pub nodes: Vec<NodeInput<'a>>,
    /// DaemonSet pod templates (their requests are every new node's overhead).
    pub daemonsets: Vec<Pod>,
    /// Pods already bound, with their node's labels and taints: they count toward topology.
    pub bound: Vec<BoundPod<'a>>,
    pub min_values_policy: MinValuesPolicy,
    pub preference_policy: PreferencePolicy,
}

/// A NodeClaim the solve decided to create.
#[derive(Clone, Debug)]
pub struct NewNodeClaim {
    pub nodepool: String,
    /// Requirements for the NodeClaim spec (hostname placeholder removed).
    pub requirements: Requirements,
    /// Compatible instance types that fit, cheapest offering first, at most 60.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// DaemonSet overhead plus the pods' requests.
    pub requests: Resources,
    pub pods: Vec<PodKey>,
    /// True when a BestEffort minValues requirement had to be relaxed.
    pub min_values_relaxed: bool,
}

/// Pods placed on an existing node (they get nominated to it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nomination {
    pub node: String,
    pub pods: Vec<PodKey>,
}

/// The outcome of a solve.
#[derive(Clone, Debug, Default)]
pub struct Results {
    pub new_nodeclaims: Vec<NewNodeClaim>,
    pub nominations: Vec<Nomination>,
    /// Why each pod that could not be placed stays pending, in words an operator can act on.
    pub errors: BTreeMap<PodKey, String>,
    /// Pools whose requirements leave no available instance type: they launch nothing
    /// whatever the pods ask (upstream publishes `NoCompatibleInstanceTypes` for each).
    pub pools_without_types: Vec<String>,
}

impl Results {
    /// Pods that were placed somewhere.
    pub fn scheduled(&self) -> usize {
        self.new_nodeclaims
            .iter()
            .map(|c| c.pods.len())
            .sum::<usize>()
            + self.nominations.iter().map(|n| n.pods.len()).sum::<usize>()
    }
}

/// Solves one batch of pods. Deterministic: the same input gives the same output.
pub fn solve(input: &SolveInput, pods: &[&Pod]) -> Results {
    Simulator::new(input).provision(pods)
}

#[allow(clippy::too_many_arguments)]
fn place(
    i: usize,
    w: &WorkPod,
    slots: &mut [ExistingSlot],
    room: &mut slot_room::SlotRoom,
    skip: &[bool],
    slot_index: &mut SlotIndex,
    claims: &mut Vec<PlannedClaim>,
    open: &mut Vec<usize>,
    templates: &[Template],
    order: &[usize],
    remaining: &mut [Option<Limits>],
    topology: &mut Topology,
    smallest: &Resources,
    cursors: &mut FastMap<(usize, bool, i32), usize>,
    pinned: &mut PinnedClaims,
    price_cap: Option<(&[Vec<f64>], f64)>,
    holds: &mut Holds,
) -> Result<Option<usize>, String> {
    let inverse = topology.inverse_selecting(&w.pod);
    let restricted = if w.has_topology || !inverse.is_empty() {
        topology
            .allowed_domains(&w.pod, &w.strict, &inverse)
            .map(|(key, allowed)| slot_index.slots_in(key, &allowed, slots))
    } else {
        None
    };
    match restricted {
        Some(list) => {
            for s in list {
                if !skip[s] && slots[s].try_add(topology, w, i, &inverse) {
                    room.set(s, &slots[s].available);
                    return Ok(Some(s));
                }
            }
        }
        None => {
            // First fit in slot order, over the slots with the CPU and memory to spare.
            let found = room
                .with_room(&w.pod.requests)
                .find(|&k| !skip[k] && slots[k].try_add(topology, w, i, &inverse));
            if let Some(k) = found {
                room.set(k, &slots[k].available);
                return Ok(Some(k));
            }
        }
    }
    // Planned claims before `start` are closed or already hold as many pods of one of
    // the pod's hostname-limited groups as allowed; both stay so for the rest of the
    // solve (claims never reopen, counts only grow), and either rejects the pod, so the
    // cursor skips them for good. Past the cursor, a claim the limits block is skipped by
    // a count lookup instead of a full `try_add`: without both, a group of thousands of
    // pods retried every claim of its group for every pod (quadratic at 100k pods).
    let limits = if pinned.disabled {
        Vec::new()
    } else {
        topology.hostname_limits(&w.pod, &inverse)
    };
    let mut start = 0;
    for &(g, inv, limit) in &limits {
        let cursor = cursors.entry((g, inv, limit)).or_insert(0);
        while *cursor < claims.len()
            && (open.binary_search(cursor).is_err()
                || topology.hostname_blocked(g, inv, limit, &claims[*cursor].hostname))
        {
            *cursor += 1;
        }
        start = start.max(*cursor);
    }
    // A pod whose topology decides on a non-hostname key (a zone) skips the claims pinned
    // to domains it may not use: they would reject it (see `pinned_claims`).
    let mut closed = Vec::new();
    let mut placed = None;
    let mut try_claim = |c: usize, claims: &mut [PlannedClaim], topology: &mut Topology| {
        let claim = &mut claims[c];
        if limits
            .iter()
            .any(|&(g, inv, limit)| topology.hostname_blocked(g, inv, limit, &claim.hostname))
        {
            return false;
        }
        let ok = claim
            .try_add(
                &templates[claim.template],
                holds,
                topology,
                w,
                i,
                &inverse,
                false,
            )
            .is_ok();
        if !smallest.fits_in(&claim.headroom) {
            closed.push(c);
        }
        ok
    };
    let pinning_key = topology
        .pinning_key(&w.pod, &inverse)
        .filter(|_| !pinned.disabled)
        .map(str::to_string);
    match pinning_key {
        Some(key) => {
            let t: &Topology = topology;
            let admits = |d: &str| t.admits_pinned(&w.pod, &w.strict, &inverse, &key, d);
            let candidates = pinned.candidates(&key, claims, open, start, admits);
            for c in candidates {
                if try_claim(c, claims, topology) {
                    placed = Some(c);
                    break;
                }
            }
        }
        None => {
            let first = open.partition_point(|&c| c < start);
            for &c in &open[first..] {
                if try_claim(c, claims, topology) {
                    placed = Some(c);
                    break;
                }
            }
        }
    }
    if let Some(c) = placed {
        pinned.changed(c, &claims[c]);
    }
    for c in closed {
        if let Ok(pos) = open.binary_search(&c) {
            open.remove(pos);
        }
        pinned.closed(c, &claims[c]);
    }
    if placed.is_some() {
        return Ok(None);
    }
    if templates.is_empty() {
        return Err("no NodePool can launch nodes (none exists, or none is ready)".into());
    }
    let mut errs = Vec::new();
    for &t in order {
        let template = &templates[t];
        // A node limit is known exactly before any type is picked: every claim is one
        // node (upstream `scheduler.go` `addToNewNodeClaim`).
        if remaining[t]
            .as_ref()
            .is_some_and(|r| r.iter().any(|(n, left)| n == NODES && *left < 1000))
        {
            errs.push(format!(
                "nodepool {:?}: node limits have been exhausted",
                template.nodepool
            ));
            continue;
        }
        let options: Vec<u32> = (0..template.options.len() as u32)
            .filter(|&o| {
                remaining[t]
                    .as_ref()
                    .is_none_or(|r| within_limits(&template.options[o as usize].it.capacity, r))
                    && price_cap.is_none_or(|(prices, cap)| prices[t][o as usize] < cap)
            })
            .collect();
        if options.is_empty() {
            errs.push(if template.options.is_empty() {
                format!("nodepool {:?}: no instance type is compatible with its requirements and available", template.nodepool)
            } else {
                format!("nodepool {:?}: all available instance types exceed its limits", template.nodepool)
            });
            continue;
        }
        let hostname = format!("hostname-placeholder-{:04}", claims.len() + 1);
        topology.register(labels::HOSTNAME, &hostname);
        let mut claim = PlannedClaim::new(t, template, hostname, options);
        match claim.try_add(template, holds, topology, w, i, &inverse, true) {
            Ok(()) => {
                if let Some(r) = remaining[t].as_mut() {
                    // Pessimistic, as upstream: assume the largest option launches.
                    let mut largest = Resources::default();
                    for &o in &claim.options {
                        largest.max(&template.options[o as usize].it.capacity);
                    }
                    largest.add_named(NODES, 1000);
                    for (name, left) in r.iter_mut() {
                        *left -= largest.get(name);
                    }
                }
                claims.push(claim);
                open.push(claims.len() - 1);
                pinned.created(claims.len() - 1, &claims[claims.len() - 1]);
                return Ok(None);
            }
            Err(e) => {
                let overhead = if template.daemon_overhead == Resources::default() {
                    "none".to_string()
                } else {
                    template.daemon_overhead.to_string()
                };
                errs.push(format!(
                    "incompatible with nodepool {:?}, daemonset overhead={overhead}: {e}",
                    template.nodepool
                ))
            }
        }
    }
    Err(errs.join("; "))
}

/// What a pool's limits leave, per named resource (milli-units). Limits only constrain
/// the resources they name, so this is a list rather than a full [`Resources`].
type Limits = Vec<(String, i64)>;

/// True when an instance type's capacity stays within what the limits leave.
fn within_limits(capacity: &Resources, remaining: &Limits) -> bool {
    remaining.iter().all(|(n, r)| capacity.get(n) <= *r)
}

fn finalize(
    c: PlannedClaim,
    templates: &[Template],
    work: &[WorkPod],
    policy: MinValuesPolicy,
) -> Result<NewNodeClaim, (Vec<PodKey>, String)> {
    let t = &templates[c.template];
    let mut requirements = c.requirements;
    requirements.remove(labels::HOSTNAME);
    crate::engine::reservation::pin(&mut requirements, &c.reserved);
    let mut priced: Vec<(f64, &TypeOption)> = c
        .options
        .iter()
        .map(|&i| &t.options[i as usize])
        .filter_map(|o| o.cheapest(&requirements).map(|off| (off.price, o)))
        .collect();
    priced.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then_with(|| a.1.it.name.cmp(&b.1.it.name))
    });
    let mut chosen: Vec<&TypeOption> = priced.iter().map(|(_, o)| *o).collect();
    let pods: Vec<PodKey> = c.pods.iter().map(|&i| work[i].pod.key.clone()).collect();
    let mut relaxed = false;
    if requirements.has_min_values() {
        // Keep the cheapest 60, widening only as far as minValues needs.
        let reqs: Vec<&Requirements> = chosen.iter().map(|o| &o.requirements).collect();
        match requirements.satisfies_min_values(&reqs) {
            Ok(needed) => chosen.truncate(needed.max(MAX_INSTANCE_TYPES.min(chosen.len()))),
            Err(short) if policy == MinValuesPolicy::Strict => {
                let msg: Vec<String> = short.iter().map(ToString::to_string).collect();
                return Err((pods, format!("minValues not met: {}", msg.join("; "))));
            }
            Err(_) => {
                relaxed = true;
                chosen.truncate(MAX_INSTANCE_TYPES);
            }
        }
    } else {
        chosen.truncate(MAX_INSTANCE_TYPES);
    }
    Ok(NewNodeClaim {
        nodepool: t.nodepool.clone(),
        requirements,
        instance_types: chosen.into_iter().map(|o| o.it.clone()).collect(),
        requests: c.requests,
        pods,
        min_values_relaxed: relaxed,
    })
}

/// Every value each topology key can take: from the pools' instance types (labels and
/// available offerings' zones) and from existing nodes' labels (`nodes`, kept up to date
/// across simulators by the node memo). The pools' part is collected as borrowed text and
/// copied once per distinct value; a key only nodes carry shares the memo's set.
fn domain_universe(
    templates: &[Template],
    mut nodes: node_memo::NodeDomains,
) -> FastMap<String, Arc<BTreeSet<String>>> {
    let mut domains: FastMap<&str, BTreeSet<&str>> = FastMap::default();
    for t in templates {
        for o in &t.options {
            for r in o.requirements.iter() {
                if r.is_complement() || r.key() == labels::NODEPOOL {
                    continue;
                }
                let allowed = t.requirements.get(r.key());
                for v in r.values() {
                    if allowed.is_none_or(|a| a.has(v)) {
                        domains.entry(r.key()).or_default().insert(v.as_str());
                    }
                }
            }
        }
    }
    for (k, vs) in domains {
        let set = match nodes.get(k) {
            Some(on_nodes) if vs.iter().all(|v| on_nodes.contains(*v)) => continue,
            Some(on_nodes) => {
                let mut all = (**on_nodes).clone();
                all.extend(vs.into_iter().map(str::to_string));
                all
            }
            None => vs.into_iter().map(str::to_string).collect(),
        };
        nodes.insert(k.to_string(), Arc::new(set));
    }
    nodes
}

#[cfg(test)]
mod tests;
