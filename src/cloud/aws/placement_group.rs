//! The placement group a NodeClass launches into (upstream `pkg/providers/placementgroup`
//! and `pkg/controllers/nodeclass/placementgroup.go`): resolved by id or name among the
//! region's `available` groups. Its nodes carry `karpenter.k8s.aws/placement-group-id`
//! (and, in a partition group, the partition EC2 put them in), launch templates place
//! instances in it, only types supporting its strategy are offered, and a node outside
//! the NodeClass's group has drifted.

use aws_sdk_ec2::types::Filter;

use super::launch_template::has_code;
use super::{Clients, sdk_error};
use crate::api::instance_options::PlacementGroupSelector;
use crate::cloud::CloudError;

/// The fleet error EC2 gives when a spread group already has seven instances in a zone
/// (upstream `IsSpreadPlacementGroupLimitError` matches on this text).
pub const SPREAD_LIMIT_MESSAGE: &str = "limit of instances in this spread placement group";

/// A resolved placement group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementGroup {
    pub id: String,
    pub name: String,
    /// `cluster`, `partition` or `spread`.
    pub strategy: String,
    /// How many partitions a partition group has.
    pub partition_count: Option<i32>,
}

/// The selected group when it exists and is available; `None` when EC2 knows no such
/// available group (a name or id EC2 does not know at all is the same answer).
pub async fn resolve(
    clients: &Clients,
    selector: &PlacementGroupSelector,
) -> Result<Option<PlacementGroup>, CloudError> {
    let mut req = clients
        .ec2
        .describe_placement_groups()
        .filters(Filter::builder().name("state").values("available").build());
    req = match (&selector.id, &selector.name) {
        (Some(id), _) => req.group_ids(id),
        (None, Some(name)) => req.group_names(name),
        (None, None) => return Ok(None),
    };
    match req.send().await {
        Ok(out) => Ok(out.placement_groups().first().map(|g| PlacementGroup {
            id: g.group_id().unwrap_or_default().to_string(),
            name: g.group_name().unwrap_or_default().to_string(),
            strategy: g
                .strategy()
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            partition_count: g.partition_count(),
        })),
        Err(e)
            if has_code(&e, "InvalidPlacementGroup.Unknown")
                || has_code(&e, "InvalidPlacementGroupId.NotFound") =>
        {
            Ok(None)
        }
        Err(e) => Err(sdk_error("DescribePlacementGroups", e)),
    }
}

/// What the selector names, for messages.
pub fn describe(selector: &PlacementGroupSelector) -> &str {
    selector
        .name
        .as_deref()
        .or(selector.id.as_deref())
        .unwrap_or_default()
}
