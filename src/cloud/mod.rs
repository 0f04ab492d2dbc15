//! Where nodes come from. The controller launches, lists and terminates instances only
//! through [`CloudProvider`]; `sim` is the embedded cloud over the built-in catalog, and
//! the AWS provider implements the same trait.

pub mod aws;
pub mod interruption_metrics;
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
    /// What the NodeClaim's pods request (its spec.resources.requests): pods asking for
    /// EFA devices get a launch with EFA interfaces.
    pub requests: crate::engine::resources::Resources,
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
    /// Labels the NodeClaim and its Node get from the launch beyond the instance type's
    /// (the capacity reservation a reserved instance runs in).
    pub labels: BTreeMap<String, String>,
}

/// A cloud API failure other than capacity.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cloud provider: {0}")]
pub struct CloudError(pub String);

/// What the cloud says is about to happen to an instance, in upstream's message kinds
/// (`pkg/controllers/interruption/messages/types.go` in the AWS provider): their names
/// are the `message_type` of `karpenter_interruption_received_messages_total` and the
/// `reason` of `karpenter_nodeclaims_disrupted_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum InterruptionKind {
    /// EC2 takes a spot instance back in two minutes.
    SpotInterrupted,
    /// EC2 says a spot instance is at higher risk of interruption.
    RebalanceRecommendation,
    /// An AWS Health scheduled change (maintenance, retirement) for the instance.
    ScheduledChange,
    /// The instance is stopping or stopped.
    InstanceStopped,
    /// The instance is shutting down or terminated.
    InstanceTerminated,
    /// EC2 takes back a capacity reservation the instance runs in.
    CapacityReservationInterrupted,
}

impl InterruptionKind {
    /// Upstream's name for the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            InterruptionKind::SpotInterrupted => "spot_interrupted",
            InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
            InterruptionKind::ScheduledChange => "scheduled_change",
            InterruptionKind::InstanceStopped => "instance_stopped",
            InterruptionKind::InstanceTerminated => "instance_terminated",
            InterruptionKind::CapacityReservationInterrupted => "capacity_reservation_interrupted",
        }
    }

    /// Whether the NodeClaim is deleted (cordoned and drained) ahead of the loss: every
    /// kind but a rebalance recommendation, which is only reported (upstream
    /// `actionForMessage` in `pkg/controllers/interruption/utils.go`).
    pub fn drains(self) -> bool {
        self != InterruptionKind::RebalanceRecommendation
    }

    /// Whether the instance's offering is out for a while (the unavailable-offerings
    /// cache takes it): a spot interruption says EC2 wants that capacity back
    /// (upstream `markUnavailableOfferings`).
    pub fn offering_unavailable(self) -> bool {
        self == InterruptionKind::SpotInterrupted
    }
}

impl std::fmt::Display for InterruptionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A notice that the cloud will take an instance back (spot interruption, scheduled
/// maintenance, a stop): the controller drains it ahead of time, or only reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interruption {
    /// The instance: its provider id, or the last segment of one (the AWS queue names
    /// instances by EC2 instance id only; `aws:///ZONE/ID` ends with it).
    pub instance: String,
    pub kind: InterruptionKind,
    pub at: DateTime<Utc>,
    /// What the provider needs back once the notice is handled (the queue message to
    /// delete), through [`CloudProvider::acknowledge`].
    #[serde(skip)]
    pub receipt: Option<String>,
}

/// The segment of a provider id that names the instance in the cloud's own terms
/// (`aws:///us-east-1a/i-0abc` → `i-0abc`).
pub fn instance_id(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap_or(provider_id)
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

    /// The controller has acted on these notices: a provider that reads them from a
    /// queue deletes them now, not before (a crash in between hands them out again, as
    /// upstream deletes a message only after handling it).
    fn acknowledge(&mut self, _handled: &[Interruption]) {}

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

    /// Said about the prices in use when they are not the region's own (the AWS provider
    /// before or without the Pricing API), for the console.
    fn prices_note(&self) -> Option<String> {
        None
    }

    /// Why a pool can launch nothing (its NodeClass is missing or not ready), for the
    /// console's explanations.
    fn unlaunchable(&self, _pool: &NodePool) -> Option<String> {
        None
    }

    /// Where a pool's launches land beyond zone and capacity type (the AWS provider's
    /// placement group id): an insufficient-capacity refusal met there keeps the offering
    /// out for this scope only, so pools launching elsewhere still try it (upstream scopes
    /// its unavailable-offerings cache by placement group).
    fn offering_scope(&self, _pool: &NodePool) -> Option<String> {
        None
    }

    /// Instances (provider ids) in capacity the cloud is about to take back on a
    /// schedule: an AWS capacity block in its last 40 minutes. Their NodeClaims are
    /// deleted so the pods move before the instances go (upstream
    /// `capacityreservation/expiration`).
    fn expiring(&self) -> Vec<String> {
        Vec::new()
    }
}
