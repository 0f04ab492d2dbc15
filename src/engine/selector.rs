//! Kubernetes label selectors (matchLabels + matchExpressions), as used by pod affinity,
//! topology spread constraints and PodDisruptionBudgets.

use std::collections::BTreeMap;

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
    fn nil_matches_nothing_and_empty_matches_everything() {
        assert!(!Selector::from_k8s(None).matches(&labels(&[])));
        let empty = Selector::from_k8s(Some(&LabelSelector::default()));
        assert!(empty.matches(&labels(&[("a", "b")])));
        assert!(empty.is_everything());
    }
}
