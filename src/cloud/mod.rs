//! Where nodes come from. The controller launches, lists and terminates instances only
//! through [`CloudProvider`]; `sim` is the embedded cloud over the built-in catalog, and
//! the AWS provider implements the same trait.

pub mod kwok;
pub mod sim;

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::engine::catalog::{CapacityType, InstanceType};
use crate::engine::provisioning::Launch;

/// What to launch: one NodeClaim's offerings, most preferred first (the provider takes the
/// first it can get, as EC2 CreateFleet does with prioritized overrides).
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRequest {
    pub nodeclaim: String,
    pub nodepool: String,
    pub offerings: Vec<Launch>,
}

/// A running (or starting) instance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Instance {
    /// `aws:///<zone>/<instance id>`, the Node's spec.providerID.
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// The NodeClaim it was launched for (the `karpenter.sh/nodeclaim` tag).
    pub nodeclaim: String,
    pub nodepool: String,
    /// Private DNS name: the node name its kubelet registers.
    pub hostname: String,
    pub launched: DateTime<Utc>,
}

/// A launch that did not happen, and which offerings were out of capacity on the way.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LaunchError {
    /// Every offering tried answered InsufficientInstanceCapacity.
    #[error("insufficient capacity for all {} offering(s) of {nodeclaim}", offerings.len())]
    InsufficientCapacity {
        nodeclaim: String,
        offerings: Vec<Launch>,
    },
    #[error("launch of {nodeclaim} failed: {message}")]
    Other { nodeclaim: String, message: String },
}

/// A launch that happened: the instance, and the offerings that were out of capacity
/// before one worked (the controller takes them out for a while).
#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub instance: Instance,
    pub unavailable: Vec<Launch>,
}

/// A cloud API failure other than capacity.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cloud provider: {0}")]
pub struct CloudError(pub String);

/// An instance the cloud will take back (spot interruption notice, scheduled
/// maintenance): the controller drains it ahead of time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interruption {
    pub provider_id: String,
    pub kind: String,
    pub at: DateTime<Utc>,
}

/// A source of instances.
pub trait CloudProvider {
    /// The instance types a pool may launch (narrowed to its NodeClass), with prices.
    fn instance_types(&self, nodepool: &str) -> Vec<Arc<InstanceType>>;

    fn create(
        &mut self,
        request: LaunchRequest,
    ) -> impl Future<Output = Result<Launched, LaunchError>> + Send;

    /// Terminates an instance; an instance already gone is not an error.
    fn delete(&mut self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Every instance this controller launched (for garbage collection).
    fn list(&mut self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send;

    /// Interruption notices since the last call.
    fn interruptions(&mut self) -> Vec<Interruption>;
}
