//! NodeClaims both ways: reading one the API server holds, and the manifest and merge
//! patches that create it and record its launch (upstream `NodeClaimTemplate.ToNodeClaim`
//! and the lifecycle controller's launch step).

use std::collections::BTreeMap;

use chrono::TimeDelta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use super::{At, Malformed, at, quantities, quantity_map, required_name};
use crate::api::duration::GoDuration;
use crate::api::labels;
use crate::api::nodeclaim::{
    NodeClaim, NodeClaimSpec, NodeSelectorRequirementWithMinValues, ResourceRequirements,
    conditions,
};
use crate::api::nodepool::NodePool;
use crate::api::time::{from_chrono, to_chrono};
use crate::cluster::{Launched, NodeClaimObject};
use crate::engine::catalog::CapacityType;
use crate::engine::requirements::{Requirement, Requirements};

/// Reads a NodeClaim back into the controller's shape (the one `nodeclaim_for` builds).
///
/// `price` looks up the offering's hourly price; a NodeClaim does not record it. An
/// offering the catalog no longer knows reads as 0.0: disruption then sees nothing
/// cheaper to replace it with, so price-driven consolidation leaves it alone, while
/// emptiness, drift and expiration still apply.
///
/// Launched is `Some` once condition Launched is True and `status.providerID` is set
/// (upstream writes both in the launch); its instance type, zone and capacity type come
/// from the labels upstream's `PopulateNodeClaimDetails` puts on the NodeClaim, its labels
/// are all of the NodeClaim's labels, its hostname is `status.nodeName` (empty until the
/// Node registers) and its time the Launched condition's lastTransitionTime.
pub fn nodeclaim(
    nc: &NodeClaim,
    price: &dyn Fn(&str, &str, CapacityType) -> Option<f64>,
) -> Result<NodeClaimObject, Malformed> {
    const KIND: &str = "NodeClaim";
    let name = required_name(KIND, &nc.metadata, false)?;
    let fail = |e: At| e.of(KIND, &name);
    let meta = &nc.metadata;
    let claim_labels = meta.labels.clone().unwrap_or_default();
    let requirements =
        karpenter_requirements(&nc.spec.requirements, "spec.requirements").map_err(fail)?;
    let requests = quantity_map(
        nc.spec
            .resources
            .requests
            .iter()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
        "spec.resources.requests",
    )
    .map_err(fail)?;
    // Expiration counts from creation: a NodeClaim without a creation time would read as
    // created at the epoch and expire at once, so it is reported instead.
    let created = meta
        .creation_timestamp
        .as_ref()
        .map(to_chrono)
        .ok_or_else(|| {
            fail(at(
                "metadata.creationTimestamp",
                "required (the API server sets it on create)",
            ))
        })?;
    let launched = launched(nc, &claim_labels, price).map_err(fail)?;
    Ok(NodeClaimObject {
        name: name.clone(),
        // A NodeClaim without the label is not managed by a NodePool (created by hand);
        // upstream leaves those to their creator, and no pool lookup matches "".
        nodepool: claim_labels
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default(),
        requirements,
        requests,
        labels: claim_labels,
        annotations: meta.annotations.clone().unwrap_or_default(),
        taints: nc.spec.taints.clone(),
        startup_taints: nc.spec.startup_taints.clone(),
        expire_after: delta(nc.spec.expire_after.value()),
        termination_grace_period: delta(
            nc.spec
                .termination_grace_period
                .as_ref()
                .and_then(GoDuration::value),
        ),
        created,
        deleting: meta.deletion_timestamp.as_ref().map(to_chrono),
        finalizer: meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == labels::TERMINATION_FINALIZER),
        launched,
        initialized_at: nc
            .status
            .as_ref()
            .and_then(|s| s.condition(conditions::INITIALIZED))
            .filter(|c| c.status == "True")
            .map(|c| to_chrono(&c.last_transition_time)),
        conditions: nc
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default(),
        last_pod_event: nc
            .status
            .as_ref()
            .and_then(|s| s.last_pod_event_time.as_ref())
            .map(to_chrono),
    })
}

fn delta(d: Option<std::time::Duration>) -> Option<TimeDelta> {
    d.and_then(|d| TimeDelta::from_std(d).ok())
}

/// The CRD's duration patterns take whole seconds, minutes and hours, so the manifest
/// carries whole seconds; a negative span (which no pool can produce) becomes 0s.
fn go_duration(d: TimeDelta) -> GoDuration {
    GoDuration::from_std(std::time::Duration::from_secs(
        u64::try_from(d.num_seconds()).unwrap_or(0),
    ))
}

fn launched(
    nc: &NodeClaim,
    claim_labels: &BTreeMap<String, String>,
    price: &dyn Fn(&str, &str, CapacityType) -> Option<f64>,
) -> Result<Option<Launched>, At> {
    let Some(status) = &nc.status else {
        return Ok(None);
    };
    let Some(condition) = status
        .condition(conditions::LAUNCHED)
        .filter(|c| c.status == "True")
    else {
        return Ok(None);
    };
    let Some(provider_id) = status.provider_id.as_deref().filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let label = |key: &str| -> Result<&str, At> {
        claim_labels
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                at(
                    format!("metadata.labels[{key}]"),
                    "required once the NodeClaim is launched (upstream sets it with the launch)",
                )
            })
    };
    let instance_type = label(labels::INSTANCE_TYPE)?;
    let zone = label(labels::ZONE)?;
    let capacity_type = label(labels::CAPACITY_TYPE)?;
    let capacity_type = CapacityType::parse(capacity_type).ok_or_else(|| {
        at(
            format!("metadata.labels[{}]", labels::CAPACITY_TYPE),
            format!(
                "unknown capacity type {capacity_type:?} (expected spot, on-demand or reserved)"
            ),
        )
    })?;
    let allocatable = quantity_map(
        status
            .allocatable
            .iter()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
        "status.allocatable",
    )?;
    let capacity = quantity_map(
        status
            .capacity
            .iter()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
        "status.capacity",
    )?;
    Ok(Some(Launched {
        provider_id: provider_id.to_string(),
        instance_type: instance_type.to_string(),
        zone: zone.to_string(),
        capacity_type,
        price: price(instance_type, zone, capacity_type).unwrap_or(0.0),
        capacity,
        allocatable,
        labels: claim_labels.clone(),
        hostname: status.node_name.clone().unwrap_or_default(),
        at: to_chrono(&condition.last_transition_time),
        image_id: status.image_id.clone(),
        // The provider's annotations are the NodeClaim's own once written.
        annotations: BTreeMap::new(),
    }))
}

/// NodePool/NodeClaim requirements, each entry checked so the message points at it.
fn karpenter_requirements(
    reqs: &[NodeSelectorRequirementWithMinValues],
    path: &str,
) -> Result<Requirements, At> {
    let mut out = Requirements::new();
    for (i, r) in reqs.iter().enumerate() {
        out.add(Requirement::try_from(r).map_err(|e| at(format!("{path}[{i}]"), e.to_string()))?);
    }
    Ok(out)
}

/// A NodeClaim to create for `claim`, as upstream's `NodeClaimTemplate.ToNodeClaim`
/// builds it: `generateName: <pool>-` (and the name itself when the controller picked
/// one), the claim's labels (with `karpenter.sh/nodepool`) and annotations, an owner
/// reference to the NodePool so deleting the pool deletes its claims, the termination
/// finalizer, and the spec; the NodeClass reference comes from the pool's template.
///
/// The owner reference needs the pool's uid, which only a pool read from an API server
/// has; without one it is left out (the API server rejects an empty uid).
pub fn nodeclaim_manifest(claim: &NodeClaimObject, pool: &NodePool) -> NodeClaim {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let spec = NodeClaimSpec {
        taints: claim.taints.clone(),
        startup_taints: claim.startup_taints.clone(),
        requirements: claim.requirements.to_node_selector_requirements(),
        resources: ResourceRequirements {
            requests: quantities(&claim.requests),
        },
        node_class_ref: pool.spec.template.spec.node_class_ref.clone(),
        termination_grace_period: claim.termination_grace_period.map(go_duration),
        expire_after: claim
            .expire_after
            .map(go_duration)
            .unwrap_or_else(GoDuration::never),
    };
    let mut claim_labels = claim.labels.clone();
    claim_labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    let owner = pool
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .map(|uid| OwnerReference {
            api_version: format!("{}/v1", labels::KARPENTER_GROUP),
            kind: "NodePool".into(),
            name: pool_name.clone(),
            uid,
            block_owner_deletion: Some(true),
            controller: None,
        });
    let mut nc = NodeClaim::new(&claim.name, spec);
    nc.metadata = ObjectMeta {
        name: Some(claim.name.clone()).filter(|n| !n.is_empty()),
        generate_name: Some(format!("{}-", claim.nodepool)),
        labels: Some(claim_labels),
        annotations: Some(claim.annotations.clone()).filter(|a| !a.is_empty()),
        owner_references: owner.map(|o| vec![o]),
        finalizers: claim
            .finalizer
            .then(|| vec![labels::TERMINATION_FINALIZER.to_string()]),
        ..ObjectMeta::default()
    };
    nc
}

/// The JSON merge patch for the NodeClaim's status subresource that records a launch,
/// as upstream's launch step leaves the status: providerID, imageID, allocatable and the
/// conditions operatorpkg's condition set holds right after `SetTrue(Launched)` on a new
/// NodeClaim (Registered and Initialized awaiting reconciliation, Ready reconciling its
/// dependents), sorted by type as operatorpkg stores them.
///
/// A merge patch replaces the whole
/// conditions list, which is right for the one write a fresh NodeClaim's launch makes.
/// Apply [`launched_labels`] first, as upstream writes metadata before status, so a
/// watcher never sees Launched=True without the labels it is read from.
pub fn launched_status(launched: &Launched) -> Value {
    let image_id = launched.image_id.as_deref();
    let at = serde_json::to_value(from_chrono(launched.at)).unwrap_or(Value::Null);
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": at,
            // NodeClaim specs are immutable, so the generation stays 1.
            "observedGeneration": 1,
        })
    };
    const AWAITING: &str = "AwaitingReconciliation";
    const AWAITING_MESSAGE: &str = "object is awaiting reconciliation";
    let mut status = serde_json::Map::new();
    status.insert("providerID".into(), json!(launched.provider_id));
    if let Some(image) = image_id {
        status.insert("imageID".into(), json!(image));
    }
    status.insert(
        "allocatable".into(),
        serde_json::to_value(quantities(&launched.allocatable)).unwrap_or(Value::Null),
    );
    if launched.capacity != crate::engine::resources::Resources::default() {
        status.insert(
            "capacity".into(),
            serde_json::to_value(quantities(&launched.capacity)).unwrap_or(Value::Null),
        );
    }
    status.insert(
        "conditions".into(),
        json!([
            condition(
                conditions::INITIALIZED,
                "Unknown",
                AWAITING,
                AWAITING_MESSAGE
            ),
            condition(conditions::LAUNCHED, "True", conditions::LAUNCHED, ""),
            condition(
                conditions::READY,
                "Unknown",
                "ReconcilingDependents",
                "Initialized=Unknown, Registered=Unknown",
            ),
            condition(
                conditions::REGISTERED,
                "Unknown",
                AWAITING,
                AWAITING_MESSAGE
            ),
        ]),
    );
    json!({ "status": status })
}

/// The JSON merge patch of `metadata.labels` that upstream's `PopulateNodeClaimDetails`
/// makes after launch: the instance type's labels (arch, os, instance family, ...) plus
/// instance type, zone and capacity type of the offering that launched. Labels already on
/// the NodeClaim stay (a merge patch only adds and replaces).
pub fn launched_labels(launched: &Launched) -> Value {
    let mut l = launched.labels.clone();
    l.insert(labels::INSTANCE_TYPE.into(), launched.instance_type.clone());
    l.insert(labels::ZONE.into(), launched.zone.clone());
    l.insert(
        labels::CAPACITY_TYPE.into(),
        launched.capacity_type.as_str().into(),
    );
    if launched.annotations.is_empty() {
        return json!({ "metadata": { "labels": l } });
    }
    json!({ "metadata": { "labels": l, "annotations": launched.annotations } })
}
