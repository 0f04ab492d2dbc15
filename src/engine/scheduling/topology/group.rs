//! One topology group: the counts of matching pods per domain for one spread constraint or
//! (anti-)affinity term, and the domains it leaves open to a pod.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::fast_hash::FastMap;
use std::sync::Arc;

use crate::api::labels;
use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::engine::pod::Pod;
use crate::engine::requirements::{Requirement, Requirements, allow_well_known_labels};

use super::{BoundPod, GroupKey, Kind};

/// Counts of matching pods per domain of one constraint.
#[derive(Clone, Debug)]
pub struct Group {
    pub id: GroupKey,
    /// The domains known when the group was made, shared by every group of the key (and
    /// every simulation of a disruption pass): thousands of hostnames are not copied per
    /// group.
    universe: Arc<BTreeSet<String>>,
    /// Domains registered since (new NodeClaims' hostnames).
    extra: BTreeSet<String>,
    /// Non-zero counts only.
    counts: FastMap<String, i32>,
}

impl Group {
    /// An empty group over the known domains.
    pub fn new(id: GroupKey, universe: Arc<BTreeSet<String>>) -> Group {
        Group {
            id,
            universe,
            extra: BTreeSet::new(),
            counts: FastMap::default(),
        }
    }

    /// True when the pod is one of the pods this group counts.
    pub fn selects(&self, pod: &Pod) -> bool {
        self.id.namespaces.contains(&pod.key.namespace) && self.id.selector.matches(&pod.labels)
    }

    /// Spread only counts nodes the pod could use: compatible with its node selection
    /// (nodeAffinityPolicy Honor) and, with nodeTaintsPolicy Honor, whose NoSchedule and
    /// NoExecute taints it tolerates (kube-scheduler `PodTopologySpread` filtering).
    pub(super) fn counts_on(&self, node: &Requirements, taints: &[Taint]) -> bool {
        self.id
            .node_filter
            .as_ref()
            .is_none_or(|f| node.is_compatible(f, &allow_well_known_labels))
            && self.counts_on_taints(taints)
    }

    pub(super) fn counts_on_taints(&self, taints: &[Taint]) -> bool {
        self.id.taint_filter.as_ref().is_none_or(|tolerations| {
            taints
                .iter()
                .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
                .all(|t| tolerations.iter().any(|tol| tol.tolerates(t)))
        })
    }

    pub(super) fn knows(&self, domain: &str) -> bool {
        self.universe.contains(domain)
            || self.extra.contains(domain)
            || self.counts.contains_key(domain)
    }

    /// Every known domain, each once.
    pub(super) fn all(&self) -> impl Iterator<Item = &str> {
        self.universe
            .iter()
            .chain(self.extra.iter())
            .map(String::as_str)
            .chain(
                self.counts
                    .keys()
                    .filter(|k| !self.universe.contains(*k) && !self.extra.contains(*k))
                    .map(String::as_str),
            )
    }

    pub(super) fn register(&mut self, domain: &str) {
        if !self.knows(domain) {
            self.extra.insert(domain.to_string());
        }
    }

    pub(super) fn record(&mut self, domain: &str) {
        match self.counts.get_mut(domain) {
            Some(c) => *c += 1,
            None => {
                self.counts.insert(domain.to_string(), 1);
            }
        }
    }

    /// Takes one matching pod out of a domain: a pod that is moving away in a disruption
    /// simulation no longer counts where it runs today.
    pub fn unrecord(&mut self, domain: &str) {
        if let Some(c) = self.counts.get_mut(domain) {
            *c -= 1;
            if *c <= 0 {
                // Keep the domain known, as it was before it was counted.
                self.counts.remove(domain);
                if !self.universe.contains(domain) {
                    self.extra.insert(domain.to_string());
                }
            }
        }
    }

    /// The group counting the cluster's bound pods (upstream counts existing pods into a
    /// new group the first time a constraint is seen).
    pub fn counted<'a>(
        id: GroupKey,
        domains: Arc<BTreeSet<String>>,
        bound: impl IntoIterator<Item = &'a BoundPod<'a>>,
    ) -> Group {
        let mut g = Group::new(id, domains);
        g.count_all(bound, 1);
        g
    }

    /// The group [`Group::counted`] would give over pods whose counts per domain are
    /// `counts` (a caller that keeps counts across simulations, see
    /// `disruption::topology_counts`): only non-zero counts, no domain registered yet.
    pub fn from_counts(
        id: GroupKey,
        universe: Arc<BTreeSet<String>>,
        counts: &FastMap<String, i32>,
    ) -> Group {
        let mut g = Group::new(id, universe);
        g.counts = counts
            .iter()
            .filter(|(_, c)| **c != 0)
            .map(|(d, c)| (d.clone(), *c))
            .collect();
        g
    }

    /// The pods of one node (all `pods` share its labels and taints) this group counts,
    /// and the domain they count in: what the node adds to [`Group::counted`].
    pub fn count_node<'a>(
        &self,
        pods: impl IntoIterator<Item = &'a BoundPod<'a>>,
    ) -> Option<(&'a str, i32)> {
        let mut domain = None;
        let mut n = 0;
        let mut node_counts: Option<bool> = None;
        for b in pods {
            if !self.selects(b.pod) {
                continue;
            }
            let Some(d) = b.node_labels.get(&self.id.key) else {
                continue;
            };
            if *node_counts.get_or_insert_with(|| self.counts_on_node(b)) {
                domain = Some(d.as_str());
                n += 1;
            }
        }
        domain.map(|d| (d, n))
    }

    /// The domains known when the group was made.
    pub fn universe(&self) -> Arc<BTreeSet<String>> {
        Arc::clone(&self.universe)
    }

    /// Counts per domain (non-zero only).
    pub fn counts(&self) -> &FastMap<String, i32> {
        &self.counts
    }

    /// [`Group::count_bound`] over many pods. With a node filter (a spread honouring the
    /// pod's node affinity) whether the group counts on a node means building the node's
    /// requirements from its labels, so that is decided once per node, not per pod; the
    /// taint check alone is cheaper than the lookup and stays per pod.
    pub fn count_all<'a>(&mut self, bound: impl IntoIterator<Item = &'a BoundPod<'a>>, delta: i32) {
        type NodeId = (*const BTreeMap<String, String>, *const Taint);
        let mut on_node: FastMap<NodeId, bool> = FastMap::default();
        for b in bound {
            if !self.selects(b.pod) {
                continue;
            }
            let Some(domain) = b.node_labels.get(&self.id.key) else {
                continue;
            };
            let counts = if self.id.node_filter.is_none() {
                self.counts_on_taints(b.node_taints)
            } else {
                let node: NodeId = (b.node_labels, b.node_taints.as_ptr());
                match on_node.get(&node) {
                    Some(&c) => c,
                    None => {
                        let c = self.counts_on_node(b);
                        on_node.insert(node, c);
                        c
                    }
                }
            };
            if counts {
                if delta > 0 {
                    self.record(domain);
                } else {
                    self.unrecord(domain);
                }
            }
        }
    }

    /// Whether the group counts pods on this pod's node (node filter and taints).
    fn counts_on_node(&self, b: &BoundPod) -> bool {
        if self.id.node_filter.is_some() {
            self.counts_on(&Requirements::from_labels(b.node_labels), b.node_taints)
        } else {
            self.counts_on_taints(b.node_taints)
        }
    }

    /// Adds (`delta` 1) or removes (-1) one bound pod if the group counts it.
    pub fn count_bound(&mut self, b: &BoundPod, delta: i32) {
        if !self.selects(b.pod) {
            return;
        }
        let Some(domain) = b.node_labels.get(&self.id.key) else {
            return;
        };
        if self.counts_on_node(b) {
            if delta > 0 {
                self.record(domain);
            } else {
                self.unrecord(domain);
            }
        }
    }

    /// The count of one domain (0 for unknown domains).
    pub fn count(&self, domain: &str) -> i32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }

    /// Domain counts, sorted, for explanations and tests.
    pub fn domains(&self) -> BTreeMap<&str, i32> {
        self.all().map(|d| (d, self.count(d))).collect()
    }

    /// Candidate domains: those the node could be in, or all known ones.
    pub(super) fn candidates<'a>(
        &'a self,
        node: &'a Requirement,
    ) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        if !node.is_complement() {
            Box::new(
                node.values()
                    .iter()
                    .map(String::as_str)
                    .filter(|d| self.knows(d)),
            )
        } else {
            Box::new(self.all().filter(|d| node.has(d)))
        }
    }

    /// Whether a node whose label for the group's key is the single value `d` can take
    /// the pod under this group: the answer [`Group::next`] gives for that node, without
    /// building requirements. `None` when only the full check can tell (an affinity
    /// group's first pod picks its domain).
    pub(super) fn admits_domain(
        &self,
        pod: &Pod,
        pod_domains: Option<&Requirement>,
        d: &str,
    ) -> Option<bool> {
        self.admits_domain_given(
            pod,
            pod_domains,
            d,
            || self.min_for(pod_domains),
            || self.matches_anywhere(pod_domains),
        )
    }

    /// Every known domain [`Group::admits_domain`] says yes to, with what does not depend
    /// on the domain worked out once: a spread's minimum count walks every domain, and
    /// working it out again for each domain was a quarter of a disruption simulation.
    pub(super) fn admitted_domains<'g>(
        &'g self,
        pod: &Pod,
        pod_domains: Option<&Requirement>,
    ) -> Vec<&'g str> {
        let min = std::cell::OnceCell::new();
        let anywhere = std::cell::OnceCell::new();
        self.all()
            .filter(|d| {
                let verdict = self.admits_domain_given(
                    pod,
                    pod_domains,
                    d,
                    || *min.get_or_init(|| self.min_for(pod_domains)),
                    || *anywhere.get_or_init(|| self.matches_anywhere(pod_domains)),
                );
                verdict == Some(true)
            })
            .collect()
    }

    /// The rule of [`Group::admits_domain`], given how to get what does not depend on the
    /// domain (a spread's minimum count, whether an affinity's pods are anywhere the pod
    /// may go); each is asked for only when the rule needs it.
    fn admits_domain_given(
        &self,
        pod: &Pod,
        pod_domains: Option<&Requirement>,
        d: &str,
        min: impl FnOnce() -> i32,
        anywhere: impl FnOnce() -> bool,
    ) -> Option<bool> {
        if pod_domains.is_some_and(|r| !r.has(d)) {
            return Some(false);
        }
        Some(match self.id.kind {
            Kind::AntiAffinity => self.count(d) == 0,
            Kind::Affinity => {
                if !anywhere() {
                    return None;
                }
                self.count(d) > 0
            }
            Kind::Spread => {
                self.knows(d)
                    && self.count(d) + self.selects(pod) as i32 - min() <= self.id.max_skew
            }
        })
    }

    /// Whether some domain the pod may go to holds a pod this group counts.
    fn matches_anywhere(&self, pod_domains: Option<&Requirement>) -> bool {
        self.counts
            .iter()
            .any(|(x, c)| *c > 0 && pod_domains.is_none_or(|r| r.has(x)))
    }

    /// [`Group::min_count`] for a pod that may or may not constrain the key.
    pub(super) fn min_for(&self, pod_domains: Option<&Requirement>) -> i32 {
        match pod_domains {
            Some(r) => self.min_count(r),
            None => self.min_count(&Requirement::exists(&self.id.key)),
        }
    }

    /// The domains a pod may go to under this group, as a requirement on the group's key;
    /// an empty requirement means none.
    pub(super) fn next(
        &self,
        pod: &Pod,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Requirement {
        match self.id.kind {
            Kind::Spread => self.next_spread(pod, pod_domains, node_domains),
            Kind::Affinity => self.next_affinity(pod, pod_domains, node_domains),
            Kind::AntiAffinity => self.next_anti_affinity(pod_domains, node_domains),
        }
    }

    pub(super) fn min_count(&self, pod_domains: &Requirement) -> i32 {
        // A new hostname can always be created, so hostname spreads have a global min of 0.
        if self.id.key == labels::HOSTNAME {
            return 0;
        }
        let mut min = i32::MAX;
        let mut eligible = 0;
        for d in self.all() {
            if pod_domains.has(d) {
                eligible += 1;
                min = min.min(self.count(d));
            }
        }
        if self.id.min_domains.is_some_and(|m| eligible < m) || min == i32::MAX {
            0
        } else {
            min
        }
    }

    fn next_spread(
        &self,
        pod: &Pod,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Requirement {
        let min = self.min_count(pod_domains);
        let self_selecting = self.selects(pod) as i32;
        let mut best: Option<(&str, i32)> = None;
        for d in self.candidates(node_domains) {
            if !pod_domains.has(d) {
                continue;
            }
            let count = self.count(d) + self_selecting;
            if count - min <= self.id.max_skew
                && best.is_none_or(|(bd, bc)| count < bc || (count == bc && d < bd))
            {
                best = Some((d, count));
            }
        }
        match best {
            Some((d, _)) => Requirement::in_values(&self.id.key, [d]),
            None => Requirement::does_not_exist(&self.id.key),
        }
    }

    fn next_affinity(
        &self,
        pod: &Pod,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Requirement {
        let mut options: Vec<&str> = self
            .counts
            .iter()
            .filter(|(d, c)| **c > 0 && pod_domains.has(d))
            .map(|(d, _)| d.as_str())
            .collect();
        if options.is_empty() && self.selects(pod) {
            // Bootstrap: the first pod of a self-affine group picks a domain, preferring
            // one the node is already in (upstream does the same for in-flight nodes).
            let mut candidates: Vec<&str> = self
                .candidates(node_domains)
                .filter(|d| pod_domains.has(d))
                .collect();
            candidates.sort_unstable();
            if let Some(d) = candidates.first() {
                options.push(d);
            } else if !node_domains.is_complement() {
                // The node's domain is not registered yet (a brand-new hostname).
                options.extend(
                    node_domains
                        .values()
                        .iter()
                        .map(String::as_str)
                        .filter(|d| pod_domains.has(d))
                        .take(1),
                );
            }
        }
        if options.is_empty() {
            Requirement::does_not_exist(&self.id.key)
        } else {
            Requirement::in_values(&self.id.key, options)
        }
    }

    fn next_anti_affinity(
        &self,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Requirement {
        let options: Vec<&str> = if node_domains.is_complement() {
            self.all()
                .filter(|d| pod_domains.has(d) && node_domains.has(d) && self.count(d) == 0)
                .collect()
        } else {
            node_domains
                .values()
                .iter()
                .map(String::as_str)
                .filter(|d| pod_domains.has(d) && self.count(d) == 0)
                .collect()
        };
        if options.is_empty() {
            Requirement::does_not_exist(&self.id.key)
        } else {
            Requirement::in_values(&self.id.key, options)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::selector::Selector;

    /// The domains worked out at once are exactly those the per-domain check admits, for
    /// every kind of group, with and without the pod narrowing the key.
    #[test]
    fn admitted_domains_are_those_admits_domain_admits() {
        let selector = Selector::from_labels(&std::collections::BTreeMap::from([(
            "app".to_string(),
            "web".to_string(),
        )]));
        let mut pod = Pod::new("default", "p", Default::default());
        pod.labels.insert("app".into(), "web".into());
        let zones: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
        for kind in [Kind::Spread, Kind::Affinity, Kind::AntiAffinity] {
            for skew in [1, 2] {
                let id = GroupKey {
                    kind,
                    key: labels::ZONE.into(),
                    namespaces: BTreeSet::from(["default".to_string()]),
                    selector: selector.clone(),
                    max_skew: skew,
                    min_domains: None,
                    node_filter: None,
                    taint_filter: None,
                };
                for counts in [vec![], vec![("a", 1)], vec![("a", 3), ("b", 1), ("e", 2)]] {
                    let mut g = Group::new(id.clone(), Arc::new(zones.clone()));
                    for (d, n) in &counts {
                        for _ in 0..*n {
                            g.record(d);
                        }
                    }
                    for narrowed in [
                        None,
                        Some(Requirement::in_values(
                            labels::ZONE,
                            ["a".to_string(), "c".to_string()],
                        )),
                    ] {
                        let per_domain: Vec<&str> = g
                            .all()
                            .filter(|d| g.admits_domain(&pod, narrowed.as_ref(), d) == Some(true))
                            .collect();
                        assert_eq!(
                            g.admitted_domains(&pod, narrowed.as_ref()),
                            per_domain,
                            "{kind:?} skew {skew} counts {counts:?} narrowed {narrowed:?}"
                        );
                    }
                }
            }
        }
    }
}
