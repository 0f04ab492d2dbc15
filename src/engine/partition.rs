//! Placement group partitions as the scheduler sees them (the AWS provider's
//! `pkg/providers/instancetype/offering/placement_group_resolver.go`): a NodeClass in a
//! partition placement group offers each instance type once per partition, each offering
//! labelled `karpenter.k8s.aws/placement-group-partition`. The partitions are then a
//! topology domain like zones: a pod spreading over that key spreads new nodes across
//! partitions, and a NodeClaim narrowed to one partition launches into it.

use std::sync::LazyLock;

use crate::api::labels;
use crate::engine::catalog::{InstanceType, Offering};
use crate::engine::requirements::{HashedKey, Requirement, Requirements};

/// The partition label key, hashed once: every offering check looks it up.
static KEY: LazyLock<HashedKey<'static>> =
    LazyLock::new(|| HashedKey::new(labels::PLACEMENT_GROUP_PARTITION));

/// Whether an offering satisfies the partition requirement of `reqs`. An offering
/// outside any partition satisfies it only when the key may be absent (NotIn,
/// DoesNotExist), as a node without the label would.
pub fn allowed(o: &Offering, reqs: &Requirements) -> bool {
    let Some(q) = reqs.get_hashed(*KEY) else {
        return true;
    };
    match o.partition {
        Some(p) => q.has(&p.to_string()),
        None => q.admits_absent(),
    }
}

/// The partitions an instance type's offerings launch into, as a requirement; `None`
/// for a type outside any partition group, so the common case costs nothing.
pub fn type_requirement(it: &InstanceType) -> Option<Requirement> {
    let mut partitions: Vec<u32> = it.offerings.iter().filter_map(|o| o.partition).collect();
    if partitions.is_empty() {
        return None;
    }
    partitions.sort_unstable();
    partitions.dedup();
    Some(Requirement::in_values(
        labels::PLACEMENT_GROUP_PARTITION,
        partitions.into_iter().map(|p| p.to_string()),
    ))
}

/// Each offering once per partition `1..=count` (upstream's expansion); unchanged for
/// `count` 0.
pub fn expand(offerings: Vec<Offering>, count: u32) -> Vec<Offering> {
    if count == 0 {
        return offerings;
    }
    offerings
        .into_iter()
        .flat_map(|o| {
            (1..=count).map(move |p| Offering {
                partition: Some(p),
                ..o.clone()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
