//! Instance types and offerings from EC2: DescribeInstanceTypes, DescribeInstanceTypeOfferings
//! per zone and DescribeSpotPriceHistory, turned into the crate's [`Catalog`].
//!
//! The conversion renders each type as a record of the built-in catalog's file format
//! (`data/catalog/<region>.json`, see `scripts/gen_catalog.py`, whose `labels_for` and
//! `entry_for` this ports) and parses it with [`Catalog::from_json`], so live and built-in
//! instance types share one path to capacity, overhead and labels (upstream
//! `pkg/providers/instancetype/types.go`). On-demand prices come from the built-in table
//! (AWS's published prices; upstream ships the same static table as its fallback); spot
//! prices are the newest DescribeSpotPriceHistory entry per type and zone.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Filter, InstanceTypeInfo, LocationType};
use serde_json::{Map, Value, json};

use super::sdk_error;
use crate::cloud::CloudError;
use crate::engine::catalog::{CapacityType, Catalog};

/// Upstream's instance type name scheme (`types.go` instanceTypeScheme):
/// category, optional size suffix, generation.
fn name_scheme(name: &str) -> Option<(String, String)> {
    let bytes = name.as_bytes();
    let letters = bytes.iter().take_while(|b| b.is_ascii_lowercase()).count();
    if letters == 0 {
        return None;
    }
    let mut i = letters;
    // (\-[0-9]+tb)?
    if bytes.get(i) == Some(&b'-') {
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits > 0 && name[i + 1 + digits..].starts_with("tb") {
            i += 1 + digits + 2;
        }
    }
    let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || !name[i + digits..].contains('.') {
        return None;
    }
    Some((name[..letters].to_string(), name[i..i + digits].to_string()))
}

fn kebab(s: &str) -> String {
    s.replace(' ', "-").to_lowercase()
}

/// The `karpenter.k8s.aws/instance-*` labels (short keys) of a type: `labels_for`.
fn labels_for(name: &str, info: &InstanceTypeInfo) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        l.insert(k.to_string(), v);
    };
    if let Some((category, generation)) = name_scheme(name) {
        put("category", category);
        put("generation", generation);
    }
    let parts: Vec<&str> = name.split('.').collect();
    if let [family, size] = parts.as_slice() {
        put("family", family.to_string());
        put("size", size.to_string());
    }
    put("capability-flex", parts[0].contains("-flex").to_string());
    let vcpus = info
        .v_cpu_info()
        .and_then(|v| v.default_v_cpus())
        .unwrap_or(0);
    put("cpu", vcpus.to_string());
    let mem = info
        .memory_info()
        .and_then(|m| m.size_in_mib())
        .unwrap_or(0);
    put("memory", mem.to_string());
    put(
        "hypervisor",
        info.hypervisor()
            .map(|h| h.as_str().to_string())
            .unwrap_or_default(),
    );
    if let Some(net) = info.network_info() {
        put(
            "encryption-in-transit-supported",
            net.encryption_in_transit_supported()
                .unwrap_or(false)
                .to_string(),
        );
        let bandwidth: f64 = net
            .network_cards()
            .iter()
            .filter_map(|c| c.baseline_bandwidth_in_gbps())
            .sum();
        if bandwidth > 0.0 {
            put(
                "network-bandwidth",
                ((bandwidth * 1000.0).round() as i64).to_string(),
            );
        }
    }
    if let Some(s) = info.instance_storage_info()
        && s.nvme_support()
            .is_some_and(|n| n.as_str() != "unsupported")
        && let Some(gb) = s.total_size_in_gb()
    {
        put("local-nvme", gb.to_string());
    }
    let gpus = info.gpu_info().map(|g| g.gpus()).unwrap_or_default();
    if let [g] = gpus {
        put("gpu-name", kebab(g.name().unwrap_or_default()));
        put(
            "gpu-manufacturer",
            kebab(g.manufacturer().unwrap_or_default()),
        );
        put("gpu-count", g.count().unwrap_or(0).to_string());
        put(
            "gpu-memory",
            g.memory_info()
                .and_then(|m| m.size_in_mib())
                .unwrap_or(0)
                .to_string(),
        );
    }
    let neuron = info.neuron_info();
    let accels = info
        .inference_accelerator_info()
        .map(|a| a.accelerators())
        .unwrap_or_default();
    if let Some(n) = neuron {
        if let [d] = n.neuron_devices() {
            put("accelerator-name", kebab(d.name().unwrap_or_default()));
            put("accelerator-manufacturer", "aws".into());
            put("accelerator-count", d.count().unwrap_or(0).to_string());
        }
    } else if let [a] = accels {
        put("accelerator-name", kebab(a.name().unwrap_or_default()));
        put(
            "accelerator-manufacturer",
            kebab(a.manufacturer().unwrap_or_default()),
        );
        put("accelerator-count", a.count().unwrap_or(0).to_string());
    }
    if let Some(p) = info.processor_info() {
        put(
            "cpu-manufacturer",
            kebab(p.manufacturer().unwrap_or_default()),
        );
        if let Some(ghz) = p.sustained_clock_speed_in_ghz() {
            put(
                "cpu-sustained-clock-speed-mhz",
                ((ghz * 1000.0).round() as i64).to_string(),
            );
        }
    }
    if let Some(ebs) = info.ebs_info()
        && ebs
            .ebs_optimized_support()
            .is_some_and(|s| s.as_str() == "default")
        && let Some(mbps) = ebs
            .ebs_optimized_info()
            .and_then(|i| i.maximum_bandwidth_in_mbps())
    {
        put("ebs-bandwidth", mbps.to_string());
    }
    l
}

/// One record of the catalog file format for a type, or `None` when it cannot be launched
/// by a Linux node here (no supported architecture, no on-demand price, no zone).
fn record(
    info: &InstanceTypeInfo,
    on_demand: f64,
    zones: &BTreeSet<String>,
    spot: &BTreeMap<String, f64>,
    reserved_enis: i64,
) -> Option<Value> {
    let name = info.instance_type()?.as_str().to_string();
    let architectures: Vec<&str> = info
        .processor_info()
        .map(|p| {
            p.supported_architectures()
                .iter()
                .map(|a| a.as_str())
                .collect()
        })
        .unwrap_or_default();
    let arch = architectures.iter().find_map(|a| match *a {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    })?;
    if zones.is_empty() {
        return None;
    }
    let net = info.network_info()?;
    let card = net.default_network_card_index().unwrap_or(0);
    let enis = net
        .network_cards()
        .iter()
        .find(|c| c.network_card_index().unwrap_or(0) == card)
        .and_then(|c| c.maximum_network_interfaces())
        .or(net.maximum_network_interfaces())
        .unwrap_or(1) as i64;
    let ipv4 = net.ipv4_addresses_per_interface().unwrap_or(1) as i64;
    let usage: Vec<&str> = info
        .supported_usage_classes()
        .iter()
        .map(|u| u.as_str())
        .filter(|u| *u == "on-demand" || *u == "spot")
        .collect();
    let mut capacity_types = usage.clone();
    capacity_types.sort();
    let labels = labels_for(&name, info);
    let mut e = Map::new();
    e.insert("name".into(), json!(name));
    e.insert(
        "vcpu".into(),
        json!(
            info.v_cpu_info()
                .and_then(|v| v.default_v_cpus())
                .unwrap_or(0)
        ),
    );
    e.insert(
        "memory_mib".into(),
        json!(
            info.memory_info()
                .and_then(|m| m.size_in_mib())
                .unwrap_or(0)
        ),
    );
    e.insert("arch".into(), json!(arch));
    e.insert("architectures".into(), json!(architectures));
    // Upstream ENILimitedPods on the default network card, less the reserved ENIs.
    e.insert(
        "max_pods".into(),
        json!(crate::engine::catalog::overhead::eni_limited_pods(
            enis,
            ipv4,
            reserved_enis
        )),
    );
    let gpus = info.gpu_info().map(|g| g.gpus()).unwrap_or_default();
    if !gpus.is_empty() {
        let g: Vec<Value> = gpus
            .iter()
            .map(|g| {
                json!({"name": g.name(), "manufacturer": g.manufacturer(),
                       "count": g.count().unwrap_or(0)})
            })
            .collect();
        e.insert("gpus".into(), json!(g));
    }
    if let Some(n) = info.neuron_info() {
        let devices = n.neuron_devices();
        let count: i64 = devices.iter().map(|d| d.count().unwrap_or(0) as i64).sum();
        let cores: i64 = devices
            .iter()
            .map(|d| {
                d.count().unwrap_or(0) as i64
                    * d.core_info().and_then(|c| c.count()).unwrap_or(0) as i64
            })
            .sum();
        e.insert("neuron".into(), json!({"devices": count, "cores": cores}));
    }
    if let Some(efa) = net.efa_info().and_then(|e| e.maximum_efa_interfaces())
        && efa > 0
    {
        e.insert("efa".into(), json!(efa));
    }
    e.insert("labels".into(), json!(labels));
    e.insert("capacity_types".into(), json!(capacity_types));
    e.insert("on_demand".into(), json!(on_demand));
    e.insert("zones".into(), json!(zones));
    if usage.contains(&"spot") {
        let prices: BTreeMap<&String, f64> = zones
            .iter()
            .filter_map(|z| spot.get(z).map(|p| (z, *p)))
            .collect();
        e.insert("spot".into(), json!(prices));
    }
    Some(Value::Object(e))
}

/// Builds a catalog from EC2's answers. Types without an on-demand price in `prices` are
/// left out (the scheduler could not rank them), as are types offered in no zone.
pub fn catalog(
    region: &str,
    infos: &[InstanceTypeInfo],
    zones: &BTreeMap<String, BTreeSet<String>>,
    spot: &BTreeMap<(String, String), f64>,
    on_demand: &dyn Fn(&str) -> Option<f64>,
    opts: &crate::engine::catalog::overhead::CapacityOptions,
) -> Result<Catalog, CloudError> {
    let empty = BTreeSet::new();
    let records: Vec<Value> = infos
        .iter()
        .filter_map(|info| {
            let name = info.instance_type()?.as_str();
            let price = on_demand(name)?;
            let zones = zones.get(name).unwrap_or(&empty);
            let spot: BTreeMap<String, f64> = zones
                .iter()
                .filter_map(|z| {
                    spot.get(&(name.to_string(), z.clone()))
                        .map(|p| (z.clone(), *p))
                })
                .collect();
            record(info, price, zones, &spot, opts.reserved_enis)
        })
        .collect();
    let file = json!({
        "header": {"region": region, "generated": chrono::Utc::now().format("%Y-%m-%d").to_string(),
                   "sources": {"instance_types": "DescribeInstanceTypes",
                               "zones": "DescribeInstanceTypeOfferings",
                               "on_demand_prices": "built-in table",
                               "spot_prices": "DescribeSpotPriceHistory"}},
        "instance_types": records,
    });
    Catalog::from_json_with(&file.to_string(), opts)
        .map(|(_, c)| c)
        .map_err(|e| CloudError(format!("EC2 instance types: {e}")))
}

/// Every instance type's description (DescribeInstanceTypes, all pages).
pub async fn describe_types(
    ec2: &aws_sdk_ec2::Client,
) -> Result<Vec<InstanceTypeInfo>, CloudError> {
    let mut out = Vec::new();
    let mut pages = ec2
        .describe_instance_types()
        .max_results(100)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| sdk_error("DescribeInstanceTypes", e))?;
        out.extend(page.instance_types().iter().cloned());
    }
    Ok(out)
}

/// The zones each type is offered in (DescribeInstanceTypeOfferings by availability-zone).
pub async fn describe_offerings(
    ec2: &aws_sdk_ec2::Client,
) -> Result<BTreeMap<String, BTreeSet<String>>, CloudError> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut pages = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| sdk_error("DescribeInstanceTypeOfferings", e))?;
        for o in page.instance_type_offerings() {
            if let (Some(t), Some(z)) = (o.instance_type(), o.location()) {
                out.entry(t.as_str().to_string())
                    .or_default()
                    .insert(z.to_string());
            }
        }
    }
    Ok(out)
}

/// The newest Linux spot price per (type, zone) (DescribeSpotPriceHistory from now, which
/// answers each pair's current price, as upstream's pricing provider asks).
pub async fn describe_spot_prices(
    ec2: &aws_sdk_ec2::Client,
) -> Result<BTreeMap<(String, String), f64>, CloudError> {
    let mut newest: BTreeMap<(String, String), (i64, f64)> = BTreeMap::new();
    let mut pages = ec2
        .describe_spot_price_history()
        .product_descriptions("Linux/UNIX")
        .product_descriptions("Linux/UNIX (Amazon VPC)")
        .start_time(aws_sdk_ec2::primitives::DateTime::from_secs(
            chrono::Utc::now().timestamp(),
        ))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| sdk_error("DescribeSpotPriceHistory", e))?;
        for p in page.spot_price_history() {
            let (Some(t), Some(z), Some(price)) = (
                p.instance_type(),
                p.availability_zone(),
                p.spot_price().and_then(|s| s.parse::<f64>().ok()),
            ) else {
                continue;
            };
            if !(price.is_finite() && price > 0.0) {
                continue;
            }
            let at = p.timestamp().map(|t| t.secs()).unwrap_or(0);
            let key = (t.as_str().to_string(), z.to_string());
            if newest.get(&key).is_none_or(|(seen, _)| at >= *seen) {
                newest.insert(key, (at, price));
            }
        }
    }
    Ok(newest.into_iter().map(|(k, (_, p))| (k, p)).collect())
}

/// On-demand prices of the built-in table.
pub fn builtin_on_demand() -> BTreeMap<String, f64> {
    Catalog::builtin_shared()
        .instance_types
        .iter()
        .filter_map(|t| {
            t.offerings
                .iter()
                .find(|o| o.capacity_type == CapacityType::OnDemand)
                .map(|o| (t.name.clone(), o.price))
        })
        .collect()
}

/// A filter for the describe calls.
pub fn filter(name: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Filter {
    let mut f = Filter::builder().name(name);
    for v in values {
        f = f.values(v);
    }
    f.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_scheme_matches_upstreams_regex() {
        assert_eq!(name_scheme("m5.large"), Some(("m".into(), "5".into())));
        assert_eq!(name_scheme("c7gn.xlarge"), Some(("c".into(), "7".into())));
        assert_eq!(
            name_scheme("u-12tb1.112xlarge"),
            Some(("u".into(), "1".into()))
        );
        assert_eq!(
            name_scheme("mac2-m2.metal"),
            Some(("mac".into(), "2".into()))
        );
        assert_eq!(name_scheme("nonsense"), None);
    }
}
