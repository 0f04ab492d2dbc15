//! User data for the nodes a NodeClass launches, one bootstrap format per AMI family
//! (upstream `pkg/providers/amifamily/bootstrap`):
//!
//! - AL2023 boots with nodeadm, which reads a MIME multi-part document whose
//!   `application/node.eks.aws` part is a NodeConfig (`nodeadm.go`): the cluster's
//!   endpoint, CA and service CIDR, the EC2NodeClass's kubelet settings as kubelet config,
//!   and the NodeClaim's labels and taints as kubelet flags;
//! - AL2 runs `/etc/eks/bootstrap.sh` from a shell part of a MIME document
//!   ([`eks_bootstrap`]);
//! - Bottlerocket reads TOML settings, Karpenter's merged over the user's
//!   ([`bottlerocket`]);
//! - Windows runs `Start-EKSBootstrap.ps1` from a PowerShell block ([`windows`]);
//! - Custom passes the user's `userData` through as it is.
//!
//! Every family registers the node with its labels and taints, `karpenter.sh/unregistered`
//! among them. A user's `userData` is kept: its MIME parts (or the script, as a part) go
//! before Karpenter's for the MIME families, its settings under Karpenter's for
//! Bottlerocket, its script before the bootstrap call for Windows.

pub mod bottlerocket;
pub mod eks_bootstrap;
pub mod windows;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::api::duration::GoDuration;
use crate::api::ec2nodeclass::{AMIFamily, InstanceStorePolicy, KubeletConfiguration};
use crate::api::nodeclaim::Taint;

/// The MIME boundary upstream uses.
const BOUNDARY: &str = "//";

/// What the node must know about its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    pub name: String,
    pub endpoint: String,
    /// Base64 PEM of the API server's CA, as EKS's DescribeCluster gives it.
    pub ca_bundle: Option<String>,
    /// The service CIDR (nodeadm derives the cluster DNS address from it).
    pub cidr: Option<String>,
}

impl ClusterInfo {
    /// An IPv6 cluster: its service CIDR is IPv6 (upstream reads the IP family from the
    /// same network configuration of the cluster).
    pub fn ipv6(&self) -> bool {
        self.cidr.as_deref().is_some_and(|c| c.contains(':'))
    }
}

/// What every family's bootstrap is made of.
#[derive(Clone, Copy, Debug)]
pub struct Bootstrap<'a> {
    pub cluster: &'a ClusterInfo,
    pub kubelet: Option<&'a KubeletConfiguration>,
    pub labels: &'a BTreeMap<String, String>,
    /// The NodeClaim's taints; `karpenter.sh/unregistered` is added when missing.
    pub taints: &'a [Taint],
    /// The EC2NodeClass's `userData`.
    pub custom: Option<&'a str>,
    pub instance_store_policy: Option<InstanceStorePolicy>,
}

/// The user data a family's nodes boot with, or why it cannot be made (a Bottlerocket
/// `userData` that is not TOML, a MIME document that does not parse).
pub fn render(family: AMIFamily, b: &Bootstrap) -> Result<String, String> {
    let taints = registration_taints(b.taints);
    let b = Bootstrap {
        taints: &taints,
        ..*b
    };
    match family {
        AMIFamily::AL2023 => {
            let config = node_config(
                b.cluster,
                b.kubelet,
                b.labels,
                b.taints,
                b.instance_store_policy,
            );
            Ok(al2023(b.custom, &config))
        }
        AMIFamily::AL2 => eks_bootstrap::user_data(&b),
        AMIFamily::Bottlerocket => bottlerocket::user_data(&b),
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            Ok(windows::user_data(&b))
        }
        AMIFamily::Custom => Ok(b.custom.unwrap_or_default().to_string()),
    }
}

/// A duration as Go's `Duration.String` writes it ("1m30s", "2m0s", "1h0m0s"), which is
/// how upstream renders `evictionSoftGracePeriod`; text that is no duration stays as it is.
pub(crate) fn go_duration_string(text: &str) -> String {
    let Some(d) = GoDuration::parse(text).ok().and_then(|d| d.value()) else {
        return text.to_string();
    };
    if d.subsec_nanos() != 0 {
        return crate::api::duration::format_go(d);
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// Go's `%q` for the plain text labels and taints are made of.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `key=value:Effect`, or `key:Effect` without a value (`corev1.Taint.ToString`).
fn taint_string(t: &Taint) -> String {
    match &t.value {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect.as_str()),
        _ => format!("{}:{}", t.key, t.effect.as_str()),
    }
}

/// The kubelet flags AL2's bootstrap.sh and Windows' bootstrap script pass on, in
/// upstream's order (`Options.kubeletExtraArgs` in `bootstrap.go`); map entries sorted by
/// key, where upstream's order is Go's map order.
pub(crate) fn kubelet_extra_args(b: &Bootstrap) -> Vec<String> {
    let mut args = Vec::new();
    if !b.labels.is_empty() {
        let l: Vec<String> = b.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        args.push(format!("--node-labels={}", quoted(&l.join(","))));
    }
    let t: Vec<String> = b.taints.iter().map(taint_string).collect();
    args.push(format!("--register-with-taints={}", quoted(&t.join(","))));
    let Some(k) = b.kubelet else {
        return args;
    };
    let joined = |name: &str,
                  m: &Option<BTreeMap<String, String>>,
                  sep: &str,
                  f: &dyn Fn(&str) -> String| {
        m.as_ref().filter(|m| !m.is_empty()).map(|m| {
            let pairs: Vec<String> = m.iter().map(|(k, v)| format!("{k}{sep}{}", f(v))).collect();
            format!("{name}={}", quoted(&pairs.join(",")))
        })
    };
    let same = |v: &str| v.to_string();
    if let Some(n) = k.max_pods {
        args.push(format!("--max-pods={n}"));
    }
    if let Some(n) = k.pods_per_core {
        args.push(format!("--pods-per-core={n}"));
    }
    args.extend(joined("--system-reserved", &k.system_reserved, "=", &same));
    args.extend(joined("--kube-reserved", &k.kube_reserved, "=", &same));
    args.extend(joined("--eviction-hard", &k.eviction_hard, "<", &same));
    args.extend(joined("--eviction-soft", &k.eviction_soft, "<", &same));
    args.extend(joined(
        "--eviction-soft-grace-period",
        &k.eviction_soft_grace_period,
        "=",
        &go_duration_string,
    ));
    if let Some(n) = k.eviction_max_pod_grace_period {
        args.push(format!("--eviction-max-pod-grace-period={n}"));
    }
    if let Some(n) = k.image_gc_high_threshold_percent {
        args.push(format!("--image-gc-high-threshold={n}"));
    }
    if let Some(n) = k.image_gc_low_threshold_percent {
        args.push(format!("--image-gc-low-threshold={n}"));
    }
    if let Some(q) = k.cpu_cfs_quota {
        args.push(format!("--cpu-cfs-quota={q}"));
    }
    args
}

/// The kubelet `config` object of a NodeConfig: the NodeClass's kubelet settings, whose
/// field names are KubeletConfiguration's (the API type mirrors upstream's, which mirrors
/// the kubelet's), unset fields left out.
fn kubelet_config(k: &KubeletConfiguration) -> Map<String, Value> {
    match serde_json::to_value(k) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// The taints a node registers with: the NodeClaim's, plus `karpenter.sh/unregistered`
/// so no pod lands before registration synced the Node (upstream
/// `providers/amifamily/resolver.go` appends it for every family).
pub fn registration_taints(taints: &[Taint]) -> Vec<Taint> {
    let mut out = taints.to_vec();
    let unregistered = Taint::unregistered();
    if !out.iter().any(|t| t.matches(&unregistered)) {
        out.push(unregistered);
    }
    out
}

/// `--node-labels` and `--register-with-taints`, as upstream renders them.
fn kubelet_flags(labels: &BTreeMap<String, String>, taints: &[Taint]) -> Vec<String> {
    let mut flags = Vec::new();
    if !labels.is_empty() {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        flags.push(format!("--node-labels={}", l.join(",")));
    }
    if !taints.is_empty() {
        let t: Vec<String> = taints.iter().map(taint_string).collect();
        flags.push(format!("--register-with-taints={}", t.join(",")));
    }
    flags
}

/// The NodeConfig document (YAML is a superset of JSON; nodeadm reads either).
pub fn node_config(
    cluster: &ClusterInfo,
    kubelet: Option<&KubeletConfiguration>,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    instance_store_policy: Option<InstanceStorePolicy>,
) -> String {
    let mut c = Map::new();
    c.insert("name".into(), json!(cluster.name));
    c.insert("apiServerEndpoint".into(), json!(cluster.endpoint));
    if let Some(ca) = &cluster.ca_bundle {
        c.insert("certificateAuthority".into(), json!(ca));
    }
    if let Some(cidr) = &cluster.cidr {
        c.insert("cidr".into(), json!(cidr));
    }
    let mut kubelet_part = Map::new();
    let config = kubelet.map(kubelet_config).unwrap_or_default();
    if !config.is_empty() {
        kubelet_part.insert("config".into(), Value::Object(config));
    }
    let flags = kubelet_flags(labels, taints);
    if !flags.is_empty() {
        kubelet_part.insert("flags".into(), json!(flags));
    }
    let mut doc = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"cluster": c, "kubelet": kubelet_part},
    });
    // nodeadm stripes the instance store into one RAID0 array for the kubelet and
    // containerd.
    if instance_store_policy == Some(InstanceStorePolicy::RAID0) {
        doc["spec"]["instance"] = json!({"localStorage": {"strategy": "RAID0"}});
    }
    serde_norway::to_string(&doc).unwrap_or_else(|_| doc.to_string())
}

/// The parts of a user's MIME multi-part document (headers and body each), or `None` when
/// it is not one.
fn mime_parts(doc: &str) -> Option<Vec<String>> {
    let doc = doc.replace("\r\n", "\n");
    let (headers, body) = doc.split_once("\n\n")?;
    if !headers.to_ascii_lowercase().contains("mime-version") {
        return None;
    }
    let boundary = headers
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))?
        .lines()
        .next()?
        .trim()
        .trim_matches('"')
        .to_string();
    let delimiter = format!("--{boundary}");
    let parts = body
        .split(&delimiter)
        .skip(1)
        .take_while(|p| !p.starts_with("--"))
        .map(|p| p.trim_matches('\n').to_string())
        .filter(|p| !p.is_empty())
        .collect();
    Some(parts)
}

/// The MIME multi-part user data of an AL2023 node: the user's parts first (a MIME
/// document's parts as they are, a shell script as `text/x-shellscript`, anything else as
/// a NodeConfig), then Karpenter's NodeConfig, which nodeadm merges over them.
pub fn al2023(user: Option<&str>, node_config: &str) -> String {
    let mut parts = user_parts(user, "application/node.eks.aws");
    parts.push(format!(
        "Content-Type: application/node.eks.aws\n\n{}",
        node_config.trim_end()
    ));
    archive(parts)
}

/// A user's `userData` as MIME parts: a MIME document's parts as they are, a script as
/// `text/x-shellscript`, anything else as `otherwise`.
fn user_parts(user: Option<&str>, otherwise: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(user) = user.map(str::trim).filter(|u| !u.is_empty()) {
        match mime_parts(user) {
            Some(p) => parts.extend(p),
            None if user.starts_with("#!") || otherwise == SHELL => parts.push(format!(
                "Content-Type: {SHELL}; charset=\"us-ascii\"\n\n{user}"
            )),
            None => parts.push(format!("Content-Type: {otherwise}\n\n{user}")),
        }
    }
    parts
}

const SHELL: &str = "text/x-shellscript";

/// Parts (headers and body each) as one MIME multi-part document under upstream's
/// boundary.
fn archive(parts: Vec<String>) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        out.push_str(&format!("--{BOUNDARY}\n{p}\n\n"));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::nodeclaim::TaintEffect;

    /// A NodeClass with most kubelet settings set, a CA, labels, a taint and RAID0.
    fn inputs() -> (
        ClusterInfo,
        KubeletConfiguration,
        BTreeMap<String, String>,
        Vec<Taint>,
    ) {
        let cluster = ClusterInfo {
            name: "prod".into(),
            endpoint: "https://ABCD.gr7.eu-west-1.eks.amazonaws.com".into(),
            ca_bundle: Some("LS0tLS1CRUdJTi1DRVJU".into()),
            cidr: Some("10.100.0.0/16".into()),
        };
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let kubelet = KubeletConfiguration {
            cluster_dns: Some(vec!["10.100.0.10".into()]),
            max_pods: Some(58),
            pods_per_core: Some(4),
            system_reserved: map(&[("cpu", "100m"), ("memory", "100Mi")]),
            kube_reserved: map(&[("cpu", "200m"), ("ephemeral-storage", "1Gi")]),
            eviction_hard: map(&[("memory.available", "5%"), ("nodefs.available", "10%")]),
            eviction_soft: map(&[("memory.available", "10%")]),
            eviction_soft_grace_period: map(&[("memory.available", "90s")]),
            eviction_max_pod_grace_period: Some(60),
            image_gc_high_threshold_percent: Some(85),
            image_gc_low_threshold_percent: Some(80),
            cpu_cfs_quota: Some(true),
        };
        let labels = BTreeMap::from([
            ("karpenter.sh/nodepool".to_string(), "web".to_string()),
            ("team".to_string(), "checkout".to_string()),
        ]);
        let taints = vec![Taint {
            key: "dedicated".into(),
            value: Some("web".into()),
            effect: TaintEffect::NoSchedule,
            time_added: None,
        }];
        (cluster, kubelet, labels, taints)
    }

    /// Compares with `tests/fixtures/user-data/NAME` (`KT_UPDATE_GOLDEN=1` rewrites it).
    fn golden(name: &str, family: AMIFamily, custom: Option<&str>) -> String {
        let (cluster, kubelet, labels, taints) = inputs();
        let got = render(
            family,
            &Bootstrap {
                cluster: &cluster,
                kubelet: Some(&kubelet),
                labels: &labels,
                taints: &taints,
                custom,
                instance_store_policy: Some(InstanceStorePolicy::RAID0),
            },
        )
        .unwrap();
        let path = format!(
            "{}/tests/fixtures/user-data/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        if std::env::var_os("KT_UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            got, want,
            "{family:?} user data differs from {path}:\n{got}"
        );
        got
    }

    #[test]
    fn al2023_user_data_is_a_nodeadm_config_after_the_users_parts() {
        let ud = golden(
            "al2023.txt",
            AMIFamily::AL2023,
            Some("#!/bin/bash\necho 'before nodeadm'"),
        );
        assert!(ud.contains("strategy: RAID0"), "{ud}");
    }

    #[test]
    fn al2_user_data_runs_bootstrap_sh_with_the_kubelet_flags() {
        let ud = golden(
            "al2.txt",
            AMIFamily::AL2,
            Some("#!/bin/bash\necho 'before bootstrap'"),
        );
        assert!(ud.contains("--local-disks raid0"), "{ud}");
        assert!(
            ud.contains(r#"--register-with-taints="dedicated=web:NoSchedule,karpenter.sh/unregistered:NoExecute""#),
            "{ud}"
        );
        assert!(
            ud.contains(r#"--eviction-soft-grace-period="memory.available=1m30s""#),
            "{ud}"
        );
        // A custom MIME document's parts come first, under our boundary.
        let (cluster, kubelet, labels, taints) = inputs();
        let user = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-config\n\npackages: [jq]\n--B--\n";
        let b = Bootstrap {
            cluster: &cluster,
            kubelet: Some(&kubelet),
            labels: &labels,
            taints: &taints,
            custom: Some(user),
            instance_store_policy: None,
        };
        let ud = render(AMIFamily::AL2, &b).unwrap();
        let cloud_config = ud.find("text/cloud-config").unwrap();
        let bootstrap = ud.find("/etc/eks/bootstrap.sh").unwrap();
        assert!(cloud_config < bootstrap, "{ud}");
        assert!(!ud.contains("--local-disks"), "{ud}");
        let bad = Bootstrap {
            custom: Some("MIME-Version: 1.0\n\nno boundary"),
            ..b
        };
        assert!(render(AMIFamily::AL2, &bad).is_err());
    }

    #[test]
    fn bottlerocket_user_data_merges_karpenters_settings_over_the_users() {
        let user = r#"
[settings.kubernetes]
cluster-name = "someone-else"
cluster-certificate = "old"
max-pods = 10
allowed-unsafe-sysctls = ["net.core.somaxconn"]
not-a-bottlerocket-key = true
[settings.kubernetes.node-labels]
team = "payments"
owner = "ops"
[settings.kubernetes.node-taints]
old = ["x:NoSchedule"]
[settings.host-containers.admin]
enabled = true
[unrelated]
dropped = true
"#;
        let ud = golden("bottlerocket.toml", AMIFamily::Bottlerocket, Some(user));
        let v: toml::Table = ud.parse().unwrap();
        let k = &v["settings"]["kubernetes"];
        assert_eq!(k["cluster-name"].as_str(), Some("prod"));
        assert_eq!(
            k["cluster-certificate"].as_str(),
            Some("LS0tLS1CRUdJTi1DRVJU")
        );
        assert_eq!(k["max-pods"].as_integer(), Some(58));
        // The user's labels stay unless ours name the same key; taints are ours only.
        assert_eq!(k["node-labels"]["owner"].as_str(), Some("ops"));
        assert_eq!(k["node-labels"]["team"].as_str(), Some("checkout"));
        assert!(k["node-taints"].get("old").is_none());
        assert_eq!(
            k["node-taints"]["karpenter.sh/unregistered"][0].as_str(),
            Some(":NoExecute")
        );
        assert_eq!(
            k["allowed-unsafe-sysctls"][0].as_str(),
            Some("net.core.somaxconn")
        );
        assert!(k.get("not-a-bottlerocket-key").is_none());
        assert!(v.get("unrelated").is_none());
        assert_eq!(
            v["settings"]["host-containers"]["admin"]["enabled"].as_bool(),
            Some(true)
        );
        assert_eq!(
            v["settings"]["bootstrap-commands"]["000-mount-instance-storage"]["mode"].as_str(),
            Some("always")
        );
        let (cluster, kubelet, labels, taints) = inputs();
        let b = Bootstrap {
            cluster: &cluster,
            kubelet: Some(&kubelet),
            labels: &labels,
            taints: &taints,
            custom: Some("settings = ["),
            instance_store_policy: None,
        };
        let e = render(AMIFamily::Bottlerocket, &b).unwrap_err();
        assert!(e.contains("not Bottlerocket TOML"), "{e}");
    }

    #[test]
    fn windows_user_data_runs_the_eks_bootstrap_script_after_the_users() {
        let ud = golden(
            "windows.ps1",
            AMIFamily::Windows2022,
            Some("Write-Host 'before bootstrap'"),
        );
        let (cluster, kubelet, labels, taints) = inputs();
        for family in [AMIFamily::Windows2019, AMIFamily::Windows2025] {
            let b = Bootstrap {
                cluster: &cluster,
                kubelet: Some(&kubelet),
                labels: &labels,
                taints: &taints,
                custom: Some("Write-Host 'before bootstrap'"),
                instance_store_policy: Some(InstanceStorePolicy::RAID0),
            };
            assert_eq!(render(family, &b).unwrap(), ud, "{family:?}");
        }
    }

    #[test]
    fn go_durations_are_written_as_go_writes_them() {
        assert_eq!(go_duration_string("90s"), "1m30s");
        assert_eq!(go_duration_string("2m"), "2m0s");
        assert_eq!(go_duration_string("1h"), "1h0m0s");
        assert_eq!(go_duration_string("45s"), "45s");
        assert_eq!(go_duration_string("soon"), "soon");
    }

    #[test]
    fn nodeadm_config_carries_kubelet_settings_labels_and_taints() {
        let cluster = ClusterInfo {
            name: "prod".into(),
            endpoint: "https://api.example".into(),
            ca_bundle: Some("Q0E=".into()),
            cidr: Some("10.100.0.0/16".into()),
        };
        let kubelet = KubeletConfiguration {
            max_pods: Some(42),
            cluster_dns: Some(vec!["10.100.0.10".into()]),
            ..Default::default()
        };
        let labels = BTreeMap::from([("karpenter.sh/nodepool".to_string(), "web".to_string())]);
        let taints = vec![Taint {
            key: "dedicated".into(),
            value: Some("web".into()),
            effect: TaintEffect::NoSchedule,
            time_added: None,
        }];
        let doc = node_config(&cluster, Some(&kubelet), &labels, &taints, None);
        let v: Value = serde_norway::from_str(&doc).expect("YAML");
        assert_eq!(v["kind"], "NodeConfig");
        assert_eq!(
            v["spec"]["cluster"]["apiServerEndpoint"],
            "https://api.example"
        );
        assert_eq!(v["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert_eq!(v["spec"]["kubelet"]["config"]["maxPods"], 42);
        assert_eq!(
            v["spec"]["kubelet"]["config"]["clusterDNS"][0],
            "10.100.0.10"
        );
        assert_eq!(
            v["spec"]["kubelet"]["flags"],
            json!([
                "--node-labels=karpenter.sh/nodepool=web",
                "--register-with-taints=dedicated=web:NoSchedule"
            ])
        );
        let ud = al2023(Some("#!/bin/bash\necho hi"), &doc);
        assert!(
            ud.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"")
        );
        assert!(ud.ends_with("--//--\n"));
        assert_eq!(ud.matches("--//\n").count(), 2, "{ud}");
        assert!(ud.contains("text/x-shellscript"), "{ud}");
        // A user MIME document's parts are kept, under our boundary.
        let user = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUND\"\n\n--BOUND\nContent-Type: text/x-shellscript\n\necho one\n--BOUND--\n";
        let ud = al2023(Some(user), &doc);
        assert!(
            ud.contains("--//\nContent-Type: text/x-shellscript\n\necho one"),
            "{ud}"
        );
        assert!(!ud.contains("BOUND"), "{ud}");
    }
}
