//! Kubernetes label selectors (matchLabels + matchExpressions), as used by pod affinity,
//! topology spread constraints and PodDisruptionBudgets.

use std::collections::BTreeMap;

use crate::engine::fast_hash::FastMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One selector expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A compiled label selector. The empty selector matches everything; `Nothing` (a nil
/// selector in Kubernetes) matches nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Selector {
    Nothing,
    Match(Vec<Expr>),
}

impl Selector {
    /// Compiles a Kubernetes LabelSelector; `None` is the nil selector (matches nothing).
    /// Unknown operators make the selector match nothing, as the API server would reject it.
    pub fn from_k8s(sel: Option<&LabelSelector>) -> Selector {
        let Some(sel) = sel else {
            return Selector::Nothing;
        };
        let mut exprs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            exprs.push(Expr::In(k.clone(), vec![v.clone()]));
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            exprs.push(match e.operator.as_str() {
                "In" => Expr::In(e.key.clone(), values),
                "NotIn" => Expr::NotIn(e.key.clone(), values),
                "Exists" => Expr::Exists(e.key.clone()),
                "DoesNotExist" => Expr::DoesNotExist(e.key.clone()),
                _ => return Selector::Nothing,
            });
        }
        Selector::Match(exprs)
    }

    /// A selector equal to `labels` (matchLabels only).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Selector {
        Selector::Match(
            labels
                .iter()
                .map(|(k, v)| Expr::In(k.clone(), vec![v.clone()]))
                .collect(),
        )
    }

    /// True when the labels satisfy every expression.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Match(exprs) => exprs.iter().all(|e| match e {
                Expr::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
                Expr::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
                Expr::Exists(k) => labels.contains_key(k),
                Expr::DoesNotExist(k) => !labels.contains_key(k),
            }),
        }
    }

    /// True for the empty selector, which matches every object.
    pub fn is_everything(&self) -> bool {
        matches!(self, Selector::Match(e) if e.is_empty())
    }

    /// A label every matching object carries (from matchLabels or a single-value `In`),
    /// if the selector requires one: the key indexes are built on.
    pub fn required_label(&self) -> Option<(&str, &str)> {
        match self {
            Selector::Match(exprs) => exprs.iter().find_map(|e| match e {
                Expr::In(k, v) if v.len() == 1 => Some((k.as_str(), v[0].as_str())),
                _ => None,
            }),
            Selector::Nothing => None,
        }
    }
}

type LabelMap<V> = FastMap<String, V>;

/// Items (the caller's indices) by label key and value. Lookups borrow the key and value,
/// so a hot loop asking "who carries app=web" allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct LabelIndex {
    /// foldhash (randomly seeded) rather than SipHash: every pod of a disruption poll is
    /// looked up here, label by label, for the PDBs and topology groups selecting it.
    map: LabelMap<LabelMap<Vec<usize>>>,
}

impl LabelIndex {
    /// Copies the key and value only the first time each is seen.
    pub fn insert(&mut self, key: &str, value: &str, item: usize) {
        let values = match self.map.get_mut(key) {
            Some(values) => values,
            None => self.map.entry(key.to_string()).or_default(),
        };
        match values.get_mut(value) {
            Some(items) => items.push(item),
            None => {
                values.insert(value.to_string(), vec![item]);
            }
        }
    }

    /// Indexes every label of an object.
    pub fn insert_labels(&mut self, labels: &BTreeMap<String, String>, item: usize) {
        for (k, v) in labels {
            self.insert(k, v, item);
        }
    }

    /// The items carrying `key=value`, in insertion order.
    pub fn get(&self, key: &str, value: &str) -> &[usize] {
        self.map
            .get(key)
            .and_then(|m| m.get(value))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Selectors (the caller's indices) indexed by a label they require, so finding the ones
/// that may match an object looks at few: hundreds of PDBs or thousands of anti-affinity
/// groups against each of 50,000 pods.
#[derive(Clone, Debug, Default)]
pub struct SelectorIndex {
    by_label: LabelIndex,
    /// Selectors that require no single label: always candidates.
    unlabelled: Vec<usize>,
}

impl SelectorIndex {
    pub fn insert(&mut self, selector: &Selector, item: usize) {
        match selector.required_label() {
            Some((k, v)) => self.by_label.insert(k, v, item),
            None => self.unlabelled.push(item),
        }
    }

    /// Items whose selector may match `labels`, ascending and each once; callers still
    /// check [`Selector::matches`].
    pub fn candidates(&self, labels: &BTreeMap<String, String>) -> Vec<usize> {
        let mut out: Vec<usize> = self.unlabelled.clone();
        for (k, v) in labels {
            out.extend_from_slice(self.by_label.get(k, v));
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["db".into()]),
            }]),
        };
        let s = Selector::from_k8s(Some(&sel));
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "api")])));
    }

    #[test]
    fn the_index_finds_every_selector_that_can_match() {
        let sels = [
            Selector::from_labels(&labels(&[("app", "web")])),
            Selector::from_labels(&labels(&[("app", "db")])),
            Selector::from_k8s(Some(&LabelSelector::default())),
        ];
        let mut index = SelectorIndex::default();
        for (i, s) in sels.iter().enumerate() {
            index.insert(s, i);
        }
        let pod = labels(&[("app", "web"), ("tier", "fe")]);
        let found: Vec<usize> = index
            .candidates(&pod)
            .into_iter()
            .filter(|&i| sels[i].matches(&pod))
            .collect();
        assert_eq!(found, [0, 2]);
    }

    #[test]
    fn nil_matches_nothing_and_empty_matches_everything() {
        assert!(!Selector::from_k8s(None).matches(&labels(&[])));
        let empty = Selector::from_k8s(Some(&LabelSelector::default()));
        assert!(empty.matches(&labels(&[("a", "b")])));
        assert!(empty.is_everything());
    }
}
