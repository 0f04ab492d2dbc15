//! EC2 capacity reservations on an EC2NodeClass: which reservations its nodes may use
//! (`spec.capacityReservationSelectorTerms`) and which ones the provider resolved
//! (`status.capacityReservations`).
//!
//! Field names and CRD markers mirror the AWS provider's `pkg/apis/v1/ec2nodeclass.go`
//! and `ec2nodeclass_status.go` at v1.14.1, so an upstream-written EC2NodeClass survives a
//! round trip through our types and our CRDs; the AWS provider resolves the terms
//! (`cloud::aws::capacity_reservation`). Enum-like fields are strings with the CRD's
//! `enum`, so a value a newer provider adds never makes the object unreadable.

use std::collections::BTreeMap;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// One term of `capacityReservationSelectorTerms`: by id, or by tags, owner and match
/// criteria.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
    /// The reservation id (`cr-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    /// The account owning the reservation.
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["open", "targeted"]))]
    pub instance_match_criteria: Option<String>,
}

/// A capacity reservation the provider resolved from the selector terms.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    pub availability_zone: String,
    /// When the reservation ends, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub end_time: Option<String>,
    #[schemars(regex(pattern = "^cr-[0-9a-z]+$"))]
    pub id: String,
    #[schemars(extend("enum" = ["open", "targeted"]))]
    pub instance_match_criteria: String,
    pub instance_type: String,
    /// Whether EC2 may reclaim the capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    #[serde(rename = "ownerID")]
    #[schemars(regex(pattern = "^[0-9]{12}$"))]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["default", "capacity-block"], "default" = "default"))]
    pub reservation_type: Option<String>,
    /// `active` or `expiring`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["active", "expiring"], "default" = "active"))]
    pub state: Option<String>,
}
