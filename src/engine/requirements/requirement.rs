//! One label key's constraint: a set of allowed values, or the complement of a set, with
//! optional inclusive integer bounds and a `minValues` flexibility floor.
//!
//! Mirrors `Requirement` in `sigs.k8s.io/karpenter/pkg/scheduling/requirement.go` (the
//! version that canonicalises Gt/Lt into inclusive bounds): `NotIn`, `Exists`, `Gt`, `Lt`,
//! `Gte` and `Lte` are all complements, so every pair of requirements intersects into
//! another requirement of the same shape.

use std::cmp::Ordering;
use std::fmt;

use crate::api::labels;
use crate::api::nodeclaim::Operator;

/// Why a requirement could not be built from user input. Kubernetes' API validation rejects
/// these too; we report them rather than guess a meaning.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    #[error(
        "key {key:?}: unknown operator {operator:?} (expected In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte)"
    )]
    UnknownOperator { key: String, operator: String },
    #[error("key {key:?}: operator {operator} needs exactly one integer value, got {values:?}")]
    NotOneInteger {
        key: String,
        operator: &'static str,
        values: Vec<String>,
    },
}

/// A constraint on one label key, closed under intersection.
///
/// Values are kept sorted and deduplicated so set operations are merge walks over two
/// slices: no hashing and no allocation when only testing for overlap.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    /// FNV-1a of `key`: `Requirements` orders keys by it, so walking two sets compares
    /// integers and touches the strings only when the hashes match.
    key_hash: u64,
    /// True when `values` lists what is excluded rather than what is allowed.
    complement: bool,
    values: Vec<String>,
    /// Inclusive lower bound; upstream canonicalises `Gt n` to `Gte n+1`.
    gte: Option<i64>,
    /// Inclusive upper bound; upstream canonicalises `Lt n` to `Lte n-1`.
    lte: Option<i64>,
    min_values: Option<usize>,
}

/// Deprecated label keys are rewritten to their stable names so a pod selecting
/// `beta.kubernetes.io/arch` meets a NodePool constraining `kubernetes.io/arch`
/// (upstream `NormalizedLabels`).
pub fn normalize_key(key: &str) -> &str {
    match key {
        labels::ZONE_BETA => labels::ZONE,
        labels::REGION_BETA => labels::REGION,
        labels::ARCH_BETA => labels::ARCH,
        labels::OS_BETA => labels::OS,
        labels::INSTANCE_TYPE_BETA => labels::INSTANCE_TYPE,
        other => other,
    }
}

fn normalized(key: String) -> String {
    let stable = normalize_key(&key);
    if std::ptr::eq(stable, key.as_str()) {
        key
    } else {
        stable.to_string()
    }
}

/// FNV-1a, 64-bit: deterministic across runs and platforms, unlike std's `RandomState`,
/// so iteration order (and every decision that depends on it) is reproducible.
pub(crate) fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn sorted_set(values: impl IntoIterator<Item = impl Into<String>>) -> Vec<String> {
    let mut v: Vec<String> = values.into_iter().map(Into::into).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Parses an integer the way Go's `strconv.Atoi` does (optional sign, decimal digits).
fn parse_int(value: &str) -> Option<i64> {
    value.parse().ok()
}

/// Whether `value` lies within optional inclusive bounds; with any bound set, values that
/// are not integers never qualify (upstream `withinBounds`).
fn within(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    match parse_int(value) {
        Some(n) => gte.is_none_or(|lo| n >= lo) && lte.is_none_or(|hi| n <= hi),
        None => false,
    }
}

fn max_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn contains(sorted: &[String], value: &str) -> bool {
    sorted.binary_search_by(|v| v.as_str().cmp(value)).is_ok()
}

impl Requirement {
    /// Builds a requirement from a manifest's (key, operator, values) triple. Values of
    /// Exists/DoesNotExist are ignored, as upstream ignores them.
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, RequirementError> {
        let key = key.into();
        if operator.is_numeric() {
            let values: Vec<String> = values.into_iter().map(Into::into).collect();
            let n = match values.as_slice() {
                [one] => parse_int(one),
                _ => None,
            };
            let Some(n) = n else {
                return Err(RequirementError::NotOneInteger {
                    key,
                    operator: operator.as_str(),
                    values,
                });
            };
            return Ok(match operator {
                Operator::Gt => Self::gt(key, n),
                Operator::Lt => Self::lt(key, n),
                Operator::Gte => Self::gte(key, n),
                _ => Self::lte(key, n),
            });
        }
        Ok(match operator {
            Operator::In => Self::in_values(key, values),
            Operator::NotIn => Self::not_in_values(key, values),
            Operator::DoesNotExist => Self::does_not_exist(key),
            _ => Self::exists(key),
        })
    }

    /// Like [`Requirement::new`] for operators spelled as strings (core `NodeSelectorRequirement`).
    pub fn parse(
        key: impl Into<String>,
        operator: &str,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, RequirementError> {
        let op = match operator {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            other => {
                return Err(RequirementError::UnknownOperator {
                    key: key.into(),
                    operator: other.to_string(),
                });
            }
        };
        Self::new(key, op, values)
    }

    fn build(key: String, complement: bool, values: Vec<String>) -> Self {
        let key = normalized(key);
        Requirement {
            key_hash: key_hash(&key),
            key,
            complement,
            values,
            gte: None,
            lte: None,
            min_values: None,
        }
    }

    /// The label must have one of `values`.
    pub fn in_values(
        key: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::build(key.into(), false, sorted_set(values))
    }

    /// The label must be absent or have none of `values`.
    pub fn not_in_values(
        key: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::build(key.into(), true, sorted_set(values))
    }

    /// The label must be present with any value.
    pub fn exists(key: impl Into<String>) -> Self {
        Self::build(key.into(), true, Vec::new())
    }

    /// The label must be absent.
    pub fn does_not_exist(key: impl Into<String>) -> Self {
        Self::build(key.into(), false, Vec::new())
    }

    /// The label must be an integer greater than `n`; `Gt i64::MAX` matches nothing.
    pub fn gt(key: impl Into<String>, n: i64) -> Self {
        match n.checked_add(1) {
            Some(lo) => Self::gte(key, lo),
            None => Self::does_not_exist(key),
        }
    }

    /// The label must be an integer less than `n`; `Lt i64::MIN` matches nothing.
    pub fn lt(key: impl Into<String>, n: i64) -> Self {
        match n.checked_sub(1) {
            Some(hi) => Self::lte(key, hi),
            None => Self::does_not_exist(key),
        }
    }

    /// The label must be an integer of at least `n`.
    pub fn gte(key: impl Into<String>, n: i64) -> Self {
        let mut r = Self::exists(key);
        r.gte = Some(n);
        r
    }

    /// The label must be an integer of at most `n`.
    pub fn lte(key: impl Into<String>, n: i64) -> Self {
        let mut r = Self::exists(key);
        r.lte = Some(n);
        r
    }

    /// Attaches a `minValues` floor (how many distinct values the launch must keep open).
    pub fn with_min_values(mut self, min_values: Option<usize>) -> Self {
        self.min_values = min_values;
        self
    }

    /// Changes the `minValues` floor; BestEffort relaxation lowers it to what is available.
    pub fn set_min_values(&mut self, min_values: Option<usize>) {
        self.min_values = min_values;
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The order `Requirements` keeps keys in.
    pub(crate) fn sort_key(&self) -> (u64, &str) {
        (self.key_hash, &self.key)
    }

    pub fn min_values(&self) -> Option<usize> {
        self.min_values
    }

    /// Inclusive integer bounds `(gte, lte)`; only complements carry bounds.
    pub fn bounds(&self) -> (Option<i64>, Option<i64>) {
        (self.gte, self.lte)
    }

    /// True when `values()` lists excluded values (NotIn, Exists, Gt, Lt, ...).
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The allowed values (or, for complements, the excluded ones), sorted.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// How many values are allowed: `usize::MAX` minus the excluded count for complements,
    /// as upstream's `Len` (so NotIn and Exists stay distinguishable), 0 when nothing is.
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX - self.values.len()
        } else {
            self.values.len()
        }
    }

    /// True when no value is allowed (the label must be absent).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The operator upstream reports: bounded complements read as Exists (or NotIn when
    /// they also exclude values); an empty set reads as DoesNotExist.
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, true) => Operator::Exists,
            (true, false) => Operator::NotIn,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// True when a node without the label satisfies it (NotIn, DoesNotExist): how an
    /// offering that carries no value for a key (no reservation, no partition) is judged.
    pub fn admits_absent(&self) -> bool {
        matches!(self.operator(), Operator::NotIn | Operator::DoesNotExist)
    }

    /// Whether a label with this value satisfies the requirement.
    pub fn has(&self, value: &str) -> bool {
        contains(&self.values, value) != self.complement && within(value, self.gte, self.lte)
    }

    /// A value that satisfies the requirement: the smallest allowed value of a set; for a
    /// complement, the integer nearest 0 inside the bounds that is not excluded. Upstream
    /// picks at random; the engine stays deterministic. None when nothing is allowed.
    pub fn any(&self) -> Option<String> {
        if !self.complement {
            return self.values.first().cloned();
        }
        let lo = self.gte.unwrap_or(i64::MIN);
        let hi = self.lte.unwrap_or(i64::MAX);
        if lo > hi {
            return None;
        }
        let anchor = 0i64.clamp(lo, hi);
        // At most `values.len() + 1` candidates each way before one is not excluded.
        let budget = self.values.len() + 1;
        let up = (0..budget).map_while(|i| anchor.checked_add(i as i64).filter(|n| *n <= hi));
        let down = (1..=budget).map_while(|i| anchor.checked_sub(i as i64).filter(|n| *n >= lo));
        up.chain(down)
            .map(|n| n.to_string())
            .find(|s| !contains(&self.values, s))
    }

    /// Constrains `self` by `other`: the values both allow (upstream `Intersection`).
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(lo), Some(hi)) = (gte, lte)
            && lo > hi
        {
            return Self::does_not_exist(self.key.clone()).with_min_values(min_values);
        }
        let mut values = match (self.complement, other.complement) {
            (true, true) => union(&self.values, &other.values),
            (true, false) => difference(&other.values, &self.values),
            (false, true) => difference(&self.values, &other.values),
            (false, false) => intersect(&self.values, &other.values),
        };
        values.retain(|v| within(v, gte, lte));
        // A concrete set already had its values filtered; bounds would only be noise.
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Requirement {
            key: self.key.clone(),
            key_hash: self.key_hash,
            complement,
            values,
            gte,
            lte,
            min_values,
        }
    }

    /// Whether some value satisfies both, without building the intersection (upstream
    /// `HasIntersection`): this runs in the scheduler's innermost loop.
    pub fn has_intersection(&self, other: &Requirement) -> bool {
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        if let (Some(lo), Some(hi)) = (gte, lte)
            && lo > hi
        {
            return false;
        }
        match (self.complement, other.complement) {
            // Infinitely many strings remain, and integers with a sign or leading zeros
            // escape any finite exclusion list.
            (true, true) => true,
            (true, false) => any_outside(&other.values, &self.values, gte, lte),
            (false, true) => any_outside(&self.values, &other.values, gte, lte),
            (false, false) => any_shared(&self.values, &other.values, gte, lte),
        }
    }

    /// The operator and values without the key, e.g. `In [m5 m6i]`, with at most five
    /// values shown; `sep` separates values.
    pub(crate) fn fmt_constraint(&self, f: &mut fmt::Formatter<'_>, sep: &str) -> fmt::Result {
        let op = self.operator();
        match (op, self.gte, self.lte) {
            (Operator::Exists, Some(_), _) | (Operator::Exists, _, Some(_)) => {}
            _ => f.write_str(op.as_str())?,
        }
        if matches!(op, Operator::In | Operator::NotIn) {
            f.write_str(" [")?;
            const SHOWN: usize = 5;
            for (i, v) in self.values.iter().take(SHOWN).enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                f.write_str(v)?;
            }
            if self.values.len() > SHOWN {
                write!(f, "{sep}and {} others", self.values.len() - SHOWN)?;
            }
            f.write_str("]")?;
        }
        let mut first = op == Operator::Exists;
        for (name, bound) in [("Gte", self.gte), ("Lte", self.lte)] {
            if let Some(n) = bound {
                if !first {
                    f.write_str(" ")?;
                }
                first = false;
                write!(f, "{name} {n}")?;
            }
        }
        if let Some(m) = self.min_values {
            write!(f, " minValues {m}")?;
        }
        Ok(())
    }
}

/// `key In [a b]`, the way upstream logs a requirement; bounds print as `Gte n` / `Lte n`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.key)?;
        self.fmt_constraint(f, " ")
    }
}

fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => {
                out.push(a[i].clone());
                i += 1;
            }
            Ordering::Greater => {
                out.push(b[j].clone());
                j += 1;
            }
            Ordering::Equal => {
                out.push(a[i].clone());
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn intersect(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                out.push(a[i].clone());
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// `a` minus `b`, both sorted.
fn difference(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(a.len());
    let mut j = 0;
    for v in a {
        while j < b.len() && b[j] < *v {
            j += 1;
        }
        if j < b.len() && b[j] == *v {
            continue;
        }
        out.push(v.clone());
    }
    out
}

/// Whether some value of `allowed` is not in `excluded` and within the bounds.
fn any_outside(
    allowed: &[String],
    excluded: &[String],
    gte: Option<i64>,
    lte: Option<i64>,
) -> bool {
    let mut j = 0;
    allowed.iter().any(|v| {
        while j < excluded.len() && excluded[j] < *v {
            j += 1;
        }
        !(j < excluded.len() && excluded[j] == *v) && within(v, gte, lte)
    })
}

/// Whether `a` and `b` share a value within the bounds.
fn any_shared(a: &[String], b: &[String], gte: Option<i64>, lte: Option<i64>) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                if within(&a[i], gte, lte) {
                    return true;
                }
                i += 1;
                j += 1;
            }
        }
    }
    false
}
