//! Validation that mirrors the Karpenter v1 CRDs' OpenAPI schema, their CEL
//! `x-kubernetes-validations` and upstream's runtime checks, so a manifest this tool accepts
//! is one the API server and the controller accept too.
//!
//! Every problem is a [`Violation`] with the field path a user would edit
//! (`spec.template.spec.requirements[2].values`, `spec.limits[cpu]`) and a message that says
//! what was expected. Checks never stop at the first problem: a user fixing a manifest sees
//! everything at once.

mod ec2nodeclass;
mod labels;
mod nodeclaim;
mod nodepool;
mod requirements;

#[cfg(test)]
mod tests;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::duration::GoDuration;
use super::ec2nodeclass::EC2NodeClass;
use super::manifest::Object;
use super::nodeclaim::NodeClaim;
use super::nodepool::NodePool;
use super::quantity::{Quantity, exceeds_kubernetes_max, is_valid_quantity};

/// One broken rule. The path is what a user edits and what the CLI, the console and
/// NodePool conditions print, so it follows Kubernetes' own field-path spelling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Field path such as `spec.template.spec.requirements[2].values`; map entries are
    /// written `labels[key]`.
    pub path: String,
    pub message: String,
}

/// Checks any object the manifest loader produced, so callers need not match on kinds.
pub fn validate(obj: &Object) -> Vec<Violation> {
    match obj {
        Object::NodePool(np) => {
            let mut out = validate_nodepool(np);
            out.extend(validate_pool_settings(np));
            out
        }
        Object::NodeClaim(nc) => validate_nodeclaim(nc),
        Object::EC2NodeClass(nc) => validate_ec2nodeclass(nc),
    }
}

/// A NodePool the API server would admit can still be rejected by the controller
/// (`NodePool.RuntimeValidate`, budget cron parsing); this checks both, so problems surface
/// before `kubectl apply` instead of as a `ValidationSucceeded=False` condition or a budget
/// upstream cannot evaluate.
pub fn validate_nodepool(np: &NodePool) -> Vec<Violation> {
    let mut out = Violations::default();
    check_name(&mut out, &np.metadata, "NodePool", false);
    nodepool::check_spec(&mut out, &np.spec);
    out.0
}

/// karpenter-tui's own NodePool settings (`api::pool_settings`), checked where a user
/// writes a manifest (`validate`, scenario files) but kept out of [`validate_nodepool`]:
/// upstream ignores these annotations, so a bad value must not mark a live pool
/// `ValidationSucceeded=False`. The engine reports such a value where it applies instead.
pub fn validate_pool_settings(np: &NodePool) -> Vec<Violation> {
    let mut out = Violations::default();
    for e in super::pool_settings::problems(np) {
        out.push(&key_path("metadata.annotations", e.annotation), e.message);
    }
    out.0
}

/// NodeClaims are immutable once created, so catching a bad one (e.g. in a scenario file)
/// before it is written is the only chance; mirrors the `karpenter.sh_nodeclaims` CRD.
pub fn validate_nodeclaim(nc: &NodeClaim) -> Vec<Violation> {
    let mut out = Violations::default();
    // Karpenter creates NodeClaims with generateName, so either name form is fine.
    check_name(&mut out, &nc.metadata, "NodeClaim", true);
    nodeclaim::check_spec(&mut out, &nc.spec);
    out.0
}

/// Mirrors the AWS provider's `karpenter.k8s.aws_ec2nodeclasses` CRD, whose CEL rules
/// (alias exclusivity, role vs. instanceProfile, reserved tags) trip users most often.
pub fn validate_ec2nodeclass(nc: &EC2NodeClass) -> Vec<Violation> {
    let mut out = Violations::default();
    check_name(&mut out, &nc.metadata, "EC2NodeClass", false);
    ec2nodeclass::check_spec(&mut out, &nc.spec);
    out.0
}

/// The list the checks append to; a newtype so every push goes through one constructor.
#[derive(Default)]
pub(crate) struct Violations(Vec<Violation>);

impl Violations {
    pub(crate) fn push(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(Violation {
            path: path.to_string(),
            message: message.into(),
        });
    }
}

/// metadata.name: present (NodePools and NodeClasses are referenced by name) and a DNS
/// subdomain, as the API server requires of cluster-scoped objects.
fn check_name(out: &mut Violations, meta: &ObjectMeta, kind: &str, generate_name_ok: bool) {
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => {
            if let Some(why) = labels::dns_subdomain_problem(name) {
                out.push("metadata.name", format!("invalid name {name:?}: {why}"));
            }
        }
        _ if generate_name_ok && meta.generate_name.as_deref().is_some_and(|g| !g.is_empty()) => {}
        _ => out.push(
            "metadata.name",
            format!(
                "required: every {kind} needs a name (lower-case letters, digits, '-' and '.')"
            ),
        ),
    }
}

/// Map entries are addressed like Kubernetes field paths: `spec.limits[cpu]`.
pub(crate) fn key_path(base: &str, key: &str) -> String {
    format!("{base}[{key}]")
}

/// Quantity maps (limits, requests): each value must be an API server quantity.
pub(crate) fn check_quantities<'a>(
    out: &mut Violations,
    base: &str,
    entries: impl IntoIterator<Item = (&'a String, &'a Quantity)>,
) {
    for (key, q) in entries {
        if !is_valid_quantity(&q.0) {
            out.push(
                &key_path(base, key),
                format!("invalid quantity {:?}: expected a number with an optional suffix, e.g. 100m, 4Gi or 1000", q.0),
            );
        } else if exceeds_kubernetes_max(&q.0) {
            out.push(
                &key_path(base, key),
                format!(
                    "quantity {:?} is out of range: Kubernetes quantities hold at most 2^63-1 (9223372036854775807; resource.Quantity caps larger ones, so the object stored would not be the one written)",
                    q.0
                ),
            );
        }
    }
}

/// `^(([0-9]+(s|m|h))+|Never)$`: expireAfter and consolidateAfter.
pub(crate) fn check_nillable_duration(out: &mut Violations, path: &str, d: &GoDuration) {
    if !(d.is_never() || d.is_whole_units("hms")) {
        out.push(
            path,
            format!(
                "invalid duration {:?}: expected whole hours, minutes and seconds such as 720h, 1h30m or 30s, or Never",
                d.text()
            ),
        );
    }
}

/// `^([0-9]+(s|m|h))+$`: terminationGracePeriod, which has no "Never".
pub(crate) fn check_duration(out: &mut Violations, path: &str, d: &GoDuration) {
    if d.is_never() {
        out.push(
            path,
            "\"Never\" is not allowed here: expected a duration such as 48h or 1h30m",
        );
    } else if !d.is_whole_units("hms") {
        out.push(
            path,
            format!(
                "invalid duration {:?}: expected whole hours, minutes and seconds such as 48h, 1h30m or 30s",
                d.text()
            ),
        );
    }
}

/// Lists with a CRD `maxItems` / maps with `maxProperties`.
pub(crate) fn check_max(out: &mut Violations, path: &str, what: &str, len: usize, max: usize) {
    if len > max {
        out.push(
            path,
            format!("at most {max} {what} are allowed, found {len}"),
        );
    }
}
