//! Validation tests. Fixtures are manifests: a valid base object per kind, edited by exact
//! text replacement, loaded through the manifest loader and validated.

mod ec2_instance;
mod ec2nodeclass;
mod nodeclaim;
mod nodepool;
mod requirements;

use super::{Violation, validate};
use crate::api::manifest::{Object, load};

/// Loads a single-object manifest; the fixture itself must load without errors.
fn load_one(yaml: &str) -> Object {
    let loaded = load("test.yaml", yaml);
    assert!(
        !loaded.has_errors(),
        "fixture does not load: {:#?}\n{yaml}",
        loaded.diagnostics
    );
    match loaded.objects.into_iter().next() {
        Some((_, obj)) => obj,
        None => panic!("fixture has no object:\n{yaml}"),
    }
}

/// `base` with the first `from` replaced by `to`; fails loudly when `from` is missing so a
/// stale fixture cannot make a test pass vacuously.
fn edit(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "fixture lacks {from:?}");
    base.replacen(from, to, 1)
}

fn check(yaml: &str) -> Vec<Violation> {
    validate(&load_one(yaml))
}

/// The edited fixture validates cleanly.
fn assert_ok(base: &str, from: &str, to: &str) {
    let yaml = edit(base, from, to);
    let vs = check(&yaml);
    assert!(
        vs.is_empty(),
        "{from:?} -> {to:?} should be valid, got {vs:#?}"
    );
}

/// The edited fixture has a violation at exactly `path` whose message contains `msg`.
fn assert_bad(base: &str, from: &str, to: &str, path: &str, msg: &str) {
    let yaml = edit(base, from, to);
    let vs = check(&yaml);
    assert!(
        vs.iter().any(|v| v.path == path && v.message.contains(msg)),
        "{from:?} -> {to:?}: expected a violation at {path} mentioning {msg:?}, got {vs:#?}"
    );
}

/// Table form: (from, to) edits that must stay valid.
fn all_ok(base: &str, cases: &[(&str, &str)]) {
    for (from, to) in cases {
        assert_ok(base, from, to);
    }
}

/// Table form: (from, to, path, message part) edits that must be rejected.
fn all_bad(base: &str, cases: &[(&str, &str, &str, &str)]) {
    for (from, to, path, msg) in cases {
        assert_bad(base, from, to, path, msg);
    }
}

#[test]
fn validate_dispatches_on_kind() {
    let text = format!(
        "{}---\n{}---\n{}",
        nodepool::POOL.replacen("name: default", "name: Bad_Name", 1),
        nodeclaim::CLAIM.replace("generateName: default-", "name: Bad_Name"),
        ec2nodeclass::CLASS.replacen("name: default", "name: Bad_Name", 1),
    );
    let loaded = load("all.yaml", &text);
    assert_eq!(loaded.objects.len(), 3, "{:#?}", loaded.diagnostics);
    for (_, obj) in &loaded.objects {
        let vs = validate(obj);
        assert_eq!(vs.len(), 1, "{}: {vs:#?}", obj.kind());
        assert_eq!(vs[0].path, "metadata.name");
        assert!(vs[0].message.contains("DNS subdomain"), "{}", vs[0].message);
    }
}
