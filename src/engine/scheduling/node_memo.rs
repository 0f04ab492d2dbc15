//! What a simulator derives from existing nodes' labels, kept from one simulator to the
//! next on the same thread.
//!
//! A simulator is built per disruption poll and per scheduling round, and most of its
//! building was the same work over the same nodes: each node's labels turned into
//! requirements, and every label value of every node collected into the topology's domain
//! universe (a thousand nodes' hostnames, zones and instance-type labels, each poll). A
//! node's labels rarely change, so both are memoized by node name and recomputed only for
//! nodes whose labels differ. An entry is reused only when its labels are equal, so the
//! memo never changes an answer. There is one memo per kind of caller (see [`Memos`]),
//! each holding the nodes of its caller's last simulator.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::NodeLabels;
use crate::engine::fast_hash::{Fast, FastMap};
use crate::engine::requirements::Requirements;

thread_local! {
    static MEMOS: RefCell<Memos> = RefCell::new(Memos::default());
}

/// One memo per kind of caller: the controller's simulators and the simulated cluster's
/// scheduler stand-in take turns on one thread over different node lists (the stand-in
/// sees only Ready Nodes, the controller every NodeClaim), and a single memo rebuilt half
/// its entries and its domain sets at every turn.
#[derive(Default)]
struct Memos {
    memos: [NodeMemo; 2],
    /// The one used last: kept on a tie, so a third caller takes over the other.
    last: usize,
}

impl Memos {
    /// The memo that already knows most of `nodes` (judged on a few of them, evenly
    /// spaced), the last one used on a tie, the other when neither knows any. Which one is
    /// picked changes only the speed, never an answer.
    fn pick(&mut self, nodes: &[super::NodeInput]) -> &mut NodeMemo {
        let step = nodes.len().div_ceil(8).max(1);
        let known = |m: &NodeMemo| {
            nodes
                .iter()
                .step_by(step)
                .filter(|n| m.nodes.get(&n.name).is_some_and(|d| d.same(&n.labels)))
                .count()
        };
        let (last, other) = (
            known(&self.memos[self.last]),
            known(&self.memos[1 - self.last]),
        );
        if other > last || (last == 0 && other == 0) {
            self.last = 1 - self.last;
        }
        &mut self.memos[self.last]
    }
}

/// Label key -> the values existing nodes carry for it.
pub(super) type NodeDomains = FastMap<String, Arc<BTreeSet<String>>>;

/// A node's labels and the requirements built from them.
struct Derived {
    labels: Arc<BTreeMap<String, String>>,
    /// A second shared copy of the same labels, known by identity too: a node rebuilt
    /// with equal labels in a new allocation, or a third kind of caller sharing this memo
    /// with its own copies (the controller's nodes and the simulated cluster's Nodes hold
    /// the same labels in different allocations).
    twin: Option<Arc<BTreeMap<String, String>>>,
    requirements: Arc<Requirements>,
    /// The memo's stamp when a node list last named this node (see [`NodeMemo::reuse`]).
    seen: u64,
}

impl Derived {
    /// Whether `labels` are known to be these by identity. The memo's own references
    /// keep both allocations from being changed in place (`Arc::make_mut` copies a
    /// shared map), so the same allocation holds the same labels.
    fn same(&self, labels: &NodeLabels) -> bool {
        match labels {
            NodeLabels::Shared(l) => {
                Arc::ptr_eq(l, &self.labels)
                    || self.twin.as_ref().is_some_and(|t| Arc::ptr_eq(l, t))
            }
            NodeLabels::Borrowed(_) => false,
        }
    }
}

#[derive(Default)]
struct NodeMemo {
    /// Node name -> its labels and the requirements built from them.
    nodes: FastMap<String, Derived>,
    /// Label key -> value -> how many memoized nodes carry it: the domain universe's
    /// node part, kept up to date as nodes come, go and relabel.
    counts: FastMap<String, FastMap<String, u32>>,
    /// Label key -> its values as a set, kept with `counts` value by value: a node
    /// coming or going changes its hostname and a few other one-node values, and
    /// rebuilding each such set (a thousand sorted names) at every pass was 2% of a
    /// simulated day. A set a simulator still shares is copied before it changes.
    domains: NodeDomains,
    /// Counts the node lists seen, to stamp the entries each one names.
    stamp: u64,
}

impl NodeMemo {
    /// The requirements of `nodes` when the memo holds exactly these nodes with these
    /// labels (by identity), as when the same caller asks again over an unchanged
    /// cluster: one lookup per node, nothing moved, the domains as they are. `None` at
    /// the first node it does not know, or when some memoized node is not in the list.
    fn reuse(&mut self, nodes: &[super::NodeInput]) -> Option<Vec<Arc<Requirements>>> {
        self.stamp += 1;
        let stamp = self.stamp;
        let mut named = 0;
        let mut out = Vec::with_capacity(nodes.len());
        for n in nodes {
            let d = self.nodes.get_mut(&n.name).filter(|d| d.same(&n.labels))?;
            if d.seen != stamp {
                d.seen = stamp;
                named += 1;
            }
            out.push(Arc::clone(&d.requirements));
        }
        // Every entry named: none left over whose labels would widen the domains (a
        // repeated name counts once).
        (named == self.nodes.len()).then_some(out)
    }

    /// Adds (`up`) or removes one node's labels from the value counts.
    fn count(&mut self, labels: &BTreeMap<String, String>, up: bool) {
        for (k, v) in labels {
            if up {
                let values = match self.counts.get_mut(k) {
                    Some(values) => values,
                    None => self.counts.entry(k.clone()).or_default(),
                };
                match values.get_mut(v) {
                    Some(n) => *n += 1,
                    None => {
                        values.insert(v.clone(), 1);
                        if let Some(d) = self.domains.get_mut(k) {
                            Arc::make_mut(d).insert(v.clone());
                        }
                    }
                }
            } else if let Some(values) = self.counts.get_mut(k)
                && let Some(n) = values.get_mut(v)
            {
                *n -= 1;
                if *n == 0 {
                    values.remove(v);
                    if values.is_empty() {
                        self.counts.remove(k);
                        self.domains.remove(k);
                    } else if let Some(d) = self.domains.get_mut(k) {
                        Arc::make_mut(d).remove(v);
                    }
                }
            }
        }
    }
}

/// Each node's labels as requirements (in `nodes` order), and every value each label key
/// takes across the nodes.
pub(super) fn node_derived(nodes: &[super::NodeInput]) -> (Vec<Arc<Requirements>>, NodeDomains) {
    MEMOS.with_borrow_mut(|memos| {
        let memo = memos.pick(nodes);
        if let Some(requirements) = memo.reuse(nodes) {
            return (requirements, memo.domains.clone());
        }
        let mut next = FastMap::with_capacity_and_hasher(nodes.len(), Fast::default());
        let mut old = std::mem::take(&mut memo.nodes);
        let requirements = nodes
            .iter()
            .map(|n| {
                let (name, entry) = match old.remove_entry(&n.name) {
                    Some((name, d)) if d.same(&n.labels) => (name, d),
                    Some((name, mut d)) if *d.labels == *n.labels => {
                        // Equal labels under a new identity: remember it, so the next
                        // simulator over the same nodes finds them by identity.
                        // It and the last one seen are kept; an older third goes.
                        if let NodeLabels::Shared(l) = &n.labels {
                            d.twin = Some(std::mem::replace(&mut d.labels, Arc::clone(l)));
                        }
                        (name, d)
                    }
                    stale => {
                        if let Some((_, d)) = stale {
                            memo.count(&d.labels, false);
                        }
                        memo.count(&n.labels, true);
                        let labels = match &n.labels {
                            NodeLabels::Shared(l) => Arc::clone(l),
                            NodeLabels::Borrowed(l) => Arc::new((*l).clone()),
                        };
                        let requirements = Arc::new(Requirements::from_labels(&labels));
                        let d = Derived {
                            labels,
                            twin: None,
                            requirements,
                            seen: 0,
                        };
                        (n.name.clone(), d)
                    }
                };
                let r = Arc::clone(&entry.requirements);
                // A name given twice: the later node's labels are the ones kept.
                if let Some(d) = next.insert(name, entry) {
                    memo.count(&d.labels, false);
                }
                r
            })
            .collect();
        for d in old.into_values() {
            memo.count(&d.labels, false);
        }
        memo.nodes = next;
        let NodeMemo {
            counts, domains, ..
        } = memo;
        for (k, values) in counts.iter() {
            if !domains.contains_key(k) {
                domains.insert(k.clone(), Arc::new(values.keys().cloned().collect()));
            }
        }
        (requirements, domains.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)]) -> super::super::NodeInput<'static> {
        super::super::NodeInput {
            name: name.into(),
            labels: NodeLabels::from(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            taints: Vec::new(),
            allocatable: Default::default(),
            requested: Default::default(),
            host_ports: Vec::new(),
            initialized: true,
        }
    }

    /// The domains as a fresh collection over the nodes would find them.
    fn fresh(nodes: &[super::super::NodeInput]) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for n in nodes {
            for (k, v) in n.labels.iter() {
                out.entry(k.clone()).or_default().insert(v.clone());
            }
        }
        out
    }

    fn sorted(d: NodeDomains) -> BTreeMap<String, BTreeSet<String>> {
        d.into_iter().map(|(k, v)| (k, (*v).clone())).collect()
    }

    /// Across nodes coming, going, relabelling and repeating names, the memo's domains
    /// are always what a fresh collection over the current nodes finds: a stale value
    /// would open a topology domain no node is in any more.
    #[test]
    fn domains_follow_the_nodes_through_every_kind_of_change() {
        let mut rng = super::super::benchmark::Rng::new(7);
        let mut below = |n: usize| rng.below(n as u64) as usize;
        let zones = ["a", "b", "c"];
        let types = ["m5.large", "c5.large"];
        for _ in 0..300 {
            let count = below(8);
            let nodes: Vec<_> = (0..count)
                .map(|_| {
                    let name = format!("n{}", below(6));
                    let mut labels = vec![
                        ("zone", zones[below(zones.len())]),
                        ("type", types[below(types.len())]),
                        ("hostname", name.as_str()),
                    ];
                    if below(2) == 0 {
                        labels.push(("spot", "true"));
                    }
                    node(&name, &labels)
                })
                .collect();
            let (reqs, domains) = node_derived(&nodes);
            // Where a name repeats, the later node's labels count, as the memo keeps them.
            let mut last: BTreeMap<&str, &super::super::NodeInput> = BTreeMap::new();
            for n in &nodes {
                last.insert(&n.name, n);
            }
            let kept: Vec<_> = last.values().map(|n| (*n).clone()).collect();
            assert_eq!(sorted(domains), fresh(&kept));
            for (n, r) in nodes.iter().zip(&reqs) {
                assert_eq!(**r, Requirements::from_labels(&n.labels), "{}", n.name);
            }
        }
    }

    /// Labels known by identity stay right when their owners change them: a caller
    /// holding shared labels relabels through `Arc::make_mut` (a copy, as the memo holds
    /// a reference), hands an equal copy from a second owner (the simulated cluster's
    /// Nodes beside the controller's nodes), or lends plain labels. Every simulator must
    /// still see each node's current labels.
    #[test]
    fn shared_labels_changed_by_their_owner_are_seen() {
        let mut rng = super::super::benchmark::Rng::new(11);
        let mut below = |n: usize| rng.below(n as u64) as usize;
        let zones = ["a", "b", "c"];
        let mut held: Vec<Arc<BTreeMap<String, String>>> = (0..5)
            .map(|i| {
                Arc::new(BTreeMap::from([
                    ("zone".to_string(), "a".to_string()),
                    ("hostname".to_string(), format!("n{i}")),
                ]))
            })
            .collect();
        for _ in 0..400 {
            let i = below(held.len());
            if below(3) == 0 {
                Arc::make_mut(&mut held[i]).insert("zone".into(), zones[below(3)].into());
            }
            let twins: Vec<BTreeMap<String, String>> = held.iter().map(|l| (**l).clone()).collect();
            let nodes: Vec<super::super::NodeInput> = held
                .iter()
                .zip(&twins)
                .enumerate()
                .map(|(i, (l, twin))| {
                    let mut n = node(&format!("n{i}"), &[]);
                    n.labels = match below(3) {
                        0 => NodeLabels::Shared(Arc::clone(l)),
                        1 => NodeLabels::Shared(Arc::new(twin.clone())),
                        _ => NodeLabels::Borrowed(twin),
                    };
                    n
                })
                .collect();
            let (reqs, domains) = node_derived(&nodes);
            assert_eq!(sorted(domains), fresh(&nodes));
            for (n, r) in nodes.iter().zip(&reqs) {
                assert_eq!(**r, Requirements::from_labels(&n.labels), "{}", n.name);
            }
        }
    }

    /// Two callers taking turns over overlapping node lists (shared labels, relabels,
    /// a name given twice, nodes coming and going) each get what a fresh collection over
    /// their own list finds, whichever memo serves them and whether or not it is reused
    /// as it stands.
    #[test]
    fn callers_taking_turns_see_their_own_nodes() {
        let mut rng = super::super::benchmark::Rng::new(23);
        let mut below = |n: usize| rng.below(n as u64) as usize;
        let labels = |i: usize, zone: &str| {
            Arc::new(BTreeMap::from([
                ("zone".to_string(), zone.to_string()),
                ("hostname".to_string(), format!("n{i}")),
            ]))
        };
        let mut held: Vec<Arc<BTreeMap<String, String>>> = (0..8).map(|i| labels(i, "a")).collect();
        let mut lists: [Vec<usize>; 2] = [(0..8).collect(), (0..6).collect()];
        for round in 0..600 {
            let caller = round % 2;
            match below(6) {
                0 => {
                    let i = below(held.len());
                    Arc::make_mut(&mut held[i])
                        .insert("zone".into(), ["a", "b", "c"][below(3)].into());
                }
                1 => lists[caller].retain(|_| below(4) != 0),
                2 => lists[caller].push(below(held.len())),
                _ => {}
            }
            let nodes: Vec<super::super::NodeInput> = lists[caller]
                .iter()
                .map(|&i| {
                    let mut n = node(&format!("n{i}"), &[]);
                    n.labels = NodeLabels::Shared(Arc::clone(&held[i]));
                    n
                })
                .collect();
            let (reqs, domains) = node_derived(&nodes);
            assert_eq!(sorted(domains), fresh(&nodes), "round {round}");
            for (n, r) in nodes.iter().zip(&reqs) {
                assert_eq!(**r, Requirements::from_labels(&n.labels), "{}", n.name);
            }
        }
    }

    /// A list naming one memoized node twice and leaving another out is not the memo as
    /// it stands: the node left out must leave the domains.
    #[test]
    fn a_repeated_name_does_not_hide_a_node_that_left() {
        let a = Arc::new(BTreeMap::from([("zone".to_string(), "a".to_string())]));
        let b = Arc::new(BTreeMap::from([("zone".to_string(), "b".to_string())]));
        let with = |name: &str, l: &Arc<BTreeMap<String, String>>| {
            let mut n = node(name, &[]);
            n.labels = NodeLabels::Shared(Arc::clone(l));
            n
        };
        let _ = node_derived(&[with("x", &a), with("y", &b)]);
        let (_, domains) = node_derived(&[with("x", &a), with("x", &a)]);
        assert_eq!(sorted(domains)["zone"], BTreeSet::from(["a".to_string()]));
    }
}
