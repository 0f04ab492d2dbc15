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

pub mod ami;
mod fleet;
pub mod instance_types;
mod instances;
pub mod launch_template;
pub mod nodeclass;
pub mod user_data;
pub mod watch;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region};

use self::fleet::Shape;
use self::instances::Facts;
use self::launch_template::{Content, Templates};
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
    /// `--aws-endpoint`: one endpoint for EC2, SSM and IAM (an emulator in tests).
    pub endpoint: Option<String>,
    pub cluster: ClusterInfo,
    /// The cluster's minor Kubernetes version ("1.33"), which AMI aliases are keyed by.
    pub kubernetes_version: String,
    /// Attempts per AWS call under throttling (RequestLimitExceeded) and 5xx.
    pub max_attempts: u32,
    /// Static credentials (access key id, secret) instead of the chain: for an emulator.
    pub credentials: Option<(String, String)>,
}

/// The AWS clients, built once from the standard credential chain.
pub struct Clients {
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub iam: aws_sdk_iam::Client,
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

/// What the background tasks and the provider share.
#[derive(Default)]
struct Shared {
    /// Every instance type of the region with its offerings and prices.
    catalog: RwLock<Arc<Catalog>>,
    nodeclasses: RwLock<BTreeMap<String, NodeClassState>>,
    /// Per provider id, what drift compares (from launches and listings).
    facts: Mutex<HashMap<String, Facts>>,
    generation: AtomicU64,
    /// Every NodeClass has been listed once: before that, a missing one may just not have
    /// arrived yet.
    listed: std::sync::atomic::AtomicBool,
}

/// A cheap handle on the provider's shared state, for the background refreshers and the
/// NodeClass wiring.
#[derive(Clone)]
pub struct AwsHandle {
    clients: Arc<Clients>,
    shared: Arc<Shared>,
    opts: Arc<AwsOptions>,
}

impl AwsHandle {
    // The locks guard plain data that every writer leaves consistent, so a poisoned lock
    // (a panic elsewhere) is still safe to read.
    fn catalog(&self) -> Arc<Catalog> {
        self.shared
            .catalog
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn nodeclasses(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, NodeClassState>> {
        self.shared
            .nodeclasses
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn nodeclasses_mut(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, NodeClassState>> {
        self.shared
            .nodeclasses
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn nodeclass(&self, name: &str) -> Option<NodeClassState> {
        self.nodeclasses().get(name).cloned()
    }

    fn facts(&self) -> std::sync::MutexGuard<'_, HashMap<String, Facts>> {
        self.shared.facts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Fetches instance types, offerings and spot prices again. On an error the previous
    /// catalog stays.
    pub async fn refresh_catalog(&self) -> Result<usize, CloudError> {
        let ec2 = &self.clients.ec2;
        let infos = instance_types::describe_types(ec2).await?;
        let zones = instance_types::describe_offerings(ec2).await?;
        let spot = instance_types::describe_spot_prices(ec2).await?;
        let on_demand = instance_types::builtin_on_demand();
        let catalog = instance_types::catalog(&self.clients.region, &infos, &zones, &spot, &|t| {
            on_demand.get(t).copied()
        })?;
        let n = catalog.instance_types.len();
        let changed = {
            let mut c = self
                .shared
                .catalog
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let changed = **c != catalog;
            *c = Arc::new(catalog);
            changed
        };
        if changed {
            self.bump();
        }
        Ok(n)
    }

    /// The price of an offering in the current catalog.
    pub fn price(&self, instance_type: &str, zone: &str, ct: CapacityType) -> Option<f64> {
        let c = self.catalog();
        let it = c.get(instance_type)?;
        it.offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == ct)
            .or_else(|| it.offerings.iter().find(|o| o.capacity_type == ct))
            .map(|o| o.price)
    }

    /// A NodeClass was created or changed: it is not Ready until resolved. Returns whether
    /// its spec is new (the watch also delivers our own status writes, which change
    /// nothing to resolve).
    pub fn set_nodeclass(&self, nc: &EC2NodeClass) -> bool {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let mut all = self.nodeclasses_mut();
        let status = nc.status.clone().unwrap_or_default();
        if let Some(old) = all.get_mut(&name)
            && old.spec == nc.spec
        {
            // Same spec: the resolution stands until the next refresh.
            old.status = status;
            old.generation = nc.metadata.generation;
            return false;
        }
        all.insert(
            name,
            NodeClassState {
                spec: nc.spec.clone(),
                generation: nc.metadata.generation,
                hash: nodeclass::hash(&nc.spec),
                resolved: Err(NotReady {
                    condition: "SubnetsReady",
                    reason: "AwaitingReconciliation".into(),
                    message: "not resolved yet".into(),
                }),
                status,
            },
        );
        drop(all);
        self.bump();
        true
    }

    pub fn remove_nodeclass(&self, name: &str) {
        let removed = self.nodeclasses_mut().remove(name).is_some();
        if removed {
            self.bump();
        }
    }

    /// Resolves every NodeClass again; returns the statuses that changed (to be written
    /// to the API server).
    pub async fn resolve_all(&self) -> Vec<(String, EC2NodeClassStatus)> {
        let known: Vec<(String, NodeClassState)> = self
            .nodeclasses()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut changed = Vec::new();
        for (name, state) in known {
            let nc = EC2NodeClass::new(&name, state.spec.clone());
            let resolved = nodeclass::resolve(
                &self.clients,
                &name,
                &nc,
                &self.opts.kubernetes_version,
                &self.opts.cluster.name,
            )
            .await;
            if let Err(e) = &resolved {
                tracing::warn!("EC2NodeClass {name} is not ready: {e}");
            }
            let status = nodeclass::status(
                &resolved,
                Some(&state.status),
                state.generation,
                chrono::Utc::now(),
            );
            let mut all = self.nodeclasses_mut();
            // The spec may have changed while resolving: that version resolves next time.
            let Some(entry) = all.get_mut(&name).filter(|e| e.spec == state.spec) else {
                continue;
            };
            let moved = entry.resolved != resolved;
            entry.resolved = resolved;
            if entry.status != status {
                entry.status = status.clone();
                changed.push((name, status));
            }
            drop(all);
            if moved {
                self.bump();
            }
        }
        changed
    }

    /// Every NodeClass has arrived (the watch listed them): from now on a pool whose
    /// NodeClass is missing or unresolved is reported as unable to launch.
    pub fn mark_listed(&self) {
        self.shared.listed.store(true, Ordering::SeqCst);
        self.bump();
    }

    /// The NodeClasses the provider knows.
    pub fn nodeclass_names(&self) -> Vec<String> {
        self.nodeclasses().keys().cloned().collect()
    }

    /// The resolution of a NodeClass (for tests and the console's explanations).
    pub fn resolved(&self, name: &str) -> Option<Result<Resolved, NotReady>> {
        self.nodeclasses().get(name).map(|s| s.resolved.clone())
    }

    /// Keeps the catalog and the NodeClasses fresh until the process ends: instance types
    /// every [`CATALOG_REFRESH`], NodeClasses every [`NODECLASS_REFRESH`]. `statuses`
    /// receives what changed; `wake` is told when launch options may have changed.
    pub fn spawn_refreshers(
        &self,
        statuses: tokio::sync::mpsc::UnboundedSender<(String, EC2NodeClassStatus)>,
        wake: Arc<tokio::sync::Notify>,
        nodeclass_changed: Arc<tokio::sync::Notify>,
    ) {
        let h = self.clone();
        let w = wake.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(CATALOG_REFRESH).await;
                match h.refresh_catalog().await {
                    Ok(n) => tracing::debug!("refreshed {n} EC2 instance types"),
                    Err(e) => tracing::warn!("refreshing EC2 instance types: {e}"),
                }
                w.notify_one();
            }
        });
        let h = self.clone();
        tokio::spawn(async move {
            loop {
                for s in h.resolve_all().await {
                    if statuses.send(s).is_err() {
                        return;
                    }
                }
                wake.notify_one();
                // A NodeClass change resolves at once; otherwise every interval.
                let _ = tokio::time::timeout(NODECLASS_REFRESH, nodeclass_changed.notified()).await;
            }
        });
    }
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

    /// Launches every request of one shape with one CreateFleet call.
    async fn launch_group(
        &mut self,
        shape: &Shape,
        requests: &[&LaunchRequest],
        annotations: &BTreeMap<String, String>,
    ) -> Vec<Result<Launched, LaunchError>> {
        let clients = self.handle.clients.clone();
        let single = requests.len() == 1;
        let mut shape = shape.clone();
        if single {
            // One NodeClaim: its tag goes on at launch, so no instance is ever without it.
            shape
                .tags
                .insert(NODECLAIM_TAG.into(), requests[0].nodeclaim.clone());
        }
        let handle = self.handle.clone();
        let result = fleet::create(&clients, &shape, requests.len() as i32, |t, z| {
            handle.price(t, z, shape.capacity_type).unwrap_or(0.0)
        })
        .await;
        let fail = |r: &LaunchRequest, message: String| LaunchError::Other {
            nodeclaim: r.nodeclaim.clone(),
            message,
        };
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                // A template deleted behind our back is made again on the next attempt.
                if e.0.contains("InvalidLaunchTemplateName") {
                    for o in &shape.overrides {
                        self.templates.forget(&o.template);
                    }
                }
                return requests.iter().map(|r| Err(fail(r, e.0.clone()))).collect();
            }
        };
        let ids: Vec<String> = result.instances.iter().map(|i| i.id.clone()).collect();
        let described = if ids.is_empty() {
            Ok(Vec::new())
        } else {
            instances::get(&clients, &ids).await
        };
        let described = match described {
            Ok(d) => d,
            Err(e) => {
                // The instances exist but cannot be read: garbage collection takes them.
                return requests.iter().map(|r| Err(fail(r, e.0.clone()))).collect();
            }
        };
        let mut out = Vec::with_capacity(requests.len());
        let mut launched = result.instances.iter();
        for r in requests {
            let Some(fi) = launched.next() else {
                out.push(Err(if result.errors.is_empty() {
                    LaunchError::InsufficientCapacity {
                        nodeclaim: r.nodeclaim.clone(),
                        offerings: result.unavailable.clone(),
                    }
                } else {
                    fail(r, result.errors.join("; "))
                }));
                continue;
            };
            if !single
                && let Err(e) =
                    instances::tag(&clients, &fi.id, &[(NODECLAIM_TAG, &r.nodeclaim)]).await
            {
                tracing::warn!("{e}");
            }
            let d = described.iter().find(|d| d.id == fi.id);
            let ct = if fi.spot {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            };
            let price = self
                .handle
                .price(&fi.instance_type, &fi.zone, ct)
                .unwrap_or(0.0);
            let instance = match d {
                Some(d) => {
                    self.handle.facts().insert(d.provider_id(), d.facts.clone());
                    let mut i = d.instance(price);
                    i.nodeclaim = r.nodeclaim.clone();
                    i.nodepool = r.nodepool.clone();
                    i
                }
                None => Instance {
                    provider_id: format!("aws:///{}/{}", fi.zone, fi.id),
                    instance_type: fi.instance_type.clone(),
                    zone: fi.zone.clone(),
                    capacity_type: ct,
                    price,
                    nodeclaim: r.nodeclaim.clone(),
                    nodepool: r.nodepool.clone(),
                    hostname: String::new(),
                    launched: chrono::Utc::now(),
                    image_id: None,
                },
            };
            out.push(Ok(Launched {
                instance,
                unavailable: result.unavailable.clone(),
                annotations: annotations.clone(),
            }));
        }
        out
    }

    /// The fleet shape of a request: templates ensured, overrides chosen, tags set.
    async fn shape(
        &mut self,
        r: &LaunchRequest,
    ) -> Result<(Shape, BTreeMap<String, String>), LaunchError> {
        let fail = |message: String| LaunchError::Other {
            nodeclaim: r.nodeclaim.clone(),
            message,
        };
        let name = r
            .nodeclass
            .clone()
            .ok_or_else(|| fail("the NodePool has no nodeClassRef".into()))?;
        let state = self
            .handle
            .nodeclass(&name)
            .ok_or_else(|| fail(format!("EC2NodeClass {name} does not exist")))?;
        let resolved = state
            .resolved
            .clone()
            .map_err(|e| fail(format!("EC2NodeClass {name} is not ready: {e}")))?;
        let family = state
            .spec
            .effective_ami_family()
            .unwrap_or(AMIFamily::Custom);
        let user_data = match family {
            AMIFamily::AL2023 => {
                let config = user_data::node_config(
                    &self.handle.opts.cluster,
                    state.spec.kubelet.as_ref(),
                    &r.labels,
                    &r.taints,
                );
                user_data::al2023(state.spec.user_data.as_deref(), &config)
            }
            AMIFamily::Custom => state.spec.user_data.clone().unwrap_or_default(),
            other => {
                return Err(fail(format!(
                    "EC2NodeClass {name}: user data for the {other:?} AMI family is not \
                     supported by this build (AL2023 and Custom are)"
                )));
            }
        };
        let cluster = self.handle.opts.cluster.name.clone();
        let mut tags = state.spec.tags.clone();
        tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
        tags.insert(crate::api::labels::NODEPOOL.into(), r.nodepool.clone());
        tags.insert(EKS_CLUSTER_TAG.into(), cluster.clone());
        tags.insert(NODECLASS_TAG.into(), name.clone());
        let catalog = self.handle.catalog();
        // One template per AMI the offerings need.
        let mut template_of_ami: BTreeMap<String, String> = BTreeMap::new();
        let mut ami_of_type: BTreeMap<String, String> = BTreeMap::new();
        for o in &r.offerings {
            if ami_of_type.contains_key(&o.instance_type) {
                continue;
            }
            let Some(it) = catalog.get(&o.instance_type) else {
                continue;
            };
            let Some(ami) = resolved.amis.iter().find(|a| ami_serves(a, it)) else {
                continue;
            };
            ami_of_type.insert(o.instance_type.clone(), ami.id.clone());
            if template_of_ami.contains_key(&ami.id) {
                continue;
            }
            let content = Content {
                image_id: ami.id.clone(),
                security_group_ids: resolved
                    .security_groups
                    .iter()
                    .map(|g| g.id.clone())
                    .collect(),
                user_data: user_data.clone(),
                metadata_options: state.spec.metadata_options.clone(),
                block_device_mappings: state.spec.effective_block_device_mappings(),
                instance_profile: resolved.instance_profile.clone(),
                detailed_monitoring: state.spec.detailed_monitoring.unwrap_or(false),
                associate_public_ip_address: state.spec.associate_public_ip_address,
                tags: tags.clone(),
            };
            let t = self
                .templates
                .ensure(&self.handle.clients, &content, &cluster)
                .await
                .map_err(|e| fail(e.0))?;
            template_of_ami.insert(ami.id.clone(), t);
        }
        let subnets = &resolved.subnets;
        let offerings = generic_offerings(&r.offerings, &catalog);
        let (ct, overrides) = fleet::overrides(
            &offerings,
            |zone| {
                subnets
                    .iter()
                    .find(|s| s.zone == zone)
                    .map(|s| s.id.clone())
            },
            |t| {
                ami_of_type
                    .get(t)
                    .and_then(|a| template_of_ami.get(a))
                    .cloned()
            },
        );
        let Some(capacity_type) = ct.filter(|_| !overrides.is_empty()) else {
            return Err(fail(format!(
                "no offering of {} can launch with EC2NodeClass {name} (no subnet in its \
                 zones, or no AMI for its instance types)",
                r.nodeclaim
            )));
        };
        let annotations = BTreeMap::from([
            (nodeclass::HASH_ANNOTATION.to_string(), state.hash.clone()),
            (
                nodeclass::HASH_VERSION_ANNOTATION.to_string(),
                nodeclass::HASH_VERSION.to_string(),
            ),
        ]);
        Ok((
            Shape {
                capacity_type,
                overrides,
                tags,
            },
            annotations,
        ))
    }
}

/// The offerings without exotic instance types (metal sizes, GPUs, Neuron, Gaudi) when
/// any remain: a pod that does not ask for an accelerator should not get one because it
/// happened to be the cheapest spot offering. Mirrors upstream's
/// `filterExoticInstanceTypes`, applied at launch as there.
fn generic_offerings(offerings: &[Launch], catalog: &Catalog) -> Vec<Launch> {
    use crate::engine::catalog::{
        RESOURCE_AMD_GPU, RESOURCE_AWS_NEURON, RESOURCE_HABANA_GAUDI, RESOURCE_NVIDIA_GPU,
    };
    let exotic = |name: &str| {
        catalog.get(name).is_some_and(|it| {
            it.label(crate::api::labels::INSTANCE_SIZE)
                .is_some_and(|s| s.contains("metal"))
                || [
                    RESOURCE_AWS_NEURON,
                    RESOURCE_AMD_GPU,
                    RESOURCE_NVIDIA_GPU,
                    RESOURCE_HABANA_GAUDI,
                ]
                .iter()
                .any(|r| it.capacity.get(r) > 0)
        })
    };
    let generic: Vec<Launch> = offerings
        .iter()
        .filter(|o| !exotic(&o.instance_type))
        .cloned()
        .collect();
    if generic.is_empty() {
        offerings.to_vec()
    } else {
        generic
    }
}

/// Whether an AMI's requirements admit an instance type (arch, GPU/accelerator variant).
fn ami_serves(ami: &crate::api::ec2nodeclass::AMI, it: &InstanceType) -> bool {
    ami.requirements.iter().all(|r| {
        let v = it.labels.get(&r.key);
        match r.operator {
            Operator::In => v.is_some_and(|v| r.values.contains(v)),
            Operator::NotIn => v.is_none_or(|v| !r.values.contains(v)),
            Operator::Exists => v.is_some(),
            Operator::DoesNotExist => v.is_none(),
            // Numeric bounds are not used by AMI requirements.
            _ => true,
        }
    })
}

impl CloudProvider for AwsCloud {
    /// The region's instance types narrowed to the pool's NodeClass: offerings only in
    /// the zones of its subnets, types only where one of its AMIs serves them.
    fn instance_types(&self, pool: &NodePool) -> Vec<Arc<InstanceType>> {
        let Ok(state) = self.nodeclass_of(pool) else {
            return Vec::new();
        };
        let Ok(resolved) = &state.resolved else {
            return Vec::new();
        };
        let zones: Vec<&str> = resolved.subnets.iter().map(|s| s.zone.as_str()).collect();
        let catalog = self.handle.catalog();
        catalog
            .instance_types
            .iter()
            .filter(|it| resolved.amis.iter().any(|a| ami_serves(a, it)))
            .filter_map(|it| {
                let mut it = it.clone();
                it.offerings.retain(|o| zones.contains(&o.zone.as_str()));
                (!it.offerings.is_empty()).then(|| Arc::new(it))
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

    fn delete(&mut self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send {
        let clients = self.handle.clients.clone();
        let id = provider_id
            .rsplit('/')
            .next()
            .unwrap_or(provider_id)
            .to_string();
        async move { instances::terminate(&clients, &id).await }
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
            Ok(found
                .iter()
                .map(|d| {
                    let ct = if d.spot {
                        CapacityType::Spot
                    } else {
                        CapacityType::OnDemand
                    };
                    d.instance(handle.price(&d.instance_type, &d.zone, ct).unwrap_or(0.0))
                })
                .collect())
        }
    }

    /// Spot interruption notices arrive through an SQS queue upstream; this build does
    /// not read one (garbage collection notices a reclaimed instance instead).
    fn interruptions(&mut self) -> Vec<Interruption> {
        Vec::new()
    }

    /// Upstream `isNodeClassDrifted`: the static hash first, then AMI, security groups and
    /// subnet against the NodeClass's current resolution.
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
        let facts = facts?;
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
        None
    }

    fn generation(&self) -> u64 {
        self.handle.shared.generation.load(Ordering::SeqCst)
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

/// Prices of the provider's catalog, for NodeClaims read back from the API server.
pub fn price_book(handle: AwsHandle) -> crate::cluster::kube::PriceBook {
    Arc::new(move |t: &str, z: &str, ct: CapacityType| handle.price(t, z, ct))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(t: &str) -> Launch {
        Launch {
            instance_type: t.into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price: 0.1,
        }
    }

    #[test]
    fn accelerated_and_metal_types_only_when_nothing_else_fits() {
        let catalog = Catalog::builtin();
        let mixed = [
            launch("inf1.xlarge"),
            launch("g4dn.xlarge"),
            launch("m5.metal"),
            launch("m5.large"),
        ];
        assert_eq!(generic_offerings(&mixed, &catalog), [launch("m5.large")]);
        let only = [launch("g4dn.xlarge")];
        assert_eq!(generic_offerings(&only, &catalog), only);
    }
}
