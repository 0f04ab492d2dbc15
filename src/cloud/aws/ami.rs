//! amiSelectorTerms resolution (upstream `pkg/providers/amifamily`): an alias
//! `family@version` reads the EKS-optimized AMI's public SSM parameter per architecture and
//! variant; id, name/owner and tags terms go through DescribeImages; an ssmParameter term
//! reads the parameter and describes the image it names. The newest image per
//! architecture (and variant) wins.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Image;

use super::instance_types::filter;
use super::{Clients, sdk_error};
use crate::api::ec2nodeclass::{AMI, AMIFamily, AMISelectorTerm};
use crate::api::labels;
use crate::api::nodeclaim::{NodeSelectorRequirementWithMinValues, Operator};

/// `karpenter.k8s.aws/instance-gpu-count` and `instance-accelerator-count`: the variant
/// requirements of the EKS-optimized AMIs.
const GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
const ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// A variant of an alias family's AMI and which instance types it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Standard,
    Nvidia,
    Neuron,
}

impl Variant {
    fn as_str(self) -> &'static str {
        match self {
            Variant::Standard => "standard",
            Variant::Nvidia => "nvidia",
            Variant::Neuron => "neuron",
        }
    }

    /// Upstream: the standard AMI serves types without GPUs or accelerators, the nvidia
    /// one types with a GPU, the neuron one types with an accelerator.
    fn requirements(self) -> Vec<NodeSelectorRequirementWithMinValues> {
        let req = |key: &str, operator| NodeSelectorRequirementWithMinValues {
            key: key.into(),
            operator,
            values: Vec::new(),
            min_values: None,
        };
        match self {
            Variant::Standard => vec![
                req(GPU_COUNT, Operator::DoesNotExist),
                req(ACCELERATOR_COUNT, Operator::DoesNotExist),
            ],
            Variant::Nvidia => vec![req(GPU_COUNT, Operator::Exists)],
            Variant::Neuron => vec![req(ACCELERATOR_COUNT, Operator::Exists)],
        }
    }
}

/// The SSM parameters an alias reads, with the variant each serves. Mirrors upstream's
/// `resolvePath` per family (`al2023.go`, `al2.go`, `bottlerocket.go`, `windows.go`).
fn alias_parameters(family: AMIFamily, version: &str, k8s: &str) -> Vec<(String, Variant)> {
    let latest = version == "latest";
    match family {
        AMIFamily::AL2023 => {
            let mut out = Vec::new();
            for (arch, variants) in [
                (
                    "x86_64",
                    &[Variant::Standard, Variant::Nvidia, Variant::Neuron][..],
                ),
                ("arm64", &[Variant::Standard][..]),
            ] {
                for v in variants {
                    let name = if latest {
                        "recommended".to_string()
                    } else {
                        format!(
                            "amazon-eks-node-al2023-{arch}-{}-{k8s}-{version}",
                            v.as_str()
                        )
                    };
                    out.push((
                        format!(
                            "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{}/{name}/image_id",
                            v.as_str()
                        ),
                        *v,
                    ));
                }
            }
            out
        }
        AMIFamily::AL2 => [
            ("", "", Variant::Standard),
            ("-arm64", "arm64-", Variant::Standard),
            ("-gpu", "gpu-", Variant::Nvidia),
        ]
        .into_iter()
        .map(|(suffix, kind, v)| {
            let name = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-{kind}node-{k8s}-{version}")
            };
            (
                format!(
                    "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}/{name}/image_id"
                ),
                v,
            )
        })
        .collect(),
        AMIFamily::Bottlerocket => {
            let version = if latest {
                "latest".to_string()
            } else {
                version.to_string()
            };
            [
                ("x86_64", "", Variant::Standard),
                ("arm64", "", Variant::Standard),
                ("x86_64", "-nvidia", Variant::Nvidia),
                ("arm64", "-nvidia", Variant::Nvidia),
            ]
            .into_iter()
            .map(|(arch, suffix, v)| {
                (
                    format!(
                        "/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/{version}/image_id"
                    ),
                    v,
                )
            })
            .collect()
        }
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            let year = match family {
                AMIFamily::Windows2019 => "2019",
                AMIFamily::Windows2022 => "2022",
                _ => "2025",
            };
            vec![(
                format!(
                    "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                ),
                Variant::Standard,
            )]
        }
        AMIFamily::Custom => Vec::new(),
    }
}

/// The kube arch of an EC2 architecture name.
fn kube_arch(ec2: &str) -> Option<&'static str> {
    match ec2 {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

/// A candidate image with what it serves.
struct Candidate {
    image: Image,
    variant: Option<Variant>,
}

/// Resolves the terms to the newest image per architecture (and alias variant), newest
/// first; an empty answer means nothing matched. `k8s` is the cluster's minor version
/// ("1.33"), which alias parameters are keyed by.
pub async fn resolve(
    clients: &Clients,
    terms: &[AMISelectorTerm],
    k8s: &str,
) -> Result<Vec<AMI>, String> {
    let mut candidates: Vec<Candidate> = Vec::new();
    for term in terms {
        if let Some(alias) = &term.alias {
            let (family, version) = alias.split_once('@').unwrap_or((alias, "latest"));
            let Some(family) = AMIFamily::from_alias_family(family) else {
                return Err(format!("alias {alias:?}: unknown family"));
            };
            let mut ids: Vec<(String, Variant)> = Vec::new();
            for (param, variant) in alias_parameters(family, version, k8s) {
                // A family without a variant for this version (e.g. no neuron AMI yet)
                // answers ParameterNotFound: that variant is simply absent.
                if let Some(id) = ssm_parameter(clients, &param).await? {
                    ids.push((id, variant));
                }
            }
            if ids.is_empty() {
                continue;
            }
            let images = describe(clients, |r| {
                r.set_image_ids(Some(ids.iter().map(|(id, _)| id.clone()).collect()))
            })
            .await?;
            for image in images {
                let variant = ids
                    .iter()
                    .find(|(id, _)| Some(id.as_str()) == image.image_id())
                    .map(|(_, v)| *v);
                candidates.push(Candidate { image, variant });
            }
        } else if let Some(param) = &term.ssm_parameter {
            let Some(id) = ssm_parameter(clients, param).await? else {
                continue;
            };
            for image in describe(clients, |r| r.image_ids(id.clone())).await? {
                candidates.push(Candidate {
                    image,
                    variant: None,
                });
            }
        } else if let Some(id) = &term.id {
            for image in describe(clients, |r| r.image_ids(id.clone())).await? {
                candidates.push(Candidate {
                    image,
                    variant: None,
                });
            }
        } else {
            let mut filters = Vec::new();
            if let Some(name) = &term.name {
                filters.push(filter("name", [name.clone()]));
            }
            for (k, v) in term.tags.iter().flatten() {
                filters.push(if v == "*" {
                    filter("tag-key", [k.clone()])
                } else {
                    filter(&format!("tag:{k}"), [v.clone()])
                });
            }
            // Upstream: without an owner, a name term means Amazon's or this account's.
            let owners: Vec<String> = match &term.owner {
                Some(o) => vec![o.clone()],
                None if term.name.is_some() => vec!["self".into(), "amazon".into()],
                None => Vec::new(),
            };
            let images = describe(clients, |r| {
                r.set_filters(Some(filters.clone()))
                    .set_owners((!owners.is_empty()).then(|| owners.clone()))
            })
            .await?;
            candidates.extend(images.into_iter().map(|image| Candidate {
                image,
                variant: None,
            }));
        }
    }
    Ok(newest_per_arch(candidates))
}

fn newest_per_arch(mut candidates: Vec<Candidate>) -> Vec<AMI> {
    // Newest first; deprecated images only when nothing else serves (upstream sorts them
    // last). Ties by id keep the answer stable.
    candidates.retain(|c| c.image.state().is_none_or(|s| s.as_str() == "available"));
    let deprecated = |c: &Candidate| {
        c.image.deprecation_time().is_some_and(|t| {
            chrono::DateTime::parse_from_rfc3339(t).is_ok_and(|t| t <= chrono::Utc::now())
        })
    };
    candidates.sort_by(|a, b| {
        deprecated(a)
            .cmp(&deprecated(b))
            .then_with(|| b.image.creation_date().cmp(&a.image.creation_date()))
            .then_with(|| a.image.image_id().cmp(&b.image.image_id()))
    });
    let mut seen: BTreeMap<(String, Option<&'static str>), ()> = BTreeMap::new();
    let mut out = Vec::new();
    for c in &candidates {
        let Some(arch) = c.image.architecture().and_then(|a| kube_arch(a.as_str())) else {
            continue;
        };
        let key = (arch.to_string(), c.variant.map(Variant::as_str));
        if seen.insert(key, ()).is_some() {
            continue;
        }
        let mut requirements = vec![NodeSelectorRequirementWithMinValues {
            key: labels::ARCH.into(),
            operator: Operator::In,
            values: vec![arch.to_string()],
            min_values: None,
        }];
        if let Some(v) = c.variant {
            requirements.extend(v.requirements());
        }
        out.push(AMI {
            id: c.image.image_id().unwrap_or_default().to_string(),
            name: c.image.name().map(str::to_string),
            deprecated: deprecated(c).then_some(true),
            requirements,
        });
    }
    out
}

/// A parameter's value, `None` when it does not exist.
async fn ssm_parameter(clients: &Clients, name: &str) -> Result<Option<String>, String> {
    match clients.ssm.get_parameter().name(name).send().await {
        Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
        Err(e) => {
            if e.as_service_error()
                .is_some_and(|s| s.is_parameter_not_found())
            {
                Ok(None)
            } else {
                Err(sdk_error(&format!("SSM GetParameter {name}"), e).0)
            }
        }
    }
}

async fn describe(
    clients: &Clients,
    build: impl Fn(
        aws_sdk_ec2::operation::describe_images::builders::DescribeImagesFluentBuilder,
    )
        -> aws_sdk_ec2::operation::describe_images::builders::DescribeImagesFluentBuilder,
) -> Result<Vec<Image>, String> {
    match build(clients.ec2.describe_images()).send().await {
        Ok(out) => Ok(out.images().to_vec()),
        Err(e) => {
            // An id that does not exist (or is not shared with us) matches nothing.
            if e.as_service_error()
                .and_then(|s| aws_sdk_ec2::error::ProvideErrorMetadata::code(s))
                .is_some_and(|c| c.starts_with("InvalidAMIID"))
            {
                Ok(Vec::new())
            } else {
                Err(sdk_error("DescribeImages", e).0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn al2023_alias_reads_upstreams_parameter_paths() {
        let latest = alias_parameters(AMIFamily::AL2023, "latest", "1.33");
        assert_eq!(
            latest[0].0,
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
        assert_eq!(latest.len(), 4);
        let pinned = alias_parameters(AMIFamily::AL2023, "v20241115", "1.33");
        assert_eq!(
            pinned[3].0,
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20241115/image_id"
        );
    }
}
