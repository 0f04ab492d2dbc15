//! Small clusters for disruption tests, property tests and the benchmark: instance types
//! with round prices, one zone, nodes and pods placed by hand.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::labels;
use crate::api::nodepool::NodePool;
use crate::engine::catalog::{CapacityType, InstanceType, Offering};
use crate::engine::pod::Pod;
use crate::engine::resources::Resources;
use crate::engine::state::{ClusterState, StateNode};

/// The zone every fixture offering is in.
pub const ZONE: &str = "test-zone-1a";

/// An instance type with `cpu` cores and `mem_gib` GiB, no kubelet overhead, on-demand at
/// `od` USD/h and spot at `spot` (no spot offering when `spot` is None).
pub fn instance_type(
    name: &str,
    cpu: i64,
    mem_gib: i64,
    od: f64,
    spot: Option<f64>,
) -> Arc<InstanceType> {
    let mut offerings = vec![Offering {
        zone: ZONE.into(),
        capacity_type: CapacityType::OnDemand,
        price: od,
        available: true,
        reservation: None,
        partition: None,
    }];
    if let Some(s) = spot {
        offerings.push(Offering {
            zone: ZONE.into(),
            capacity_type: CapacityType::Spot,
            price: s,
            available: true,
            reservation: None,
            partition: None,
        });
    }
    let mut capacity = Resources::cpu_mem(cpu * 1000, mem_gib << 30);
    capacity.pods = 110_000;
    Arc::new(InstanceType {
        name: name.into(),
        labels: BTreeMap::from([
            (labels::INSTANCE_TYPE.to_string(), name.to_string()),
            (labels::ARCH.to_string(), "amd64".to_string()),
            (labels::OS.to_string(), "linux".to_string()),
        ]),
        capacity,
        overhead: Resources::default(),
        offerings,
    })
}

/// A cluster of pools over a shared set of instance types.
pub struct Fixture {
    pub state: ClusterState,
    pub types: Vec<Arc<InstanceType>>,
    pub now: DateTime<Utc>,
}

impl Fixture {
    pub fn new(types: Vec<Arc<InstanceType>>, now: DateTime<Utc>) -> Fixture {
        Fixture {
            state: ClusterState::default(),
            types,
            now,
        }
    }

    /// Adds a pool that may launch every fixture type.
    pub fn pool(&mut self, pool: NodePool) -> &mut Self {
        let name = pool.metadata.name.clone().unwrap_or_default();
        self.state
            .instance_types
            .insert(name.clone(), self.types.clone());
        self.state.nodepools.insert(name, pool);
        self
    }

    /// Adds an initialized, ready node of `pool` created `age` ago, with no pod events since.
    pub fn node(
        &mut self,
        name: &str,
        pool: &str,
        instance_type: &str,
        ct: CapacityType,
        age: TimeDelta,
    ) -> &mut StateNode {
        let it = self
            .types
            .iter()
            .find(|t| t.name == instance_type)
            .unwrap_or_else(|| panic!("fixture has no type {instance_type}"))
            .clone();
        let pool = self.state.nodepools[pool].clone();
        let n = StateNode::launched(name, &pool, &it, ct, self.now - age);
        self.state.nodes.push(n);
        self.state.nodes.last_mut().expect("just pushed")
    }

    /// Binds a running pod requesting `cpu_m` millicores and `mem_mib` MiB to `node`.
    pub fn pod(&mut self, name: &str, node: &str, cpu_m: i64, mem_mib: i64) -> &mut Pod {
        let mut p = Pod::new("default", name, Resources::cpu_mem(cpu_m, mem_mib << 20));
        p.node_name = Some(node.into());
        p.phase = crate::engine::pod::Phase::Running;
        p.unschedulable = false;
        p.created = self.now - TimeDelta::hours(1);
        p.started = Some(p.created);
        self.state.pods.push(p);
        self.state.pods.last_mut().expect("just pushed")
    }
}
