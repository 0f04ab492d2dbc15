//! The workload of Karpenter's own scheduling benchmark
//! (`scheduling_benchmark_test.go`, `makeDiversePods`): pods split evenly into generic,
//! zonal topology spread, hostname topology spread, zonal self-affinity and hostname
//! self-anti-affinity, with CPU and memory drawn from fixed sets by a seeded generator, so
//! our numbers and upstream's describe the same problem. Pure and deterministic.

use std::collections::BTreeMap;

use crate::api::labels;
use crate::engine::pod::{AffinityTerm, Pod, SpreadConstraint};
use crate::engine::resources::{Resources, parse_milli};
use crate::engine::selector::Selector;

const CPUS: [&str; 5] = ["100m", "250m", "500m", "1", "1.5"];
const MEMORIES: [&str; 6] = ["100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"];
/// Distinct label values per category: pods of one value form one deployment-like group.
const GROUPS: u64 = 10;

/// A small, well-mixed deterministic generator (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The five pod shapes of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Generic,
    ZonalSpread,
    HostnameSpread,
    ZonalAffinity,
    HostnameAntiAffinity,
}

impl Shape {
    const ALL: [Shape; 5] = [
        Shape::Generic,
        Shape::ZonalSpread,
        Shape::HostnameSpread,
        Shape::ZonalAffinity,
        Shape::HostnameAntiAffinity,
    ];

    fn name(self) -> &'static str {
        match self {
            Shape::Generic => "generic",
            Shape::ZonalSpread => "zonal-spread",
            Shape::HostnameSpread => "hostname-spread",
            Shape::ZonalAffinity => "zonal-affinity",
            Shape::HostnameAntiAffinity => "hostname-anti-affinity",
        }
    }
}

/// `n` pods: n/5 of each shape, the remainder generic.
pub fn diverse_pods(n: usize, seed: u64) -> Vec<Pod> {
    let mut rng = Rng::new(seed);
    let per = n / 5;
    let mut pods = Vec::with_capacity(n);
    for shape in Shape::ALL {
        for _ in 0..per {
            pods.push(make(shape, pods.len(), &mut rng));
        }
    }
    while pods.len() < n {
        pods.push(make(Shape::Generic, pods.len(), &mut rng));
    }
    pods
}

fn make(shape: Shape, i: usize, rng: &mut Rng) -> Pod {
    let cpu = parse_milli(CPUS[rng.below(CPUS.len() as u64) as usize]).unwrap_or(1000);
    let mem = parse_milli(MEMORIES[rng.below(MEMORIES.len() as u64) as usize]).unwrap_or(1 << 40);
    let requests = Resources {
        cpu,
        memory: mem,
        ..Default::default()
    };
    let mut p = Pod::new("bench", &format!("{}-{i:06}", shape.name()), requests);
    let app = format!("{}-{}", shape.name(), rng.below(GROUPS));
    p.labels = BTreeMap::from([("app".to_string(), app)]);
    let selector = Selector::from_labels(&p.labels);
    let spread = |key: &str| SpreadConstraint {
        max_skew: 1,
        topology_key: key.to_string(),
        hard: true,
        selector: selector.clone(),
        min_domains: None,
        honor_node_affinity: true,
        honor_node_taints: false,
        match_label_keys: Vec::new(),
    };
    let term = |key: &str| AffinityTerm {
        selector: selector.clone(),
        namespaces: Vec::new(),
        topology_key: key.to_string(),
        weight: 0,
    };
    match shape {
        Shape::Generic => {}
        Shape::ZonalSpread => p.spread.push(spread(labels::ZONE)),
        Shape::HostnameSpread => p.spread.push(spread(labels::HOSTNAME)),
        Shape::ZonalAffinity => p.affinity.push(term(labels::ZONE)),
        Shape::HostnameAntiAffinity => p.anti_affinity.push(term(labels::HOSTNAME)),
    }
    p
}

/// Node count of a straightforward first-fit-decreasing over bins the size of the
/// largest instance type, honouring the hostname rules (at most one pod of a hostname
/// anti-affinity or hostname spread group per node) and ignoring zones: the baseline the
/// scheduler's node count is compared against.
pub fn first_fit_decreasing_nodes(pods: &[Pod], bin: &Resources) -> usize {
    let mut order: Vec<&Pod> = pods.iter().collect();
    order.sort_by(|a, b| {
        b.requests
            .cpu
            .cmp(&a.requests.cpu)
            .then_with(|| b.requests.memory.cmp(&a.requests.memory))
    });
    let exclusive = |p: &Pod| {
        (!p.anti_affinity.is_empty() || p.spread.iter().any(|s| s.topology_key == labels::HOSTNAME))
            .then(|| p.labels.get("app").cloned())
            .flatten()
    };
    let mut bins: Vec<(Resources, Vec<String>)> = Vec::new();
    'pods: for p in order {
        let group = exclusive(p);
        for (used, groups) in bins.iter_mut() {
            let mut next = used.clone();
            next.add(&p.requests);
            if next.fits_in(bin) && group.as_ref().is_none_or(|g| !groups.contains(g)) {
                *used = next;
                groups.extend(group);
                continue 'pods;
            }
        }
        bins.push((p.requests.clone(), group.into_iter().collect()));
    }
    bins.len()
}
