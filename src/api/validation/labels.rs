//! Label keys and values: Kubernetes' syntax (apimachinery's `IsQualifiedName`,
//! `IsValidLabelValue`, `IsDNS1123Subdomain`) and the label domains Karpenter reserves
//! (the CRDs' CEL rules on `requirements[].key` and `template.metadata.labels`).

use crate::api::labels::{
    ALLOWED_KUBERNETES_IO_LABEL_KEYS, ALLOWED_KUBERNETES_IO_REQUIREMENT_KEYS, CAPACITY_TYPE,
    HOSTNAME, NODEPOOL,
};

/// Where a label key appears; the reserved-domain exceptions differ slightly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyUse {
    NodePoolRequirement,
    /// NodeClaims may name their NodePool (`karpenter.sh/nodepool`): Karpenter writes it.
    NodeClaimRequirement,
    TemplateLabel,
}

/// `karpenter.k8s.aws` keys a NodePool or NodeClaim may use: the list of the CEL rule the
/// AWS provider v1.14.1 adds for this domain to the core CRDs
/// (`pkg/apis/crds/karpenter.sh_nodeclaims.yaml`), in its order. It holds the capacity
/// reservation keys a reserved NodeClaim is pinned with.
const ALLOWED_AWS_KEYS: &[&str] = &[
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

const NAME_SYNTAX: &str =
    "alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: the name part of a key, and label values.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Why `s` is not a DNS-1123 subdomain (object names, key prefixes), if it is not one.
pub(crate) fn dns_subdomain_problem(s: &str) -> Option<String> {
    if s.len() > 253 {
        return Some(format!("must be at most 253 characters, found {}", s.len()));
    }
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        b.first().is_some_and(alnum)
            && b.last().is_some_and(alnum)
            && b.iter().all(|c| alnum(c) || *c == b'-')
    };
    if s.split('.').all(label_ok) {
        None
    } else {
        Some(
            "must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
                .to_string(),
        )
    }
}

/// Why `s` is not a qualified name (label keys, taint keys), if it is not one: an optional
/// DNS subdomain prefix and '/', then a name of at most 63 characters.
pub(crate) fn qualified_name_problem(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((_, n)) if n.contains('/') => {
            return Some(format!(
                "{s:?} is not a qualified name: at most one '/' may separate a DNS subdomain prefix from the name"
            ));
        }
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some(format!(
                "{s:?} is not a qualified name: the prefix before '/' is empty"
            ));
        }
        if let Some(why) = dns_subdomain_problem(p) {
            return Some(format!("{s:?} is not a qualified name: prefix {p:?} {why}"));
        }
    }
    if name.is_empty() {
        return Some(format!(
            "{s:?} is not a qualified name: the name part is empty"
        ));
    }
    if name.len() > 63 {
        return Some(format!(
            "{s:?} is not a qualified name: the name part must be at most 63 characters, found {}",
            name.len()
        ));
    }
    if !is_label_name(name) {
        return Some(format!(
            "{s:?} is not a qualified name: the name part must consist of {NAME_SYNTAX} (e.g. example.com/my-label)"
        ));
    }
    None
}

/// Why `s` is not a label value, if it is not one (empty is allowed).
pub(crate) fn label_value_problem(s: &str) -> Option<String> {
    if s.len() > 63 {
        Some(format!(
            "label value {s:?} must be at most 63 characters, found {}",
            s.len()
        ))
    } else if !s.is_empty() && !is_label_name(s) {
        Some(format!("invalid label value {s:?}: expected {NAME_SYNTAX}"))
    } else {
        None
    }
}

/// Why `key` may not be used in this place, if it may not: upstream's restricted labels and
/// reserved domains. The domain is what CEL's `find("^([^/]+)")` returns: the text before
/// the first '/', or the whole key when it has none.
pub(crate) fn restricted_key_problem(key: &str, used: KeyUse) -> Option<String> {
    let domain = key.split('/').next().unwrap_or_default();
    if key == HOSTNAME {
        return Some(format!(
            "label {HOSTNAME:?} is restricted: Karpenter cannot choose a node's hostname"
        ));
    }
    if key == NODEPOOL && used != KeyUse::NodeClaimRequirement {
        return Some(format!(
            "label {NODEPOOL:?} is restricted: Karpenter sets it to the owning NodePool's name"
        ));
    }
    let k8s_allowed = match used {
        KeyUse::TemplateLabel => ALLOWED_KUBERNETES_IO_LABEL_KEYS,
        _ => ALLOWED_KUBERNETES_IO_REQUIREMENT_KEYS,
    };
    if domain.ends_with("kubernetes.io")
        && !k8s_allowed.contains(&key)
        && !domain.ends_with("node.kubernetes.io")
        && !domain.ends_with("node-restriction.kubernetes.io")
    {
        return Some(format!(
            "label domain \"kubernetes.io\" is restricted: {key:?} is not one of the well-known keys ({}), and only keys under node.kubernetes.io or node-restriction.kubernetes.io are open",
            k8s_allowed.join(", ")
        ));
    }
    if domain.ends_with("k8s.io") && !domain.ends_with("kops.k8s.io") {
        return Some(format!(
            "label domain \"k8s.io\" is restricted: {key:?} is reserved (only kops.k8s.io keys are open)"
        ));
    }
    if domain.ends_with("karpenter.sh") && key != CAPACITY_TYPE && key != NODEPOOL {
        return Some(format!(
            "label domain \"karpenter.sh\" is restricted: of its keys only {CAPACITY_TYPE:?} may be set"
        ));
    }
    if domain.ends_with("karpenter.k8s.aws") && !ALLOWED_AWS_KEYS.contains(&key) {
        return Some(format!(
            "label domain \"karpenter.k8s.aws\" is restricted: {key:?} is not one of its well-known instance labels (e.g. karpenter.k8s.aws/instance-family)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in [
            "app",
            "example.com/team",
            "a.b-c/X_y.z",
            "node.kubernetes.io/x",
            "9",
        ] {
            assert_eq!(qualified_name_problem(ok), None, "{ok}");
        }
        let cases = [
            ("", "name part is empty"),
            ("a/", "name part is empty"),
            ("/a", "prefix before '/' is empty"),
            ("a/b/c", "at most one '/'"),
            (
                "Example.com/a",
                "prefix \"Example.com\" must be a DNS subdomain",
            ),
            ("-a", "must consist of"),
            ("a b", "must consist of"),
            ("a_", "must consist of"),
        ];
        for (bad, want) in cases {
            let why = qualified_name_problem(bad).unwrap_or_default();
            assert!(why.contains(want), "{bad:?}: {why}");
        }
        let long = "a".repeat(64);
        assert!(qualified_name_problem(&long).is_some_and(|w| w.contains("at most 63")));
        assert_eq!(qualified_name_problem(&"a".repeat(63)), None);
    }

    #[test]
    fn label_values() {
        for ok in ["", "spot", "m5.large", "A_b-9"] {
            assert_eq!(label_value_problem(ok), None, "{ok}");
        }
        for bad in ["-x", "x.", "a/b", "a b"] {
            assert!(label_value_problem(bad).is_some(), "{bad}");
        }
        assert!(label_value_problem(&"a".repeat(64)).is_some_and(|w| w.contains("at most 63")));
    }

    #[test]
    fn dns_subdomains() {
        assert_eq!(dns_subdomain_problem("default"), None);
        assert_eq!(dns_subdomain_problem("gpu-pool.v2"), None);
        for bad in ["Default", "a_b", "-a", "a.", ".a", "a..b", ""] {
            assert!(dns_subdomain_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn reserved_domains_follow_the_cel_rules() {
        use KeyUse::*;
        let open = [
            ("topology.kubernetes.io/zone", NodePoolRequirement),
            ("node.kubernetes.io/instance-type", NodePoolRequirement),
            ("node.kubernetes.io/instance-type", TemplateLabel),
            ("example.node.kubernetes.io/x", TemplateLabel),
            ("node-restriction.kubernetes.io/team", TemplateLabel),
            ("kops.k8s.io/instancegroup", NodePoolRequirement),
            ("karpenter.sh/capacity-type", NodePoolRequirement),
            ("karpenter.sh/nodepool", NodeClaimRequirement),
            ("karpenter.k8s.aws/instance-family", NodePoolRequirement),
            // The keys a reserved NodeClaim is pinned with.
            (
                "karpenter.k8s.aws/capacity-reservation-id",
                NodeClaimRequirement,
            ),
            (
                "karpenter.k8s.aws/capacity-reservation-type",
                NodePoolRequirement,
            ),
            ("example.com/team", TemplateLabel),
            ("team", TemplateLabel),
        ];
        for (key, used) in open {
            assert_eq!(restricted_key_problem(key, used), None, "{key} as {used:?}");
        }
        let closed = [
            (
                "kubernetes.io/hostname",
                NodeClaimRequirement,
                "\"kubernetes.io/hostname\" is restricted",
            ),
            (
                "karpenter.sh/nodepool",
                NodePoolRequirement,
                "\"karpenter.sh/nodepool\" is restricted",
            ),
            (
                "karpenter.sh/nodepool",
                TemplateLabel,
                "\"karpenter.sh/nodepool\" is restricted",
            ),
            (
                "kubernetes.io/team",
                TemplateLabel,
                "domain \"kubernetes.io\"",
            ),
            (
                "foo.kubernetes.io/x",
                NodePoolRequirement,
                "domain \"kubernetes.io\"",
            ),
            ("k8s.io/x", NodePoolRequirement, "domain \"k8s.io\""),
            ("sigs.k8s.io/x", TemplateLabel, "domain \"k8s.io\""),
            (
                "karpenter.sh/initialized",
                NodePoolRequirement,
                "domain \"karpenter.sh\"",
            ),
            // Upstream v1.14.1's list names the provider's labels; others stay closed.
            (
                "karpenter.k8s.aws/instance-performance-mode",
                TemplateLabel,
                "domain \"karpenter.k8s.aws\"",
            ),
            // CEL takes the whole key as the domain when there is no '/'.
            ("kubernetes.io", TemplateLabel, "domain \"kubernetes.io\""),
        ];
        for (key, used, want) in closed {
            let why = restricted_key_problem(key, used).unwrap_or_default();
            assert!(why.contains(want), "{key} as {used:?}: {why}");
        }
    }
}
