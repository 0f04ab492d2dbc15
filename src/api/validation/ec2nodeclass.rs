//! EC2NodeClass checks: the AWS provider's `karpenter.k8s.aws_ec2nodeclasses` CRD schema
//! and its CEL rules (`+kubebuilder:validation:XValidation` markers in
//! `pkg/apis/v1/ec2nodeclass.go`), plus the kubelet patterns its `hack/validation` adds.

use std::collections::BTreeMap;

use super::{Violations, check_max, key_path};
use crate::api::ec2nodeclass::{
    ALIAS_FAMILIES, AMISelectorTerm, BlockDeviceMapping, EC2NodeClassSpec, MetadataOptions,
};

mod instance_options;
mod kubelet;

/// CRD `maxItems` of each selector term list.
const MAX_TERMS: usize = 30;
/// CRD `maxProperties` of a selector term's tags.
const MAX_TERM_TAGS: usize = 20;
/// CRD `maxLength` of an AMI alias.
const MAX_ALIAS_LEN: usize = 30;
/// CRD `maxItems` of `blockDeviceMappings`.
const MAX_BLOCK_DEVICES: usize = 50;

pub(crate) fn check_spec(out: &mut Violations, spec: &EC2NodeClassSpec) {
    check_ami_terms(out, spec);
    check_subnet_terms(out, spec);
    check_security_group_terms(out, spec);
    check_iam(out, spec);
    check_tags(out, &spec.tags);
    if let Some(k) = &spec.kubelet {
        kubelet::check(out, "spec.kubelet", k);
    }
    if let Some(b) = &spec.block_device_mappings {
        check_block_devices(out, b);
    }
    check_metadata_options(out, &spec.metadata_options);
    instance_options::check(out, spec);
}

/// The CRD patterns on selector ids (`ami-[0-9a-z]+` and the like) are unanchored, so,
/// like the API server, this only asks that the id contain such a run.
fn contains_id(id: &str, prefix: &str) -> bool {
    id.match_indices(prefix).any(|(i, _)| {
        id[i + prefix.len()..]
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

fn check_id(out: &mut Violations, path: &str, id: &str, prefix: &str) {
    if !contains_id(id, prefix) {
        out.push(
            path,
            format!("invalid id {id:?}: expected {prefix} followed by lower-case letters and digits, e.g. {prefix}0123456789abcdef0"),
        );
    }
}

/// Selector tags: `self.all(k, k != '' && self[k] != '')` and `maxProperties: 20`.
fn check_term_tags(out: &mut Violations, path: &str, tags: &BTreeMap<String, String>) {
    check_max(out, path, "tags", tags.len(), MAX_TERM_TAGS);
    for (k, v) in tags {
        if k.is_empty() || v.is_empty() {
            out.push(
                &key_path(path, k),
                "empty tag keys or values aren't supported (use \"*\" to match any value)",
            );
        }
    }
}

/// Names of the fields that are set, for "mutually exclusive" messages.
fn set_fields(fields: &[(&'static str, bool)]) -> Vec<&'static str> {
    fields
        .iter()
        .filter(|(_, set)| *set)
        .map(|(n, _)| *n)
        .collect()
}

fn check_ami_terms(out: &mut Violations, spec: &EC2NodeClassSpec) {
    let base = "spec.amiSelectorTerms";
    let terms = &spec.ami_selector_terms;
    if terms.is_empty() {
        out.push(
            base,
            "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']: add a term such as {alias: al2023@latest}",
        );
    }
    check_max(out, base, "amiSelectorTerms", terms.len(), MAX_TERMS);
    for (i, t) in terms.iter().enumerate() {
        check_ami_term(out, &format!("{base}[{i}]"), t, terms.len());
    }
    let has_alias = terms.iter().any(|t| t.alias.is_some());
    if !has_alias && spec.ami_family.is_none() {
        out.push(
            "spec.amiFamily",
            "amiFamily must be set if amiSelectorTerms does not contain an alias (AL2, AL2023, Bottlerocket, Windows2019, Windows2022, Windows2025 or Custom)",
        );
    }
}

fn check_ami_term(out: &mut Violations, path: &str, t: &AMISelectorTerm, term_count: usize) {
    if t.tags.is_none()
        && t.id.is_none()
        && t.name.is_none()
        && t.alias.is_none()
        && t.ssm_parameter.is_none()
    {
        out.push(
            path,
            "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
        );
    }
    if let Some(id) = &t.id {
        let others = set_fields(&[
            ("alias", t.alias.is_some()),
            ("tags", t.tags.is_some()),
            ("name", t.name.is_some()),
            ("owner", t.owner.is_some()),
        ]);
        if !others.is_empty() {
            out.push(
                &format!("{path}.id"),
                format!("'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (also set: {})", others.join(", ")),
            );
        }
        check_id(out, &format!("{path}.id"), id, "ami-");
    }
    if let Some(alias) = &t.alias {
        let alias_path = format!("{path}.alias");
        let others = set_fields(&[
            ("id", t.id.is_some()),
            ("tags", t.tags.is_some()),
            ("name", t.name.is_some()),
            ("owner", t.owner.is_some()),
        ]);
        if !others.is_empty() {
            out.push(
                &alias_path,
                format!("'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (also set: {})", others.join(", ")),
            );
        }
        if term_count != 1 {
            out.push(
                &alias_path,
                format!("'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms (found {term_count} terms)"),
            );
        }
        check_alias(out, &alias_path, alias);
    }
    if let Some(tags) = &t.tags {
        check_term_tags(out, &format!("{path}.tags"), tags);
    }
}

/// `family@version`: format, family list, and Windows pinned to `latest`.
fn check_alias(out: &mut Violations, path: &str, alias: &str) {
    if alias.len() > MAX_ALIAS_LEN {
        out.push(
            path,
            format!(
                "alias must be at most {MAX_ALIAS_LEN} characters, found {}",
                alias.len()
            ),
        );
    }
    let (family, version) = alias.split_once('@').unwrap_or((alias, ""));
    if family.is_empty() || !family.bytes().all(|b| b.is_ascii_alphanumeric()) || version.is_empty()
    {
        out.push(
            path,
            format!("'alias' is improperly formatted, must match the format 'family@version': {alias:?} (e.g. al2023@latest or al2023@v20240807)"),
        );
        return;
    }
    if !ALIAS_FAMILIES.contains(&family) {
        out.push(
            path,
            format!(
                "family {family:?} is not supported, must be one of the following: {}",
                ALIAS_FAMILIES
                    .iter()
                    .map(|f| format!("'{f}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    } else if family.starts_with("windows") && version != "latest" {
        out.push(
            path,
            format!("windows families may only specify version 'latest', found {version:?}"),
        );
    }
}

fn check_subnet_terms(out: &mut Violations, spec: &EC2NodeClassSpec) {
    let base = "spec.subnetSelectorTerms";
    let terms = &spec.subnet_selector_terms;
    if terms.is_empty() {
        out.push(
            base,
            "subnetSelectorTerms cannot be empty: select subnets by tags or id, e.g. {tags: {karpenter.sh/discovery: my-cluster}}",
        );
    }
    check_max(out, base, "subnetSelectorTerms", terms.len(), MAX_TERMS);
    for (i, t) in terms.iter().enumerate() {
        let path = format!("{base}[{i}]");
        match (&t.tags, &t.id) {
            (None, None) => out.push(&path, "expected at least one, got none, ['tags', 'id']"),
            (Some(_), Some(_)) => out.push(
                &format!("{path}.id"),
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term (also set: tags)",
            ),
            _ => {}
        }
        if let Some(id) = &t.id {
            check_id(out, &format!("{path}.id"), id, "subnet-");
        }
        if let Some(tags) = &t.tags {
            check_term_tags(out, &format!("{path}.tags"), tags);
        }
    }
}

fn check_security_group_terms(out: &mut Violations, spec: &EC2NodeClassSpec) {
    let base = "spec.securityGroupSelectorTerms";
    let terms = &spec.security_group_selector_terms;
    if terms.is_empty() {
        out.push(
            base,
            "securityGroupSelectorTerms cannot be empty: select security groups by tags, id or name",
        );
    }
    check_max(
        out,
        base,
        "securityGroupSelectorTerms",
        terms.len(),
        MAX_TERMS,
    );
    for (i, t) in terms.iter().enumerate() {
        let path = format!("{base}[{i}]");
        let (tags, id, name) = (t.tags.is_some(), t.id.is_some(), t.name.is_some());
        if !tags && !id && !name {
            out.push(
                &path,
                "expected at least one, got none, ['tags', 'id', 'name']",
            );
        }
        for (field, set, others) in [
            ("id", id, set_fields(&[("tags", tags), ("name", name)])),
            ("name", name, set_fields(&[("tags", tags), ("id", id)])),
        ] {
            if set && !others.is_empty() {
                out.push(
                    &format!("{path}.{field}"),
                    format!("'{field}' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term (also set: {})", others.join(", ")),
                );
            }
        }
        if let Some(id) = &t.id {
            check_id(out, &format!("{path}.id"), id, "sg-");
        }
        if let Some(tags) = &t.tags {
            check_term_tags(out, &format!("{path}.tags"), tags);
        }
    }
}

/// Exactly one of role / instanceProfile, neither empty.
fn check_iam(out: &mut Violations, spec: &EC2NodeClassSpec) {
    match (&spec.role, &spec.instance_profile) {
        (None, None) => out.push(
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']: neither is set",
        ),
        (Some(_), Some(_)) => out.push(
            "spec",
            "must specify exactly one of ['role', 'instanceProfile']: both are set",
        ),
        _ => {}
    }
    if spec.role.as_deref() == Some("") {
        out.push("spec.role", "role cannot be empty");
    }
    if spec.instance_profile.as_deref() == Some("") {
        out.push("spec.instanceProfile", "instanceProfile cannot be empty");
    }
}

/// Tags Karpenter writes itself or EKS reserves may not be overridden.
fn check_tags(out: &mut Violations, tags: &BTreeMap<String, String>) {
    const RESERVED: &[&str] = &[
        "eks:eks-cluster-name",
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "karpenter.k8s.aws/ec2nodeclass",
    ];
    for k in tags.keys() {
        let path = key_path("spec.tags", k);
        if k.is_empty() {
            out.push(&path, "empty tag keys aren't supported");
        } else if k.starts_with("kubernetes.io/cluster") {
            out.push(&path, "tag contains a restricted tag matching kubernetes.io/cluster/ (Karpenter sets the cluster ownership tag)");
        } else if RESERVED.contains(&k.as_str()) {
            out.push(
                &path,
                format!("tag contains a restricted tag matching {k} (Karpenter or EKS sets it)"),
            );
        }
    }
}

fn check_block_devices(out: &mut Violations, devices: &[BlockDeviceMapping]) {
    let base = "spec.blockDeviceMappings";
    check_max(
        out,
        base,
        "blockDeviceMappings",
        devices.len(),
        MAX_BLOCK_DEVICES,
    );
    let mut first_root: Option<usize> = None;
    for (i, d) in devices.iter().enumerate() {
        let path = format!("{base}[{i}]");
        if d.root_volume == Some(true) {
            match first_root {
                Some(first) => out.push(
                    &format!("{path}.rootVolume"),
                    format!("must have only one blockDeviceMappings with rootVolume (already set on {base}[{first}])"),
                ),
                None => first_root = Some(i),
            }
        }
        if let Some(ebs) = &d.ebs {
            if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
                out.push(
                    &format!("{path}.ebs"),
                    "snapshotID or volumeSize must be defined",
                );
            }
            if let Some(size) = ebs
                .volume_size
                .as_ref()
                .filter(|q| !is_ebs_volume_size(&q.0))
            {
                out.push(
                    &format!("{path}.ebs.volumeSize"),
                    format!(
                        "invalid volumeSize {:?}: expected a whole number of Gi (1-59000), G (1-64000), Ti (up to 58) or T (up to 64), e.g. 20Gi",
                        size.0
                    ),
                );
            }
        }
    }
}

/// Upstream's `volumeSize` pattern, read value by value:
/// `^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$`.
/// Its Ti and T branches have quirks (an empty alternative, and `[1-5][0-7]` skipping 18Ti,
/// 19Ti, 28Ti, ...); they are kept, because the API server enforces the pattern as written.
fn is_ebs_volume_size(s: &str) -> bool {
    let whole = |n: &str, max: u32| {
        !n.is_empty()
            && !n.starts_with('0')
            && n.len() <= 5
            && n.bytes().all(|b| b.is_ascii_digit())
            && n.parse::<u32>().is_ok_and(|v| v <= max)
    };
    if let Some(n) = s.strip_suffix("Gi") {
        whole(n, 59_000)
    } else if let Some(n) = s.strip_suffix("Ti") {
        matches!(
            n.as_bytes(),
            [] | [b'1'..=b'9'] | [b'1'..=b'5', b'0'..=b'7'] | [b'5', b'8']
        )
    } else if let Some(n) = s.strip_suffix('G') {
        whole(n, 64_000)
    } else if let Some(n) = s.strip_suffix('T') {
        n.is_empty() || whole(n, 64)
    } else {
        false
    }
}

fn check_metadata_options(out: &mut Violations, m: &MetadataOptions) {
    let base = "spec.metadataOptions";
    for (field, value, allowed) in [
        ("httpEndpoint", &m.http_endpoint, ["enabled", "disabled"]),
        (
            "httpProtocolIPv6",
            &m.http_protocol_ipv6,
            ["enabled", "disabled"],
        ),
        ("httpTokens", &m.http_tokens, ["required", "optional"]),
    ] {
        if !allowed.contains(&value.as_str()) {
            out.push(
                &format!("{base}.{field}"),
                format!(
                    "unsupported value {value:?}: expected {} or {}",
                    allowed[0], allowed[1]
                ),
            );
        }
    }
    let hops = m.http_put_response_hop_limit;
    if !(1..=64).contains(&hops) {
        out.push(
            &format!("{base}.httpPutResponseHopLimit"),
            format!("must be between 1 and 64, found {hops}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::is_ebs_volume_size;

    #[test]
    fn ebs_volume_sizes_follow_upstreams_pattern() {
        for ok in [
            "1Gi", "20Gi", "59000Gi", "64000G", "100G", "1Ti", "17Ti", "58Ti", "64T", "Ti",
        ] {
            assert!(is_ebs_volume_size(ok), "{ok}");
        }
        for bad in [
            "0Gi", "020Gi", "59001Gi", "64001G", "18Ti", "59Ti", "65T", "20GB", "20", "20Mi",
            "1.5Gi", "",
        ] {
            assert!(!is_ebs_volume_size(bad), "{bad}");
        }
    }
}
