//! The AWS provider: [`CloudProvider`] over EC2, as Karpenter's AWS provider
//! (`karpenter-provider-aws`) does it. Instance types and prices come from EC2 and are
//! refreshed in the background; EC2NodeClasses are resolved to subnets, security groups,
//! AMIs and an instance profile; launches are CreateFleet calls over content-keyed launch
//! templates; instances are found, garbage collected and drift-checked by their tags.
//!
//! The provider itself does no Kubernetes I/O: NodeClasses arrive through
//! [`AwsHandle::set_nodeclass`] and their statuses leave through
//! [`AwsHandle::resolve_all`], which `watch` wires to the API server (and tests call
//! directly).
//!
//! Here: options, clients, the provider and its trait methods. `handle` holds the shared
//! state and its refreshers, `launch` a launch from request to instance, and the other
//! modules one upstream provider each (instance types, NodeClass, AMI, launch template,
//! user data, fleet, instances).

pub mod ami;
pub mod capacity_reservation;
pub mod compatibility;
pub mod ephemeral_storage;
mod fleet;
mod handle;
pub mod hardware;
pub mod instance_types;
mod instances;
pub mod interruption;
mod launch;
pub mod launch_template;
pub mod nodeclass;
pub mod placement_group;
pub mod pricing;
pub mod user_data;
pub mod watch;

use handle::Shared;
pub use handle::{AwsHandle, price_book};
use launch::ami_serves;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region};

use self::fleet::Shape;
use self::instances::Facts;
use self::launch_template::{Content, ReservationTarget, Templates};
use self::nodeclass::{NodeClassState, NotReady, Resolved};
use self::user_data::ClusterInfo;
use super::{
    CloudError, CloudProvider, Instance, Interruption, LaunchError, LaunchRequest, Launched,
};
use crate::api::ec2nodeclass::{AMIFamily, EC2NodeClass, EC2NodeClassStatus};
use crate::api::nodeclaim::Operator;
use crate::api::nodepool::NodePool;
use crate::cluster::NodeClaimObject;
use crate::engine::catalog::{CapacityType, Catalog, InstanceType};
use crate::engine::provisioning::Launch;

/// Tags upstream puts on every instance (`pkg/providers/instance` getTags).
pub const NODECLAIM_TAG: &str = "karpenter.sh/nodeclaim";
pub const NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";
pub const EKS_CLUSTER_TAG: &str = "eks:eks-cluster-name";

/// How often instance types, offerings and spot prices are fetched again (upstream
/// refreshes them every 5 minutes... and caches them as long).
pub const CATALOG_REFRESH: Duration = Duration::from_secs(300);
/// How often NodeClasses are resolved again (upstream requeues its NodeClass status
/// controller every minute, so a new AMI behind an alias shows up as drift within it).
pub const NODECLASS_REFRESH: Duration = Duration::from_secs(60);

/// Where and how to reach AWS, and what nodes must know about their cluster.
#[derive(Clone, Debug)]
pub struct AwsOptions {
    /// `--region`; else the standard chain (AWS_REGION, profile, IMDS).
    pub region: Option<String>,
    /// `--aws-endpoint`: one endpoint for EC2, SSM, IAM, SQS and Pricing (an emulator in
    /// tests).
    pub endpoint: Option<String>,
    pub cluster: ClusterInfo,
    /// The cluster's minor Kubernetes version ("1.33"), which AMI aliases are keyed by.
    pub kubernetes_version: String,
    /// Attempts per AWS call under throttling (RequestLimitExceeded) and 5xx.
    pub max_attempts: u32,
    /// Static credentials (access key id, secret) instead of the chain: for an emulator.
    pub credentials: Option<(String, String)>,
    /// `VM_MEMORY_OVERHEAD_PERCENT` and `RESERVED_ENIS`, applied to every instance type.
    pub capacity: crate::engine::catalog::overhead::CapacityOptions,
    /// `ISOLATED_VPC`: the Pricing API is out of reach, so it is never called and the
    /// built-in on-demand prices stand.
    pub isolated_vpc: bool,
}

/// The AWS clients, built once from the standard credential chain.
pub struct Clients {
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub iam: aws_sdk_iam::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// Asked in the Pricing API's own region ([`pricing::api_region`]).
    pub pricing: aws_sdk_pricing::Client,
    pub region: String,
}

impl Clients {
    /// The standard aws-config chain (env, profile, SSO, IMDS, web identity), with the
    /// region and endpoint overrides. Throttling (RequestLimitExceeded, which the SDK
    /// classifies as a throttling error) and 5xx answers are retried by the SDK's standard
    /// strategy: exponential backoff with full jitter from 200 ms, at most 20 s apart.
    /// Credentials are never logged: only the region and endpoint are.
    pub async fn new(opts: &AwsOptions) -> Result<Clients, String> {
        let retry = RetryConfig::standard()
            .with_max_attempts(opts.max_attempts)
            .with_initial_backoff(Duration::from_millis(200))
            .with_max_backoff(Duration::from_secs(20));
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).retry_config(retry);
        if let Some(r) = &opts.region {
            loader = loader.region(Region::new(r.clone()));
        }
        if let Some(e) = &opts.endpoint {
            loader = loader.endpoint_url(e.clone());
        }
        if let Some((id, secret)) = &opts.credentials {
            loader = loader.credentials_provider(aws_sdk_ec2::config::Credentials::new(
                id, secret, None, None, "static",
            ));
        }
        let config = loader.load().await;
        let region = config
            .region()
            .map(|r| r.to_string())
            .ok_or("no AWS region: pass --region or set AWS_REGION (or a profile's region)")?;
        tracing::info!(
            "AWS provider: region {region}, endpoint {}",
            opts.endpoint.as_deref().unwrap_or("default")
        );
        Ok(Clients {
            ec2: aws_sdk_ec2::Client::new(&config),
            ssm: aws_sdk_ssm::Client::new(&config),
            iam: aws_sdk_iam::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
            pricing: aws_sdk_pricing::Client::from_conf(
                aws_sdk_pricing::config::Builder::from(&config)
                    .region(Region::new(pricing::api_region(&region)))
                    .build(),
            ),
            region,
        })
    }
}

/// An SDK error as one line naming the call (`DisplayErrorContext` walks the sources).
pub fn sdk_error<E: std::error::Error + 'static>(call: &str, e: E) -> CloudError {
    CloudError(format!(
        "{call}: {}",
        aws_sdk_ec2::error::DisplayErrorContext(e)
    ))
}

/// The AWS cloud provider.
pub struct AwsCloud {
    handle: AwsHandle,
    templates: Templates,
}

impl AwsCloud {
    /// Builds the clients and fetches the instance types once (an error here, such as
    /// missing credentials or an unreachable endpoint, stops the start with the reason).
    pub async fn connect(opts: AwsOptions) -> Result<AwsCloud, String> {
        let clients = Clients::new(&opts).await?;
        let handle = AwsHandle {
            clients: Arc::new(clients),
            shared: Arc::new(Shared::default()),
            opts: Arc::new(opts),
        };
        let began = std::time::Instant::now();
        let n = handle
            .refresh_catalog()
            .await
            .map_err(|e| format!("AWS provider: {e}"))?;
        tracing::info!(
            "AWS provider: {n} instance types with offerings and spot prices in {:.2} s",
            began.elapsed().as_secs_f64()
        );
        Ok(AwsCloud {
            handle,
            templates: Templates::default(),
        })
    }

    pub fn handle(&self) -> AwsHandle {
        self.handle.clone()
    }

    fn nodeclass_of(&self, pool: &NodePool) -> Result<NodeClassState, String> {
        let r = &pool.spec.template.spec.node_class_ref;
        if r.kind != "EC2NodeClass" {
            return Err(format!("nodeClassRef kind {} is not EC2NodeClass", r.kind));
        }
        self.handle
            .nodeclass(&r.name)
            .ok_or_else(|| format!("EC2NodeClass {} does not exist", r.name))
    }
}

impl CloudProvider for AwsCloud {
    /// The region's instance types narrowed to the pool's NodeClass: offerings only in
    /// the zones of its subnets, types only where one of its AMIs serves them and its
    /// launch settings are possible ([`compatibility`]), each with the ephemeral storage
    /// the NodeClass gives it (its volumes, or the instance store under RAID0), a
    /// `reserved` offering per capacity reservation it resolved, and each offering once
    /// per partition of a partition placement group.
    fn instance_types(&self, pool: &NodePool) -> Vec<Arc<InstanceType>> {
        let Ok(state) = self.nodeclass_of(pool) else {
            return Vec::new();
        };
        let Ok(resolved) = &state.resolved else {
            return Vec::new();
        };
        let zones: Vec<&str> = resolved.subnets.iter().map(|s| s.zone.as_str()).collect();
        let catalog = self.handle.catalog();
        let hardware = self.handle.hardware();
        let strategy = resolved
            .placement_group
            .as_ref()
            .map(|g| g.strategy.as_str());
        // A partition group offers each offering once per partition (upstream
        // `PlacementGroupResolver`), so partitions become a topology domain.
        let partitions = resolved
            .placement_group
            .as_ref()
            .filter(|g| g.strategy == "partition")
            .and_then(|g| g.partition_count)
            .map(|n| n.max(0) as u32);
        let counts = self.handle.reservations();
        catalog
            .instance_types
            .iter()
            .filter(|it| resolved.amis.iter().any(|a| ami_serves(a, it)))
            .filter(|it| {
                compatibility::incompatibility(
                    &it.name,
                    hardware.get(&it.name),
                    &state.spec,
                    strategy,
                )
                .is_none()
            })
            .filter_map(|source| {
                let mut it = source.clone();
                it.offerings.retain(|o| zones.contains(&o.zone.as_str()));
                for r in &resolved.capacity_reservations {
                    if r.status.instance_type == it.name {
                        let on_demand = source
                            .offerings
                            .iter()
                            .find(|o| o.capacity_type == CapacityType::OnDemand)
                            .map(|o| o.price);
                        it.offerings.push(capacity_reservation::offering(
                            &r.status,
                            on_demand,
                            counts.count(&r.status.id),
                            &zones,
                        ));
                    }
                }
                if it.offerings.is_empty() {
                    return None;
                }
                if let Some(n) = partitions {
                    it.offerings =
                        crate::engine::partition::expand(std::mem::take(&mut it.offerings), n);
                }
                let storage = ephemeral_storage::bytes_for(
                    &state.spec,
                    hardware.get(&it.name).and_then(|h| h.instance_store_gb),
                );
                if storage != crate::engine::catalog::overhead::DEFAULT_ROOT_VOLUME_BYTES {
                    ephemeral_storage::resize(&mut it, storage);
                }
                Some(Arc::new(it))
            })
            .collect()
    }

    async fn create(&mut self, request: LaunchRequest) -> Result<Launched, LaunchError> {
        let mut out = self.create_all(vec![request]).await;
        out.pop().unwrap_or_else(|| {
            Err(LaunchError::Other {
                nodeclaim: String::new(),
                message: "no launch result".into(),
            })
        })
    }

    /// Groups the round's requests by fleet shape and launches each group with one call.
    async fn create_all(
        &mut self,
        requests: Vec<LaunchRequest>,
    ) -> Vec<Result<Launched, LaunchError>> {
        let mut out: Vec<Option<Result<Launched, LaunchError>>> =
            requests.iter().map(|_| None).collect();
        let mut groups: Vec<(Shape, BTreeMap<String, String>, Vec<usize>)> = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            match self.shape(r).await {
                Ok((shape, annotations)) => {
                    match groups
                        .iter_mut()
                        .find(|(s, a, _)| *s == shape && *a == annotations)
                    {
                        Some(g) => g.2.push(i),
                        None => groups.push((shape, annotations, vec![i])),
                    }
                }
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        for (shape, annotations, members) in groups {
            let reqs: Vec<&LaunchRequest> = members.iter().map(|&i| &requests[i]).collect();
            let results = self.launch_group(&shape, &reqs, &annotations).await;
            for (i, r) in members.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .zip(&requests)
            .map(|(r, req)| {
                r.unwrap_or_else(|| {
                    Err(LaunchError::Other {
                        nodeclaim: req.nodeclaim.clone(),
                        message: "not launched".into(),
                    })
                })
            })
            .collect()
    }

    /// Terminates the instance; a reservation it ran in counts its slot free again.
    fn delete(&mut self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send {
        let handle = self.handle.clone();
        // Taken, so a repeated termination does not count the slot twice.
        let reservation = self
            .handle
            .facts()
            .get_mut(provider_id)
            .and_then(|f| f.reservation.take());
        let id = super::instance_id(provider_id).to_string();
        async move {
            instances::terminate(&handle.clients, &id).await?;
            if let Some(r) = reservation {
                handle.reservations().terminated(&r);
                handle.bump();
            }
            Ok(())
        }
    }

    fn list(&mut self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send {
        let handle = self.handle.clone();
        async move {
            let found = instances::list(&handle.clients, &handle.opts.cluster.name).await?;
            let facts: HashMap<String, Facts> = found
                .iter()
                .map(|d| (d.provider_id(), d.facts.clone()))
                .collect();
            let changed = {
                let mut f = handle.facts();
                let changed = *f != facts;
                *f = facts;
                changed
            };
            if changed {
                handle.bump();
            }
            Ok(found.iter().map(|d| handle.priced(d)).collect())
        }
    }

    /// What the interruption queue brought since the last call (nothing without
    /// `--interruption-queue`: garbage collection then notices a reclaimed instance).
    fn interruptions(&mut self) -> Vec<Interruption> {
        self.handle.inbox().take()
    }

    /// Said while on-demand prices are the built-in us-east-1 table.
    fn prices_note(&self) -> Option<String> {
        self.handle.prices_note()
    }

    /// Their queue messages are deleted now.
    fn acknowledge(&mut self, handled: &[Interruption]) {
        if self.handle.inbox().handled(handled) {
            self.handle.shared.acked.notify_one();
        }
    }

    /// Upstream `isNodeClassDrifted`: the static hash first, then AMI, security groups,
    /// subnet and placement group against the NodeClass's current resolution.
    fn drifted(&self, claim: &NodeClaimObject, pool: &NodePool) -> Option<String> {
        let launched = claim.launched.as_ref()?;
        let state = self.nodeclass_of(pool).ok()?;
        if claim
            .annotations
            .get(nodeclass::HASH_VERSION_ANNOTATION)
            .map(String::as_str)
            == Some(nodeclass::HASH_VERSION)
            && claim
                .annotations
                .get(nodeclass::HASH_ANNOTATION)
                .is_some_and(|h| *h != state.hash)
        {
            return Some("NodeClassDrift".into());
        }
        let resolved = state.resolved.as_ref().ok()?;
        let facts = self.handle.facts().get(&launched.provider_id).cloned();
        let image = launched
            .image_id
            .clone()
            .or_else(|| facts.as_ref().and_then(|f| f.image_id.clone()));
        if let Some(image) = image
            && !resolved.amis.iter().any(|a| a.id == image)
        {
            return Some("AMIDrift".into());
        }
        if let Some(facts) = facts {
            let groups: std::collections::BTreeSet<String> = resolved
                .security_groups
                .iter()
                .map(|g| g.id.clone())
                .collect();
            if !facts.security_groups.is_empty() && facts.security_groups != groups {
                return Some("SecurityGroupDrift".into());
            }
            if let Some(subnet) = &facts.subnet_id
                && !resolved.subnets.iter().any(|s| s.id == *subnet)
            {
                return Some("SubnetDrift".into());
            }
        }
        // Upstream `isPlacementGroupDrifted`, last as there: the node's group label
        // against the NodeClass's group (added, removed or changed). It needs no instance
        // facts.
        let node_group = launched.labels.get(crate::api::labels::PLACEMENT_GROUP_ID);
        (node_group != resolved.placement_group.as_ref().map(|g| &g.id))
            .then(|| "PlacementGroupDrift".into())
    }

    fn generation(&self) -> u64 {
        self.handle.shared.generation.load(Ordering::SeqCst)
    }

    /// The placement group the pool's NodeClass launches into.
    fn offering_scope(&self, pool: &NodePool) -> Option<String> {
        let state = self.nodeclass_of(pool).ok()?;
        let resolved = state.resolved.ok()?;
        resolved.placement_group.map(|g| g.id)
    }

    /// Instances in capacity blocks that resolved as `expiring`.
    fn expiring(&self) -> Vec<String> {
        let ending: std::collections::HashSet<String> = self
            .handle
            .nodeclasses()
            .values()
            .filter_map(|s| s.resolved.as_ref().ok())
            .flat_map(|r| &r.capacity_reservations)
            .filter(|f| f.status.state.as_deref() == Some("expiring"))
            .map(|f| f.status.id.clone())
            .collect();
        if ending.is_empty() {
            return Vec::new();
        }
        let mut ids: Vec<String> = self
            .handle
            .facts()
            .iter()
            .filter(|(_, f)| f.reservation.as_ref().is_some_and(|r| ending.contains(r)))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    fn unlaunchable(&self, pool: &NodePool) -> Option<String> {
        if !self.handle.shared.listed.load(Ordering::SeqCst) {
            return None;
        }
        match self.nodeclass_of(pool) {
            Err(e) => Some(e),
            // Not resolved yet is not a reason: resolution is under way.
            Ok(s) => s
                .resolved
                .err()
                .filter(|e| e.reason != "AwaitingReconciliation")
                .map(|e| {
                    format!(
                        "EC2NodeClass {} is not ready: {e}",
                        pool.spec.template.spec.node_class_ref.name
                    )
                }),
        }
    }
}
