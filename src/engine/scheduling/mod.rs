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
mod preferences;
mod queue;
mod template;
pub mod topology;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::api::labels;
use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::api::nodepool::NodePool;
use crate::engine::catalog::InstanceType;
use crate::engine::pod::{HostPort, Pod, PodKey};
use crate::engine::requirements::Requirements;
use crate::engine::resources::Resources;

pub use claim::{ExistingSlot, PlannedClaim};
pub use preferences::WorkPod;
pub use template::{Template, TypeOption, offering_allowed};
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

/// A NodePool and the instance types it may launch (already narrowed to its NodeClass;
/// offerings marked unavailable by the ICE cache are skipped).
#[derive(Clone, Debug)]
pub struct PoolInput<'a> {
    pub nodepool: &'a NodePool,
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Capacity of the pool's existing nodes, counted against `spec.limits`.
    pub in_use: Resources,
}

/// A node (or launched, not yet registered NodeClaim) pods may be placed on.
#[derive(Clone, Debug)]
pub struct NodeInput {
    pub name: String,
    pub labels: BTreeMap<String, String>,
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
    pub nodes: Vec<NodeInput>,
    /// DaemonSet pod templates (their requests are every new node's overhead).
    pub daemonsets: Vec<Pod>,
    /// Pods already bound, with their node's labels and taints: they count toward topology.
    pub bound: Vec<BoundPod<'a>>,
    pub min_values_policy: MinValuesPolicy,
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
    Simulator::new(input).run(pods, &[])
}

/// A solve prepared once and run many times: the NodePool templates, the existing nodes'
/// free room and the cluster's topology counts are built on creation, and each
/// [`Simulator::run`] places a batch of pods with some nodes taken away, then undoes its
/// placements. Disruption asks "where would this node's pods go?" for every candidate of
/// a pass; sharing the preparation is what keeps 5,000 such questions inside a second.
pub struct Simulator<'a> {
    input: &'a SolveInput<'a>,
    templates: Vec<Template>,
    pool_errors: Vec<String>,
    order: Vec<usize>,
    prefer_no_schedule: bool,
    remaining: Vec<Option<Limits>>,
    slots: Vec<ExistingSlot>,
    /// Each slot's host-port count before any run, to undo placements.
    slot_ports: Vec<usize>,
    /// Input node index -> slot index.
    node_slot: Vec<usize>,
    /// Topology with the bound pods' inverse anti-affinity; cloned per run.
    base: Topology,
    /// Groups counted over every bound pod, by constraint, filled on first use.
    group_cache: HashMap<topology::GroupKey, topology::Group>,
    /// Bound pods (indices into `input.bound`) by label, so counting a group whose
    /// selector requires a label visits only the pods that carry it.
    bound_by_label: HashMap<(String, String), Vec<usize>>,
    slot_index: SlotIndex,
    /// Per template, per option: the cheapest offering the pool allows, USD/h.
    option_prices: Vec<Vec<f64>>,
    /// Slots excluded in the current run (all false between runs).
    skip: Vec<bool>,
}

/// Existing nodes by the value of a topology key, built per key on first use: a pod
/// whose spread allows two zones visits only the nodes in them.
#[derive(Default)]
struct SlotIndex {
    by_key: HashMap<String, HashMap<String, Vec<usize>>>,
}

impl SlotIndex {
    /// Slots whose `key` label is one of `values`, plus those without a single value for
    /// it (the full check decides those), in slot order.
    fn slots_in(&mut self, key: &str, values: &[String], slots: &[ExistingSlot]) -> Vec<usize> {
        let by_value = self.by_key.entry(key.to_string()).or_insert_with(|| {
            let mut m: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, s) in slots.iter().enumerate() {
                match s.requirements.get(key) {
                    Some(r) if !r.is_complement() && r.values().len() == 1 => {
                        m.entry(r.values()[0].clone()).or_default().push(i)
                    }
                    _ => m.entry(String::new()).or_default().push(i),
                }
            }
            m
        });
        let mut out: Vec<usize> = values
            .iter()
            .filter(|v| !v.is_empty())
            .chain(std::iter::once(&String::new()))
            .filter_map(|v| by_value.get(v))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out
    }
}

impl<'a> Simulator<'a> {
    /// Prepares the templates, slots and topology of `input`.
    pub fn new(input: &'a SolveInput<'a>) -> Simulator<'a> {
        let mut templates: Vec<Template> = Vec::new();
        let mut in_use: Vec<Resources> = Vec::new();
        let mut pool_errors = Vec::new();
        for p in &input.pools {
            match Template::new(p.nodepool, &p.instance_types, &input.daemonsets) {
                Ok(mut t) => {
                    t.min_values_strict = input.min_values_policy == MinValuesPolicy::Strict;
                    templates.push(t);
                    in_use.push(p.in_use.clone());
                }
                Err(e) => pool_errors.push(format!(
                    "nodepool {:?} has invalid requirements: {e}",
                    p.nodepool.metadata.name.as_deref().unwrap_or("")
                )),
            }
        }
        // Weight descending; ties broken by name descending (upstream orders NodePools
        // this way).
        let mut order: Vec<usize> = (0..templates.len()).collect();
        order.sort_by(|&a, &b| {
            templates[b]
                .weight
                .cmp(&templates[a].weight)
                .then_with(|| templates[b].nodepool.cmp(&templates[a].nodepool))
        });
        let prefer_no_schedule = templates.iter().any(|t| {
            t.taints
                .iter()
                .any(|x| x.effect == TaintEffect::PreferNoSchedule)
        });

        let mut base = Topology::new(domain_universe(&templates, &input.nodes));
        for b in &input.bound {
            base.add_inverse_for_bound(b.pod, b.node_labels);
        }

        let mut by_slot: Vec<usize> = (0..input.nodes.len()).collect();
        by_slot.sort_by(|&a, &b| {
            let (a, b) = (&input.nodes[a], &input.nodes[b]);
            b.initialized
                .cmp(&a.initialized)
                .then_with(|| a.name.cmp(&b.name))
        });
        let mut node_slot = vec![0; input.nodes.len()];
        let slots: Vec<ExistingSlot> = by_slot
            .iter()
            .enumerate()
            .map(|(s, &i)| {
                node_slot[i] = s;
                let n = &input.nodes[i];
                let mut available = n.allocatable.clone();
                available.sub(&n.requested);
                ExistingSlot {
                    name: n.name.clone(),
                    requirements: Requirements::from_labels(&n.labels),
                    taints: n.taints.clone(),
                    available,
                    host_ports: n.host_ports.clone(),
                    initialized: n.initialized,
                    pods: Vec::new(),
                }
            })
            .collect();
        let slot_ports = slots.iter().map(|s| s.host_ports.len()).collect();
        let option_prices = templates
            .iter()
            .map(|t| {
                t.options
                    .iter()
                    .map(|o| {
                        o.cheapest(&t.requirements)
                            .map(|off| off.price)
                            .unwrap_or(f64::INFINITY)
                    })
                    .collect()
            })
            .collect();
        let remaining = templates
            .iter()
            .zip(&in_use)
            .map(|(t, used)| {
                t.limits.as_ref().map(|l| {
                    l.iter()
                        .map(|(n, v)| (n.clone(), v - used.get(n)))
                        .collect()
                })
            })
            .collect();
        Simulator {
            input,
            templates,
            pool_errors,
            order,
            prefer_no_schedule,
            remaining,
            slots,
            slot_ports,
            node_slot,
            base,
            group_cache: HashMap::new(),
            bound_by_label: HashMap::new(),
            slot_index: SlotIndex::default(),
            option_prices,
            skip: Vec::new(),
        }
    }

    /// Counts a group over the bound pods, through the label index when the selector
    /// requires a label.
    fn count_group(
        bound: &[BoundPod],
        by_label: &mut HashMap<(String, String), Vec<usize>>,
        key: &topology::GroupKey,
        domains: Arc<BTreeSet<String>>,
    ) -> topology::Group {
        match topology::label_hint(&key.selector) {
            Some(kv) => {
                if by_label.is_empty() {
                    for (i, b) in bound.iter().enumerate() {
                        for (k, v) in &b.pod.labels {
                            by_label.entry((k.clone(), v.clone())).or_default().push(i);
                        }
                    }
                }
                let hits = by_label.get(&kv).map(Vec::as_slice).unwrap_or_default();
                topology::Group::counted(key.clone(), domains, hits.iter().map(|&i| &bound[i]))
            }
            None => topology::Group::counted(key.clone(), domains, bound),
        }
    }

    /// The prepared NodePool templates (what a replacement could be), by pool name.
    pub fn template(&self, nodepool: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.nodepool == nodepool)
    }

    /// Places `pods` with the nodes at `excluded` (indices into the input's nodes) gone.
    /// Pods bound to an excluded node are moving: they stop counting in topology where
    /// they run today. Leaves the simulator as it found it.
    pub fn run(&mut self, pods: &[&Pod], excluded: &[usize]) -> Results {
        self.run_capped(pods, excluded, None)
    }

    /// [`Simulator::run`] where new NodeClaims may only use instance types whose cheapest
    /// offering costs less than `price_cap` USD/h. Consolidation asks "is there a cheaper
    /// home?": pricier types can never be the answer, and leaving them out of the
    /// simulation keeps each of thousands of questions small. Callers that need the
    /// reason for a failure run again without the cap (consolidation does).
    pub fn run_capped(
        &mut self,
        pods: &[&Pod],
        excluded: &[usize],
        price_cap: Option<f64>,
    ) -> Results {
        let input = self.input;
        let mut skip = std::mem::take(&mut self.skip);
        skip.resize(self.slots.len(), false);
        for &n in excluded {
            skip[self.node_slot[n]] = true;
        }
        let mut touched: Vec<usize> = Vec::new();
        let excluded_node = |name: &str| {
            excluded
                .iter()
                .map(|&n| &input.nodes[n])
                .find(|n| n.name == name)
        };
        // Pods leaving an excluded node, with that node's labels and taints.
        let moving: Vec<BoundPod> = pods
            .iter()
            .filter_map(|p| {
                let node = excluded_node(p.node_name.as_deref()?)?;
                Some(BoundPod {
                    pod: p,
                    node_labels: &node.labels,
                    node_taints: &node.taints,
                })
            })
            .collect();

        let mut topology = self.base.clone();
        for m in &moving {
            topology.remove_inverse_for_bound(m.pod, m.node_labels);
        }
        let mut errors = BTreeMap::new();
        let mut work: Vec<WorkPod> = Vec::with_capacity(pods.len());
        let mut queue_pods = Vec::with_capacity(pods.len());
        for p in pods {
            match WorkPod::new(p) {
                Ok(w) => {
                    queue_pods.push(work.len());
                    work.push(w);
                }
                Err(e) => {
                    errors.insert(p.key.clone(), format!("invalid node selection: {e}"));
                }
            }
        }
        let bound = &input.bound;
        let cache = &mut self.group_cache;
        let by_label = &mut self.bound_by_label;
        let mut make_group = |key: &topology::GroupKey, domains: Arc<BTreeSet<String>>| {
            let mut g = match cache.get(key) {
                Some(g) => g.clone(),
                None => {
                    let g = Self::count_group(bound, by_label, key, domains);
                    cache.insert(key.clone(), g.clone());
                    g
                }
            };
            for m in &moving {
                g.count_bound(m, -1);
            }
            g
        };
        for w in &work {
            if w.has_topology {
                topology.add_pod_with(&w.pod, &w.strict, &mut make_group);
            }
        }

        // The smallest request of the batch: planned claims that cannot fit it are closed.
        let mut smallest = Resources {
            cpu: i64::MAX,
            memory: i64::MAX,
            pods: 1000,
            ..Default::default()
        };
        for w in &work {
            smallest.cpu = smallest.cpu.min(w.pod.requests.cpu);
            smallest.memory = smallest.memory.min(w.pod.requests.memory);
        }

        let mut claims: Vec<PlannedClaim> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut remaining = self.remaining.clone();
        let mut cursors: HashMap<(usize, bool, i32), usize> = HashMap::new();
        let mut q = queue::Queue::new(queue_pods, |i| &work[i].pod);
        while let Some(i) = q.pop() {
            let result = place(
                i,
                &work[i],
                &mut self.slots,
                &skip,
                &mut self.slot_index,
                &mut claims,
                &mut open,
                &self.templates,
                &self.order,
                &mut remaining,
                &mut topology,
                &smallest,
                &mut cursors,
                price_cap.map(|c| (self.option_prices.as_slice(), c)),
            );
            match result {
                Ok(slot) => {
                    touched.extend(slot);
                    errors.remove(&work[i].pod.key);
                }
                Err(e) => {
                    let e = if self.pool_errors.is_empty() {
                        e
                    } else {
                        format!("{e}; {}", self.pool_errors.join("; "))
                    };
                    errors.insert(work[i].pod.key.clone(), e);
                    let relaxed = work[i].relax(self.prefer_no_schedule).is_some();
                    if relaxed && work[i].has_topology {
                        topology.remove_pod(&work[i].pod);
                        topology.add_pod_with(&work[i].pod, &work[i].strict, &mut make_group);
                    }
                    q.push(i, relaxed);
                }
            }
        }

        let mut results = Results {
            errors,
            ..Default::default()
        };
        for &n in excluded {
            skip[self.node_slot[n]] = false;
        }
        self.skip = skip;
        touched.sort_unstable();
        touched.dedup();
        for s in touched {
            let slot = &mut self.slots[s];
            results.nominations.push(Nomination {
                node: slot.name.clone(),
                pods: slot.pods.iter().map(|&i| work[i].pod.key.clone()).collect(),
            });
            // Undo this run's placements.
            for &i in &slot.pods {
                slot.available.add(&work[i].pod.requests);
            }
            slot.host_ports.truncate(self.slot_ports[s]);
            slot.pods.clear();
        }
        for c in claims {
            match finalize(c, &self.templates, &work, input.min_values_policy) {
                Ok(nc) => results.new_nodeclaims.push(nc),
                Err((pods, why)) => {
                    for p in pods {
                        results.errors.insert(p, why.clone());
                    }
                }
            }
        }
        results
    }
}

#[allow(clippy::too_many_arguments)]
fn place(
    i: usize,
    w: &WorkPod,
    slots: &mut [ExistingSlot],
    skip: &[bool],
    slot_index: &mut SlotIndex,
    claims: &mut Vec<PlannedClaim>,
    open: &mut Vec<usize>,
    templates: &[Template],
    order: &[usize],
    remaining: &mut [Option<Limits>],
    topology: &mut Topology,
    smallest: &Resources,
    cursors: &mut HashMap<(usize, bool, i32), usize>,
    price_cap: Option<(&[Vec<f64>], f64)>,
) -> Result<Option<usize>, String> {
    let inverse = topology.inverse_selecting(&w.pod);
    let restricted = if w.has_topology || !inverse.is_empty() {
        topology
            .allowed_domains(&w.pod, &w.strict, &inverse)
            .map(|(key, allowed)| slot_index.slots_in(&key, &allowed, slots))
    } else {
        None
    };
    match restricted {
        Some(list) => {
            for s in list {
                if !skip[s] && slots[s].try_add(topology, w, i, &inverse) {
                    return Ok(Some(s));
                }
            }
        }
        None => {
            for (k, (s, _)) in slots
                .iter_mut()
                .zip(skip)
                .enumerate()
                .filter(|(_, (_, skip))| !**skip)
            {
                if s.try_add(topology, w, i, &inverse) {
                    return Ok(Some(k));
                }
            }
        }
    }
    // Planned claims before `start` already hold as many pods of one of the pod's
    // hostname-limited groups as allowed; they would reject it, so skip them.
    let mut start = 0;
    for (g, inv, limit) in topology.hostname_limits(&w.pod, &inverse) {
        let cursor = cursors.entry((g, inv, limit)).or_insert(0);
        while *cursor < claims.len()
            && topology.hostname_blocked(g, inv, limit, &claims[*cursor].hostname)
        {
            *cursor += 1;
        }
        start = start.max(*cursor);
    }
    let first = open.partition_point(|&c| c < start);
    let mut closed = Vec::new();
    let mut placed = false;
    for (pos, &c) in open.iter().enumerate().skip(first) {
        let claim = &mut claims[c];
        if claim
            .try_add(&templates[claim.template], topology, w, i, &inverse, false)
            .is_ok()
        {
            placed = true;
        }
        if !smallest.fits_in(&claim.headroom) {
            closed.push(pos);
        }
        if placed {
            break;
        }
    }
    for pos in closed.into_iter().rev() {
        open.remove(pos);
    }
    if placed {
        return Ok(None);
    }
    if templates.is_empty() {
        return Err("no NodePool can launch nodes (none exists, or none is ready)".into());
    }
    let mut errs = Vec::new();
    for &t in order {
        let template = &templates[t];
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
        match claim.try_add(template, topology, w, i, &inverse, true) {
            Ok(()) => {
                if let Some(r) = remaining[t].as_mut() {
                    // Pessimistic, as upstream: assume the largest option launches.
                    let mut largest = Resources::default();
                    for &o in &claim.options {
                        largest.max(&template.options[o as usize].it.capacity);
                    }
                    for (name, left) in r.iter_mut() {
                        *left -= largest.get(name);
                    }
                }
                claims.push(claim);
                open.push(claims.len() - 1);
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
/// available offerings' zones) and from existing nodes' labels.
fn domain_universe(
    templates: &[Template],
    nodes: &[NodeInput],
) -> HashMap<String, BTreeSet<String>> {
    let mut domains: HashMap<String, BTreeSet<String>> = HashMap::new();
    for t in templates {
        for o in &t.options {
            for r in o.requirements.iter() {
                if r.is_complement() || r.key() == labels::NODEPOOL {
                    continue;
                }
                let allowed = t.requirements.get(r.key());
                for v in r.values() {
                    if allowed.is_none_or(|a| a.has(v)) {
                        domains
                            .entry(r.key().to_string())
                            .or_default()
                            .insert(v.clone());
                    }
                }
            }
        }
    }
    for n in nodes {
        for (k, v) in &n.labels {
            domains.entry(k.clone()).or_default().insert(v.clone());
        }
    }
    domains
}

#[cfg(test)]
mod tests;
