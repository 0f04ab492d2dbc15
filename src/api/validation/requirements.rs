//! Node selector requirements of NodePool templates and NodeClaims: the CRD schema of
//! `requirements[]`, its CEL rules, and upstream's runtime `ValidateRequirement`.

use super::labels::{KeyUse, label_value_problem, qualified_name_problem, restricted_key_problem};
use super::{Violations, check_max};
use crate::api::nodeclaim::{NodeSelectorRequirementWithMinValues, Operator};

/// CRD `maxItems` of a requirements list.
const MAX_REQUIREMENTS: usize = 100;
/// CRD `maxLength` of a requirement key.
const MAX_KEY_LEN: usize = 316;
/// CRD bounds of `minValues`.
const MIN_VALUES_RANGE: std::ops::RangeInclusive<i64> = 1..=50;

/// Checks a requirements list found at `base` (e.g. `spec.template.spec.requirements`).
pub(crate) fn check_requirements(
    out: &mut Violations,
    base: &str,
    reqs: &[NodeSelectorRequirementWithMinValues],
    used: KeyUse,
) {
    check_max(out, base, "requirements", reqs.len(), MAX_REQUIREMENTS);
    for (i, r) in reqs.iter().enumerate() {
        check_requirement(out, &format!("{base}[{i}]"), r, used);
    }
}

fn check_requirement(
    out: &mut Violations,
    path: &str,
    r: &NodeSelectorRequirementWithMinValues,
    used: KeyUse,
) {
    let key_path = format!("{path}.key");
    if r.key.len() > MAX_KEY_LEN {
        out.push(
            &key_path,
            format!(
                "key must be at most {MAX_KEY_LEN} characters, found {}",
                r.key.len()
            ),
        );
    } else if let Some(why) = qualified_name_problem(&r.key) {
        out.push(&key_path, format!("invalid key: {why}"));
    }
    if let Some(why) = restricted_key_problem(&r.key, used) {
        out.push(&key_path, why);
    }

    let values_path = format!("{path}.values");
    let op = r.operator.as_str();
    match r.operator {
        Operator::In if r.values.is_empty() => out.push(
            &values_path,
            "requirements with operator 'In' must have a value defined (list at least one value)",
        ),
        // Core Kubernetes node selector validation: these operators test presence only.
        Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => out.push(
            &values_path,
            format!(
                "operator {op} takes no values, found {} (remove 'values' or use In / NotIn)",
                r.values.len()
            ),
        ),
        o if o.is_numeric() => match r.values.as_slice() {
            [v] if !v.parse::<i64>().is_ok_and(|n| n >= 0) => out.push(
                &format!("{values_path}[0]"),
                format!(
                    "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value: {v:?} is not a non-negative integer"
                ),
            ),
            [_] => {}
            vs => out.push(
                &values_path,
                format!(
                    "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value: operator {op} found {} values",
                    vs.len()
                ),
            ),
        },
        _ => {}
    }
    for (j, v) in r.values.iter().enumerate() {
        if let Some(why) = label_value_problem(v) {
            out.push(&format!("{values_path}[{j}]"), why);
        }
    }

    if let Some(min) = r.min_values {
        let min_path = format!("{path}.minValues");
        if !MIN_VALUES_RANGE.contains(&min) {
            out.push(
                &min_path,
                format!("minValues must be between 1 and 50, found {min}"),
            );
        }
        let n = r.values.len();
        if r.operator == Operator::In && i64::try_from(n).is_ok_and(|n| n < min) {
            out.push(
                &min_path,
                format!(
                    "requirements with 'minValues' must have at least that many values specified in the 'values' field: minValues is {min} but {n} value{} listed",
                    if n == 1 { " is" } else { "s are" }
                ),
            );
        }
    }
}
