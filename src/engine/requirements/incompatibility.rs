//! Why two sets of requirements cannot both hold, in words an operator can act on.
//!
//! Upstream builds its error lazily (`badKeyError`) because most compatibility checks in a
//! scheduling round fail and nobody reads the message. We do the same by borrowing both
//! sides; `into_owned` detaches the reason when a pod's failure must outlive the check.

use std::borrow::Cow;
use std::fmt;

use super::Requirement;
use crate::api::labels::WELL_KNOWN_LABELS;

/// Which rule of `Compatible` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncompatibilityKind {
    /// The incoming side asks for values of a label the existing side never defines (and
    /// the label is not allowed to stay undefined).
    Undefined,
    /// Both sides constrain the key and no value satisfies both.
    Disjoint,
}

/// A requirement either borrowed from the sets being compared or detached from them.
/// Boxed when owned so the error stays a few words wide: `compatible` returns it by
/// value in the scheduler's innermost loop.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Side<'a> {
    Borrowed(&'a Requirement),
    Owned(Box<Requirement>),
}

impl Side<'_> {
    fn get(&self) -> &Requirement {
        match self {
            Side::Borrowed(r) => r,
            Side::Owned(r) => r,
        }
    }

    fn into_owned(self) -> Side<'static> {
        match self {
            Side::Borrowed(r) => Side::Owned(Box::new(r.clone())),
            Side::Owned(r) => Side::Owned(r),
        }
    }
}

/// One failed key. `existing` is the receiver of `compatible`/`intersects` (a NodePool,
/// node or instance type), `incoming` the argument (usually the pod).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incompatibility<'a> {
    kind: IncompatibilityKind,
    existing: Option<Side<'a>>,
    incoming: Side<'a>,
    hint: Option<Cow<'a, str>>,
}

impl<'a> Incompatibility<'a> {
    pub(crate) fn undefined(
        incoming: &'a Requirement,
        existing_keys: impl Iterator<Item = &'a str>,
    ) -> Self {
        Incompatibility {
            kind: IncompatibilityKind::Undefined,
            existing: None,
            hint: label_hint(incoming.key(), existing_keys).map(Cow::Borrowed),
            incoming: Side::Borrowed(incoming),
        }
    }

    pub(crate) fn disjoint(existing: &'a Requirement, incoming: &'a Requirement) -> Self {
        Incompatibility {
            kind: IncompatibilityKind::Disjoint,
            existing: Some(Side::Borrowed(existing)),
            incoming: Side::Borrowed(incoming),
            hint: None,
        }
    }

    pub fn kind(&self) -> IncompatibilityKind {
        self.kind
    }

    /// The label key both sides disagree on.
    pub fn key(&self) -> &str {
        self.incoming.get().key()
    }

    /// The receiver's requirement on the key; None when it does not define the key.
    pub fn existing(&self) -> Option<&Requirement> {
        self.existing.as_ref().map(Side::get)
    }

    /// The argument's requirement on the key.
    pub fn incoming(&self) -> &Requirement {
        self.incoming.get()
    }

    /// For an undefined key: a defined or well-known key it may be a typo of.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// Detaches the reason from the requirements it was found in.
    pub fn into_owned(self) -> Incompatibility<'static> {
        Incompatibility {
            kind: self.kind,
            existing: self.existing.map(Side::into_owned),
            incoming: self.incoming.into_owned(),
            hint: self.hint.map(|h| Cow::Owned(h.into_owned())),
        }
    }

    /// Renders the reason naming the receiver, e.g. `NodePool "default"`:
    /// `key "karpenter.k8s.aws/instance-family" In [c5] not compatible with NodePool
    /// "default" requirement In [m5, m6i]`.
    pub fn describe<'b>(&'b self, existing_who: &'b str) -> impl fmt::Display + 'b {
        Described {
            inner: self,
            who: existing_who,
        }
    }
}

struct Described<'b, 'a> {
    inner: &'b Incompatibility<'a>,
    who: &'b str,
}

struct Constraint<'r>(&'r Requirement);

impl fmt::Display for Constraint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_constraint(f, ", ")
    }
}

impl fmt::Display for Described<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inc = self.inner;
        write!(
            f,
            "key {:?} {} not compatible",
            inc.key(),
            Constraint(inc.incoming())
        )?;
        match (inc.existing(), self.who.is_empty()) {
            (Some(existing), false) => {
                write!(f, " with {} requirement {}", self.who, Constraint(existing))?
            }
            (Some(existing), true) => write!(f, " with requirement {}", Constraint(existing))?,
            (None, false) => write!(f, " with {}, which does not define the label", self.who)?,
            (None, true) => f.write_str(": the label does not have known values")?,
        }
        if let Some(hint) = inc.hint() {
            write!(f, " (typo of {hint:?}?)")?;
        }
        Ok(())
    }
}

impl fmt::Display for Incompatibility<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe("").fmt(f)
    }
}

impl std::error::Error for Incompatibility<'_> {}

/// A key the user may have meant: one that contains `key`, or shares its name part (after
/// the `/`), first among well-known labels, then among the defined keys (upstream
/// `labelHint`, minus the edit distance newer versions dropped). A well-known key gets no
/// hint: it is spelled right, the other side just does not offer it.
fn label_hint<'a>(key: &str, mut existing_keys: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    if WELL_KNOWN_LABELS.contains(&key) {
        return None;
    }
    let name = key.split_once('/').map_or(key, |(_, name)| name);
    let similar = |candidate: &str| {
        candidate != key
            && (candidate.contains(key) || (!name.is_empty() && candidate.ends_with(name)))
    };
    WELL_KNOWN_LABELS
        .iter()
        .copied()
        .find(|c| similar(c))
        .or_else(|| existing_keys.find(|c| similar(c)))
}
