//! Bottlerocket's user data (upstream `bootstrap/bottlerocket.go` and
//! `bottlerocketsettings.go`): TOML settings. The user's `userData` is read as TOML and
//! Karpenter's settings go over it: the cluster's name, endpoint and CA, the node's labels
//! (merged over the user's) and taints (replacing the user's), and the EC2NodeClass's
//! kubelet settings under Bottlerocket's names. Only the `settings` table is kept, and
//! under `settings.kubernetes` only the keys Bottlerocket knows (an unknown one would stop
//! the node from booting; it is dropped with a warning, as upstream drops it).

use toml::{Table, Value};

use super::{Bootstrap, go_duration_string};
use crate::api::ec2nodeclass::InstanceStorePolicy;

/// `settings.kubernetes` keys Bottlerocket accepts (upstream's `BottlerocketKubernetes`).
const KUBERNETES_KEYS: &[&str] = &[
    "api-server",
    "cloud-provider",
    "cluster-certificate",
    "cluster-name",
    "cluster-dns-ip",
    "credential-providers",
    "node-labels",
    "node-taints",
    "max-pods",
    "static-pods",
    "eviction-hard",
    "eviction-soft",
    "eviction-soft-grace-period",
    "eviction-max-pod-grace-period",
    "kube-reserved",
    "system-reserved",
    "allowed-unsafe-sysctls",
    "server-tls-bootstrap",
    "registry-qps",
    "registry-burst",
    "event-qps",
    "event-burst",
    "kube-api-qps",
    "kube-api-burst",
    "container-log-max-size",
    "container-log-max-files",
    "cpu-manager-policy",
    "cpu-manager-policy-options",
    "cpu-manager-reconcile-period",
    "memory-manager-policy",
    "topology-manager-scope",
    "topology-manager-policy",
    "topology-manager-policy-options",
    "image-gc-high-threshold-percent",
    "image-gc-low-threshold-percent",
    "ids-per-pod",
    "cpu-cfs-quota-enforced",
    "shutdown-grace-period",
    "shutdown-grace-period-for-critical-pods",
    "cluster-domain",
    "seccomp-default",
    "pod-pids-limit",
    "device-ownership-from-security-context",
    "single-process-oom-kill",
    "container-log-max-workers",
    "container-log-monitor-interval",
    "hostname-override-source",
    "log-level",
];

fn table_of(m: &std::collections::BTreeMap<String, String>, f: impl Fn(&str) -> String) -> Value {
    Value::Table(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::String(f(v))))
            .collect(),
    )
}

/// The TOML document, or why the user's is not one.
pub fn user_data(b: &Bootstrap) -> Result<String, String> {
    let user: Table = match b.custom.filter(|u| !u.trim().is_empty()) {
        Some(u) => u
            .parse()
            .map_err(|e| format!("userData is not Bottlerocket TOML: {e}"))?,
        None => Table::new(),
    };
    let mut settings = match user.get("settings") {
        Some(Value::Table(t)) => t.clone(),
        Some(_) => return Err("userData: settings is not a table".into()),
        None => Table::new(),
    };
    let mut k = match settings.remove("kubernetes") {
        Some(Value::Table(t)) => t,
        Some(_) => return Err("userData: settings.kubernetes is not a table".into()),
        None => Table::new(),
    };
    let unknown: Vec<String> = k
        .keys()
        .filter(|key| !KUBERNETES_KEYS.contains(&key.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        tracing::warn!(
            "Bottlerocket userData: dropped settings.kubernetes keys Bottlerocket does not know: {}",
            unknown.join(", ")
        );
        k.retain(|key, _| KUBERNETES_KEYS.contains(&key));
    }
    let c = b.cluster;
    k.insert("cluster-name".into(), Value::String(c.name.clone()));
    k.insert("api-server".into(), Value::String(c.endpoint.clone()));
    // Set from the cluster, or unset: a CA in the user's settings does not outlive it.
    match &c.ca_bundle {
        Some(ca) => k.insert("cluster-certificate".into(), Value::String(ca.clone())),
        None => k.remove("cluster-certificate"),
    };
    let mut labels = match k.remove("node-labels") {
        Some(Value::Table(t)) => t,
        _ => Table::new(),
    };
    for (key, v) in b.labels {
        labels.insert(key.clone(), Value::String(v.clone()));
    }
    if !labels.is_empty() {
        k.insert("node-labels".into(), Value::Table(labels));
    }
    let mut taints = Table::new();
    for t in b.taints {
        let entry = format!("{}:{}", t.value.as_deref().unwrap_or(""), t.effect.as_str());
        match taints
            .entry(t.key.clone())
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            Value::Array(a) => a.push(Value::String(entry)),
            _ => unreachable!("node-taints entries are arrays"),
        }
    }
    k.insert("node-taints".into(), Value::Table(taints));
    if let Some(kl) = b.kubelet {
        let mut set = |key: &str, v: Option<Value>| {
            if let Some(v) = v {
                k.insert(key.into(), v);
            }
        };
        set("max-pods", kl.max_pods.map(|n| Value::Integer(n.into())));
        set(
            "cluster-dns-ip",
            kl.cluster_dns
                .as_ref()
                .and_then(|d| d.first())
                .map(|d| Value::String(d.clone())),
        );
        let same = |v: &str| v.to_string();
        set(
            "system-reserved",
            kl.system_reserved.as_ref().map(|m| table_of(m, same)),
        );
        set(
            "kube-reserved",
            kl.kube_reserved.as_ref().map(|m| table_of(m, same)),
        );
        set(
            "eviction-hard",
            kl.eviction_hard.as_ref().map(|m| table_of(m, same)),
        );
        set(
            "eviction-soft",
            kl.eviction_soft.as_ref().map(|m| table_of(m, same)),
        );
        set(
            "eviction-soft-grace-period",
            kl.eviction_soft_grace_period
                .as_ref()
                .map(|m| table_of(m, go_duration_string)),
        );
        set(
            "eviction-max-pod-grace-period",
            kl.eviction_max_pod_grace_period
                .map(|n| Value::Integer(n.into())),
        );
        // Bottlerocket takes the thresholds as strings.
        set(
            "image-gc-high-threshold-percent",
            kl.image_gc_high_threshold_percent
                .map(|n| Value::String(n.to_string())),
        );
        set(
            "image-gc-low-threshold-percent",
            kl.image_gc_low_threshold_percent
                .map(|n| Value::String(n.to_string())),
        );
        set(
            "cpu-cfs-quota-enforced",
            kl.cpu_cfs_quota.map(Value::Boolean),
        );
    }
    settings.insert("kubernetes".into(), Value::Table(k));
    if b.instance_store_policy == Some(InstanceStorePolicy::RAID0) {
        let mut commands = match settings.remove("bootstrap-commands") {
            Some(Value::Table(t)) => t,
            _ => Table::new(),
        };
        let words =
            |w: &[&str]| Value::Array(w.iter().map(|s| Value::String((*s).into())).collect());
        let mut mount = Table::new();
        mount.insert(
            "commands".into(),
            Value::Array(vec![
                words(&["apiclient", "ephemeral-storage", "init"]),
                words(&[
                    "apiclient",
                    "ephemeral-storage",
                    "bind",
                    "--dirs",
                    "/var/lib/containerd",
                    "/var/lib/kubelet",
                    "/var/log/pods",
                ]),
            ]),
        );
        mount.insert("mode".into(), Value::String("always".into()));
        mount.insert("essential".into(), Value::Boolean(true));
        commands.insert("000-mount-instance-storage".into(), Value::Table(mount));
        settings.insert("bootstrap-commands".into(), Value::Table(commands));
    }
    let mut doc = Table::new();
    doc.insert("settings".into(), Value::Table(settings));
    toml::to_string(&doc).map_err(|e| format!("writing Bottlerocket TOML: {e}"))
}
