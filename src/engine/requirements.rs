//! The requirement algebra Karpenter's scheduler is built on: label constraints from pods,
//! NodePools, NodeClaims, nodes and instance types, intersected and checked for
//! compatibility (upstream `sigs.k8s.io/karpenter/pkg/scheduling/requirements.go`).
//!
//! A scheduling round checks compatibility for every (pod, candidate) pair, millions of
//! times for 20,000 pods and 400 instance types, and most checks fail. So `compatible` and
//! `intersects` walk two sorted lists in place, allocate nothing, and borrow the failing
//! requirements for the reason instead of formatting it.

mod conversions;
mod incompatibility;
mod min_values;
#[cfg(test)]
mod proptests;
mod requirement;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use crate::api::labels;
use crate::api::nodeclaim::{NodeSelectorRequirementWithMinValues, Operator};

pub use conversions::{heaviest_preference, pod_requirements, strict_pod_requirements};
pub use incompatibility::{Incompatibility, IncompatibilityKind};
pub use min_values::{MinValuesShortfall, OptionValues};
pub use requirement::{Requirement, RequirementError, normalize_key};

/// A conjunction of label requirements, at most one per key (adding a second intersects).
///
/// Held as a `Vec` ordered by (FNV hash of the key, key) rather than a `BTreeMap`: the hot
/// operation walks two sets' shared keys, and with hash order that walk compares integers
/// and reads a key string only when the hashes match. Well-known keys share long prefixes
/// (`karpenter.k8s.aws/instance-`), which makes alphabetical comparisons slow. A scratch
/// micro-benchmark of a (2-key pod, 12-key instance type) check on the 2-core machine
/// measured: alphabetical Vec merge 90-135 ns, `BTreeMap` merge 105-205 ns, `BTreeMap`
/// lookups of the smaller set's keys 40-60 ns, hash-ordered Vec merge 36-49 ns. Interning
/// keys later only swaps the hash for the intern id. Iteration order is therefore not
/// alphabetical; `Display` sorts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requirements {
    items: Vec<Requirement>,
}

/// A label key with the hash requirement sets are ordered by.
#[derive(Clone, Copy, Debug)]
pub struct HashedKey<'k> {
    hash: u64,
    key: &'k str,
}

impl<'k> HashedKey<'k> {
    pub fn new(key: &'k str) -> Self {
        HashedKey {
            hash: requirement::key_hash(key),
            key,
        }
    }
}

/// Allows well-known labels to stay undefined on the receiver of `compatible`, as
/// upstream's `AllowUndefinedWellKnownLabels`: a NodePool that does not constrain
/// `topology.kubernetes.io/zone` still launches into some zone.
pub fn allow_well_known_labels(key: &str) -> bool {
    labels::WELL_KNOWN_LABELS.contains(&key)
}

/// Allows no label to stay undefined (upstream `Compatible` without options): used
/// against existing nodes, whose labels are all known.
pub fn allow_no_undefined(_key: &str) -> bool {
    false
}

fn is_negative(op: Operator) -> bool {
    matches!(op, Operator::NotIn | Operator::DoesNotExist)
}

impl Requirements {
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.position_of(HashedKey::new(key))
    }

    fn position_of(&self, key: HashedKey<'_>) -> Result<usize, usize> {
        let wanted = (key.hash, key.key);
        self.items.binary_search_by(|r| r.sort_key().cmp(&wanted))
    }

    /// [`Requirements::get`] with the key's hash worked out once by the caller, who
    /// looks the same key up in many sets (every node's, building an index by its value).
    pub fn get_hashed(&self, key: HashedKey<'_>) -> Option<&Requirement> {
        self.position_of(key).ok().map(|i| &self.items[i])
    }

    /// Adds a requirement; if the key is already constrained, both must hold (upstream `Add`).
    pub fn add(&mut self, requirement: Requirement) {
        match self.position(requirement.key()) {
            Ok(i) => self.items[i] = requirement.intersection(&self.items[i]),
            Err(i) => self.items.insert(i, requirement),
        }
    }

    /// Adds every requirement of `other` (a pod's requirements onto a NodeClaim's).
    pub fn add_all(&mut self, other: &Requirements) {
        for r in &other.items {
            match self.position(r.key()) {
                Ok(i) => self.items[i] = r.intersection(&self.items[i]),
                Err(i) => self.items.insert(i, r.clone()),
            }
        }
    }

    /// The requirement on `key`; None means the key is unconstrained (upstream's `Get`
    /// returns Exists then, which callers can build with [`Requirement::exists`]).
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.position(key).ok().map(|i| &self.items[i])
    }

    /// Mutable access for relaxation (lowering `minValues`); the key cannot change.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Requirement> {
        self.position(key).ok().map(|i| &mut self.items[i])
    }

    /// Drops the constraint on `key`.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.position(key).ok().map(|i| self.items.remove(i))
    }

    pub fn has(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Constrained keys, in storage (hash) order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(Requirement::key)
    }

    /// Requirements in storage (hash) order.
    pub fn iter(&self) -> std::slice::Iter<'_, Requirement> {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The labels a launched node is certain to carry: keys pinned to a single value.
    /// `kubernetes.io/hostname` is left out, as upstream's restricted labels are: the
    /// scheduler pins it to a placeholder, never to the real node name.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.items
            .iter()
            .filter(|r| {
                r.operator() == Operator::In && r.values().len() == 1 && r.key() != labels::HOSTNAME
            })
            .map(|r| (r.key().to_string(), r.values()[0].clone()))
            .collect()
    }

    /// Whether `other` (a pod's requirements) can be met by `self` (a NodePool, node or
    /// instance type), mirroring upstream `Compatible`: every key `other` asks for must be
    /// defined by `self`, unless `other` only excludes values (NotIn, DoesNotExist) or
    /// `allow_undefined` says the key may stay undefined; then every shared key must
    /// intersect. Reports the first failing key, undefined keys first, as upstream does.
    pub fn compatible<'a>(
        &'a self,
        other: &'a Requirements,
        allow_undefined: &dyn Fn(&str) -> bool,
    ) -> Result<(), Incompatibility<'a>> {
        let mut i = 0;
        for incoming in &other.items {
            while i < self.items.len() && self.items[i].sort_key() < incoming.sort_key() {
                i += 1;
            }
            let defined = i < self.items.len() && self.items[i].sort_key() == incoming.sort_key();
            if defined || is_negative(incoming.operator()) || allow_undefined(incoming.key()) {
                continue;
            }
            return Err(Incompatibility::undefined(incoming, self.keys()));
        }
        self.intersects(other)
    }

    /// Whether a node with these labels meets every requirement, no key left undefined:
    /// `Requirements::from_labels(labels).compatible(self, &allow_no_undefined)` without
    /// building the labels' requirements (a disruption pass asks it of every node, and
    /// the building was most of the drift check). False also where only the full check
    /// can tell: a deprecated key (`failure-domain.beta...`) that reading the labels
    /// folds into its stable name. A true answer is always the full check's.
    pub fn satisfied_by_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        // A key that is its own stable name comes back as itself: compared by address,
        // as every label of every node is checked at each disruption pass.
        if labels
            .keys()
            .any(|k| !std::ptr::eq(requirement::normalize_key(k), k.as_str()))
        {
            return false;
        }
        self.items.iter().all(|r| match labels.get(r.key()) {
            Some(v) => r.has(v),
            None => is_negative(r.operator()),
        })
    }

    /// [`Requirements::compatible`] when the reason is not needed.
    pub fn is_compatible(
        &self,
        other: &Requirements,
        allow_undefined: &dyn Fn(&str) -> bool,
    ) -> bool {
        self.compatible(other, allow_undefined).is_ok()
    }

    /// Whether every key both sides constrain has a value both allow; keys only one side
    /// constrains are fine. As upstream, two requirements that both only exclude values
    /// (NotIn, DoesNotExist) never conflict: a node without the label satisfies both.
    pub fn intersects<'a>(&'a self, other: &'a Requirements) -> Result<(), Incompatibility<'a>> {
        let (a, b) = (&self.items, &other.items);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].sort_key().cmp(&b[j].sort_key()) {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    let (existing, incoming) = (&a[i], &b[j]);
                    let both_negative =
                        is_negative(incoming.operator()) && is_negative(existing.operator());
                    if !(existing.has_intersection(incoming) || both_negative) {
                        return Err(Incompatibility::disjoint(existing, incoming));
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    /// Requirements in alphabetical key order, for output people read.
    pub fn sorted(&self) -> Vec<&Requirement> {
        let mut v: Vec<&Requirement> = self.items.iter().collect();
        v.sort_unstable_by(|a, b| a.key().cmp(b.key()));
        v
    }

    /// Back to the NodeClaim's `spec.requirements` form. A requirement with excluded
    /// values and bounds becomes several entries on the same key, which Kubernetes ANDs.
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirementWithMinValues> {
        let mut out = Vec::with_capacity(self.items.len());
        for r in self.sorted() {
            let min_values = r.min_values().and_then(|n| i64::try_from(n).ok());
            let mut push = |operator: Operator, values: Vec<String>| {
                out.push(NodeSelectorRequirementWithMinValues {
                    key: r.key().to_string(),
                    operator,
                    values,
                    min_values,
                });
            };
            let (gte, lte) = r.bounds();
            match r.operator() {
                Operator::In | Operator::NotIn => push(r.operator(), r.values().to_vec()),
                Operator::Exists if gte.is_none() && lte.is_none() => {
                    push(Operator::Exists, Vec::new())
                }
                Operator::DoesNotExist => push(Operator::DoesNotExist, Vec::new()),
                _ => {}
            }
            if let Some(n) = gte {
                push(Operator::Gte, vec![n.to_string()]);
            }
            if let Some(n) = lte {
                push(Operator::Lte, vec![n.to_string()]);
            }
        }
        out
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<I: IntoIterator<Item = Requirement>>(iter: I) -> Self {
        let mut r = Requirements::new();
        r.extend(iter);
        r
    }
}

impl Extend<Requirement> for Requirements {
    fn extend<I: IntoIterator<Item = Requirement>>(&mut self, iter: I) {
        for requirement in iter {
            self.add(requirement);
        }
    }
}

impl<'a> IntoIterator for &'a Requirements {
    type Item = &'a Requirement;
    type IntoIter = std::slice::Iter<'a, Requirement>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

/// `karpenter.sh/capacity-type In [on-demand spot], kubernetes.io/arch In [amd64]`, in key
/// order, the way upstream logs requirements.
impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.sorted().into_iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}
