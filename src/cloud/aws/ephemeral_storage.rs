//! How much ephemeral storage a node of a NodeClass has (upstream `ephemeralStorage` in
//! `pkg/providers/instancetype/types.go`): the instance store under
//! `instanceStorePolicy: RAID0` (striped into one array, it holds the kubelet's and
//! containerd's data), else the volume the NodeClass marks `rootVolume`, else the family's
//! data volume (`/dev/xvda` for AL2 and AL2023, `/dev/xvdb` for Bottlerocket, `/dev/sda1`
//! for Windows; the last mapping for Custom), else upstream's 20Gi.
//!
//! The built-in and live catalogs assume the 20Gi default; [`resize`] gives a type the
//! storage its NodeClass gives it, with the nodefs eviction threshold (10%) that follows.

use crate::api::ec2nodeclass::{AMIFamily, EC2NodeClassSpec, InstanceStorePolicy};
use crate::engine::catalog::InstanceType;
use crate::engine::catalog::overhead::{DEFAULT_ROOT_VOLUME_BYTES, eviction_threshold};
use crate::engine::resources::parse_milli;

/// The device each family keeps its pods' data on.
fn data_device(family: AMIFamily) -> Option<&'static str> {
    match family {
        AMIFamily::AL2 | AMIFamily::AL2023 => Some("/dev/xvda"),
        AMIFamily::Bottlerocket => Some("/dev/xvdb"),
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            Some("/dev/sda1")
        }
        AMIFamily::Custom => None,
    }
}

fn bytes(q: &crate::api::quantity::Quantity) -> Option<i64> {
    parse_milli(&q.0).ok().map(|m| m / 1000)
}

/// Bytes of ephemeral storage on a node of `spec` whose type has `instance_store_gb` of
/// instance store (EC2's `TotalSizeInGB`, decimal gigabytes).
pub fn bytes_for(spec: &EC2NodeClassSpec, instance_store_gb: Option<i64>) -> i64 {
    if spec.instance_store_policy == Some(InstanceStorePolicy::RAID0)
        && let Some(gb) = instance_store_gb
    {
        return gb * 1_000_000_000;
    }
    let family = spec.effective_ami_family().unwrap_or(AMIFamily::Custom);
    let size_of = |b: &crate::api::ec2nodeclass::BlockDeviceMapping| {
        b.ebs
            .as_ref()
            .and_then(|e| e.volume_size.as_ref())
            .and_then(bytes)
    };
    if let Some(mappings) = spec
        .block_device_mappings
        .as_ref()
        .filter(|m| !m.is_empty())
    {
        if let Some(size) = mappings
            .iter()
            .find(|b| b.root_volume == Some(true))
            .and_then(size_of)
        {
            return size;
        }
        let found = match data_device(family) {
            Some(device) => mappings
                .iter()
                .find(|b| b.device_name.as_deref() == Some(device))
                .and_then(size_of),
            None => mappings.last().and_then(size_of),
        };
        if let Some(size) = found {
            return size;
        }
    }
    DEFAULT_ROOT_VOLUME_BYTES
}

/// The type with `bytes` of ephemeral storage: its capacity, and its overhead's nodefs
/// eviction threshold, which is a share of it.
pub fn resize(it: &mut InstanceType, bytes: i64) {
    let old = eviction_threshold(DEFAULT_ROOT_VOLUME_BYTES).ephemeral_storage;
    let new = eviction_threshold(bytes).ephemeral_storage;
    it.capacity.ephemeral_storage = bytes * 1000;
    it.overhead.ephemeral_storage += new - old;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> EC2NodeClassSpec {
        serde_norway::from_str(&format!(
            "amiSelectorTerms:\n- alias: al2023@latest\nrole: R\nsubnetSelectorTerms:\n- id: subnet-1\nsecurityGroupSelectorTerms:\n- id: sg-1\n{yaml}"
        ))
        .unwrap()
    }

    const GI: i64 = 1 << 30;

    #[test]
    fn storage_follows_raid0_then_the_root_volume_then_the_familys_device() {
        // Nothing set: upstream's 20Gi.
        assert_eq!(bytes_for(&spec(""), Some(75)), 20 * GI);
        // RAID0: the instance store, in decimal gigabytes; without one, the volumes.
        let raid = spec("instanceStorePolicy: RAID0\n");
        assert_eq!(bytes_for(&raid, Some(75)), 75_000_000_000);
        assert_eq!(bytes_for(&raid, None), 20 * GI);
        // A volume marked rootVolume wins over the family's device.
        let root = spec(
            "blockDeviceMappings:\n- deviceName: /dev/xvda\n  ebs: {volumeSize: 50Gi}\n- deviceName: /dev/xvdc\n  rootVolume: true\n  ebs: {volumeSize: 200Gi}\n",
        );
        assert_eq!(bytes_for(&root, None), 200 * GI);
        let device = spec(
            "blockDeviceMappings:\n- deviceName: /dev/xvdc\n  ebs: {volumeSize: 300Gi}\n- deviceName: /dev/xvda\n  ebs: {volumeSize: 80Gi}\n",
        );
        assert_eq!(bytes_for(&device, None), 80 * GI);
        // Bottlerocket keeps data on /dev/xvdb; Custom takes the last mapping.
        let mut br = spec(
            "amiFamily: Bottlerocket\nblockDeviceMappings:\n- deviceName: /dev/xvda\n  ebs: {volumeSize: 4Gi}\n- deviceName: /dev/xvdb\n  ebs: {volumeSize: 120Gi}\n",
        );
        br.ami_selector_terms[0].alias = None;
        br.ami_selector_terms[0].id = Some("ami-1".into());
        assert_eq!(bytes_for(&br, None), 120 * GI);
        let mut custom = br.clone();
        custom.ami_family = Some(AMIFamily::Custom);
        assert_eq!(bytes_for(&custom, None), 120 * GI);
        custom.block_device_mappings.as_mut().unwrap().reverse();
        assert_eq!(bytes_for(&custom, None), 4 * GI);
    }

    #[test]
    fn a_resized_type_keeps_its_kube_reserved_and_moves_its_eviction_threshold() {
        let catalog = crate::engine::catalog::Catalog::builtin();
        let mut it = catalog.get("m5d.large").unwrap().clone();
        let before = it.allocatable().ephemeral_storage;
        assert_eq!(before, 17 * GI * 1000, "20Gi - 1Gi - 2Gi");
        resize(&mut it, 75_000_000_000);
        assert_eq!(it.capacity.ephemeral_storage, 75_000_000_000 * 1000);
        // 75G - 1Gi kube-reserved - 7.5G eviction threshold.
        assert_eq!(
            it.allocatable().ephemeral_storage,
            (75_000_000_000 - GI - 7_500_000_000) * 1000
        );
    }
}
