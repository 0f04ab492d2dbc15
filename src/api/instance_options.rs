//! Instance-level options of an EC2NodeClass added in the AWS provider's v1.x line:
//! placement groups, network interface layout (EFA), connection tracking timeouts and
//! CPU options.
//!
//! Field names and CRD markers mirror the AWS provider's `pkg/apis/v1/ec2nodeclass.go` at
//! v1.14.1, so an upstream-written EC2NodeClass survives a round trip through our types
//! and CRDs. The AWS provider puts them into the launch template and offers only the
//! instance types they are possible on (`cloud::aws::compatibility`). Enum-like
//! fields are strings with the CRD's `enum`, so a newer value never makes the object
//! unreadable.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The placement group nodes launch into: by name or by id, exactly one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.name) || has(self.id)").message("expected at least one, got none, ['name', 'id']"))]
#[x_kube(validation = Rule::new("!(has(self.name) && has(self.id))").message("'name' and 'id' are mutually exclusive"))]
pub struct PlacementGroupSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    /// `pg-...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^pg-[0-9a-z]+$"))]
    pub id: Option<String>,
}

/// One network interface of the launch: card, device index and kind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    #[schemars(range(min = 0))]
    pub device_index: i32,
    /// `interface` or `efa-only`.
    #[schemars(extend("enum" = ["interface", "efa-only"]))]
    pub interface_type: String,
}

/// Connection tracking timeouts of the primary interface, in seconds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)").message("at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"))]
pub struct ConnectionTracking {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 432000))]
    pub tcp_established_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 180))]
    pub udp_stream_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 60))]
    pub udp_timeout: Option<i32>,
}

/// CPU options of the launch.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// `enabled` or `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub nested_virtualization: Option<String>,
}
