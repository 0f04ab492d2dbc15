//! What a simulator derives from existing nodes' labels, kept from one simulator to the
//! next on the same thread.
//!
//! A simulator is built per disruption poll and per scheduling round, and most of its
//! building was the same work over the same nodes: each node's labels turned into
//! requirements, and every label value of every node collected into the topology's domain
//! universe (a thousand nodes' hostnames, zones and instance-type labels, each poll). A
//! node's labels rarely change, so both are memoized by node name and recomputed only for
//! nodes whose labels differ. An entry is reused only when its labels are equal, so the
//! memo never changes an answer. It holds the nodes of the last simulator only.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::engine::requirements::Requirements;

thread_local! {
    static MEMO: RefCell<NodeMemo> = RefCell::new(NodeMemo::default());
}

/// Label key -> the values existing nodes carry for it.
pub(super) type NodeDomains = HashMap<String, Arc<BTreeSet<String>>>;

#[derive(Default)]
struct NodeMemo {
    /// Node name -> its labels and the requirements built from them.
    nodes: HashMap<String, (BTreeMap<String, String>, Arc<Requirements>)>,
    /// Label key -> value -> how many memoized nodes carry it: the domain universe's
    /// node part, kept up to date as nodes come, go and relabel.
    counts: HashMap<String, HashMap<String, u32>>,
    /// Label key -> its values as a set, dropped when a count of the key appears or
    /// vanishes and rebuilt on the next read.
    domains: NodeDomains,
}

impl NodeMemo {
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
                        self.domains.remove(k);
                    }
                }
            } else if let Some(values) = self.counts.get_mut(k)
                && let Some(n) = values.get_mut(v)
            {
                *n -= 1;
                if *n == 0 {
                    values.remove(v);
                    self.domains.remove(k);
                    if values.is_empty() {
                        self.counts.remove(k);
                    }
                }
            }
        }
    }
}

/// Each node's labels as requirements (in `nodes` order), and every value each label key
/// takes across the nodes.
pub(super) fn node_derived(nodes: &[super::NodeInput]) -> (Vec<Arc<Requirements>>, NodeDomains) {
    MEMO.with_borrow_mut(|memo| {
        let mut next = HashMap::with_capacity(nodes.len());
        let mut old = std::mem::take(&mut memo.nodes);
        let requirements = nodes
            .iter()
            .map(|n| {
                let entry = match old.remove(&n.name) {
                    Some((labels, r)) if labels == *n.labels => (labels, r),
                    stale => {
                        if let Some((labels, _)) = stale {
                            memo.count(&labels, false);
                        }
                        memo.count(&n.labels, true);
                        (
                            n.labels.clone().into_owned(),
                            Arc::new(Requirements::from_labels(&n.labels)),
                        )
                    }
                };
                let r = Arc::clone(&entry.1);
                // A name given twice: the later node's labels are the ones kept.
                if let Some((labels, _)) = next.insert(n.name.clone(), entry) {
                    memo.count(&labels, false);
                }
                r
            })
            .collect();
        for (labels, _) in old.into_values() {
            memo.count(&labels, false);
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
    use std::borrow::Cow;

    fn node(name: &str, labels: &[(&str, &str)]) -> super::super::NodeInput<'static> {
        super::super::NodeInput {
            name: name.into(),
            labels: Cow::Owned(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
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
}
