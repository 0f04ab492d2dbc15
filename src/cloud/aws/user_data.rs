//! User data for the nodes a NodeClass launches. AL2023 boots with nodeadm, which reads a
//! MIME multi-part document whose `application/node.eks.aws` part is a NodeConfig
//! (upstream `pkg/providers/amifamily/bootstrap/nodeadm.go`): the cluster's endpoint, CA
//! and service CIDR, the EC2NodeClass's kubelet settings as kubelet config, and the
//! NodeClaim's labels and taints as kubelet flags. A user-supplied `userData` (a NodeConfig
//! or any MIME part) is kept as its own part before Karpenter's, as upstream merges it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::api::ec2nodeclass::KubeletConfiguration;
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
        let t: Vec<String> = taints
            .iter()
            .map(|t| match &t.value {
                Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect.as_str()),
                _ => format!("{}:{}", t.key, t.effect.as_str()),
            })
            .collect();
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
    let doc = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"cluster": c, "kubelet": kubelet_part},
    });
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
    let mut parts: Vec<String> = Vec::new();
    if let Some(user) = user.map(str::trim).filter(|u| !u.is_empty()) {
        match mime_parts(user) {
            Some(p) => parts.extend(p),
            None if user.starts_with("#!") => parts.push(format!(
                "Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{user}"
            )),
            None => parts.push(format!("Content-Type: application/node.eks.aws\n\n{user}")),
        }
    }
    parts.push(format!(
        "Content-Type: application/node.eks.aws\n\n{}",
        node_config.trim_end()
    ));
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
        let doc = node_config(&cluster, Some(&kubelet), &labels, &taints);
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
