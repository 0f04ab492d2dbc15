//! Where nodes come from. The controller launches, lists and terminates instances only
//! through [`CloudProvider`]; `sim` is the embedded cloud over the built-in catalog, and
//! the AWS provider implements the same trait.

pub mod aws;
pub mod kwok;
pub mod live;
pub mod prices;
pub mod sim;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::api::nodeclaim::Taint;
use crate::api::nodepool::NodePool;
use crate::cluster::NodeClaimObject;
use crate::engine::catalog::{CapacityType, InstanceType};
use crate::engine::provisioning::Launch;

/// What to launch: one NodeClaim's offerings, most preferred first (the provider takes the
/// first it can get, as EC2 CreateFleet does with prioritized overrides).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LaunchRequest {
    pub nodeclaim: String,
    pub nodepool: String,
    pub offerings: Vec<Launch>,
    /// The pool's `nodeClassRef` name (the AWS provider's EC2NodeClass).
    pub nodeclass: Option<String>,
    /// The labels and taints (startup taints included) the node registers with: the
    /// kubelet's `--node-labels` and `--register-with-taints`.
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
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
    /// The image it booted (the NodeClaim's status.imageID), where the cloud has images.
    pub image_id: Option<String>,
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
    /// Annotations the NodeClaim gets with its launch (the AWS provider's NodeClass hash,
    /// which NodeClassDrift compares later).
    pub annotations: BTreeMap<String, String>,
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
pub trait CloudProvider: Send {
    /// The instance types a pool may launch (narrowed to its NodeClass), with prices. A
    /// pool whose NodeClass is not ready gets none.
    fn instance_types(&self, pool: &NodePool) -> Vec<Arc<InstanceType>>;

    fn create(
        &mut self,
        request: LaunchRequest,
    ) -> impl Future<Output = Result<Launched, LaunchError>> + Send;

    /// Launches several NodeClaims of one provisioning round; answers in request order.
    /// A provider that can merge launches of the same shape into one call (the AWS
    /// provider's CreateFleet batching) overrides this.
    fn create_all(
        &mut self,
        requests: Vec<LaunchRequest>,
    ) -> impl Future<Output = Vec<Result<Launched, LaunchError>>> + Send {
        async move {
            let mut out = Vec::with_capacity(requests.len());
            for r in requests {
                out.push(self.create(r).await);
            }
            out
        }
    }

    /// Terminates an instance; an instance already gone is not an error.
    fn delete(&mut self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send;

    /// Every instance this controller launched (for garbage collection).
    fn list(&mut self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send;

    /// Interruption notices since the last call.
    fn interruptions(&mut self) -> Vec<Interruption>;

    /// Why a launched NodeClaim no longer matches its NodeClass (AMIDrift, SubnetDrift,
    /// SecurityGroupDrift, NodeClassDrift: upstream `CloudProvider.IsDrifted`), if it does
    /// not.
    fn drifted(&self, _claim: &NodeClaimObject, _pool: &NodePool) -> Option<String> {
        None
    }

    /// Changes whenever what [`CloudProvider::instance_types`] or
    /// [`CloudProvider::drifted`] answer may have changed (a refreshed catalog, a NodeClass
    /// resolved anew), so the controller asks again.
    fn generation(&self) -> u64 {
        0
    }

    /// Why a pool can launch nothing (its NodeClass is missing or not ready), for the
    /// console's explanations.
    fn unlaunchable(&self, _pool: &NodePool) -> Option<String> {
        None
    }
}
