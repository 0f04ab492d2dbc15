//! Topology: pod counts per domain (zone, hostname, ...) for every spread constraint and
//! pod (anti-)affinity term in play, and the domains each constraint leaves open.
//!
//! Mirrors upstream `scheduling/topology.go` and `topologygroup.go`: identical constraints
//! of many pods (a deployment's 100 replicas) share one group; spread picks the least
//! loaded domain within maxSkew, affinity picks domains that already hold matching pods
//! (or bootstraps one when the pod selects itself), anti-affinity picks empty domains.
//! Unlike upstream, a domain choice looks only at the domains the node could be in when
//! that set is finite (a NodeClaim's own hostname), so self-anti-affinity over thousands
//! of new nodes stays O(1) per check instead of a scan of every hostname.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::api::labels;
use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::engine::pod::{AffinityTerm, Pod, SpreadConstraint, Toleration};
use crate::engine::requirements::{Requirement, Requirements, allow_well_known_labels};
use crate::engine::selector::Selector;

/// What kind of rule a group enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Spread,
    Affinity,
    AntiAffinity,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Spread => "topology spread",
            Kind::Affinity => "pod affinity",
            Kind::AntiAffinity => "pod anti-affinity",
        }
    }
}

/// The identity of a group: constraints that hash equal are tracked once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupKey {
    pub kind: Kind,
    pub key: String,
    pub namespaces: BTreeSet<String>,
    pub selector: Selector,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    /// Spread only: nodes count toward a domain only when compatible with these (the
    /// pod's own node selection, nodeAffinityPolicy Honor).
    pub node_filter: Option<Requirements>,
    /// Spread only, nodeTaintsPolicy Honor: the pod's tolerations; nodes with taints they
    /// do not tolerate do not count.
    pub taint_filter: Option<Vec<Toleration>>,
}

/// A pod already running on a node, as topology counts it.
#[derive(Clone, Copy, Debug)]
pub struct BoundPod<'a> {
    pub pod: &'a Pod,
    pub node_labels: &'a BTreeMap<String, String>,
    pub node_taints: &'a [Taint],
}

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
    counts: HashMap<String, i32>,
}

impl Group {
    /// An empty group over the known domains.
    pub fn new(id: GroupKey, universe: Arc<BTreeSet<String>>) -> Group {
        Group {
            id,
            universe,
            extra: BTreeSet::new(),
            counts: HashMap::new(),
        }
    }

    /// True when the pod is one of the pods this group counts.
    pub fn selects(&self, pod: &Pod) -> bool {
        self.id.namespaces.contains(&pod.key.namespace) && self.id.selector.matches(&pod.labels)
    }

    /// Spread only counts nodes the pod could use: compatible with its node selection
    /// (nodeAffinityPolicy Honor) and, with nodeTaintsPolicy Honor, whose NoSchedule and
    /// NoExecute taints it tolerates (kube-scheduler `PodTopologySpread` filtering).
    fn counts_on(&self, node: &Requirements, taints: &[Taint]) -> bool {
        self.id
            .node_filter
            .as_ref()
            .is_none_or(|f| node.is_compatible(f, &allow_well_known_labels))
            && self.counts_on_taints(taints)
    }

    fn counts_on_taints(&self, taints: &[Taint]) -> bool {
        self.id.taint_filter.as_ref().is_none_or(|tolerations| {
            taints
                .iter()
                .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
                .all(|t| tolerations.iter().any(|tol| tol.tolerates(t)))
        })
    }

    fn knows(&self, domain: &str) -> bool {
        self.universe.contains(domain)
            || self.extra.contains(domain)
            || self.counts.contains_key(domain)
    }

    /// Every known domain, each once.
    fn all(&self) -> impl Iterator<Item = &str> {
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

    fn register(&mut self, domain: &str) {
        if !self.knows(domain) {
            self.extra.insert(domain.to_string());
        }
    }

    fn record(&mut self, domain: &str) {
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
        for b in bound {
            g.count_bound(b, 1);
        }
        g
    }

    /// Adds (`delta` 1) or removes (-1) one bound pod if the group counts it.
    pub fn count_bound(&mut self, b: &BoundPod, delta: i32) {
        if !self.selects(b.pod) {
            return;
        }
        let Some(domain) = b.node_labels.get(&self.id.key) else {
            return;
        };
        let counts = if self.id.node_filter.is_some() {
            self.counts_on(&Requirements::from_labels(b.node_labels), b.node_taints)
        } else {
            self.counts_on_taints(b.node_taints)
        };
        if counts {
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
    fn candidates<'a>(&'a self, node: &'a Requirement) -> Box<dyn Iterator<Item = &'a str> + 'a> {
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

    /// The domains a pod may go to under this group, as a requirement on the group's key;
    /// an empty requirement means none.
    fn next(
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

    fn min_count(&self, pod_domains: &Requirement) -> i32 {
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

/// Why a pod's topology cannot be satisfied on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError {
    pub kind: Kind,
    pub key: String,
}

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unsatisfiable {} on {:?}: no eligible domain",
            self.kind.describe(),
            self.key
        )
    }
}

/// All groups of one scheduling round.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    groups: Vec<Group>,
    index: HashMap<GroupKey, usize>,
    /// Groups whose anti-affinity owners repel the pods the group selects. Shared
    /// copy-on-write: a disruption pass clones the topology per simulation and changes
    /// only a few of thousands of groups.
    inverse: Vec<Arc<Group>>,
    inverse_index: Arc<HashMap<GroupKey, usize>>,
    /// Inverse groups by a label their selector requires (`app=web`), and those whose
    /// selector requires none: finding the groups that select a pod looks at few.
    inverse_by_label: Arc<HashMap<(String, String), Vec<usize>>>,
    inverse_unlabelled: Arc<Vec<usize>>,
    /// Known domains per topology key, shared between the simulations of one pass.
    domains: Arc<HashMap<String, Arc<BTreeSet<String>>>>,
    /// Domains registered during this round (new NodeClaims' hostnames).
    extra: HashMap<String, BTreeSet<String>>,
    /// Groups each pod (by uid) owns.
    owned: HashMap<String, Vec<usize>>,
}

impl Topology {
    /// Starts with the domain universe: every value of every key the NodePools and
    /// instance types could produce, plus the labels of existing nodes.
    pub fn new(domains: HashMap<String, BTreeSet<String>>) -> Topology {
        Topology {
            domains: Arc::new(domains.into_iter().map(|(k, v)| (k, Arc::new(v))).collect()),
            ..Default::default()
        }
    }

    /// Makes a domain known (a new NodeClaim's placeholder hostname).
    pub fn register(&mut self, key: &str, domain: &str) {
        let known = self.domains.get(key).is_some_and(|d| d.contains(domain));
        if !known
            && self
                .extra
                .entry(key.to_string())
                .or_default()
                .insert(domain.to_string())
        {
            // Inverse groups need no registration: anti-affinity only asks whether a
            // domain's count is 0, which an unknown domain's is.
            for g in self.groups.iter_mut() {
                if g.id.key == key {
                    g.register(domain);
                }
            }
        }
    }

    fn group_keys(pod: &Pod, strict: &Requirements) -> Vec<GroupKey> {
        let ns = |term: &AffinityTerm| -> BTreeSet<String> {
            if term.namespaces.is_empty() {
                BTreeSet::from([pod.key.namespace.clone()])
            } else {
                term.namespaces.iter().cloned().collect()
            }
        };
        let mut keys = Vec::new();
        for s in &pod.spread {
            keys.push(spread_key(pod, s, strict));
        }
        for (kind, terms) in [
            (Kind::Affinity, &pod.affinity),
            (Kind::Affinity, &pod.preferred_affinity),
            (Kind::AntiAffinity, &pod.anti_affinity),
            (Kind::AntiAffinity, &pod.preferred_anti_affinity),
        ] {
            for t in terms {
                keys.push(GroupKey {
                    kind,
                    key: t.topology_key.clone(),
                    namespaces: ns(t),
                    selector: t.selector.clone(),
                    max_skew: 0,
                    min_domains: None,
                    node_filter: None,
                    taint_filter: None,
                });
            }
        }
        keys
    }

    /// Creates (or joins) the groups a pod's constraints need, counting the cluster's
    /// bound pods into new groups.
    pub fn add_pod(&mut self, pod: &Pod, strict: &Requirements, bound: &[BoundPod]) {
        self.add_pod_with(pod, strict, |key, domains| {
            Group::counted(key.clone(), domains, bound)
        });
    }

    /// [`Topology::add_pod`] with the caller building each new group (a disruption pass
    /// counts the cluster once per constraint and reuses the counts).
    pub fn add_pod_with(
        &mut self,
        pod: &Pod,
        strict: &Requirements,
        mut make: impl FnMut(&GroupKey, Arc<BTreeSet<String>>) -> Group,
    ) {
        let mut owned = Vec::new();
        for key in Self::group_keys(pod, strict) {
            let idx = match self.index.get(&key) {
                Some(i) => *i,
                None => {
                    let domains = self.known_domains(&key.key);
                    let g = make(&key, domains);
                    self.groups.push(g);
                    self.index.insert(key, self.groups.len() - 1);
                    self.groups.len() - 1
                }
            };
            owned.push(idx);
        }
        self.owned.insert(pod.uid.clone(), owned);
    }

    /// Registers the inverse anti-affinity of pods already bound in the cluster: pods they
    /// select must stay out of their domains.
    pub fn add_inverse_for_bound(&mut self, pod: &Pod, node_labels: &BTreeMap<String, String>) {
        for t in &pod.anti_affinity {
            if let Some(domain) = node_labels.get(&t.topology_key) {
                let key = self.inverse_key(pod, t);
                let i = self.inverse_group(key);
                Arc::make_mut(&mut self.inverse[i]).record(domain);
            }
        }
    }

    /// Undoes [`Topology::add_inverse_for_bound`] for a pod that is moving away.
    pub fn remove_inverse_for_bound(&mut self, pod: &Pod, node_labels: &BTreeMap<String, String>) {
        for t in &pod.anti_affinity {
            if let Some(domain) = node_labels.get(&t.topology_key) {
                let key = self.inverse_key(pod, t);
                if let Some(&i) = self.inverse_index.get(&key) {
                    Arc::make_mut(&mut self.inverse[i]).unrecord(domain);
                }
            }
        }
    }

    /// Every known domain of a key: the shared universe plus this round's registrations.
    fn known_domains(&self, key: &str) -> Arc<BTreeSet<String>> {
        let base = self.domains.get(key).cloned().unwrap_or_default();
        match self.extra.get(key) {
            Some(extra) if !extra.is_empty() => {
                let mut d = (*base).clone();
                d.extend(extra.iter().cloned());
                Arc::new(d)
            }
            _ => base,
        }
    }

    fn inverse_key(&self, pod: &Pod, t: &AffinityTerm) -> GroupKey {
        GroupKey {
            kind: Kind::AntiAffinity,
            key: t.topology_key.clone(),
            namespaces: if t.namespaces.is_empty() {
                BTreeSet::from([pod.key.namespace.clone()])
            } else {
                t.namespaces.iter().cloned().collect()
            },
            selector: t.selector.clone(),
            max_skew: 0,
            min_domains: None,
            node_filter: None,
            taint_filter: None,
        }
    }

    fn inverse_group(&mut self, key: GroupKey) -> usize {
        if let Some(i) = self.inverse_index.get(&key) {
            return *i;
        }
        let domains = self.known_domains(&key.key);
        let i = self.inverse.len();
        match label_hint(&key.selector) {
            Some(kv) => Arc::make_mut(&mut self.inverse_by_label)
                .entry(kv)
                .or_default()
                .push(i),
            None => Arc::make_mut(&mut self.inverse_unlabelled).push(i),
        }
        self.inverse
            .push(Arc::new(Group::new(key.clone(), domains)));
        Arc::make_mut(&mut self.inverse_index).insert(key, i);
        i
    }

    /// Forgets a pod's groups, for preference relaxation (the groups stay for others).
    pub fn remove_pod(&mut self, pod: &Pod) {
        self.owned.remove(&pod.uid);
    }

    /// The domains of one non-hostname key an existing node must be in for this pod, when
    /// a spread or anti-affinity group decides that independently of the node: the
    /// scheduler then visits only the nodes in those domains (a necessary condition of
    /// [`Topology::may_admit`], so the placement is the one a full scan finds).
    pub fn allowed_domains(
        &self,
        pod: &Pod,
        strict: &Requirements,
        inverse: &[usize],
    ) -> Option<(String, Vec<String>)> {
        let owned = self
            .owned
            .get(&pod.uid)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let groups = owned
            .iter()
            .map(|i| &self.groups[*i])
            .chain(inverse.iter().map(|i| &*self.inverse[*i]));
        for g in groups {
            if g.id.key == labels::HOSTNAME || g.id.kind == Kind::Affinity {
                continue;
            }
            let pod_domains = strict.get(&g.id.key);
            let pod_has = |d: &str| pod_domains.is_none_or(|r| r.has(d));
            let allowed: Vec<String> = match g.id.kind {
                Kind::Spread => {
                    let min = match pod_domains {
                        Some(r) => g.min_count(r),
                        None => g.min_count(&Requirement::exists(&g.id.key)),
                    };
                    let own = g.selects(pod) as i32;
                    g.all()
                        .filter(|d| pod_has(d) && g.count(d) + own - min <= g.id.max_skew)
                        .map(str::to_string)
                        .collect()
                }
                _ => g
                    .all()
                    .filter(|d| pod_has(d) && g.count(d) == 0)
                    .map(str::to_string)
                    .collect(),
            };
            return Some((g.id.key.clone(), allowed));
        }
        None
    }

    /// A cheap, allocation-free pre-check for a node whose topology labels are single
    /// values (an existing node): false only when [`Topology::requirements_for`] would
    /// certainly fail there. Scanning thousands of nodes for a spread or anti-affinity pod
    /// then costs a few lookups per node; the full check runs on the few that pass.
    pub fn may_admit(
        &self,
        pod: &Pod,
        strict: &Requirements,
        node: &Requirements,
        inverse: &[usize],
    ) -> bool {
        let owned = self
            .owned
            .get(&pod.uid)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let groups = owned
            .iter()
            .map(|i| &self.groups[*i])
            .chain(inverse.iter().map(|i| &*self.inverse[*i]));
        for g in groups {
            let Some(nr) = node.get(&g.id.key) else {
                continue;
            };
            if nr.is_complement() || nr.values().len() != 1 {
                continue;
            }
            let d = nr.values()[0].as_str();
            let pod_domains = strict.get(&g.id.key);
            if pod_domains.is_some_and(|r| !r.has(d)) {
                return false;
            }
            let ok = match g.id.kind {
                Kind::AntiAffinity => g.count(d) == 0,
                Kind::Affinity => {
                    let anywhere = g
                        .counts
                        .iter()
                        .any(|(x, c)| *c > 0 && pod_domains.is_none_or(|r| r.has(x)));
                    // Without matching pods anywhere the first pod bootstraps a domain:
                    // leave that to the full check.
                    !anywhere || g.count(d) > 0
                }
                Kind::Spread => {
                    if !g.knows(d) {
                        false
                    } else {
                        let min = match pod_domains {
                            Some(r) => g.min_count(r),
                            None => g.min_count(&Requirement::exists(&g.id.key)),
                        };
                        g.count(d) + g.selects(pod) as i32 - min <= g.id.max_skew
                    }
                }
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// The extra requirements the pod's topology imposes on a node with `node` requirements.
    pub fn requirements_for(
        &self,
        pod: &Pod,
        strict: &Requirements,
        node: &Requirements,
        inverse: &[usize],
    ) -> Result<Requirements, TopologyError> {
        let mut out = Requirements::new();
        let owned = self
            .owned
            .get(&pod.uid)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let groups = owned
            .iter()
            .map(|i| &self.groups[*i])
            .chain(inverse.iter().map(|i| &*self.inverse[*i]));
        for g in groups {
            let exists = Requirement::exists(&g.id.key);
            let pod_domains = strict.get(&g.id.key).unwrap_or(&exists);
            let node_domains = node.get(&g.id.key).unwrap_or(&exists);
            let next = g.next(pod, pod_domains, node_domains);
            if next.is_empty() {
                return Err(TopologyError {
                    kind: g.id.kind,
                    key: g.id.key.clone(),
                });
            }
            out.add(next);
        }
        Ok(out)
    }

    /// Counts a placed pod into every group that selects it, and records its own
    /// anti-affinity terms as inverse groups.
    pub fn record(&mut self, pod: &Pod, node: &Requirements, taints: &[Taint]) {
        for g in &mut self.groups {
            if !g.selects(pod) || !g.counts_on(node, taints) {
                continue;
            }
            let Some(r) = node.get(&g.id.key) else {
                continue;
            };
            if r.is_complement() {
                continue;
            }
            if g.id.kind == Kind::AntiAffinity {
                // Conservative, as upstream: every domain the node might be in.
                for d in r.values().to_vec() {
                    g.record(&d);
                }
            } else if r.values().len() == 1 {
                g.record(&r.values()[0]);
            }
        }
        for t in pod.anti_affinity.clone() {
            let key = self.inverse_key(pod, &t);
            let i = self.inverse_group(key);
            if let Some(r) = node.get(&t.topology_key)
                && !r.is_complement()
            {
                let g = Arc::make_mut(&mut self.inverse[i]);
                for d in r.values() {
                    g.record(d);
                }
            }
        }
    }

    /// The inverse anti-affinity groups that select this pod: other pods' required
    /// anti-affinity it must respect even without constraints of its own.
    pub fn inverse_selecting(&self, pod: &Pod) -> Vec<usize> {
        if self.inverse.is_empty() {
            return Vec::new();
        }
        let mut out: Vec<usize> = self
            .inverse_unlabelled
            .iter()
            .copied()
            .chain(pod.labels.iter().flat_map(|(k, v)| {
                self.inverse_by_label
                    .get(&(k.clone(), v.clone()))
                    .into_iter()
                    .flatten()
                    .copied()
            }))
            .filter(|&i| self.inverse[i].selects(pod))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The groups that allow only a bounded count of matching pods per hostname for this
    /// pod: its own hostname anti-affinity and hostname spreads, and other pods' hostname
    /// anti-affinity selecting it. Returns (group, inverse?, highest count still allowed).
    /// Counts only grow during a solve, so a node blocked by one of these stays blocked;
    /// the scheduler uses that to skip nodes it already knows are full for the group.
    pub fn hostname_limits(&self, pod: &Pod, inverse: &[usize]) -> Vec<(usize, bool, i32)> {
        let mut out = Vec::new();
        for &i in self
            .owned
            .get(&pod.uid)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let g = &self.groups[i];
            if g.id.key != labels::HOSTNAME {
                continue;
            }
            match g.id.kind {
                Kind::AntiAffinity => out.push((i, false, 0)),
                Kind::Spread => out.push((i, false, g.id.max_skew - g.selects(pod) as i32)),
                Kind::Affinity => {}
            }
        }
        for &i in inverse {
            if self.inverse[i].id.key == labels::HOSTNAME {
                out.push((i, true, 0));
            }
        }
        out
    }

    /// True when the hostname already holds more matching pods than the limit allows.
    pub fn hostname_blocked(
        &self,
        group: usize,
        inverse: bool,
        limit: i32,
        hostname: &str,
    ) -> bool {
        let g = if inverse {
            &*self.inverse[group]
        } else {
            &self.groups[group]
        };
        g.count(hostname) > limit
    }

    /// The groups, for explanations and tests.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }
}

fn spread_key(pod: &Pod, s: &SpreadConstraint, strict: &Requirements) -> GroupKey {
    let mut selector = s.selector.clone();
    // matchLabelKeys narrows the selector to pods with the same values (e.g. pod-template-hash).
    if let crate::engine::selector::Selector::Match(exprs) = &mut selector {
        for k in &s.match_label_keys {
            if let Some(v) = pod.labels.get(k) {
                exprs.push(crate::engine::selector::Expr::In(
                    k.clone(),
                    vec![v.clone()],
                ));
            }
        }
    }
    GroupKey {
        kind: Kind::Spread,
        key: s.topology_key.clone(),
        namespaces: BTreeSet::from([pod.key.namespace.clone()]),
        selector,
        max_skew: s.max_skew,
        min_domains: s.min_domains,
        node_filter: if s.honor_node_affinity && !strict.is_empty() {
            Some(strict.clone())
        } else {
            None
        },
        taint_filter: s.honor_node_taints.then(|| pod.tolerations.clone()),
    }
}

/// A label the selector requires (from matchLabels or a single-value `In`): only pods with
/// it can match, so groups are indexed by it.
pub fn label_hint(selector: &Selector) -> Option<(String, String)> {
    match selector {
        Selector::Match(exprs) => exprs.iter().find_map(|e| match e {
            crate::engine::selector::Expr::In(k, v) if v.len() == 1 => {
                Some((k.clone(), v[0].clone()))
            }
            _ => None,
        }),
        Selector::Nothing => None,
    }
}
