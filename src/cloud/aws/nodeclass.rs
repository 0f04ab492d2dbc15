//! EC2NodeClass resolution (upstream `pkg/controllers/nodeclass`): the selector terms
//! become concrete subnets, security groups, AMIs and an instance profile, written to the
//! NodeClass's status with one condition each and Ready over all of them. A NodeClass
//! that does not resolve is NotReady with the reason, and its pools launch nothing.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::instance_types::filter;
use super::{Clients, ami, capacity_reservation, placement_group, sdk_error};
use crate::api::ec2nodeclass::{
    EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus, SecurityGroup, SecurityGroupSelectorTerm,
    Subnet, SubnetSelectorTerm,
};
use crate::engine::disruption::drift::fnv1a;

/// The NodeClaim annotation carrying the NodeClass hash at launch (upstream
/// `karpenter.k8s.aws/ec2nodeclass-hash`), and its version.
pub const HASH_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const HASH_VERSION_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// Bumped when the hash's inputs change, so old NodeClaims are not all drifted at once
/// (upstream compares the version first and skips the check on a mismatch).
pub const HASH_VERSION: &str = "v1";

/// A subnet as resolved, with what the fleet needs to choose among a zone's subnets.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedSubnet {
    pub id: String,
    pub zone: String,
    pub zone_id: Option<String>,
    pub available_ips: i32,
}

/// What a NodeClass resolved to: everything a launch needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub subnets: Vec<ResolvedSubnet>,
    pub security_groups: Vec<SecurityGroup>,
    pub amis: Vec<crate::api::ec2nodeclass::AMI>,
    pub instance_profile: String,
    /// The capacity reservations the selector terms found, with EC2's counts.
    pub capacity_reservations: Vec<capacity_reservation::Found>,
    /// The placement group the NodeClass selects, resolved.
    pub placement_group: Option<placement_group::PlacementGroup>,
}

/// A NodeClass as the provider knows it: the spec, its hash, and the last resolution.
#[derive(Clone, Debug)]
pub struct NodeClassState {
    pub spec: EC2NodeClassSpec,
    pub generation: Option<i64>,
    pub hash: String,
    /// The resolution, or why it failed (the Ready condition's reason and message).
    pub resolved: Result<Resolved, NotReady>,
    pub status: EC2NodeClassStatus,
}

/// Why a NodeClass is not Ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotReady {
    pub condition: &'static str,
    pub reason: String,
    pub message: String,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// The drift hash of a NodeClass: every spec field except the selector terms, whose
/// changes drift through AMIDrift, SubnetDrift and SecurityGroupDrift instead (upstream
/// tags them `hash:"ignore"`). FNV-1a over canonical JSON, like the NodePool hash.
pub fn hash(spec: &EC2NodeClassSpec) -> String {
    let mut v = serde_json::to_value(spec).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("subnetSelectorTerms");
        o.remove("securityGroupSelectorTerms");
        o.remove("amiSelectorTerms");
    }
    fnv1a(v.to_string().as_bytes()).to_string()
}

/// Resolves a NodeClass. `region` and `cluster` name the instance profile a `role` gets.
pub async fn resolve(
    clients: &Clients,
    name: &str,
    nc: &EC2NodeClass,
    k8s_version: &str,
    cluster: &str,
) -> Result<Resolved, NotReady> {
    let spec = &nc.spec;
    let subnets = subnets(clients, &spec.subnet_selector_terms)
        .await
        .map_err(|e| not_ready("SubnetsReady", "SubnetsNotFound", e))?;
    if subnets.is_empty() {
        return Err(not_ready(
            "SubnetsReady",
            "SubnetsNotFound",
            "SubnetSelector did not match any Subnets".into(),
        ));
    }
    let security_groups = security_groups(clients, &spec.security_group_selector_terms)
        .await
        .map_err(|e| not_ready("SecurityGroupsReady", "SecurityGroupsNotFound", e))?;
    if security_groups.is_empty() {
        return Err(not_ready(
            "SecurityGroupsReady",
            "SecurityGroupsNotFound",
            "SecurityGroupSelector did not match any SecurityGroups".into(),
        ));
    }
    let amis = ami::resolve(clients, &spec.ami_selector_terms, k8s_version)
        .await
        .map_err(|e| not_ready("AMIsReady", "AMINotFound", e))?;
    if amis.is_empty() {
        return Err(not_ready(
            "AMIsReady",
            "AMINotFound",
            "AMISelector did not match any AMIs".into(),
        ));
    }
    let instance_profile = instance_profile(clients, name, spec, cluster)
        .await
        .map_err(|e| not_ready("InstanceProfileReady", "InstanceProfileNotFound", e))?;
    // Upstream `nodeclass/placementgroup.go`: True when nothing is selected; False when
    // the selected group is missing or not available, so the pools launch nothing rather
    // than outside the group.
    let placement_group = match &spec.placement_group_selector {
        None => None,
        Some(selector) => {
            let what = placement_group::describe(selector).to_string();
            let found = placement_group::resolve(clients, selector)
                .await
                .map_err(|e| {
                    not_ready(
                        "PlacementGroupReady",
                        "PlacementGroupResolutionFailed",
                        format!("Failed to resolve placement group {what:?}: {}", e.0),
                    )
                })?;
            Some(found.ok_or_else(|| {
                not_ready(
                    "PlacementGroupReady",
                    "PlacementGroupNotFound",
                    format!("Placement group {what:?} not found"),
                )
            })?)
        }
    };
    let terms = spec
        .capacity_reservation_selector_terms
        .as_deref()
        .unwrap_or_default();
    let capacity_reservations = if terms.is_empty() {
        Vec::new()
    } else {
        capacity_reservation::list(clients, terms, Utc::now())
            .await
            .map_err(|e| {
                not_ready(
                    "CapacityReservationsReady",
                    "CapacityReservationsResolutionFailed",
                    e,
                )
            })?
    };
    Ok(Resolved {
        subnets,
        security_groups,
        amis,
        instance_profile,
        capacity_reservations,
        placement_group,
    })
}

fn not_ready(condition: &'static str, reason: &str, message: String) -> NotReady {
    NotReady {
        condition,
        reason: reason.into(),
        message,
    }
}

fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<aws_sdk_ec2::types::Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                filter("tag-key", [k.clone()])
            } else {
                filter(&format!("tag:{k}"), [v.clone()])
            }
        })
        .collect()
}

/// The union of every term's subnets, most free addresses first (upstream's order).
async fn subnets(
    clients: &Clients,
    terms: &[SubnetSelectorTerm],
) -> Result<Vec<ResolvedSubnet>, String> {
    let mut out: BTreeMap<String, ResolvedSubnet> = BTreeMap::new();
    for term in terms {
        let mut req = clients.ec2.describe_subnets();
        if let Some(id) = &term.id {
            req = req.filters(filter("subnet-id", [id.clone()]));
        }
        for f in tag_filters(term.tags.as_ref().unwrap_or(&BTreeMap::new())) {
            req = req.filters(f);
        }
        let page = req
            .send()
            .await
            .map_err(|e| sdk_error("DescribeSubnets", e).0)?;
        for s in page.subnets() {
            let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else {
                continue;
            };
            out.insert(
                id.to_string(),
                ResolvedSubnet {
                    id: id.to_string(),
                    zone: zone.to_string(),
                    zone_id: s.availability_zone_id().map(str::to_string),
                    available_ips: s.available_ip_address_count().unwrap_or(0),
                },
            );
        }
    }
    let mut v: Vec<ResolvedSubnet> = out.into_values().collect();
    v.sort_by(|a, b| b.available_ips.cmp(&a.available_ips).then(a.id.cmp(&b.id)));
    Ok(v)
}

async fn security_groups(
    clients: &Clients,
    terms: &[SecurityGroupSelectorTerm],
) -> Result<Vec<SecurityGroup>, String> {
    let mut out: BTreeMap<String, SecurityGroup> = BTreeMap::new();
    for term in terms {
        let mut req = clients.ec2.describe_security_groups();
        if let Some(id) = &term.id {
            req = req.filters(filter("group-id", [id.clone()]));
        }
        if let Some(name) = &term.name {
            req = req.filters(filter("group-name", [name.clone()]));
        }
        for f in tag_filters(term.tags.as_ref().unwrap_or(&BTreeMap::new())) {
            req = req.filters(f);
        }
        let page = req
            .send()
            .await
            .map_err(|e| sdk_error("DescribeSecurityGroups", e).0)?;
        for g in page.security_groups() {
            if let Some(id) = g.group_id() {
                out.insert(
                    id.to_string(),
                    SecurityGroup {
                        id: id.to_string(),
                        name: g.group_name().map(str::to_string),
                    },
                );
            }
        }
    }
    Ok(out.into_values().collect())
}

/// The instance profile name upstream gives a NodeClass's role: the cluster name and a
/// hash of region and NodeClass name.
pub fn profile_name(cluster: &str, region: &str, nodeclass: &str) -> String {
    format!(
        "{cluster}_{}",
        fnv1a(format!("{region}{nodeclass}").as_bytes())
    )
}

/// The instance profile: the spec's, or one created for the role (upstream's instance
/// profile provider: create if missing, tagged for the cluster, with the role in it).
async fn instance_profile(
    clients: &Clients,
    nodeclass: &str,
    spec: &EC2NodeClassSpec,
    cluster: &str,
) -> Result<String, String> {
    if let Some(p) = &spec.instance_profile {
        return Ok(p.clone());
    }
    let Some(role) = &spec.role else {
        return Err("neither role nor instanceProfile is set".into());
    };
    // A role given as an ARN names the role after its last path segment.
    let role = role.rsplit('/').next().unwrap_or(role).to_string();
    let name = profile_name(cluster, &clients.region, nodeclass);
    let existing = match clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
    {
        Ok(out) => out.instance_profile().cloned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            None
        }
        Err(e) => return Err(sdk_error("IAM GetInstanceProfile", e).0),
    };
    let roles: Vec<String> = match existing {
        Some(p) => p
            .roles()
            .iter()
            .map(|r| r.role_name().to_string())
            .collect(),
        None => {
            let tag = |k: &str, v: &str| {
                aws_sdk_iam::types::Tag::builder()
                    .key(k)
                    .value(v)
                    .build()
                    .map_err(|e| e.to_string())
            };
            clients
                .iam
                .create_instance_profile()
                .instance_profile_name(&name)
                .path(format!("/karpenter/{}/{cluster}/", clients.region))
                .tags(tag(&format!("kubernetes.io/cluster/{cluster}"), "owned")?)
                .tags(tag("karpenter.k8s.aws/ec2nodeclass", nodeclass)?)
                .tags(tag("topology.kubernetes.io/region", &clients.region)?)
                .send()
                .await
                .map_err(|e| sdk_error("IAM CreateInstanceProfile", e).0)?;
            Vec::new()
        }
    };
    if roles.contains(&role) {
        return Ok(name);
    }
    for old in roles {
        clients
            .iam
            .remove_role_from_instance_profile()
            .instance_profile_name(&name)
            .role_name(old)
            .send()
            .await
            .map_err(|e| sdk_error("IAM RemoveRoleFromInstanceProfile", e).0)?;
    }
    clients
        .iam
        .add_role_to_instance_profile()
        .instance_profile_name(&name)
        .role_name(&role)
        .send()
        .await
        .map_err(|e| sdk_error(&format!("IAM AddRoleToInstanceProfile (role {role})"), e).0)?;
    Ok(name)
}

/// The status a resolution writes: the resolved values, one condition per part and Ready.
/// A condition that keeps its status keeps its lastTransitionTime from `old`.
pub fn status(
    resolved: &Result<Resolved, NotReady>,
    old: Option<&EC2NodeClassStatus>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> EC2NodeClassStatus {
    // Upstream v1.14.1's `EC2NodeClass.StatusConditions()`, in the order they resolve.
    const PARTS: [&str; 6] = [
        "SubnetsReady",
        "SecurityGroupsReady",
        "AMIsReady",
        "InstanceProfileReady",
        "PlacementGroupReady",
        "CapacityReservationsReady",
    ];
    let failed = resolved.as_ref().err();
    // Parts before the failing one resolved; parts after it were not tried.
    let failed_at = failed.and_then(|f| PARTS.iter().position(|p| *p == f.condition));
    let mut conditions = Vec::new();
    for (i, part) in PARTS.iter().enumerate() {
        let (status, reason, message) = match (failed, failed_at) {
            (Some(f), Some(at)) if i == at => ("False", f.reason.clone(), f.message.clone()),
            (Some(_), Some(at)) if i > at => (
                "Unknown",
                "AwaitingReconciliation".to_string(),
                "object is awaiting reconciliation".to_string(),
            ),
            _ => ("True", (*part).to_string(), String::new()),
        };
        conditions.push(condition(
            part, status, reason, message, old, generation, now,
        ));
    }
    // Upstream `nodeclass/validation.go` with dry runs disabled (no authorization probe is
    // made here): False while a dependency failed, else True.
    conditions.push(match failed {
        Some(_) => condition(
            "ValidationSucceeded",
            "False",
            "DependenciesNotReady".into(),
            "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution".into(),
            old,
            generation,
            now,
        ),
        None => condition(
            "ValidationSucceeded",
            "True",
            "ValidationSucceeded".into(),
            String::new(),
            old,
            generation,
            now,
        ),
    });
    conditions.push(match failed {
        Some(f) => condition(
            "Ready",
            "False",
            "UnhealthyDependents".into(),
            format!("{} {}: {}", f.condition, f.reason, f.message),
            old,
            generation,
            now,
        ),
        None => condition(
            "Ready",
            "True",
            "Ready".into(),
            String::new(),
            old,
            generation,
            now,
        ),
    });
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    let mut status = EC2NodeClassStatus {
        conditions,
        ..Default::default()
    };
    if let Ok(r) = resolved {
        status.subnets = r
            .subnets
            .iter()
            .map(|s| Subnet {
                id: s.id.clone(),
                zone: s.zone.clone(),
                zone_id: s.zone_id.clone(),
            })
            .collect();
        status.security_groups = r.security_groups.clone();
        status.amis = r.amis.clone();
        status.instance_profile = Some(r.instance_profile.clone());
        status.capacity_reservations = r
            .capacity_reservations
            .iter()
            .map(|f| f.status.clone())
            .collect();
    }
    status
}

fn condition(
    type_: &str,
    status: &str,
    reason: String,
    message: String,
    old: Option<&EC2NodeClassStatus>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Condition {
    let since = old
        .and_then(|o| o.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| crate::api::time::from_chrono(now));
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason,
        message,
        last_transition_time: since,
        observed_generation: generation,
    }
}
