//! Requirements from the objects that carry them: NodePool and NodeClaim requirements,
//! label maps, core node selector terms, and a pod's nodeSelector plus node affinity
//! (upstream `NewNodeSelectorRequirementsWithMinValues`, `NewLabelRequirements`,
//! `NewNodeSelectorRequirements`, `NewPodRequirements`, `NewStrictPodRequirements`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};

use super::{Requirement, RequirementError, Requirements};
use crate::api::nodeclaim::NodeSelectorRequirementWithMinValues;

impl TryFrom<&NodeSelectorRequirementWithMinValues> for Requirement {
    type Error = RequirementError;

    fn try_from(r: &NodeSelectorRequirementWithMinValues) -> Result<Self, Self::Error> {
        // The CRD bounds minValues to 1..=50; anything else carries no flexibility demand.
        let min_values = r
            .min_values
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0);
        Ok(Requirement::new(
            r.key.as_str(),
            r.operator,
            r.values.iter().map(String::as_str),
        )?
        .with_min_values(min_values))
    }
}

impl TryFrom<&NodeSelectorRequirement> for Requirement {
    type Error = RequirementError;

    fn try_from(r: &NodeSelectorRequirement) -> Result<Self, Self::Error> {
        let values = r.values.iter().flatten().map(String::as_str);
        Requirement::parse(r.key.as_str(), &r.operator, values)
    }
}

impl Requirements {
    /// A NodePool template's or NodeClaim's `requirements`, with their `minValues`.
    pub fn from_karpenter(
        requirements: &[NodeSelectorRequirementWithMinValues],
    ) -> Result<Self, RequirementError> {
        requirements.iter().map(Requirement::try_from).collect()
    }

    /// Node labels or a pod's nodeSelector: each key pinned to its one value.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        labels
            .iter()
            .map(|(k, v)| Requirement::in_values(k.as_str(), [v.as_str()]))
            .collect()
    }

    /// Core node selector requirements (node affinity `matchExpressions`).
    pub fn from_node_selector_requirements(
        requirements: &[NodeSelectorRequirement],
    ) -> Result<Self, RequirementError> {
        requirements.iter().map(Requirement::try_from).collect()
    }

    /// One node selector term. Only `matchExpressions` count: upstream ignores
    /// `matchFields` (which can only select `metadata.name`, unknown before launch).
    pub fn from_node_selector_term(term: &NodeSelectorTerm) -> Result<Self, RequirementError> {
        Self::from_node_selector_requirements(term.match_expressions.as_deref().unwrap_or_default())
    }
}

/// The preferred term upstream treats as required first: the heaviest, and among equal
/// weights the first listed (Go's unstable sort leaves ties unspecified; we pin them so
/// relaxation removes the same term this picked).
pub fn heaviest_preference(preferred: &[PreferredSchedulingTerm]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, term) in preferred.iter().enumerate() {
        if best.is_none_or(|b| term.weight > preferred[b].weight) {
            best = Some(i);
        }
    }
    best
}

/// What a pod asks of a node while it is being scheduled: its nodeSelector, the first
/// required node selector term and its heaviest preferred term, all treated as required.
/// Upstream's relaxation later removes the preferred terms and moves to the next required
/// term when the pod cannot schedule (`NewPodRequirements`).
pub fn pod_requirements(
    node_selector: &BTreeMap<String, String>,
    affinity: Option<&NodeAffinity>,
) -> Result<Requirements, RequirementError> {
    build_pod_requirements(node_selector, affinity, true)
}

/// Only what the pod strictly requires: nodeSelector and the first required term, no
/// preferences (`NewStrictPodRequirements`, used to validate existing placements).
pub fn strict_pod_requirements(
    node_selector: &BTreeMap<String, String>,
    affinity: Option<&NodeAffinity>,
) -> Result<Requirements, RequirementError> {
    build_pod_requirements(node_selector, affinity, false)
}

fn build_pod_requirements(
    node_selector: &BTreeMap<String, String>,
    affinity: Option<&NodeAffinity>,
    with_preferences: bool,
) -> Result<Requirements, RequirementError> {
    let mut requirements = Requirements::from_labels(node_selector);
    let Some(affinity) = affinity else {
        return Ok(requirements);
    };
    if with_preferences {
        let preferred = affinity
            .preferred_during_scheduling_ignored_during_execution
            .as_deref()
            .unwrap_or_default();
        if let Some(i) = heaviest_preference(preferred) {
            requirements.add_all(&Requirements::from_node_selector_term(
                &preferred[i].preference,
            )?);
        }
    }
    let first_required = affinity
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .and_then(|selector| selector.node_selector_terms.first());
    if let Some(term) = first_required {
        requirements.add_all(&Requirements::from_node_selector_term(term)?);
    }
    Ok(requirements)
}
