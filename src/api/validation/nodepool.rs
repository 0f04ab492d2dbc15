//! NodePool checks: the `karpenter.sh_nodepools` CRD schema and CEL rules, plus upstream's
//! `NodePool.RuntimeValidate` (labels, taints, requirements) and budget schedule parsing.

use std::collections::BTreeMap;

use super::labels::{KeyUse, label_value_problem, qualified_name_problem, restricted_key_problem};
use super::nodeclaim::{check_node_class_ref, check_taints};
use super::requirements::check_requirements;
use super::{
    Violations, check_duration, check_max, check_nillable_duration, check_quantities, key_path,
};
use crate::api::nodepool::{Budget, Disruption, NodeClaimTemplate, NodePoolSpec};
use crate::api::schedule::Schedule;

/// CRD `maxItems` of `disruption.budgets`.
const MAX_BUDGETS: usize = 50;
/// CRD `maxProperties` of `template.metadata.labels`.
const MAX_LABELS: usize = 100;

pub(crate) fn check_spec(out: &mut Violations, spec: &NodePoolSpec) {
    if let Some(w) = spec.weight
        && !(1..=100).contains(&w)
    {
        out.push(
            "spec.weight",
            format!("weight must be between 1 and 100, found {w} (leave it unset for the lowest priority)"),
        );
    }
    check_quantities(out, "spec.limits", &spec.limits);
    check_negative_limits(out, spec);
    check_static(out, spec);
    check_disruption(out, &spec.disruption);
    check_template(out, &spec.template);
}

/// A negative limit is already exceeded by an empty pool, so the pool launches nothing,
/// and says so nowhere (the API server takes any quantity; upstream's provisioner skips
/// the pool as over its limits). Refused here, where the author can see why.
fn check_negative_limits(out: &mut Violations, spec: &NodePoolSpec) {
    for (k, q) in &spec.limits {
        let negative = q.0.trim().strip_prefix('-').is_some_and(|n| {
            let mantissa = n.split(|c: char| !(c.is_ascii_digit() || c == '.')).next();
            mantissa.is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)))
        });
        if negative {
            out.push(
                &key_path("spec.limits", k),
                format!(
                    "limit {:?} is negative: no node fits under it, so this pool would launch nothing (write 0 to stop a pool on purpose)",
                    q.0
                ),
            );
        }
    }
}

/// The CRD's rules on static pools (`spec.replicas` set): a non-negative count, no
/// limits but `nodes`, no weight (upstream `pkg/apis/v1/nodepool.go` XValidations).
fn check_static(out: &mut Violations, spec: &NodePoolSpec) {
    let Some(replicas) = spec.replicas else {
        return;
    };
    if replicas < 0 {
        out.push(
            "spec.replicas",
            format!("replicas must be 0 or more, found {replicas}"),
        );
    }
    if let Some(other) = spec.limits.keys().find(|k| k.as_str() != "nodes") {
        out.push(
            &format!("spec.limits.{other}"),
            "only 'limits.nodes' is supported on static NodePools",
        );
    }
    if spec.weight.is_some() {
        out.push(
            "spec.weight",
            "'weight' is not supported on static NodePools",
        );
    }
}

fn check_disruption(out: &mut Violations, d: &Disruption) {
    // The typed model defaults the whole block to `consolidateAfter: 0s`, so `None` means
    // the block was written without it; upstream marks the field required.
    match &d.consolidate_after {
        None => out.push(
            "spec.disruption.consolidateAfter",
            "required when spec.disruption is set: how long a node must be empty or underutilized before consolidation, e.g. 0s, 5m or Never",
        ),
        Some(c) => check_nillable_duration(out, "spec.disruption.consolidateAfter", c),
    }
    check_max(
        out,
        "spec.disruption.budgets",
        "budgets",
        d.budgets.len(),
        MAX_BUDGETS,
    );
    for (i, b) in d.budgets.iter().enumerate() {
        check_budget(out, &format!("spec.disruption.budgets[{i}]"), b);
    }
}

fn check_budget(out: &mut Violations, path: &str, b: &Budget) {
    if !is_budget_nodes(&b.nodes) {
        out.push(
            &format!("{path}.nodes"),
            format!(
                "invalid nodes {:?}: expected a node count such as 5, or a percentage from 0% to 100% such as 10%",
                b.nodes
            ),
        );
    }
    // CEL on the list: `self.all(x, has(x.schedule) == has(x.duration))`; reported at the
    // field that is missing.
    match (&b.schedule, &b.duration) {
        (Some(_), None) => out.push(
            &format!("{path}.duration"),
            "'schedule' must be set with 'duration': add how long the budget stays active after each schedule hit, e.g. 8h",
        ),
        (None, Some(_)) => out.push(
            &format!("{path}.schedule"),
            "'schedule' must be set with 'duration': add when the budget becomes active, e.g. \"0 9 * * 1-5\" or @daily",
        ),
        _ => {}
    }
    if let Some(s) = &b.schedule {
        match Schedule::parse(s) {
            Err(e) => out.push(
                &format!("{path}.schedule"),
                format!("invalid cron schedule {s:?}: {e}"),
            ),
            // robfig/cron parses it, and then finds no time to fire: the budget would
            // never apply, which is never what its author meant.
            Ok(parsed) if parsed.never_fires() => out.push(
                &format!("{path}.schedule"),
                format!(
                    "cron schedule {s:?} never fires: no date matches its day-of-month and month fields together, so this budget would never apply"
                ),
            ),
            Ok(_) => {}
        }
    }
    if let Some(d) = &b.duration
        && !is_budget_duration(d.text())
    {
        out.push(
            &format!("{path}.duration"),
            format!(
                "invalid duration {:?}: budget durations take hours and minutes only (cron has no seconds), e.g. 8h, 30m or 1h30m",
                d.text()
            ),
        );
    }
}

/// `^((100|[0-9]{1,2})%|[0-9]+)$`
fn is_budget_nodes(s: &str) -> bool {
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    match s.strip_suffix('%') {
        Some(p) => p == "100" || (p.len() <= 2 && digits(p)),
        None => digits(s),
    }
}

/// `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`: Go prints durations with a trailing "0s",
/// so that suffix is tolerated.
fn is_budget_duration(s: &str) -> bool {
    let body = s.strip_suffix("0s").unwrap_or(s);
    let Some((_, rest)) = split_digits(body) else {
        return false;
    };
    match rest {
        "h" | "m" => true,
        _ => rest
            .strip_prefix('h')
            .and_then(split_digits)
            .is_some_and(|(_, unit)| unit == "m"),
    }
}

/// A non-empty run of leading ASCII digits, and the rest.
fn split_digits(t: &str) -> Option<(&str, &str)> {
    let n = t.bytes().take_while(u8::is_ascii_digit).count();
    (n > 0).then(|| t.split_at(n))
}

fn check_template(out: &mut Violations, t: &NodeClaimTemplate) {
    check_template_labels(out, "spec.template.metadata.labels", &t.metadata.labels);
    let spec = &t.spec;
    check_requirements(
        out,
        "spec.template.spec.requirements",
        &spec.requirements,
        KeyUse::NodePoolRequirement,
    );
    check_taints(
        out,
        "spec.template.spec",
        &spec.taints,
        &spec.startup_taints,
    );
    check_node_class_ref(out, "spec.template.spec.nodeClassRef", &spec.node_class_ref);
    check_nillable_duration(out, "spec.template.spec.expireAfter", &spec.expire_after);
    if let Some(d) = &spec.termination_grace_period {
        check_duration(out, "spec.template.spec.terminationGracePeriod", d);
    }
}

/// Template labels: CRD `maxProperties` and value pattern, the reserved-domain CEL rules,
/// and upstream's runtime `validateLabels` (keys are qualified names).
fn check_template_labels(out: &mut Violations, base: &str, labels: &BTreeMap<String, String>) {
    check_max(out, base, "labels", labels.len(), MAX_LABELS);
    for (k, v) in labels {
        let path = key_path(base, k);
        if let Some(why) = qualified_name_problem(k) {
            out.push(&path, format!("invalid label key: {why}"));
        }
        if let Some(why) = restricted_key_problem(k, KeyUse::TemplateLabel) {
            out.push(&path, why);
        }
        if let Some(why) = label_value_problem(v) {
            out.push(&path, why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_nodes_pattern() {
        for ok in ["0", "5", "120", "0%", "10%", "99%", "100%"] {
            assert!(is_budget_nodes(ok), "{ok}");
        }
        for bad in [
            "", "%", "101%", "100.0%", "5 %", "-1", "1e3", "010%0", "abc",
        ] {
            assert!(!is_budget_nodes(bad), "{bad}");
        }
    }

    #[test]
    fn budget_duration_pattern() {
        for ok in ["8h", "30m", "1h30m", "10h0m", "1h30m0s", "30m0s", "0m"] {
            assert!(is_budget_duration(ok), "{ok}");
        }
        for bad in [
            "", "30s", "10s", "0s", "1h30m30s", "1m30m", "1h1h", "1d", "h", "1.5h",
        ] {
            assert!(!is_budget_duration(bad), "{bad}");
        }
    }
}
