//! The NodeClaim a NodePool's template makes (upstream `NodeClaimTemplate.ToNodeClaim`):
//! the controller's provisioner and disruption replacements create these, and so does a
//! console approving a replace against upstream Karpenter (make-before-break from
//! outside its orchestration).

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::labels;
use crate::api::nodepool::NodePool;
use crate::cluster::NodeClaimObject;
use crate::engine::requirements::{Requirement, Requirements};
use crate::engine::resources::Resources;
use crate::engine::scheduling::MAX_INSTANCE_TYPES;

/// A NodeClaim for `pool`, as upstream's `NodeClaimTemplate.ToNodeClaim` builds it: the
/// template's labels, annotations (plus the nodepool hash), taints, startup taints,
/// expireAfter and terminationGracePeriod, and the round's requirements narrowed to the
/// instance types it may launch as.
pub fn nodeclaim_for(
    name: &str,
    pool: &NodePool,
    requirements: &Requirements,
    instance_types: &[String],
    requests: Resources,
    now: DateTime<Utc>,
) -> NodeClaimObject {
    let t = &pool.spec.template;
    let mut reqs = requirements.clone();
    reqs.add(Requirement::in_values(
        labels::INSTANCE_TYPE,
        instance_types.iter().take(MAX_INSTANCE_TYPES).cloned(),
    ));
    let mut claim_labels = t.metadata.labels.clone();
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    claim_labels.insert(labels::NODEPOOL.into(), pool_name.clone());
    let mut annotations = t.metadata.annotations.clone();
    annotations.insert(
        labels::NODEPOOL_HASH.into(),
        crate::engine::disruption::drift::nodepool_hash(pool),
    );
    annotations.insert(
        labels::NODEPOOL_HASH_VERSION.into(),
        crate::engine::disruption::drift::HASH_VERSION.into(),
    );
    let duration = |d: Option<std::time::Duration>| d.and_then(|d| TimeDelta::from_std(d).ok());
    NodeClaimObject {
        name: name.to_string(),
        nodepool: pool_name,
        requirements: reqs,
        requests,
        labels: claim_labels,
        annotations,
        taints: t.spec.taints.clone(),
        startup_taints: t.spec.startup_taints.clone(),
        expire_after: duration(t.spec.expire_after.value()),
        termination_grace_period: duration(
            t.spec
                .termination_grace_period
                .as_ref()
                .and_then(|d| d.value()),
        ),
        created: now,
        deleting: None,
        finalizer: true,
        launched: None,
        initialized_at: None,
        conditions: Vec::new(),
        last_pod_event: None,
    }
}
