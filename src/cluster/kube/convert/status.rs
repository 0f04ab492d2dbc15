//! The NodePool status patch (upstream `nodepool/counter` and `nodepool/readiness`):
//! `status.nodes` (what the scale subresource reads), `status.resources` (the capacity
//! of the pool's nodes, plus `nodes`) and the pool's conditions.

use serde_json::{Value, json};

use super::quantities;
use crate::cluster::PoolStatus;

/// The merge patch of a NodePool's status subresource.
pub fn nodepool_status_patch(status: &PoolStatus) -> Value {
    let mut resources =
        serde_json::to_value(quantities(&status.resources)).unwrap_or_else(|_| json!({}));
    if let Some(m) = resources.as_object_mut() {
        m.insert("nodes".into(), json!(status.nodes.to_string()));
    }
    json!({"status": {
        "nodes": status.nodes,
        "resources": resources,
        "conditions": status.conditions,
    }})
}
