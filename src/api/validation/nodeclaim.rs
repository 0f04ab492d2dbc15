//! NodeClaim checks, and the parts of a NodeClaim spec that NodePool templates share
//! (taints, the NodeClass reference).

use std::collections::HashMap;

use super::labels::{KeyUse, qualified_name_problem};
use super::requirements::check_requirements;
use super::{Violations, check_duration, check_nillable_duration, check_quantities};
use crate::api::nodeclaim::{NodeClaimSpec, NodeClassReference, Taint, TaintEffect};

/// The whole NodeClaim spec at `spec`.
pub(crate) fn check_spec(out: &mut Violations, spec: &NodeClaimSpec) {
    check_requirements(
        out,
        "spec.requirements",
        &spec.requirements,
        KeyUse::NodeClaimRequirement,
    );
    check_taints(out, "spec", &spec.taints, &spec.startup_taints);
    check_quantities(out, "spec.resources.requests", &spec.resources.requests);
    check_node_class_ref(out, "spec.nodeClassRef", &spec.node_class_ref);
    check_nillable_duration(out, "spec.expireAfter", &spec.expire_after);
    if let Some(d) = &spec.termination_grace_period {
        check_duration(out, "spec.terminationGracePeriod", d);
    }
}

/// `taints` and `startupTaints` under `spec_path`: CRD key/value patterns (qualified names)
/// and upstream's runtime rule that a key/effect pair appears once across both lists.
pub(crate) fn check_taints(
    out: &mut Violations,
    spec_path: &str,
    taints: &[Taint],
    startup: &[Taint],
) {
    let mut seen: HashMap<(&str, TaintEffect), String> = HashMap::new();
    let lists = [("taints", taints), ("startupTaints", startup)];
    for (field, list) in lists {
        for (i, t) in list.iter().enumerate() {
            let path = format!("{spec_path}.{field}[{i}]");
            if t.key.is_empty() {
                out.push(&format!("{path}.key"), "taint key may not be empty");
            } else if let Some(why) = qualified_name_problem(&t.key) {
                out.push(&format!("{path}.key"), format!("invalid taint key: {why}"));
            }
            if let Some(v) = t.value.as_deref().filter(|v| !v.is_empty())
                && let Some(why) = qualified_name_problem(v)
            {
                out.push(
                    &format!("{path}.value"),
                    format!("invalid taint value: {why}"),
                );
            }
            match seen.get(&(t.key.as_str(), t.effect)) {
                Some(first) => out.push(
                    &path,
                    format!(
                        "duplicate taint key/effect pair {}={}: already set at {first}",
                        t.key,
                        t.effect.as_str()
                    ),
                ),
                None => {
                    seen.insert((t.key.as_str(), t.effect), path);
                }
            }
        }
    }
}

/// `nodeClassRef`: the CEL rules on group, kind and name, and the group pattern `^[^/]*$`.
pub(crate) fn check_node_class_ref(out: &mut Violations, path: &str, r: &NodeClassReference) {
    if r.group.is_empty() {
        out.push(
            &format!("{path}.group"),
            "group may not be empty (e.g. karpenter.k8s.aws)",
        );
    } else if r.group.contains('/') {
        out.push(
            &format!("{path}.group"),
            format!(
                "group {:?} must not contain '/': write the API group without a version, e.g. karpenter.k8s.aws",
                r.group
            ),
        );
    }
    if r.kind.is_empty() {
        out.push(
            &format!("{path}.kind"),
            "kind may not be empty (e.g. EC2NodeClass)",
        );
    }
    if r.name.is_empty() {
        out.push(
            &format!("{path}.name"),
            "name may not be empty (the name of the EC2NodeClass to use)",
        );
    }
}
