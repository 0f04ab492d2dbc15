//! Node capacity and overhead by the AWS provider's formulas, so that the simulated
//! allocatable of a type matches what Karpenter assumes before a real node reports.
//!
//! Every rule mirrors `aws/karpenter-provider-aws` `pkg/providers/instancetype/types.go`
//! with the defaults of an AL2023 EC2NodeClass and no kubelet overrides: `memory()`,
//! `kubeReservedResources()`, `evictionThreshold()`, `ENILimitedPods()`, and the root volume
//! size `amifamily.DefaultEBS` (20Gi).

use crate::engine::resources::Resources;

/// Upstream option `--vm-memory-overhead-percent` (default 0.075): the share of the
/// advertised memory the hypervisor and firmware keep, unknown until a node reports.
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;

/// Upstream's options that change an instance type's capacity before any node of it
/// reports (AWS provider `pkg/operator/options`): `VM_MEMORY_OVERHEAD_PERCENT` and
/// `RESERVED_ENIS`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacityOptions {
    /// The share of advertised memory the hypervisor keeps (0.075).
    pub vm_memory_overhead_percent: f64,
    /// ENIs kept for other uses (VPC CNI custom networking): not counted toward max pods.
    pub reserved_enis: i64,
}

impl Default for CapacityOptions {
    fn default() -> Self {
        CapacityOptions {
            vm_memory_overhead_percent: VM_MEMORY_OVERHEAD_PERCENT,
            reserved_enis: 0,
        }
    }
}

/// Upstream `amifamily.DefaultEBS.VolumeSize` (20Gi), the AL2023 root volume: it is the
/// node's ephemeral storage unless the EC2NodeClass maps a bigger one.
pub const DEFAULT_ROOT_VOLUME_BYTES: i64 = 20 << 30;

/// Upstream `memory()`: Graviton (first architecture arm64) loses 64 MiB to the CMA
/// reservation, then the VM overhead share is taken off, rounded up to whole MiB.
pub fn capacity_memory_mib(advertised_mib: i64, arm64_first: bool, overhead_percent: f64) -> i64 {
    let mib = if arm64_first {
        advertised_mib - 64
    } else {
        advertised_mib
    };
    let bytes = mib as f64 * 1024.0 * 1024.0;
    // Same float expression as upstream, so the rounding agrees to the MiB.
    let overhead = (bytes * overhead_percent / 1024.0 / 1024.0).ceil() as i64;
    mib - overhead
}

/// Upstream `ENILimitedPods()`: the VPC CNI gives every pod a secondary IP of the default
/// network card; each ENI keeps one primary address, and two host-network pods are free.
/// Reserved ENIs (`RESERVED_ENIS`) give no pod an address.
pub fn eni_limited_pods(enis: i64, ipv4_per_eni: i64, reserved_enis: i64) -> i64 {
    let enis = enis - reserved_enis;
    if enis <= 0 {
        return 0;
    }
    enis * (ipv4_per_eni - 1) + 2
}

/// Upstream kube-reserved CPU (from Bottlerocket's table): 6% of the first core, 1% of the
/// second, 0.5% of cores 3-4 and 0.25% of the rest, each step truncated to a millicore.
pub fn kube_reserved_cpu_millis(cpu_millis: i64) -> i64 {
    const RANGES: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    RANGES
        .iter()
        .filter(|(start, _, _)| cpu_millis >= *start)
        .map(|&(start, end, pct)| {
            let span = if cpu_millis < end {
                cpu_millis - start
            } else {
                end - start
            };
            (span as f64 * pct) as i64
        })
        .sum()
}

/// Upstream `kubeReservedResources()` with no overrides: the CPU table above,
/// 11 MiB per pod + 255 MiB of memory, and 1Gi of ephemeral storage.
pub fn kube_reserved(cpu_millis: i64, max_pods: i64) -> Resources {
    Resources {
        cpu: kube_reserved_cpu_millis(cpu_millis),
        memory: mib_to_milli(11 * max_pods + 255),
        ephemeral_storage: (1 << 30) * 1000,
        ..Default::default()
    }
}

/// Upstream `evictionThreshold()` defaults: `memory.available` 100Mi and
/// `nodefs.available` 10% of the root volume (rounded up to a byte).
pub fn eviction_threshold(storage_bytes: i64) -> Resources {
    let nodefs = (storage_bytes as f64 / 100.0 * 10.0).ceil() as i64;
    Resources {
        memory: mib_to_milli(100),
        ephemeral_storage: nodefs * 1000,
        ..Default::default()
    }
}

/// kube-reserved + system-reserved (empty by default upstream) + eviction threshold: what
/// the kubelet withholds from pods, i.e. capacity minus allocatable.
pub fn node_overhead(cpu_millis: i64, max_pods: i64, storage_bytes: i64) -> Resources {
    let mut total = kube_reserved(cpu_millis, max_pods);
    total.add(&eviction_threshold(storage_bytes));
    total
}

/// MiB to the milli-bytes `Resources` holds.
pub fn mib_to_milli(mib: i64) -> i64 {
    mib * 1024 * 1024 * 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_reservation_follows_the_upstream_table() {
        // 1 core: 6% of 1000m = 60m.
        assert_eq!(kube_reserved_cpu_millis(1000), 60);
        // 2 cores: 60m + 1% of 1000m = 70m.
        assert_eq!(kube_reserved_cpu_millis(2000), 70);
        // 4 cores: 70m + 0.5% of 2000m = 80m.
        assert_eq!(kube_reserved_cpu_millis(4000), 80);
        // 96 cores: 80m + 0.25% of 92000m = 310m.
        assert_eq!(kube_reserved_cpu_millis(96_000), 310);
    }

    #[test]
    fn memory_capacity_loses_the_vm_share_and_graviton_cma() {
        // 8192 MiB * 7.5% = 614.4 -> 615 MiB.
        assert_eq!(
            capacity_memory_mib(8192, false, VM_MEMORY_OVERHEAD_PERCENT),
            7577
        );
        // arm64: (8192 - 64) = 8128; 8128 * 7.5% = 609.6 -> 610 MiB.
        assert_eq!(
            capacity_memory_mib(8192, true, VM_MEMORY_OVERHEAD_PERCENT),
            7518
        );
    }

    #[test]
    fn eni_formula() {
        assert_eq!(eni_limited_pods(3, 10, 0), 29);
        // RESERVED_ENIS=1 on an m5.large-like type: 2 usable ENIs of 10 addresses.
        assert_eq!(eni_limited_pods(3, 10, 1), 20);
        assert_eq!(eni_limited_pods(3, 10, 3), 0);
        // A 10% VM overhead takes 820 MiB of 8 GiB instead of 615.
        assert_eq!(capacity_memory_mib(8192, false, 0.1), 7372);
        assert_eq!(eni_limited_pods(4, 15, 0), 58);
        assert_eq!(eni_limited_pods(0, 15, 0), 0);
    }

    #[test]
    fn eviction_threshold_is_ten_percent_of_the_root_volume() {
        let e = eviction_threshold(DEFAULT_ROOT_VOLUME_BYTES);
        assert_eq!(e.ephemeral_storage, 2 * (1 << 30) * 1000);
        assert_eq!(e.memory, mib_to_milli(100));
    }
}
