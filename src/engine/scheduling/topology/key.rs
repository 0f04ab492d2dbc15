//! A topology group's identity, and a borrowed view of it read off a pod in place.
//!
//! Every pod a solve places looks its constraints up among the round's groups. Building
//! an owned key for that (the topology key, the namespaces, the selector with its
//! `matchLabelKeys` terms, the pod's node requirements and tolerations), hashing it whole
//! and dropping it, per constraint per placement, cost `Topology::add_pod_with` 0.24 G of
//! its 1.49 G instructions over the first 6 simulated hours of
//! `examples/diurnal-1000.yaml` (callgrind). A [`KeyView`] borrows all of that from the
//! pod; groups are indexed by its [`KeyView::fingerprint`], checked with
//! [`KeyView::matches`], and an owned [`GroupKey`] is built only for a new group.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::LazyLock;

use super::Kind;
use crate::engine::fast_hash::Fast;
use crate::engine::pod::{AffinityTerm, Pod, SpreadConstraint, Toleration};
use crate::engine::requirements::Requirements;
use crate::engine::selector::{Expr, Selector};

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

/// The namespaces a term counts pods in, as sorted distinct names whatever holds them.
#[derive(Clone, Debug)]
enum Namespaces<'a> {
    /// The pod's own namespace (a spread, or a term naming none).
    One(&'a str),
    /// A term's own list, sorted and deduplicated.
    Listed(BTreeSet<&'a str>),
}

impl Namespaces<'_> {
    fn iter(&self) -> impl Iterator<Item = &str> {
        let (one, listed) = match self {
            Namespaces::One(ns) => (Some(*ns), None),
            Namespaces::Listed(set) => (None, Some(set)),
        };
        one.into_iter().chain(listed.into_iter().flatten().copied())
    }

    fn len(&self) -> usize {
        match self {
            Namespaces::One(_) => 1,
            Namespaces::Listed(set) => set.len(),
        }
    }
}

/// A [`GroupKey`] borrowed from the pod it describes. Two views that describe the same key
/// have the same fingerprint and match the same owned key.
#[derive(Clone, Debug)]
pub struct KeyView<'a> {
    kind: Kind,
    key: &'a str,
    namespaces: Namespaces<'a>,
    selector: &'a Selector,
    /// A spread's `matchLabelKeys` and the pod's labels: each key the pod carries adds
    /// `key In (value)` to a selector that matches something (upstream narrows the
    /// selector to pods of the same revision, e.g. `pod-template-hash`).
    match_label_keys: &'a [String],
    labels: Option<&'a BTreeMap<String, String>>,
    max_skew: i32,
    min_domains: Option<i32>,
    node_filter: Option<&'a Requirements>,
    taint_filter: Option<&'a [Toleration]>,
}

/// One hasher for every fingerprint, seeded per process: fingerprints are compared across
/// the maps of a run, never stored.
static FINGERPRINTS: LazyLock<Fast> = LazyLock::new(Fast::default);

impl<'a> KeyView<'a> {
    /// A spread constraint's group (upstream `topology.go` builds one per constraint).
    pub fn spread(pod: &'a Pod, s: &'a SpreadConstraint, strict: &'a Requirements) -> Self {
        KeyView {
            kind: Kind::Spread,
            key: &s.topology_key,
            namespaces: Namespaces::One(&pod.key.namespace),
            selector: &s.selector,
            match_label_keys: &s.match_label_keys,
            labels: Some(&pod.labels),
            max_skew: s.max_skew,
            min_domains: s.min_domains,
            node_filter: (s.honor_node_affinity && !strict.is_empty()).then_some(strict),
            taint_filter: s.honor_node_taints.then_some(pod.tolerations.as_slice()),
        }
    }

    /// A pod (anti-)affinity term's group: the term's namespaces, or the pod's own.
    pub fn term(pod: &'a Pod, kind: Kind, t: &'a AffinityTerm) -> Self {
        KeyView {
            kind,
            key: &t.topology_key,
            namespaces: if t.namespaces.is_empty() {
                Namespaces::One(&pod.key.namespace)
            } else {
                Namespaces::Listed(t.namespaces.iter().map(String::as_str).collect())
            },
            selector: &t.selector,
            match_label_keys: &[],
            labels: None,
            max_skew: 0,
            min_domains: None,
            node_filter: None,
            taint_filter: None,
        }
    }

    /// Every group a pod's own constraints need: its spreads, then its required and
    /// preferred affinity and anti-affinity terms.
    pub fn of_pod(pod: &'a Pod, strict: &'a Requirements) -> impl Iterator<Item = Self> + 'a {
        let spreads = pod.spread.iter().map(move |s| Self::spread(pod, s, strict));
        let terms = [
            (Kind::Affinity, &pod.affinity),
            (Kind::Affinity, &pod.preferred_affinity),
            (Kind::AntiAffinity, &pod.anti_affinity),
            (Kind::AntiAffinity, &pod.preferred_anti_affinity),
        ]
        .into_iter()
        .flat_map(move |(kind, terms)| terms.iter().map(move |t| Self::term(pod, kind, t)));
        spreads.chain(terms)
    }

    /// The `key In (value)` terms `matchLabelKeys` adds, when the selector takes them.
    fn added_terms(&self) -> impl Iterator<Item = (&'a String, &'a String)> + 'a {
        let labels = match self.selector {
            Selector::Match(_) => self.labels,
            Selector::Nothing => None,
        };
        self.match_label_keys
            .iter()
            .filter_map(move |k| labels.and_then(|l| l.get(k)).map(|v| (k, v)))
    }

    /// A hash of the key this view describes: equal keys, equal fingerprints.
    pub fn fingerprint(&self) -> u64 {
        let mut h = FINGERPRINTS.build_hasher();
        self.kind.hash(&mut h);
        self.key.hash(&mut h);
        for ns in self.namespaces.iter() {
            ns.hash(&mut h);
        }
        match self.selector {
            Selector::Nothing => h.write_u8(0),
            Selector::Match(exprs) => {
                h.write_u8(1);
                for e in exprs {
                    hash_expr(&mut h, e);
                }
                for (k, v) in self.added_terms() {
                    hash_in_one(&mut h, k, v);
                }
            }
        }
        self.max_skew.hash(&mut h);
        self.min_domains.hash(&mut h);
        self.node_filter.hash(&mut h);
        self.taint_filter.hash(&mut h);
        h.finish()
    }

    /// Whether this view describes `k`.
    pub fn matches(&self, k: &GroupKey) -> bool {
        self.kind == k.kind
            && self.key == k.key
            && self.max_skew == k.max_skew
            && self.min_domains == k.min_domains
            && self.node_filter == k.node_filter.as_ref()
            && self.taint_filter == k.taint_filter.as_deref()
            && self.namespaces.len() == k.namespaces.len()
            && self
                .namespaces
                .iter()
                .zip(&k.namespaces)
                .all(|(a, b)| a == b)
            && self.selector_matches(&k.selector)
    }

    fn selector_matches(&self, owned: &Selector) -> bool {
        match (self.selector, owned) {
            (Selector::Nothing, Selector::Nothing) => true,
            (Selector::Match(base), Selector::Match(all)) => {
                let Some((head, tail)) = all.split_at_checked(base.len()) else {
                    return false;
                };
                head == base.as_slice() && {
                    let mut added = self.added_terms();
                    let mut tail = tail.iter();
                    loop {
                        match (added.next(), tail.next()) {
                            (None, None) => break true,
                            (Some((k, v)), Some(Expr::In(k2, vs)))
                                if k == k2 && vs.len() == 1 && vs[0] == *v => {}
                            _ => break false,
                        }
                    }
                }
            }
            _ => false,
        }
    }

    /// The owned key, for a new group.
    pub fn to_key(&self) -> GroupKey {
        let selector = match self.selector {
            Selector::Nothing => Selector::Nothing,
            Selector::Match(exprs) => {
                let mut exprs = exprs.clone();
                exprs.extend(
                    self.added_terms()
                        .map(|(k, v)| Expr::In(k.clone(), vec![v.clone()])),
                );
                Selector::Match(exprs)
            }
        };
        GroupKey {
            kind: self.kind,
            key: self.key.to_string(),
            namespaces: self.namespaces.iter().map(str::to_string).collect(),
            selector,
            max_skew: self.max_skew,
            min_domains: self.min_domains,
            node_filter: self.node_filter.cloned(),
            taint_filter: self.taint_filter.map(<[Toleration]>::to_vec),
        }
    }
}

/// Hashes a selector term for [`KeyView::fingerprint`].
fn hash_expr(h: &mut impl Hasher, e: &Expr) {
    let (tag, key, values): (u8, &String, &[String]) = match e {
        Expr::In(k, vs) => (0, k, vs),
        Expr::NotIn(k, vs) => (1, k, vs),
        Expr::Exists(k) => (2, k, &[]),
        Expr::DoesNotExist(k) => (3, k, &[]),
    };
    h.write_u8(tag);
    key.hash(h);
    values.hash(h);
}

/// Hashes `key In (value)` as [`hash_expr`] hashes `Expr::In(key, vec![value])`: a term
/// `matchLabelKeys` adds and the same term written in the selector make one key, so the
/// two views must hash alike.
fn hash_in_one(h: &mut impl Hasher, key: &String, value: &String) {
    h.write_u8(0);
    key.hash(h);
    std::slice::from_ref(value).hash(h);
}

/// Groups indexed by fingerprint: `(fingerprint, n)` holds the n-th group with that
/// fingerprint, so a collision costs one more lookup instead of a wrong group.
pub type Index = crate::engine::fast_hash::FastMap<(u64, u32), usize>;

/// Finds the group a view describes: `Ok(index)`, or `Err(slot)` with the free slot a new
/// group of this key goes in.
pub fn find<'g>(
    index: &Index,
    key_of: impl Fn(usize) -> &'g GroupKey,
    view: &KeyView,
) -> Result<usize, (u64, u32)> {
    let fingerprint = view.fingerprint();
    for n in 0.. {
        match index.get(&(fingerprint, n)) {
            Some(&i) if view.matches(key_of(i)) => return Ok(i),
            Some(_) => {}
            None => return Err((fingerprint, n)),
        }
    }
    unreachable!("a u32 of slots per fingerprint is never filled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::pod::SpreadConstraint;
    use crate::engine::requirements::Requirement;

    fn web(ns: &str, hash: &str) -> Pod {
        let mut pod = Pod::new(ns, "p", Default::default());
        pod.labels.insert("app".into(), "web".into());
        pod.labels.insert("pod-template-hash".into(), hash.into());
        pod
    }

    fn spread(match_label_keys: &[&str], selector: Selector) -> SpreadConstraint {
        SpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            hard: true,
            selector,
            min_domains: None,
            honor_node_affinity: true,
            honor_node_taints: false,
            match_label_keys: match_label_keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    /// A view matches the key it builds and no key that differs in one part, and views
    /// of equal keys (from different pods) have equal fingerprints.
    #[test]
    fn a_view_matches_its_own_key_and_no_other() {
        let app = Selector::from_labels(&BTreeMap::from([("app".into(), "web".into())]));
        let strict =
            Requirements::from_iter([Requirement::in_values("kubernetes.io/arch", ["amd64"])]);
        let none = Requirements::default();
        let pods = [
            web("default", "abc"),
            web("default", "def"),
            web("other", "abc"),
        ];
        let spreads = [
            spread(&[], app.clone()),
            spread(&["pod-template-hash"], app.clone()),
            spread(&["pod-template-hash", "missing"], app.clone()),
            spread(&["pod-template-hash"], Selector::Nothing),
        ];
        let terms = [
            AffinityTerm {
                selector: app.clone(),
                namespaces: vec![],
                topology_key: "kubernetes.io/hostname".into(),
                weight: 0,
            },
            AffinityTerm {
                selector: app.clone(),
                namespaces: vec!["b".into(), "a".into(), "b".into()],
                topology_key: "kubernetes.io/hostname".into(),
                weight: 0,
            },
        ];
        let mut views = Vec::new();
        for pod in &pods {
            for s in &spreads {
                views.push(KeyView::spread(pod, s, &strict));
                views.push(KeyView::spread(pod, s, &none));
            }
            for t in &terms {
                views.push(KeyView::term(pod, Kind::Affinity, t));
                views.push(KeyView::term(pod, Kind::AntiAffinity, t));
            }
        }
        let keys: Vec<GroupKey> = views.iter().map(KeyView::to_key).collect();
        for (i, v) in views.iter().enumerate() {
            for (j, k) in keys.iter().enumerate() {
                assert_eq!(v.matches(k), keys[i] == *k, "view {i} against key {j}");
                if keys[i] == *k {
                    assert_eq!(v.fingerprint(), views[j].fingerprint(), "views {i} and {j}");
                }
            }
        }
        // The spread with matchLabelKeys narrows to the pod's revision.
        let narrowed = KeyView::spread(&pods[0], &spreads[1], &none).to_key();
        let Selector::Match(exprs) = &narrowed.selector else {
            panic!("a selector that matches something");
        };
        assert_eq!(
            exprs.last(),
            Some(&Expr::In("pod-template-hash".into(), vec!["abc".into()]))
        );
    }
}
