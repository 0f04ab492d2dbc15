//! Requirement rules, exercised through a NodePool template (NodeClaims share them; see
//! nodeclaim.rs for where they differ).

use super::nodepool::POOL;
use super::{all_bad, all_ok, assert_bad, assert_ok, check, edit};

/// The fixture's first requirement, replaced by each case.
const REQ0: &str = "        - key: karpenter.sh/capacity-type\n          operator: In\n          values: [\"spot\", \"on-demand\"]\n";

/// POOL with its first requirement replaced by `req` (indented as a list item).
fn with_req(req: &str) -> (String, &'static str) {
    (edit(POOL, REQ0, req), "spec.template.spec.requirements[0]")
}

#[test]
fn at_most_100_requirements() {
    let req = "        - key: example.com/team\n          operator: Exists\n";
    assert_ok(POOL, REQ0, &req.repeat(99));
    assert_bad(
        POOL,
        REQ0,
        &req.repeat(100),
        "spec.template.spec.requirements",
        "at most 100 requirements are allowed, found 101",
    );
}

#[test]
fn requirement_keys() {
    let req = |key: &str| format!("        - key: \"{key}\"\n          operator: Exists\n");
    for key in [
        "example.com/team",
        "team",
        "topology.kubernetes.io/zone",
        "kubernetes.io/arch",
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
        "node-restriction.kubernetes.io/pool",
        "kops.k8s.io/instancegroup",
        "karpenter.k8s.aws/instance-family",
    ] {
        assert_ok(POOL, REQ0, &req(key));
    }
    let long = format!("example.com/{}", "a".repeat(305));
    for (key, msg) in [
        (
            "kubernetes.io/hostname",
            "label \"kubernetes.io/hostname\" is restricted",
        ),
        (
            "karpenter.sh/nodepool",
            "label \"karpenter.sh/nodepool\" is restricted",
        ),
        (
            "karpenter.sh/initialized",
            "label domain \"karpenter.sh\" is restricted",
        ),
        (
            "kubernetes.io/team",
            "label domain \"kubernetes.io\" is restricted",
        ),
        ("sigs.k8s.io/x", "label domain \"k8s.io\" is restricted"),
        (
            "karpenter.k8s.aws/not-a-label",
            "label domain \"karpenter.k8s.aws\" is restricted",
        ),
        (
            "Example.com/team",
            "invalid key: \"Example.com/team\" is not a qualified name",
        ),
        ("a/b/c", "at most one '/'"),
        ("team-", "not a qualified name"),
        (
            long.as_str(),
            "key must be at most 316 characters, found 317",
        ),
    ] {
        let (yaml, at) = with_req(&req(key));
        let vs = check(&yaml);
        assert!(
            vs.iter()
                .any(|v| v.path == format!("{at}.key") && v.message.contains(msg)),
            "{key}: expected {msg:?} at {at}.key, got {vs:#?}"
        );
    }
}

#[test]
fn operators_and_values() {
    let req = |op: &str, values: &str| {
        format!(
            "        - key: example.com/size\n          operator: {op}\n          values: {values}\n"
        )
    };
    for (op, values) in [
        ("In", "[a]"),
        ("NotIn", "[]"),
        ("NotIn", "[a, b]"),
        ("Exists", "[]"),
        ("DoesNotExist", "[]"),
        ("Gt", "[\"4\"]"),
        ("Lt", "[\"0\"]"),
        ("Gte", "[\"16\"]"),
        ("Lte", "[\"64\"]"),
    ] {
        assert_ok(POOL, REQ0, &req(op, values));
    }
    let at = "spec.template.spec.requirements[0]";
    for (op, values, path, msg) in [
        (
            "In",
            "[]",
            "values",
            "requirements with operator 'In' must have a value defined",
        ),
        (
            "Exists",
            "[a]",
            "values",
            "operator Exists takes no values, found 1",
        ),
        (
            "DoesNotExist",
            "[a, b]",
            "values",
            "operator DoesNotExist takes no values, found 2",
        ),
        ("Gt", "[]", "values", "operator Gt found 0 values"),
        (
            "Gte",
            "[\"1\", \"2\"]",
            "values",
            "operator Gte found 2 values",
        ),
        (
            "Lt",
            "[abc]",
            "values[0]",
            "\"abc\" is not a non-negative integer",
        ),
        (
            "Lte",
            "[\"-1\"]",
            "values[0]",
            "\"-1\" is not a non-negative integer",
        ),
        (
            "In",
            "[\"has space\"]",
            "values[0]",
            "invalid label value \"has space\"",
        ),
        (
            "NotIn",
            "[ok, \"-bad\"]",
            "values[1]",
            "invalid label value \"-bad\"",
        ),
    ] {
        assert_bad(POOL, REQ0, &req(op, values), &format!("{at}.{path}"), msg);
    }
    let long = format!("[{}]", "a".repeat(64));
    assert_bad(
        POOL,
        REQ0,
        &req("In", &long),
        &format!("{at}.values[0]"),
        "at most 63 characters",
    );
}

#[test]
fn min_values() {
    let req = |values: &str, min: i64| {
        format!(
            "        - key: node.kubernetes.io/instance-type\n          operator: In\n          values: {values}\n          minValues: {min}\n"
        )
    };
    all_ok(
        POOL,
        &[(REQ0, &req("[a, b]", 2)), (REQ0, &req("[a, b, c]", 1))],
    );
    let path = "spec.template.spec.requirements[0].minValues";
    all_bad(
        POOL,
        &[
            (
                REQ0,
                &req("[a, b]", 3),
                path,
                "minValues is 3 but 2 values are listed",
            ),
            (REQ0, &req("[a, b]", 0), path, "between 1 and 50, found 0"),
            (REQ0, &req("[a]", 51), path, "between 1 and 50, found 51"),
        ],
    );
}
