//! The embedded cloud: instances over the built-in catalog, with what makes a real cloud
//! interesting to an autoscaler: launches take time, offerings run out of capacity
//! (InsufficientInstanceCapacity, switched on and off per offering), spot instances are
//! interrupted with two minutes' notice, and instances can be listed and terminated.
//! Deterministic for a seed.

use std::collections::BTreeMap;
use std::future::ready;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use super::{
    CloudError, CloudProvider, Instance, Interruption, InterruptionKind, LaunchError,
    LaunchRequest, Launched,
};
use crate::engine::catalog::{CapacityType, Catalog, InstanceType};

/// Spot interruption notices come this long before the instance is taken (EC2: 2 min).
pub const SPOT_NOTICE: TimeDelta = TimeDelta::minutes(2);

/// Which offerings are out of capacity: every field that is set must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct CapacityOutage {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<CapacityType>,
}

impl CapacityOutage {
    fn covers(&self, instance_type: &str, zone: &str, ct: CapacityType) -> bool {
        self.instance_type
            .as_deref()
            .is_none_or(|t| t == instance_type)
            && self.zone.as_deref().is_none_or(|z| z == zone)
            && self.capacity_type.is_none_or(|c| c == ct)
    }
}

/// An instance and when it is up or goes away.
#[derive(Clone, Debug, PartialEq)]
pub struct SimInstance {
    pub instance: Instance,
    /// When the instance is running and its kubelet starts (launch + boot).
    pub running_at: DateTime<Utc>,
    /// When the cloud takes it back (after a spot interruption notice).
    pub reclaim_at: Option<DateTime<Utc>>,
}

/// The simulated cloud's reading of the time: the simulation's clock, handed in by what
/// wires the world, so the cloud (below the control layer) does not name control's `Clock`.
pub type Now = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The simulated cloud.
pub struct SimCloud {
    clock: Now,
    types: Vec<Arc<InstanceType>>,
    /// From the CreateFleet call to a running instance.
    pub launch_latency: TimeDelta,
    instances: BTreeMap<String, SimInstance>,
    outages: Vec<CapacityOutage>,
    interruptions: Vec<Interruption>,
    next_id: u64,
    rng: fastrand::Rng,
}

impl SimCloud {
    pub fn new(catalog: &Catalog, clock: Now, seed: u64) -> SimCloud {
        SimCloud {
            clock,
            types: catalog
                .instance_types
                .iter()
                .cloned()
                .map(Arc::new)
                .collect(),
            launch_latency: TimeDelta::seconds(5),
            instances: BTreeMap::new(),
            outages: Vec::new(),
            interruptions: Vec::new(),
            next_id: 0,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// An independent copy of this cloud (its instances, outages, pending interruption
    /// notices and random state) that reads `clock`: a what-if's fork of the world runs
    /// on its own virtual clock.
    pub fn fork(&self, clock: Now) -> SimCloud {
        SimCloud {
            clock,
            types: self.types.clone(),
            launch_latency: self.launch_latency,
            instances: self.instances.clone(),
            outages: self.outages.clone(),
            interruptions: self.interruptions.clone(),
            next_id: self.next_id,
            rng: self.rng.clone(),
        }
    }

    /// Starts or ends a capacity outage.
    pub fn set_outage(&mut self, outage: CapacityOutage, on: bool) {
        self.outages.retain(|o| o != &outage);
        if on {
            self.outages.push(outage);
        }
    }

    /// True when an offering is out of capacity now.
    pub fn is_out(&self, instance_type: &str, zone: &str, ct: CapacityType) -> bool {
        self.outages
            .iter()
            .any(|o| o.covers(instance_type, zone, ct))
    }

    /// Sends a spot interruption notice for the instance; it is reclaimed two minutes
    /// later. Returns false when there is no such running spot instance.
    pub fn interrupt(&mut self, provider_id: &str) -> bool {
        let now = (self.clock)();
        let Some(i) = self.instances.get_mut(provider_id) else {
            return false;
        };
        if i.instance.capacity_type != CapacityType::Spot || i.reclaim_at.is_some() {
            return false;
        }
        i.reclaim_at = Some(now + SPOT_NOTICE);
        self.interruptions.push(Interruption {
            instance: provider_id.to_string(),
            kind: InterruptionKind::SpotInterrupted,
            at: now,
            receipt: None,
        });
        true
    }

    /// Instances the cloud has reclaimed by `now`; they are gone afterwards.
    pub fn reclaim(&mut self, now: DateTime<Utc>) -> Vec<Instance> {
        let gone: Vec<String> = self
            .instances
            .iter()
            .filter(|(_, i)| i.reclaim_at.is_some_and(|t| t <= now))
            .map(|(id, _)| id.clone())
            .collect();
        gone.iter()
            .filter_map(|id| self.instances.remove(id))
            .map(|i| i.instance)
            .collect()
    }

    /// Every instance, with its timings.
    pub fn instances(&self) -> impl Iterator<Item = &SimInstance> {
        self.instances.values()
    }

    /// The next moment something changes by itself (an instance starts or is reclaimed).
    pub fn next_event(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.instances
            .values()
            .flat_map(|i| [Some(i.running_at), i.reclaim_at])
            .flatten()
            .filter(|t| *t > now)
            .min()
    }

    /// An instance that was running before the run began (a scenario's running node,
    /// an exported cluster's): running since `since`, at the offering's price. None when
    /// the cloud has no such offering.
    pub fn adopt(
        &mut self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        nodeclaim: &str,
        nodepool: &str,
        since: DateTime<Utc>,
    ) -> Option<Instance> {
        let price = self
            .types
            .iter()
            .find(|t| t.name == instance_type)?
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == capacity_type)?
            .price;
        let id = self.id(zone);
        let instance = Instance {
            provider_id: id.clone(),
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type,
            price,
            nodeclaim: nodeclaim.to_string(),
            nodepool: nodepool.to_string(),
            hostname: self.hostname(),
            launched: since,
            image_id: None,
        };
        self.instances.insert(
            id,
            SimInstance {
                instance: instance.clone(),
                running_at: since,
                reclaim_at: None,
            },
        );
        Some(instance)
    }

    /// Starts an instance nobody asked for through the controller (a leaked launch, for
    /// garbage-collection tests and scenarios).
    pub fn start_unmanaged(&mut self, instance_type: &str, zone: &str, nodeclaim: &str) -> String {
        let now = (self.clock)();
        let id = self.id(zone);
        let instance = Instance {
            provider_id: id.clone(),
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type: CapacityType::OnDemand,
            price: 0.0,
            nodeclaim: nodeclaim.to_string(),
            nodepool: String::new(),
            hostname: self.hostname(),
            launched: now,
            image_id: None,
        };
        self.instances.insert(
            id.clone(),
            SimInstance {
                instance,
                running_at: now + self.launch_latency,
                reclaim_at: None,
            },
        );
        id
    }

    fn id(&mut self, zone: &str) -> String {
        self.next_id += 1;
        format!(
            "aws:///{zone}/i-{:017x}",
            0x0a1b_0000_0000u64 + self.next_id
        )
    }

    fn hostname(&mut self) -> String {
        format!(
            "ip-10-{}-{}-{}.ec2.internal",
            self.rng.u8(0..=255),
            self.rng.u8(0..=255),
            self.rng.u8(1..=254)
        )
    }
}

impl CloudProvider for SimCloud {
    fn instance_types(&self, _pool: &crate::api::nodepool::NodePool) -> Vec<Arc<InstanceType>> {
        self.types.clone()
    }

    fn create(
        &mut self,
        request: LaunchRequest,
    ) -> impl Future<Output = Result<Launched, LaunchError>> + Send {
        let now = (self.clock)();
        let mut unavailable = Vec::new();
        let mut result = None;
        for o in &request.offerings {
            if self.is_out(&o.instance_type, &o.zone, o.capacity_type) {
                unavailable.push(o.clone());
                continue;
            }
            let id = self.id(&o.zone);
            let instance = Instance {
                provider_id: id.clone(),
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
                price: o.price,
                nodeclaim: request.nodeclaim.clone(),
                nodepool: request.nodepool.clone(),
                hostname: self.hostname(),
                launched: now,
                image_id: None,
            };
            self.instances.insert(
                id,
                SimInstance {
                    instance: instance.clone(),
                    running_at: now + self.launch_latency,
                    reclaim_at: None,
                },
            );
            result = Some(instance);
            break;
        }
        ready(match result {
            Some(instance) => Ok(Launched {
                instance,
                unavailable,
                annotations: Default::default(),
                labels: Default::default(),
            }),
            None if request.offerings.is_empty() => Err(LaunchError::Other {
                nodeclaim: request.nodeclaim,
                message: "no offering left to try".into(),
            }),
            None => Err(LaunchError::InsufficientCapacity {
                nodeclaim: request.nodeclaim,
                offerings: unavailable,
            }),
        })
    }

    fn delete(&mut self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send {
        self.instances.remove(provider_id);
        ready(Ok(()))
    }

    fn list(&mut self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send {
        ready(Ok(self
            .instances
            .values()
            .map(|i| i.instance.clone())
            .collect()))
    }

    fn interruptions(&mut self) -> Vec<Interruption> {
        std::mem::take(&mut self.interruptions)
    }
}
