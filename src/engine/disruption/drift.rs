//! Drift: a node no longer matches what its NodePool (or NodeClass) would launch today.
//!
//! Mirrors upstream `nodeclaim/disruption/drift.go`, checked in its order: the cloud
//! provider's verdict (AMIDrift, SubnetDrift, SecurityGroupDrift, NodeClassDrift) first,
//! then NodePoolDrifted (the template's static fields hashed at launch and now differ),
//! then RequirementsDrifted (the NodeClaim's labels no longer satisfy the pool's
//! requirements; widening a requirement is not drift). Weight, limits and budgets are not in the hash:
//! changing them never replaces a node.
//!
//! The hash is our own (FNV-1a over canonical JSON), not upstream's hashstructure value: a
//! console attached to a cluster run by upstream Karpenter reads the NodeClaim's Drifted
//! condition instead of recomputing it.

use std::fmt;

use serde::Serialize;

use crate::api::labels;
use crate::api::nodeclaim::{NodeClassReference, Taint};
use crate::api::nodepool::NodePool;
use crate::engine::requirements::{Requirements, allow_no_undefined};
use crate::engine::state::StateNode;

/// Why a node is drifted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftReason {
    /// From the cloud provider: AMIDrift, SubnetDrift, SecurityGroupDrift, NodeClassDrift.
    NodeClass(String),
    NodePoolDrifted,
    /// The first pool requirement the node's labels fail, in words.
    RequirementsDrifted(String),
}

impl fmt::Display for DriftReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriftReason::NodeClass(r) => f.write_str(r),
            DriftReason::NodePoolDrifted => f.write_str("NodePoolDrifted"),
            DriftReason::RequirementsDrifted(why) => write!(f, "RequirementsDrifted ({why})"),
        }
    }
}

/// The template fields whose change means drift, in a fixed order for hashing.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StaticFields<'a> {
    labels: &'a std::collections::BTreeMap<String, String>,
    annotations: &'a std::collections::BTreeMap<String, String>,
    taints: &'a [Taint],
    startup_taints: &'a [Taint],
    node_class_ref: &'a NodeClassReference,
    expire_after: &'a str,
    termination_grace_period: Option<&'a str>,
}

/// The value of the `karpenter.sh/nodepool-hash` annotation a NodeClaim gets at launch.
pub fn nodepool_hash(pool: &NodePool) -> String {
    let t = &pool.spec.template;
    let fields = StaticFields {
        labels: &t.metadata.labels,
        annotations: &t.metadata.annotations,
        taints: &t.spec.taints,
        startup_taints: &t.spec.startup_taints,
        node_class_ref: &t.spec.node_class_ref,
        expire_after: t.spec.expire_after.text(),
        termination_grace_period: t.spec.termination_grace_period.as_ref().map(|d| d.text()),
    };
    // Serializing plain maps, slices and strings cannot fail.
    let json = serde_json::to_vec(&fields).unwrap_or_default();
    format!("{}", fnv1a(&json))
}

/// FNV-1a, 64 bit: a stable hash for content-keyed names (the same in every build and
/// process, unlike std's SipHash with random keys).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Whether (and why) the node drifted from its pool. `pool_hash` is `nodepool_hash(pool)`,
/// computed once per pass.
pub fn drift(node: &StateNode, pool: &NodePool, pool_hash: &str) -> Option<DriftReason> {
    if let Some(r) = &node.nodeclass_drift {
        return Some(DriftReason::NodeClass(r.clone()));
    }
    if let Some(h) = node.annotations.get(labels::NODEPOOL_HASH)
        && h != pool_hash
    {
        return Some(DriftReason::NodePoolDrifted);
    }
    let pool_reqs = match Requirements::from_karpenter(&pool.spec.template.spec.requirements) {
        Ok(r) => r,
        // A pool whose requirements do not parse launches nothing; its nodes are not
        // replaced on that account.
        Err(_) => return None,
    };
    // The NodeClaim's labels, as upstream's `areRequirementsDrifted` reads them: a Node
    // whose kubelet registered with fewer labels has not drifted on that account.
    let node_reqs = Requirements::from_labels(&node.claim_labels);
    if let Err(e) = node_reqs.compatible(&pool_reqs, &allow_no_undefined) {
        return Some(DriftReason::RequirementsDrifted(e.to_string()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::nodeclaim::{NodeSelectorRequirementWithMinValues, Operator};
    use crate::engine::catalog::{CapacityType, Catalog};
    use chrono::DateTime;

    fn req(key: &str, values: &[&str]) -> NodeSelectorRequirementWithMinValues {
        NodeSelectorRequirementWithMinValues {
            key: key.into(),
            operator: Operator::In,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    fn launched(pool: &NodePool) -> StateNode {
        let catalog = Catalog::builtin();
        let it = catalog.get("m5.large").unwrap();
        StateNode::launched("n1", pool, it, CapacityType::OnDemand, DateTime::UNIX_EPOCH)
    }

    #[test]
    fn widening_is_not_drift_but_narrowing_past_the_node_is() {
        let mut pool = NodePool::unconstrained("default");
        pool.spec.template.spec.requirements = vec![req(labels::INSTANCE_TYPE, &["m5.large"])];
        let node = launched(&pool);
        let hash = nodepool_hash(&pool);
        assert_eq!(drift(&node, &pool, &hash), None);

        pool.spec.template.spec.requirements =
            vec![req(labels::INSTANCE_TYPE, &["m5.large", "m5.xlarge"])];
        assert_eq!(drift(&node, &pool, &nodepool_hash(&pool)), None);

        pool.spec.template.spec.requirements = vec![req(labels::INSTANCE_TYPE, &["m5.xlarge"])];
        let d = drift(&node, &pool, &nodepool_hash(&pool));
        assert!(
            matches!(&d, Some(DriftReason::RequirementsDrifted(why)) if why.contains("m5.large")),
            "{d:?}"
        );
    }

    #[test]
    fn template_changes_drift_but_weight_and_budgets_do_not() {
        let mut pool = NodePool::unconstrained("default");
        let node = launched(&pool);
        pool.spec.weight = Some(50);
        pool.spec.disruption.budgets[0].nodes = "1".into();
        assert_eq!(drift(&node, &pool, &nodepool_hash(&pool)), None);

        pool.spec
            .template
            .metadata
            .labels
            .insert("team".into(), "a".into());
        assert_eq!(
            drift(&node, &pool, &nodepool_hash(&pool)),
            Some(DriftReason::NodePoolDrifted)
        );
    }

    /// The NodeClaim's labels decide requirements drift, as upstream reads them: a Node
    /// registered with only the pool's label (as a kubelet alone registers) is not
    /// drifted. Seen on AWS: every registered node read RequirementsDrifted.
    #[test]
    fn requirements_drift_reads_the_nodeclaims_labels_not_the_nodes() {
        let mut pool = NodePool::unconstrained("default");
        pool.spec.template.spec.requirements = vec![req(labels::INSTANCE_TYPE, &["m5.large"])];
        let mut node = launched(&pool);
        node.labels = [(labels::NODEPOOL.to_string(), "default".to_string())].into();
        let hash = nodepool_hash(&pool);
        assert_eq!(drift(&node, &pool, &hash), None);
        node.claim_labels
            .insert(labels::INSTANCE_TYPE.into(), "m5.xlarge".into());
        assert!(matches!(
            drift(&node, &pool, &hash),
            Some(DriftReason::RequirementsDrifted(_))
        ));
    }

    #[test]
    fn the_cloud_providers_verdict_comes_first() {
        let pool = NodePool::unconstrained("default");
        let mut node = launched(&pool);
        node.nodeclass_drift = Some("AMIDrift".into());
        assert_eq!(
            drift(&node, &pool, &nodepool_hash(&pool)),
            Some(DriftReason::NodeClass("AMIDrift".into()))
        );
    }
}
