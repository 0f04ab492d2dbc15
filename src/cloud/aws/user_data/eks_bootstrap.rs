//! AL2's user data (upstream `bootstrap/eksbootstrap.go`): a MIME multi-part document
//! whose last part is a shell script calling `/etc/eks/bootstrap.sh` with the cluster's
//! name, endpoint and CA, the cluster DNS address, and the kubelet's flags (labels,
//! taints and the EC2NodeClass's kubelet settings). The user's `userData` (a MIME
//! document's parts, or a script) goes first.

use super::{Bootstrap, SHELL, archive, kubelet_extra_args, user_parts};
use crate::api::ec2nodeclass::InstanceStorePolicy;

/// The bootstrap.sh script. bootstrap.sh reads its options space-separated, not with `=`.
pub fn script(b: &Bootstrap) -> String {
    let c = b.cluster;
    let mut s = String::from("#!/bin/bash -xe\n");
    s.push_str("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n");
    s.push_str(&format!(
        "/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}'",
        c.name, c.endpoint
    ));
    if let Some(ca) = &c.ca_bundle {
        s.push_str(&format!(" --b64-cluster-ca '{ca}'"));
    }
    let dns = b
        .kubelet
        .and_then(|k| k.cluster_dns.as_ref())
        .and_then(|d| d.first());
    // An IPv6 cluster DNS address means an IPv6 cluster.
    if dns.is_some_and(|d| d.parse::<std::net::Ipv6Addr>().is_ok()) {
        s.push_str(" \\\n--ip-family ipv6");
    }
    if let Some(d) = dns {
        s.push_str(&format!(" \\\n--dns-cluster-ip '{d}'"));
    }
    // An explicit maxPods replaces bootstrap.sh's ENI-based one.
    if b.kubelet.is_some_and(|k| k.max_pods.is_some()) {
        s.push_str(" \\\n--use-max-pods false");
    }
    let args = kubelet_extra_args(b);
    if !args.is_empty() {
        s.push_str(&format!(" \\\n--kubelet-extra-args '{}'", args.join(" ")));
    }
    if b.instance_store_policy == Some(InstanceStorePolicy::RAID0) {
        s.push_str(" \\\n--local-disks raid0");
    }
    s
}

/// The whole document: the user's parts, then the bootstrap script.
pub fn user_data(b: &Bootstrap) -> Result<String, String> {
    if let Some(u) = b.custom.map(str::trim)
        && (u.starts_with("MIME-Version:") || u.starts_with("Content-Type:"))
        && super::mime_parts(u).is_none()
    {
        return Err(
            "userData starts as a MIME document but is not a multipart one with a boundary".into(),
        );
    }
    let mut parts = user_parts(b.custom, SHELL);
    parts.push(format!(
        "Content-Type: {SHELL}; charset=\"us-ascii\"\n\n{}",
        script(b)
    ));
    Ok(archive(parts))
}
