//! `spec.kubelet` of an EC2NodeClass: the CEL rules on `KubeletConfiguration` and the value
//! patterns the AWS provider's `hack/validation/kubelet.sh` adds to the CRD.

use std::collections::BTreeMap;

use super::super::{Violations, key_path};
use crate::api::duration::GoDuration;
use crate::api::ec2nodeclass::KubeletConfiguration;
use crate::api::quantity::is_valid_quantity;

/// Resources kubeReserved and systemReserved may hold (upstream `SupportedReservedResources`).
const RESERVED_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];
/// Eviction signals the kubelet knows (upstream `SupportedEvictionSignals`).
const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

fn quoted(list: &[&str]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", items.join(","))
}

pub(crate) fn check(out: &mut Violations, base: &str, k: &KubeletConfiguration) {
    for (field, v) in [("maxPods", k.max_pods), ("podsPerCore", k.pods_per_core)] {
        if let Some(v) = v.filter(|v| *v < 0) {
            out.push(
                &format!("{base}.{field}"),
                format!("must not be negative, found {v}"),
            );
        }
    }
    for (field, map) in [
        ("systemReserved", &k.system_reserved),
        ("kubeReserved", &k.kube_reserved),
    ] {
        if let Some(map) = map {
            check_reserved(out, &format!("{base}.{field}"), field, map);
        }
    }
    for (field, map) in [
        ("evictionHard", &k.eviction_hard),
        ("evictionSoft", &k.eviction_soft),
    ] {
        if let Some(map) = map {
            check_signals(out, &format!("{base}.{field}"), field, map);
            for (key, v) in map {
                if !is_eviction_threshold(v) {
                    out.push(
                        &key_path(&format!("{base}.{field}"), key),
                        format!("invalid threshold {v:?}: expected a percentage such as 10% or a quantity such as 500Mi"),
                    );
                }
            }
        }
    }
    if let Some(map) = &k.eviction_soft_grace_period {
        let path = format!("{base}.evictionSoftGracePeriod");
        check_signals(out, &path, "evictionSoftGracePeriod", map);
        for (key, v) in map {
            if GoDuration::parse(v).ok().and_then(|d| d.value()).is_none() {
                out.push(
                    &key_path(&path, key),
                    format!("invalid duration {v:?}: expected e.g. 1m30s or 2m"),
                );
            }
        }
    }
    check_soft_pairs(out, base, k);
    check_image_gc(out, base, k);
}

fn check_reserved(out: &mut Violations, path: &str, field: &str, map: &BTreeMap<String, String>) {
    for (key, v) in map {
        let p = key_path(path, key);
        if !RESERVED_RESOURCES.contains(&key.as_str()) {
            out.push(
                &p,
                format!("valid keys for {field} are {}", quoted(RESERVED_RESOURCES)),
            );
        }
        if v.starts_with('-') {
            out.push(
                &p,
                format!("{field} value cannot be a negative resource quantity, found {v:?}"),
            );
        } else if !is_valid_quantity(v) {
            out.push(
                &p,
                format!("invalid quantity {v:?}: expected e.g. 100m, 1Gi or 1000"),
            );
        }
    }
}

fn check_signals(out: &mut Violations, path: &str, field: &str, map: &BTreeMap<String, String>) {
    for key in map.keys() {
        if !EVICTION_SIGNALS.contains(&key.as_str()) {
            out.push(
                &key_path(path, key),
                format!("valid keys for {field} are {}", quoted(EVICTION_SIGNALS)),
            );
        }
    }
}

/// `^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||QUANTITY)$`: a percentage, empty, or a quantity.
fn is_eviction_threshold(v: &str) -> bool {
    let Some(p) = v.strip_suffix('%') else {
        return v.is_empty() || is_valid_quantity(v);
    };
    let digits =
        |s: &str, max: usize| (1..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    let (int, frac) = match p.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (p, None),
    };
    if int == "100" {
        frac.is_none_or(|f| (1..=2).contains(&f.len()) && f.bytes().all(|b| b == b'0'))
    } else {
        digits(int, 2) && frac.is_none_or(|f| digits(f, 2))
    }
}

/// Every soft threshold needs a grace period and every grace period a threshold.
fn check_soft_pairs(out: &mut Violations, base: &str, k: &KubeletConfiguration) {
    let empty = BTreeMap::new();
    let soft = k.eviction_soft.as_ref().unwrap_or(&empty);
    let grace = k.eviction_soft_grace_period.as_ref().unwrap_or(&empty);
    for key in soft.keys().filter(|s| !grace.contains_key(*s)) {
        out.push(
            &key_path(&format!("{base}.evictionSoft"), key),
            format!("evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod: add evictionSoftGracePeriod[{key}]"),
        );
    }
    for key in grace.keys().filter(|g| !soft.contains_key(*g)) {
        out.push(
            &key_path(&format!("{base}.evictionSoftGracePeriod"), key),
            format!("evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft: add evictionSoft[{key}]"),
        );
    }
}

fn check_image_gc(out: &mut Violations, base: &str, k: &KubeletConfiguration) {
    let high = k.image_gc_high_threshold_percent;
    let low = k.image_gc_low_threshold_percent;
    for (field, v) in [
        ("imageGCHighThresholdPercent", high),
        ("imageGCLowThresholdPercent", low),
    ] {
        if let Some(v) = v.filter(|v| !(0..=100).contains(v)) {
            out.push(
                &format!("{base}.{field}"),
                format!("must be between 0 and 100, found {v}"),
            );
        }
    }
    if let (Some(h), Some(l)) = (high, low)
        && h <= l
    {
        out.push(
            &format!("{base}.imageGCHighThresholdPercent"),
            format!("imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent ({h} <= {l})"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::is_eviction_threshold;

    #[test]
    fn eviction_thresholds() {
        for ok in [
            "", "10%", "5.5%", "99.99%", "100%", "100.0%", "100.00%", "500Mi", "1Gi", "0",
        ] {
            assert!(is_eviction_threshold(ok), "{ok}");
        }
        for bad in [
            "%", "101%", "100.5%", "1.234%", "abc", "10 %", "123%", ".5%",
        ] {
            assert!(!is_eviction_threshold(bad), "{bad}");
        }
    }
}
