//! EC2NodeClass rules about the instances themselves: IMDS options, kubelet settings and
//! block devices.

use super::ec2nodeclass::CLASS;
use super::{all_bad, all_ok};

#[test]
fn metadata_options() {
    let at = "spec.metadataOptions";
    all_ok(
        CLASS,
        &[
            ("httpPutResponseHopLimit: 2", "httpPutResponseHopLimit: 64"),
            ("httpTokens: required", "httpTokens: optional"),
            ("httpEndpoint: enabled", "httpEndpoint: disabled"),
        ],
    );
    all_bad(
        CLASS,
        &[
            (
                "httpEndpoint: enabled",
                "httpEndpoint: \"on\"",
                &format!("{at}.httpEndpoint"),
                "unsupported value \"on\": expected enabled or disabled",
            ),
            (
                "httpProtocolIPv6: disabled",
                "httpProtocolIPv6: off",
                &format!("{at}.httpProtocolIPv6"),
                "expected enabled or disabled",
            ),
            (
                "httpTokens: required",
                "httpTokens: always",
                &format!("{at}.httpTokens"),
                "expected required or optional",
            ),
            (
                "httpPutResponseHopLimit: 2",
                "httpPutResponseHopLimit: 0",
                &format!("{at}.httpPutResponseHopLimit"),
                "between 1 and 64, found 0",
            ),
            (
                "httpPutResponseHopLimit: 2",
                "httpPutResponseHopLimit: 65",
                &format!("{at}.httpPutResponseHopLimit"),
                "found 65",
            ),
        ],
    );
}

#[test]
fn kubelet() {
    let at = |f: &str| format!("spec.kubelet.{f}");
    all_ok(
        CLASS,
        &[
            (
                "imageGCLowThresholdPercent: 80",
                "imageGCLowThresholdPercent: 0",
            ),
            (
                "      cpu: 200m\n",
                "      cpu: 200m\n      pid: \"100\"\n      ephemeral-storage: 1Gi\n",
            ),
            ("memory.available: 5%", "nodefs.available: 10.5%"),
        ],
    );
    all_bad(
        CLASS,
        &[
            (
                "imageGCLowThresholdPercent: 80",
                "imageGCLowThresholdPercent: 90",
                &at("imageGCHighThresholdPercent"),
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent (85 <= 90)",
            ),
            (
                "imageGCLowThresholdPercent: 80",
                "imageGCLowThresholdPercent: 85",
                &at("imageGCHighThresholdPercent"),
                "(85 <= 85)",
            ),
            (
                "imageGCHighThresholdPercent: 85",
                "imageGCHighThresholdPercent: 101",
                &at("imageGCHighThresholdPercent"),
                "between 0 and 100, found 101",
            ),
            (
                "imageGCLowThresholdPercent: 80",
                "imageGCLowThresholdPercent: -1",
                &at("imageGCLowThresholdPercent"),
                "between 0 and 100, found -1",
            ),
            (
                "      cpu: 200m\n",
                "      gpu: \"1\"\n",
                &at("kubeReserved[gpu]"),
                "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",
            ),
            (
                "      cpu: 200m\n",
                "      cpu: -200m\n",
                &at("kubeReserved[cpu]"),
                "kubeReserved value cannot be a negative resource quantity",
            ),
            (
                "      memory: 100Mi\n",
                "      memory: lots\n",
                &at("systemReserved[memory]"),
                "invalid quantity \"lots\"",
            ),
            (
                "      cpu: 100m\n",
                "      cpus: 100m\n",
                &at("systemReserved[cpus]"),
                "valid keys for systemReserved",
            ),
            (
                "memory.available: 5%",
                "memory.free: 5%",
                &at("evictionHard[memory.free]"),
                "valid keys for evictionHard are ['memory.available',",
            ),
            (
                "memory.available: 5%",
                "memory.available: 150%",
                &at("evictionHard[memory.available]"),
                "invalid threshold \"150%\"",
            ),
            (
                "memory.available: 1m\n",
                "memory.available: soon\n",
                &at("evictionSoftGracePeriod[memory.available]"),
                "invalid duration \"soon\"",
            ),
            (
                "    evictionSoftGracePeriod:\n      memory.available: 1m\n",
                "",
                &at("evictionSoft[memory.available]"),
                "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
            ),
            (
                "      memory.available: 1m\n",
                "      memory.available: 1m\n      nodefs.available: 1m\n",
                &at("evictionSoftGracePeriod[nodefs.available]"),
                "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
            ),
            (
                "maxPods: 110",
                "maxPods: -1",
                &at("maxPods"),
                "must not be negative",
            ),
        ],
    );
}

#[test]
fn block_device_mappings() {
    let at = "spec.blockDeviceMappings";
    let second =
        |extra: &str| format!("        volumeType: gp3\n    - deviceName: /dev/xvdb\n{extra}");
    let v = "        volumeType: gp3\n";
    all_ok(
        CLASS,
        &[
            (v, &second("      ebs:\n        snapshotID: snap-0123\n")),
            (
                v,
                &second("      rootVolume: false\n      ebs:\n        volumeSize: 100Gi\n"),
            ),
        ],
    );
    let many = (0..50)
        .map(|i| format!("    - deviceName: /dev/xvd{i}\n"))
        .collect::<String>();
    all_bad(
        CLASS,
        &[
            (
                v,
                &second("      rootVolume: true\n      ebs:\n        volumeSize: 100Gi\n"),
                &format!("{at}[1].rootVolume"),
                "must have only one blockDeviceMappings with rootVolume (already set on spec.blockDeviceMappings[0])",
            ),
            (
                v,
                &second("      ebs:\n        volumeType: gp3\n"),
                &format!("{at}[1].ebs"),
                "snapshotID or volumeSize must be defined",
            ),
            (
                "volumeSize: 20Gi",
                "volumeSize: 20GB",
                &format!("{at}[0].ebs.volumeSize"),
                "invalid volumeSize \"20GB\": expected a whole number of Gi",
            ),
            (
                v,
                &format!("{v}{many}"),
                at,
                "at most 50 blockDeviceMappings are allowed, found 51",
            ),
        ],
    );
}
