//! Windows' user data (upstream `bootstrap/windows.go`): one PowerShell block that runs
//! the user's script, then the EKS-optimized AMI's `Start-EKSBootstrap.ps1` with the
//! cluster's name, endpoint and CA, the kubelet's flags and the cluster DNS address.

use super::{Bootstrap, kubelet_extra_args};

pub fn user_data(b: &Bootstrap) -> String {
    let c = b.cluster;
    let mut s = String::from("<powershell>\n");
    if let Some(custom) = b.custom.filter(|u| !u.is_empty()) {
        s.push_str(custom);
        s.push('\n');
    }
    s.push_str(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n",
    );
    s.push_str(&format!(
        "& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}'",
        c.name, c.endpoint
    ));
    if let Some(ca) = &c.ca_bundle {
        s.push_str(&format!(" -Base64ClusterCA '{ca}'"));
    }
    let args = kubelet_extra_args(b);
    if !args.is_empty() {
        s.push_str(&format!(" -KubeletExtraArgs '{}'", args.join(" ")));
    }
    if let Some(d) = b
        .kubelet
        .and_then(|k| k.cluster_dns.as_ref())
        .and_then(|d| d.first())
    {
        s.push_str(&format!(" -DNSClusterIP '{d}'"));
    }
    s.push_str("\n</powershell>");
    s
}
