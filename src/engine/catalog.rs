//! Instance types and their offerings: what the scheduler can launch, where, and at what price.
//!
//! The built-in catalog is real EC2 data for us-east-1 (specs from DescribeInstanceTypes,
//! AWS's published on-demand prices, spot prices derived by a documented rule; see
//! `scripts/gen_catalog.py` and the file's header), embedded in the binary so the engine
//! needs no I/O. Capacity and overhead follow the AWS provider's formulas
//! ([`overhead`]); synthetic catalogs mirror upstream's benchmark instance types.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::engine::resources::Resources;

mod builtin;
pub mod overhead;
mod synthetic;

pub use builtin::{
    CatalogError, CatalogHeader, RESOURCE_AMD_GPU, RESOURCE_AWS_NEURON, RESOURCE_AWS_NEURON_CORE,
    RESOURCE_EFA, RESOURCE_HABANA_GAUDI, RESOURCE_NVIDIA_GPU,
};
pub use synthetic::ZONES as SYNTHETIC_ZONES;

/// The built-in catalog file, embedded at compile time (the engine does no I/O).
const BUILTIN_JSON: &str = include_str!("../../data/catalog/us-east-1.json");

/// How an instance is paid for; NodePools select it with `karpenter.sh/capacity-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapacityType {
    Spot,
    OnDemand,
    Reserved,
}

impl CapacityType {
    pub const ALL: [CapacityType; 3] = [
        CapacityType::Spot,
        CapacityType::OnDemand,
        CapacityType::Reserved,
    ];

    /// The `karpenter.sh/capacity-type` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::Spot => crate::api::labels::CAPACITY_TYPE_SPOT,
            CapacityType::OnDemand => crate::api::labels::CAPACITY_TYPE_ON_DEMAND,
            CapacityType::Reserved => crate::api::labels::CAPACITY_TYPE_RESERVED,
        }
    }

    /// The inverse of [`CapacityType::as_str`]; `None` for values Karpenter does not know.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == value)
    }
}

/// Serialized as its label value (`spot`, `on-demand`, `reserved`), for the journal and
/// the console's JSON.
impl serde::Serialize for CapacityType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One way to get an instance type: a zone and capacity type at a price. `available` turns
/// false while an insufficient-capacity error keeps the offering out (upstream's
/// unavailable-offerings cache), so the scheduler skips it without losing the price.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: CapacityType,
    /// USD per hour.
    pub price: f64,
    pub available: bool,
    /// The capacity reservation a `reserved` offering launches into; `None` for every
    /// other offering. Each reservation is its own offering, as upstream's are, so two
    /// reservations of one type in one zone are two offerings.
    pub reservation: Option<Arc<Reservation>>,
    /// The placement group partition it launches into, for a NodeClass in a partition
    /// group (each offering is then offered once per partition); `None` otherwise.
    pub partition: Option<u32>,
}

pub use crate::engine::reservation::{Reservation, ReservationKind};

/// A launchable machine shape, as the scheduler sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    pub name: String,
    /// Single-valued well-known labels the node will carry: instance type, arch, os, region
    /// and the `karpenter.k8s.aws/instance-*` family. Zone and capacity type vary per
    /// offering and are not here.
    pub labels: BTreeMap<String, String>,
    /// What the kubelet will report as capacity (after the VM memory overhead).
    pub capacity: Resources,
    /// kube-reserved + system-reserved + eviction threshold: capacity minus allocatable.
    pub overhead: Resources,
    pub offerings: Vec<Offering>,
}

impl InstanceType {
    /// What pods can request on a node of this type: capacity minus overhead.
    pub fn allocatable(&self) -> Resources {
        let mut r = self.capacity.clone();
        r.sub(&self.overhead);
        r
    }

    /// The cheapest available offering that `accept` admits (e.g. a zone and capacity-type
    /// requirement); ties keep catalog order so the choice is stable.
    pub fn cheapest_offering(
        &self,
        mut accept: impl FnMut(&Offering) -> bool,
    ) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available && accept(o))
            .fold(None, |best: Option<&Offering>, o| match best {
                Some(b) if b.price <= o.price => Some(b),
                _ => Some(o),
            })
    }

    /// A label value, if the type carries the label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// The instance types a cloud can launch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    pub instance_types: Vec<InstanceType>,
}

fn builtin_parsed() -> &'static (CatalogHeader, Arc<Catalog>) {
    static BUILTIN: OnceLock<(CatalogHeader, Arc<Catalog>)> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        // The file is generated, checked in and covered by tests; failing here is a build
        // defect, not bad user input.
        let (header, catalog) =
            builtin::parse(BUILTIN_JSON).expect("embedded data/catalog/us-east-1.json is valid");
        (header, Arc::new(catalog))
    })
}

impl Catalog {
    /// The embedded us-east-1 catalog (parsed once per process, then cloned).
    pub fn builtin() -> Catalog {
        builtin_parsed().1.as_ref().clone()
    }

    /// The embedded catalog without a copy, for callers that only read it.
    pub fn builtin_shared() -> Arc<Catalog> {
        Arc::clone(&builtin_parsed().1)
    }

    /// Sources and generation date of the embedded catalog.
    pub fn builtin_header() -> &'static CatalogHeader {
        &builtin_parsed().0
    }

    /// Parses a catalog file in the built-in format (e.g. another region's).
    pub fn from_json(text: &str) -> Result<(CatalogHeader, Catalog), CatalogError> {
        builtin::parse(text)
    }

    /// [`Catalog::from_json`] with the operator's capacity options.
    pub fn from_json_with(
        text: &str,
        opts: &overhead::CapacityOptions,
    ) -> Result<(CatalogHeader, Catalog), CatalogError> {
        builtin::parse_with(text, opts)
    }

    /// `n` types shaped like upstream's benchmark (`fake.InstanceTypes(n)`); the seed only
    /// moves the per-zone spot discounts, so equal seeds give equal catalogs.
    pub fn synthetic(n: usize, seed: u64) -> Catalog {
        synthetic::generate(n, seed)
    }

    /// The instance type of that name.
    pub fn get(&self, name: &str) -> Option<&InstanceType> {
        self.instance_types.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::overhead::mib_to_milli;
    use super::*;
    use crate::api::labels;

    const GI: i64 = (1 << 30) * 1000;

    fn builtin_type(name: &str) -> InstanceType {
        Catalog::builtin_shared()
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing from the built-in catalog"))
    }

    #[test]
    fn m5_large_allocatable_matches_upstream_arithmetic() {
        // m5.large: 2 vCPU, 8192 MiB, 3 ENIs x 10 IPv4 -> max pods 3 * (10 - 1) + 2 = 29.
        // cpu: 2000m - kube-reserved (6% of 1000m = 60m, + 1% of 1000m = 10m) = 1930m.
        // memory: capacity 8192 - ceil(8192 * 0.075 = 614.4) = 7577 MiB;
        //   - kube-reserved 11 * 29 + 255 = 574 MiB - eviction 100 MiB = 6903 MiB.
        // ephemeral-storage: 20Gi - 1Gi kube-reserved - 10% of 20Gi (2Gi) = 17Gi.
        let t = builtin_type("m5.large");
        let a = t.allocatable();
        assert_eq!(a.cpu, 1930);
        assert_eq!(a.memory, mib_to_milli(6903));
        assert_eq!(a.pods, 29_000);
        assert_eq!(a.ephemeral_storage, 17 * GI);
        assert_eq!(t.capacity.memory, mib_to_milli(7577));
    }

    #[test]
    fn m5_xlarge_allocatable_matches_upstream_arithmetic() {
        // m5.xlarge: 4 vCPU, 16384 MiB, 4 ENIs x 15 IPv4 -> max pods 4 * 14 + 2 = 58.
        // cpu: 4000m - (60m + 10m + 0.5% of 2000m = 10m) = 3920m.
        // memory: 16384 - ceil(1228.8) = 15155 MiB; - (11 * 58 + 255 = 893) - 100 = 14162 MiB.
        let a = builtin_type("m5.xlarge").allocatable();
        assert_eq!(a.cpu, 3920);
        assert_eq!(a.memory, mib_to_milli(14162));
        assert_eq!(a.pods, 58_000);
        assert_eq!(a.ephemeral_storage, 17 * GI);
    }

    #[test]
    fn graviton_memory_loses_the_cma_reservation() {
        // m6g.large: (8192 - 64) = 8128 MiB; - ceil(8128 * 0.075 = 609.6) = 7518 MiB.
        let t = builtin_type("m6g.large");
        assert_eq!(t.capacity.memory, mib_to_milli(7518));
        assert_eq!(t.label(labels::ARCH), Some("arm64"));
    }

    #[test]
    fn every_builtin_type_has_a_priced_offering_and_labels() {
        let c = Catalog::builtin_shared();
        assert!(
            c.instance_types.len() > 500,
            "only {} types",
            c.instance_types.len()
        );
        for t in &c.instance_types {
            assert!(!t.offerings.is_empty(), "{} has no offering", t.name);
            assert!(
                t.offerings.iter().all(|o| o.price > 0.0),
                "{} has a free offering",
                t.name
            );
            assert!(t.cheapest_offering(|_| true).is_some(), "{}", t.name);
            assert_eq!(t.label(labels::INSTANCE_TYPE), Some(t.name.as_str()));
            assert_eq!(t.label(labels::OS), Some("linux"));
            for key in [
                labels::ARCH,
                labels::INSTANCE_CATEGORY,
                labels::INSTANCE_FAMILY,
                labels::INSTANCE_CPU,
            ] {
                assert!(t.label(key).is_some(), "{} lacks {key}", t.name);
            }
            let a = t.allocatable();
            assert!(
                a.cpu > 0 && a.memory > 0 && a.pods > 0,
                "{}: allocatable {a}",
                t.name
            );
        }
    }

    #[test]
    fn builtin_has_both_architectures_and_the_requested_families() {
        let c = Catalog::builtin_shared();
        let arm = c
            .instance_types
            .iter()
            .filter(|t| t.label(labels::ARCH) == Some("arm64"))
            .count();
        let amd = c
            .instance_types
            .iter()
            .filter(|t| t.label(labels::ARCH) == Some("amd64"))
            .count();
        assert!(arm > 50 && amd > 50, "arm64 {arm}, amd64 {amd}");
        for name in [
            "c7g.large",
            "m7i.large",
            "r6a.large",
            "t3.medium",
            "i4i.large",
            "x2gd.large",
            "z1d.large",
        ] {
            assert!(c.get(name).is_some(), "{name} missing");
        }
    }

    #[test]
    fn accelerators_become_extended_resources_and_labels() {
        let p4d = builtin_type("p4d.24xlarge");
        assert_eq!(p4d.capacity.get(RESOURCE_NVIDIA_GPU), 8000);
        assert_eq!(p4d.label(labels::INSTANCE_GPU_NAME), Some("a100"));
        assert_eq!(p4d.label(labels::INSTANCE_GPU_MANUFACTURER), Some("nvidia"));
        assert_eq!(p4d.label(labels::INSTANCE_GPU_COUNT), Some("8"));
        assert_eq!(p4d.label(labels::INSTANCE_LOCAL_NVME), Some("8000"));
        let inf2 = builtin_type("inf2.xlarge");
        assert_eq!(inf2.capacity.get(RESOURCE_AWS_NEURON), 1000);
        assert_eq!(inf2.capacity.get(RESOURCE_NVIDIA_GPU), 0);
        let m5 = builtin_type("m5.large");
        assert!(
            m5.capacity.extended.is_empty(),
            "{:?}",
            m5.capacity.extended
        );
    }

    #[test]
    fn spot_is_cheaper_than_on_demand_and_varies_by_zone() {
        let c = Catalog::builtin_shared();
        let mut varying = 0;
        let mut spot_types = 0;
        for t in &c.instance_types {
            let od = t.cheapest_offering(|o| o.capacity_type == CapacityType::OnDemand);
            let spots: Vec<f64> = t
                .offerings
                .iter()
                .filter(|o| o.capacity_type == CapacityType::Spot)
                .map(|o| o.price)
                .collect();
            if let Some(od) = od {
                assert!(
                    spots.iter().all(|s| *s < od.price),
                    "{}: spot not below {}",
                    t.name,
                    od.price
                );
            }
            if !spots.is_empty() {
                spot_types += 1;
            }
            if spots.windows(2).any(|w| w[0] != w[1]) {
                varying += 1;
            }
        }
        assert!(spot_types > 500, "only {spot_types} types offer spot");
        assert!(
            varying > spot_types / 2,
            "only {varying} of {spot_types} vary by zone"
        );
        // The spot offering of m5.large is the cheapest overall.
        let m5 = builtin_type("m5.large");
        let cheapest = m5.cheapest_offering(|_| true).map(|o| o.capacity_type);
        assert_eq!(cheapest, Some(CapacityType::Spot));
    }

    #[test]
    fn cheapest_offering_skips_unavailable_and_rejected_offerings() {
        let mut t = builtin_type("m5.large");
        let best = t
            .cheapest_offering(|_| true)
            .map(|o| (o.zone.clone(), o.capacity_type));
        let (zone, ct) = best.clone().expect("m5.large has offerings");
        for o in t
            .offerings
            .iter_mut()
            .filter(|o| o.zone == zone && o.capacity_type == ct)
        {
            o.available = false;
        }
        let next = t
            .cheapest_offering(|_| true)
            .map(|o| (o.zone.clone(), o.capacity_type));
        assert_ne!(next, best);
        let od = t.cheapest_offering(|o| o.capacity_type == CapacityType::OnDemand);
        assert_eq!(od.map(|o| o.price), Some(0.096));
        assert!(t.cheapest_offering(|o| o.zone == "nowhere").is_none());
    }

    #[test]
    fn header_names_its_sources() {
        let h = Catalog::builtin_header();
        assert_eq!(h.region, "us-east-1");
        assert!(!h.generated.is_empty());
        let source = |k: &str| h.sources.get(k).map(String::as_str).unwrap_or_default();
        assert!(source("instance_types").contains("moto"), "{h:?}");
        assert!(
            source("on_demand_prices").contains("ec2-on-demand-prices.csv"),
            "{h:?}"
        );
        assert!(source("spot_prices").contains("sha256"), "{h:?}");
    }

    #[test]
    fn capacity_type_round_trips_its_label_value() {
        for c in CapacityType::ALL {
            assert_eq!(CapacityType::parse(c.as_str()), Some(c));
        }
        assert_eq!(CapacityType::OnDemand.as_str(), "on-demand");
        assert_eq!(CapacityType::parse("preemptible"), None);
    }

    #[test]
    fn synthetic_is_deterministic_with_prices_growing_with_size() {
        let a = Catalog::synthetic(400, 7);
        assert_eq!(a, Catalog::synthetic(400, 7));
        assert_eq!(a.instance_types.len(), 400);
        let cheapest = |t: &InstanceType, ct: CapacityType| {
            t.cheapest_offering(|o| o.capacity_type == ct)
                .map(|o| o.price)
                .unwrap_or(f64::NAN)
        };
        for w in a.instance_types.windows(2) {
            for ct in [CapacityType::Spot, CapacityType::OnDemand] {
                assert!(
                    cheapest(&w[0], ct) < cheapest(&w[1], ct),
                    "{} vs {}",
                    w[0].name,
                    w[1].name
                );
            }
            assert!(w[0].capacity.cpu < w[1].capacity.cpu);
        }
        // Upstream shape: type i has i+1 vCPU, 2(i+1) GiB, 10(i+1) pods.
        let t9 = a
            .get("fake-it-9")
            .cloned()
            .unwrap_or_else(|| panic!("fake-it-9 missing"));
        assert_eq!(
            (t9.capacity.cpu, t9.capacity.memory, t9.capacity.pods),
            (10_000, 20 * GI, 100_000)
        );
        let zones: std::collections::BTreeSet<&str> =
            t9.offerings.iter().map(|o| o.zone.as_str()).collect();
        assert_eq!(zones.into_iter().collect::<Vec<_>>(), SYNTHETIC_ZONES);
        // The seed moves spot prices, nothing else.
        let b = Catalog::synthetic(400, 8);
        assert_ne!(a, b);
        assert_eq!(
            cheapest(&a.instance_types[3], CapacityType::OnDemand),
            cheapest(&b.instance_types[3], CapacityType::OnDemand)
        );
    }
}
