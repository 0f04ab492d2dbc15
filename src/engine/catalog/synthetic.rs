//! Synthetic catalogs shaped like upstream's scheduling-benchmark instance types
//! (`kubernetes-sigs/karpenter` `pkg/cloudprovider/fake/instancetype.go`, `InstanceTypes(n)`),
//! so our benchmark and upstream's solve the same problem.
//!
//! Type `i` (0-based) is `fake-it-<i>` with `i+1` vCPU, `2(i+1)` GiB and `10(i+1)` pods;
//! the price is upstream's `PriceFromResources` (0.1 per vCPU + 0.1 per GB of memory), so it
//! grows with size. Offerings follow upstream's default set: spot in test-zone-1 and -2,
//! on-demand in test-zone-1, -2 and -3. Upstream prices spot like on-demand; here each zone's
//! spot discount (55-75%) is drawn from the seed, so spot is cheaper, zones differ, and the
//! same seed always gives the same catalog. Overhead is upstream's fake kube-reserved
//! (100m CPU, 10Mi memory).

use std::collections::BTreeMap;

use super::overhead::{DEFAULT_ROOT_VOLUME_BYTES, mib_to_milli};
use super::{CapacityType, Catalog, InstanceType, Offering};
use crate::api::labels;
use crate::engine::resources::Resources;

/// The zones upstream's fake cloud provider offers.
pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
const SPOT_ZONES: usize = 2;

/// splitmix64: a tiny, well-mixed, dependency-free generator; enough for reproducible draws.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Spot discount of a zone, in [0.55, 0.75).
fn spot_discount(seed: u64, zone: usize) -> f64 {
    let u = (splitmix64(seed ^ splitmix64(zone as u64)) >> 11) as f64 / (1u64 << 53) as f64;
    0.55 + 0.20 * u
}

/// Upstream `fake.PriceFromResources`: 0.1 per vCPU plus 0.1 per 1e9 bytes of memory.
fn price(vcpu: i64, memory_bytes: i64) -> f64 {
    0.1 * vcpu as f64 + 0.1 * memory_bytes as f64 / 1e9
}

pub(super) fn generate(n: usize, seed: u64) -> Catalog {
    let discounts: Vec<f64> = (0..SPOT_ZONES).map(|z| spot_discount(seed, z)).collect();
    let instance_types = (0..n)
        .map(|i| {
            let vcpu = i as i64 + 1;
            let memory_bytes = vcpu * 2 * (1 << 30);
            let on_demand = price(vcpu, memory_bytes);
            let mut offerings = Vec::with_capacity(ZONES.len() + SPOT_ZONES);
            for (z, discount) in discounts.iter().enumerate() {
                offerings.push(Offering {
                    zone: ZONES[z].to_string(),
                    capacity_type: CapacityType::Spot,
                    price: on_demand * (1.0 - discount),
                    available: true,
                    reservation: None,
                    partition: None,
                });
            }
            for zone in ZONES {
                offerings.push(Offering {
                    zone: zone.to_string(),
                    capacity_type: CapacityType::OnDemand,
                    price: on_demand,
                    available: true,
                    reservation: None,
                    partition: None,
                });
            }
            let name = format!("fake-it-{i}");
            // Upstream marks types over 4 vCPU and 8Gi as "large", the rest "small".
            let size = if vcpu > 4 && memory_bytes > 8 * (1 << 30) {
                "large"
            } else {
                "small"
            };
            let type_labels: BTreeMap<String, String> = [
                (labels::INSTANCE_TYPE, name.clone()),
                (labels::ARCH, "amd64".to_string()),
                (labels::OS, "linux".to_string()),
                (labels::INSTANCE_CPU, vcpu.to_string()),
                (labels::INSTANCE_MEMORY, (memory_bytes >> 20).to_string()),
                (labels::INSTANCE_SIZE, size.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            InstanceType {
                name,
                labels: type_labels,
                capacity: Resources {
                    cpu: vcpu * 1000,
                    memory: memory_bytes * 1000,
                    pods: vcpu * 10 * 1000,
                    // Upstream's fake types have no ephemeral storage; a default root volume
                    // keeps pods that request some schedulable.
                    ephemeral_storage: DEFAULT_ROOT_VOLUME_BYTES * 1000,
                    extended: Vec::new(),
                },
                overhead: Resources {
                    cpu: 100,
                    memory: mib_to_milli(10),
                    ..Default::default()
                },
                offerings,
            }
        })
        .collect();
    Catalog { instance_types }
}
