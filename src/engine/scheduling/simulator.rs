//! A solve prepared once and run many times (see [`Simulator`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::fast_hash::FastMap;
use std::sync::Arc;

use crate::api::nodeclaim::TaintEffect;
use crate::engine::pod::Pod;
use crate::engine::requirements::HashedKey;
use crate::engine::reservation::{Holds, ReservedMode};
use crate::engine::resources::Resources;

use super::node_memo::node_derived;
use super::slot_room::SlotRoom;
use super::{
    BoundPod, ExistingSlot, Limits, MinValuesPolicy, Nomination, PlannedClaim, Results, SolveInput,
    Template, Topology, WorkPod, domain_universe, finalize, place, queue, topology,
};

/// Counts of matching bound pods per domain, by topology group: what
/// [`Simulator::with_group_counts`] takes.
pub type GroupCounts = FastMap<topology::GroupKey, FastMap<String, i32>>;

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
    /// The slots' free CPU and memory, to pass over full ones (kept with `slots`).
    room: SlotRoom,
    /// Each slot's host-port count before any run, to undo placements.
    slot_ports: Vec<usize>,
    /// Input node index -> slot index.
    node_slot: Vec<usize>,
    /// Topology with the bound pods' inverse anti-affinity; cloned per run.
    base: Topology,
    /// Groups counted over every bound pod, by constraint, filled on first use.
    group_cache: FastMap<topology::GroupKey, topology::Group>,
    /// Counts over every bound pod that the caller kept from earlier simulators of a
    /// cluster that has since changed a little: a group found here is not counted again.
    seeds: Option<Arc<GroupCounts>>,
    /// Bound pods (indices into `input.bound`) by label value, per label key, so
    /// counting a group whose selector requires a label visits only the pods that carry
    /// it. Built per key on first use, over borrowed text: indexing every label of every
    /// bound pod (tens of thousands of copied strings) was a tenth of a simulated day.
    bound_by_label: FastMap<String, FastMap<&'a str, Vec<usize>>>,
    slot_index: SlotIndex,
    /// Per template, per option: the cheapest offering the pool allows, USD/h.
    option_prices: Vec<Vec<f64>>,
    /// Every capacity reservation the pools' types offer, none held: each run starts
    /// from a copy.
    holds: Holds,
    /// Slots excluded in the current run (all false between runs).
    skip: Vec<bool>,
    /// Tests only: try every open planned claim, without the pinned-domain index.
    plain_claim_scan: bool,
}

/// Existing nodes by the value of a topology key, built per key on first use: a pod
/// whose spread allows two zones visits only the nodes in them.
#[derive(Default)]
pub(super) struct SlotIndex {
    by_key: FastMap<String, FastMap<String, Vec<usize>>>,
}

impl SlotIndex {
    /// Slots whose `key` label is one of `values`, plus those without a single value for
    /// it (the full check decides those), in slot order.
    pub(super) fn slots_in(
        &mut self,
        key: &str,
        values: &[&str],
        slots: &[ExistingSlot],
    ) -> Vec<usize> {
        // One lookup when the key is indexed (every placement but the first); `entry`
        // would copy the key each time.
        if let Some(by_value) = self.by_key.get(key) {
            return in_values(by_value, values);
        }
        // The key is hashed once, and each value copied once: per slot, both were a
        // fifth of the time placing pods took (4.3% of the 1,000-node day).
        let hashed = HashedKey::new(key);
        let mut m: FastMap<String, Vec<usize>> = FastMap::default();
        for (i, s) in slots.iter().enumerate() {
            let value = match s.requirements.get_hashed(hashed) {
                Some(r) if !r.is_complement() && r.values().len() == 1 => r.values()[0].as_str(),
                _ => "",
            };
            match m.get_mut(value) {
                Some(list) => list.push(i),
                None => {
                    m.insert(value.to_string(), vec![i]);
                }
            }
        }
        let out = in_values(&m, values);
        self.by_key.insert(key.to_string(), m);
        out
    }
}

/// The slots of `by_value` under one of `values` or under no single value (""), in slot
/// order.
fn in_values(by_value: &FastMap<String, Vec<usize>>, values: &[&str]) -> Vec<usize> {
    let mut out: Vec<usize> = values
        .iter()
        .copied()
        .filter(|v| !v.is_empty())
        .chain(std::iter::once(""))
        .filter_map(|v| by_value.get(v))
        .flatten()
        .copied()
        .collect();
    out.sort_unstable();
    out
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

        let (requirements, node_domains) = node_derived(&input.nodes);
        let mut base = Topology::new(domain_universe(&templates, node_domains));
        for b in input.bound.iter().filter(|b| b.repels) {
            base.add_inverse_for_bound(b.pod, b.node_labels);
        }

        // Initialized nodes first; otherwise the caller's order (stable), which is how
        // the kube-scheduler stand-in expresses its scoring.
        let mut by_slot: Vec<usize> = (0..input.nodes.len()).collect();
        by_slot.sort_by(|&a, &b| input.nodes[b].initialized.cmp(&input.nodes[a].initialized));
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
                    requirements: Arc::clone(&requirements[i]),
                    taints: n.taints.clone(),
                    available,
                    host_ports: n.host_ports.clone(),
                    initialized: n.initialized,
                    pods: Vec::new(),
                }
            })
            .collect();
        let slot_ports = slots.iter().map(|s| s.host_ports.len()).collect();
        let room = SlotRoom::new(slots.iter().map(|s| &s.available));
        let holds = Holds::new(
            templates
                .iter()
                .flat_map(|t| t.options.iter().map(|o| &*o.it)),
            ReservedMode::Fallback,
        );
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
            room,
            slot_ports,
            node_slot,
            base,
            group_cache: FastMap::default(),
            seeds: None,
            bound_by_label: FastMap::default(),
            slot_index: SlotIndex::default(),
            option_prices,
            holds,
            skip: Vec::new(),
            plain_claim_scan: false,
        }
    }

    /// Takes each topology group's counts over the bound pods from `counts` where it has
    /// them, instead of counting every bound pod of the cluster (see
    /// `disruption::topology_counts`, which keeps them from one pass to the next). The
    /// caller promises they are exactly what counting `input.bound` gives.
    pub fn with_group_counts(mut self, counts: Arc<GroupCounts>) -> Self {
        self.seeds = Some(counts);
        self
    }

    /// The topology groups this simulator has counted or been given so far: those its
    /// runs needed.
    pub fn groups_used(&self) -> impl Iterator<Item = &topology::GroupKey> {
        self.group_cache.keys()
    }

    /// Counts a group over the bound pods, through the label index when the selector
    /// requires a label.
    fn count_group(
        bound: &'a [BoundPod<'a>],
        by_label: &mut FastMap<String, FastMap<&'a str, Vec<usize>>>,
        key: &topology::GroupKey,
        domains: Arc<BTreeSet<String>>,
    ) -> topology::Group {
        match key.selector.required_label() {
            Some((k, v)) => {
                let by_value = by_label.entry(k.to_string()).or_insert_with(|| {
                    let mut m: FastMap<&'a str, Vec<usize>> = FastMap::default();
                    for (i, b) in bound.iter().enumerate() {
                        if let Some(value) = b.pod.labels.get(k) {
                            m.entry(value.as_str()).or_default().push(i);
                        }
                    }
                    m
                });
                let hits = by_value.get(v).into_iter().flatten().map(|&i| &bound[i]);
                topology::Group::counted(key.clone(), domains, hits)
            }
            None => topology::Group::counted(key.clone(), domains, bound),
        }
    }

    /// The same simulator trying every open planned claim in turn (no pinned-domain
    /// index, no hostname-limit cursor or skip): the straightforward scan tests compare
    /// the indexed one with.
    #[cfg(test)]
    pub(super) fn with_plain_claim_scan(mut self) -> Self {
        self.plain_claim_scan = true;
        self
    }

    /// The prepared NodePool templates (what a replacement could be), by pool name.
    pub fn template(&self, nodepool: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.nodepool == nodepool)
    }

    /// Places `pods` with the nodes at `excluded` (indices into the input's nodes) gone.
    /// Pods bound to an excluded node are moving: they stop counting in topology where
    /// they run today. Leaves the simulator as it found it.
    pub fn run(&mut self, pods: &[&Pod], excluded: &[usize]) -> Results {
        self.solve(pods, excluded, None, None, ReservedMode::Fallback)
            .expect("a run without a claim limit runs to the end")
    }

    /// [`Simulator::run`] for the provisioner: a NodeClaim that could launch into a
    /// capacity reservation but finds it all held takes no more pods (upstream's
    /// provisioner disables the reserved-capacity fallback its disruption simulations
    /// keep; see [`ReservedMode`]).
    pub fn provision(&mut self, pods: &[&Pod]) -> Results {
        self.solve(pods, &[], None, None, ReservedMode::Strict)
            .expect("a run without a claim limit runs to the end")
    }

    /// [`Simulator::run`] where new NodeClaims may only use instance types whose cheapest
    /// offering costs less than `price_cap` USD/h, and that gives up, returning `None`,
    /// as soon as the pods need more than `max_new_claims` new NodeClaims that will all be
    /// launched. Consolidation asks "is there a cheaper home, on at most one new node?":
    /// pricier types can never be the answer, and leaving them out keeps each of
    /// thousands of questions small; and in the 1,000-node day 86% of single-node
    /// questions needed a second new node, after which placing the rest of their pods
    /// decided nothing. A claim counts once it exists, unless the strict minValues policy
    /// and its requirements' minValues could still fail it at the end (its pods then fail
    /// instead); claims only ever gain pods, so the count cannot come back under the
    /// limit. Callers that need the reason for a failure run again without the cap
    /// (consolidation does).
    pub fn run_within(
        &mut self,
        pods: &[&Pod],
        excluded: &[usize],
        price_cap: Option<f64>,
        max_new_claims: usize,
    ) -> Option<Results> {
        self.solve(
            pods,
            excluded,
            price_cap,
            Some(max_new_claims),
            ReservedMode::Fallback,
        )
    }

    fn solve(
        &mut self,
        pods: &[&Pod],
        excluded: &[usize],
        price_cap: Option<f64>,
        claim_limit: Option<usize>,
        mode: ReservedMode,
    ) -> Option<Results> {
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
                Some(BoundPod::new(p, &node.labels, &node.taints))
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
            match WorkPod::new(p, input.preference_policy) {
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
        let seeds = self.seeds.as_deref();
        let mut make_group = |key: &topology::GroupKey, domains: Arc<BTreeSet<String>>| {
            let mut g = match cache.get(key) {
                Some(g) => g.clone(),
                None => {
                    let g = match seeds.and_then(|s| s.get(key)) {
                        Some(counts) => {
                            let g = topology::Group::from_counts(key.clone(), domains, counts);
                            #[cfg(test)]
                            {
                                let fresh = Self::count_group(bound, by_label, key, g.universe());
                                assert_eq!(
                                    g.counts(),
                                    fresh.counts(),
                                    "kept topology counts differ from a fresh count of {key:?}"
                                );
                            }
                            g
                        }
                        None => Self::count_group(bound, by_label, key, domains),
                    };
                    cache.insert(key.clone(), g.clone());
                    g
                }
            };
            g.count_all(&moving, -1);
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
        let mut cursors: FastMap<(usize, bool, i32), usize> = FastMap::default();
        let mut pinned = super::PinnedClaims {
            disabled: self.plain_claim_scan,
            ..Default::default()
        };
        let mut holds = self.holds.clone();
        holds.mode = mode;
        let mut q = queue::Queue::new(queue_pods, |i| &work[i].pod);
        // New claims that finalizing cannot fail (see `run_within`), and whether they
        // went over the caller's limit.
        let strict = input.min_values_policy == MinValuesPolicy::Strict;
        let mut sure_claims = 0;
        let mut over_limit = false;
        while let Some(i) = q.pop() {
            let before = claims.len();
            let result = place(
                i,
                &work[i],
                &mut self.slots,
                &mut self.room,
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
                &mut pinned,
                price_cap.map(|c| (self.option_prices.as_slice(), c)),
                &mut holds,
            );
            match result {
                Ok(slot) => {
                    touched.extend(slot);
                    errors.remove(&work[i].pod.key);
                    if claims.len() > before
                        && !(strict && claims[before].requirements.has_min_values())
                    {
                        sure_claims += 1;
                        if claim_limit.is_some_and(|limit| sure_claims > limit) {
                            over_limit = true;
                            break;
                        }
                    }
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
            pools_without_types: self
                .templates
                .iter()
                .filter(|t| t.options.is_empty())
                .map(|t| t.nodepool.clone())
                .collect(),
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
            if !over_limit {
                results.nominations.push(Nomination {
                    node: slot.name.clone(),
                    pods: slot.pods.iter().map(|&i| work[i].pod.key.clone()).collect(),
                });
            }
            // Undo this run's placements.
            for &i in &slot.pods {
                slot.available.add(&work[i].pod.requests);
            }
            slot.host_ports.truncate(self.slot_ports[s]);
            slot.pods.clear();
            self.room.set(s, &slot.available);
        }
        if over_limit {
            return None;
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
        Some(results)
    }
}
