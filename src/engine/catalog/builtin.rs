//! The catalog file format (`data/catalog/<region>.json`, written by `scripts/gen_catalog.py`)
//! and its conversion into [`InstanceType`]s with upstream capacity and overhead.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

use super::overhead::{self, DEFAULT_ROOT_VOLUME_BYTES};
use super::{CapacityType, Catalog, InstanceType, Offering};
use crate::api::labels;
use crate::engine::resources::Resources;

/// Upstream extended resource names (AWS provider `pkg/apis/v1/labels.go`).
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
pub const RESOURCE_AWS_NEURON: &str = "aws.amazon.com/neuron";
pub const RESOURCE_AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";

/// Where a catalog file's numbers come from and when it was made, so the console can show
/// how old its prices are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct CatalogHeader {
    pub region: String,
    /// Generation date (YYYY-MM-DD).
    pub generated: String,
    /// Source of each kind of fact: instance_types, zones, on_demand_prices, spot_prices.
    pub sources: BTreeMap<String, String>,
    /// Prefix the file's short label keys stand for.
    #[serde(default = "default_label_prefix")]
    pub label_prefix: String,
}

fn default_label_prefix() -> String {
    "karpenter.k8s.aws/instance-".to_string()
}

/// Why a catalog file was rejected: the type and field at fault.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog is not valid JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),
    #[error("instance type {name:?}: {field}: {message}")]
    Invalid {
        name: String,
        field: &'static str,
        message: String,
    },
}

// The raw shapes borrow from the embedded text (no escapes in practice, `Cow` copes if
// there are) and read JSON objects as pair lists: parsing the built-in catalog allocates
// little beyond the final `InstanceType`s.
#[derive(Deserialize)]
struct RawFile<'a> {
    header: CatalogHeader,
    #[serde(borrow)]
    instance_types: Vec<RawType<'a>>,
}

#[derive(Deserialize)]
struct RawGpu<'a> {
    #[serde(borrow)]
    manufacturer: Cow<'a, str>,
    count: i64,
}

#[derive(Deserialize)]
struct RawNeuron {
    devices: i64,
    cores: i64,
}

#[derive(Deserialize)]
struct RawType<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    vcpu: i64,
    memory_mib: i64,
    #[serde(borrow)]
    arch: Cow<'a, str>,
    #[serde(default, borrow)]
    architectures: Vec<Cow<'a, str>>,
    max_pods: i64,
    #[serde(default, borrow)]
    gpus: Vec<RawGpu<'a>>,
    neuron: Option<RawNeuron>,
    #[serde(default)]
    efa: i64,
    #[serde(borrow, deserialize_with = "pairs")]
    labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    #[serde(borrow)]
    capacity_types: Vec<Cow<'a, str>>,
    on_demand: f64,
    #[serde(borrow)]
    zones: Vec<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "pairs")]
    spot: Vec<(Cow<'a, str>, f64)>,
}

/// Reads a JSON object as (key, value) pairs in file order, without building a map.
fn pairs<'de, D, V>(deserializer: D) -> Result<Vec<(Cow<'de, str>, V)>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Pairs<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Pairs<V> {
        type Value = Vec<(Cow<'de, str>, V)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some((k, v)) = map.next_entry::<Borrowed<'de>, V>()? {
                out.push((k.0, v));
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Pairs(std::marker::PhantomData))
}

/// A string key that borrows from the input when it can.
struct Borrowed<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Borrowed<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Cow::<'de, str>::deserialize(d).map(Borrowed)
    }
}

/// Parses a catalog file; every type must have a positive vCPU count, memory and price.
pub fn parse(text: &str) -> Result<(CatalogHeader, Catalog), CatalogError> {
    parse_with(text, &overhead::CapacityOptions::default())
}

/// [`parse`] with the operator's capacity options (the VM memory overhead; the file's
/// `max_pods` already counts only usable ENIs).
pub fn parse_with(
    text: &str,
    opts: &overhead::CapacityOptions,
) -> Result<(CatalogHeader, Catalog), CatalogError> {
    let raw: RawFile = serde_json::from_str(text)?;
    let region = raw.header.region.clone();
    let prefix = raw.header.label_prefix.clone();
    let instance_types = raw
        .instance_types
        .into_iter()
        .map(|t| convert(t, &region, &prefix, opts.vm_memory_overhead_percent))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((raw.header, Catalog { instance_types }))
}

fn invalid(name: &str, field: &'static str, message: impl Into<String>) -> CatalogError {
    CatalogError::Invalid {
        name: name.to_string(),
        field,
        message: message.into(),
    }
}

fn valid_price(p: f64) -> bool {
    p.is_finite() && p > 0.0
}

fn convert(
    t: RawType,
    region: &str,
    prefix: &str,
    vm_memory_overhead_percent: f64,
) -> Result<InstanceType, CatalogError> {
    if t.vcpu <= 0 {
        return Err(invalid(&t.name, "vcpu", "expected a positive count"));
    }
    if t.memory_mib <= 0 {
        return Err(invalid(&t.name, "memory_mib", "expected a positive size"));
    }
    if !valid_price(t.on_demand) {
        return Err(invalid(&t.name, "on_demand", "expected a positive price"));
    }
    if t.zones.is_empty() {
        return Err(invalid(&t.name, "zones", "expected at least one zone"));
    }
    let cpu = t.vcpu * 1000;
    // Upstream keys the Graviton CMA rule on the first reported architecture.
    let arm64_first = t
        .architectures
        .first()
        .map_or(t.arch == "arm64", |a| a == "arm64");
    let mut capacity = Resources {
        cpu,
        memory: overhead::mib_to_milli(overhead::capacity_memory_mib(
            t.memory_mib,
            arm64_first,
            vm_memory_overhead_percent,
        )),
        pods: t.max_pods * 1000,
        ephemeral_storage: DEFAULT_ROOT_VOLUME_BYTES * 1000,
        extended: Vec::new(),
    };
    for gpu in &t.gpus {
        let resource = match gpu.manufacturer.as_ref() {
            "NVIDIA" => RESOURCE_NVIDIA_GPU,
            "AMD" => RESOURCE_AMD_GPU,
            "Habana" => RESOURCE_HABANA_GAUDI,
            _ => continue,
        };
        capacity.add_named(resource, gpu.count * 1000);
    }
    if let Some(n) = &t.neuron {
        capacity.add_named(RESOURCE_AWS_NEURON, n.devices * 1000);
        capacity.add_named(RESOURCE_AWS_NEURON_CORE, n.cores * 1000);
    }
    capacity.add_named(RESOURCE_EFA, t.efa * 1000);
    let overhead = overhead::node_overhead(cpu, t.max_pods, DEFAULT_ROOT_VOLUME_BYTES);

    let mut type_labels: BTreeMap<String, String> = t
        .labels
        .into_iter()
        .map(|(k, v)| {
            let mut key = String::with_capacity(prefix.len() + k.len());
            key.push_str(prefix);
            key.push_str(&k);
            (key, v.into_owned())
        })
        .collect();
    let name = t.name.into_owned();
    type_labels.insert(labels::INSTANCE_TYPE.to_string(), name.clone());
    type_labels.insert(labels::ARCH.to_string(), t.arch.into_owned());
    type_labels.insert(labels::OS.to_string(), "linux".to_string());
    type_labels.insert(labels::REGION.to_string(), region.to_string());

    let on_demand = t
        .capacity_types
        .iter()
        .any(|c| c == CapacityType::OnDemand.as_str());
    let mut offerings = Vec::with_capacity(t.zones.len() * 2);
    for zone in t.zones {
        if let Some(&(_, price)) = t.spot.iter().find(|(z, _)| *z == zone) {
            if !valid_price(price) {
                return Err(invalid(
                    &name,
                    "spot",
                    format!("zone {zone}: expected a positive price"),
                ));
            }
            offerings.push(Offering {
                zone: zone.to_string(),
                capacity_type: CapacityType::Spot,
                price,
                available: true,
                reservation: None,
                partition: None,
            });
        }
        if on_demand {
            offerings.push(Offering {
                zone: zone.into_owned(),
                capacity_type: CapacityType::OnDemand,
                price: t.on_demand,
                available: true,
                reservation: None,
                partition: None,
            });
        }
    }
    Ok(InstanceType {
        name,
        labels: type_labels,
        capacity,
        overhead,
        offerings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_type(extra: &str) -> String {
        format!(
            r#"{{"header":{{"region":"r","generated":"d","sources":{{}}}},"instance_types":[
            {{"name":"x.large","vcpu":2,"memory_mib":4096,"arch":"amd64","max_pods":29,
              "labels":{{"family":"x"}},"capacity_types":["on-demand","spot"],
              "zones":["r-a","r-b"],"spot":{{"r-a":0.01}}{extra}}}]}}"#
        )
    }

    #[test]
    fn rejects_a_type_without_a_price_naming_it() {
        let err = parse(&one_type(r#","on_demand":0"#))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(r#"instance type "x.large": on_demand: expected a positive price"#)
        );
    }

    #[test]
    fn spot_only_where_the_file_prices_it() {
        let (_, c) = parse(&one_type(r#","on_demand":0.1"#)).expect("valid");
        let t = &c.instance_types[0];
        let kinds: Vec<(&str, CapacityType)> = t
            .offerings
            .iter()
            .map(|o| (o.zone.as_str(), o.capacity_type))
            .collect();
        assert_eq!(
            kinds,
            [
                ("r-a", CapacityType::Spot),
                ("r-a", CapacityType::OnDemand),
                ("r-b", CapacityType::OnDemand)
            ]
        );
        assert_eq!(
            t.labels.get(labels::INSTANCE_FAMILY).map(String::as_str),
            Some("x")
        );
        assert_eq!(t.labels.get(labels::REGION).map(String::as_str), Some("r"));
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        assert!(matches!(
            parse("{\"header\": 1}"),
            Err(CatalogError::Json(_))
        ));
    }
}
