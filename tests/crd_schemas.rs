//! The CRDs `karpenter-tui crds` prints, checked two ways:
//!
//! - structurally, in Rust: what the API server demands of a CRD schema (no `$ref`, a type
//!   on every node, int-or-string only in its one allowed form) and the names, scope and
//!   printer columns users see in `kubectl get`, written out as upstream has them;
//! - by an independent validator (Python `jsonschema`, in a cached venv), which reads the
//!   printed YAML and validates upstream-style manifests (must pass) and type-broken ones
//!   (must fail at the field path their first line names).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_tui::api::crds::{crds, crds_yaml};
use serde_json::{Value, json};

#[path = "peers/jsonschema.rs"]
mod jsonschema;
#[path = "fixtures/upstream_crds.rs"]
mod upstream_crds;

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const KINDS: [&str; 3] = ["NodePool", "NodeClaim", "EC2NodeClass"];

// ---------------------------------------------------------------------------------------
// Names, scope and printer columns, as upstream's CRDs declare them.

/// (name, type, jsonPath, priority)
type Column = (&'static str, &'static str, &'static str, Option<i32>);

struct Expected {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    columns: &'static [Column],
}

const EXPECTED: [Expected; 3] = [
    Expected {
        group: "karpenter.sh",
        kind: "NodePool",
        plural: "nodepools",
        singular: "nodepool",
        short_names: &[],
        columns: &[
            (
                "NodeClass",
                "string",
                ".spec.template.spec.nodeClassRef.name",
                None,
            ),
            ("Nodes", "string", ".status.nodes", None),
            (
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
                None,
            ),
            ("Age", "date", ".metadata.creationTimestamp", None),
            ("Weight", "integer", ".spec.weight", Some(1)),
            ("CPU", "string", ".status.resources.cpu", Some(1)),
            ("Memory", "string", ".status.resources.memory", Some(1)),
        ],
    },
    Expected {
        group: "karpenter.sh",
        kind: "NodeClaim",
        plural: "nodeclaims",
        singular: "nodeclaim",
        short_names: &[],
        columns: &[
            (
                "Type",
                "string",
                ".metadata.labels.node\\.kubernetes\\.io/instance-type",
                None,
            ),
            (
                "Capacity",
                "string",
                ".metadata.labels.karpenter\\.sh/capacity-type",
                None,
            ),
            (
                "Zone",
                "string",
                ".metadata.labels.topology\\.kubernetes\\.io/zone",
                None,
            ),
            ("Node", "string", ".status.nodeName", None),
            (
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
                None,
            ),
            ("Age", "date", ".metadata.creationTimestamp", None),
            ("ImageID", "string", ".status.imageID", Some(1)),
            ("ID", "string", ".status.providerID", Some(1)),
            (
                "NodePool",
                "string",
                ".metadata.labels.karpenter\\.sh/nodepool",
                Some(1),
            ),
            ("NodeClass", "string", ".spec.nodeClassRef.name", Some(1)),
            (
                "Drifted",
                "string",
                ".status.conditions[?(@.type==\"Drifted\")].status",
                Some(1),
            ),
        ],
    },
    Expected {
        group: "karpenter.k8s.aws",
        kind: "EC2NodeClass",
        plural: "ec2nodeclasses",
        singular: "ec2nodeclass",
        short_names: &["ec2nc", "ec2ncs"],
        columns: &[
            (
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
                None,
            ),
            ("Age", "date", ".metadata.creationTimestamp", None),
            ("Role", "string", ".spec.role", Some(1)),
        ],
    },
];

fn find(all: &[CustomResourceDefinition], kind: &str) -> CustomResourceDefinition {
    all.iter()
        .find(|c| c.spec.names.kind == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

#[test]
fn names_scope_and_columns_are_upstreams() {
    let all = crds();
    assert_eq!(all.len(), 3);
    for want in &EXPECTED {
        let crd = find(&all, want.kind);
        let names = &crd.spec.names;
        let name = format!("{}.{}", want.plural, want.group);
        assert_eq!(crd.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(crd.spec.group, want.group);
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(names.plural, want.plural);
        assert_eq!(names.singular.as_deref(), Some(want.singular));
        assert_eq!(names.list_kind, Some(format!("{}List", want.kind)));
        assert_eq!(names.categories, Some(vec!["karpenter".to_string()]));
        let shorts: Vec<&str> = names
            .short_names
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        assert_eq!(shorts, want.short_names, "{} short names", want.kind);

        assert_eq!(crd.spec.versions.len(), 1);
        let version = &crd.spec.versions[0];
        assert_eq!(
            (version.name.as_str(), version.served, version.storage),
            ("v1", true, true)
        );
        let sub = version.subresources.as_ref().expect("subresources");
        assert!(sub.status.is_some(), "{}: status subresource", want.kind);
        // Upstream v1.14.1: NodePool scales by spec.replicas (static pools) and reports
        // status.nodes; the other kinds have no scale subresource.
        let scale = sub.scale.as_ref().map(|s| {
            (
                s.spec_replicas_path.as_str(),
                s.status_replicas_path.as_str(),
                s.label_selector_path.as_deref(),
            )
        });
        let want_scale =
            (want.kind == "NodePool").then_some((".spec.replicas", ".status.nodes", None));
        assert_eq!(scale, want_scale, "{} scale subresource", want.kind);
        let columns: Vec<(&str, &str, &str, Option<i32>)> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.type_.as_str(),
                    c.json_path.as_str(),
                    c.priority,
                )
            })
            .collect();
        assert_eq!(columns, want.columns, "{} printer columns", want.kind);
    }
}

// ---------------------------------------------------------------------------------------
// A superset of upstream v1.14.1's schema: applying our CRDs over upstream's prunes nothing,
// and each of upstream's fields has upstream's type.

/// A schema node's type as tests/fixtures/crd_paths.py writes it: `type` or
/// `int-or-string`, then `/<format>` and `+preserve-unknown-fields` when present.
fn schema_type(node: &Value) -> String {
    let mut ty = if node.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        "int-or-string".to_string()
    } else {
        node["type"].as_str().unwrap_or("<none>").to_string()
    };
    if let Some(format) = node["format"].as_str() {
        ty = format!("{ty}/{format}");
    }
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) {
        ty.push_str("+preserve-unknown-fields");
    }
    ty
}

/// Every property path of a schema with its type, as tests/fixtures/crd_paths.py spells
/// them.
fn property_paths(node: &Value, path: &str, out: &mut BTreeMap<String, String>) {
    let key = if path.is_empty() { "." } else { path };
    out.insert(key.to_string(), schema_type(node));
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            property_paths(v, &format!("{path}.{k}"), out);
        }
    }
    if let Some(items) = node.get("items") {
        property_paths(items, &format!("{path}[]"), out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        property_paths(values, &format!("{path}{{}}"), out);
    }
}

/// `Kind version path` -> type, for our CRDs.
fn our_paths() -> BTreeMap<String, String> {
    let mut ours = BTreeMap::new();
    for crd in &crds() {
        for v in &crd.spec.versions {
            let schema = serde_json::to_value(
                v.schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref()),
            )
            .expect("schema");
            let mut paths = BTreeMap::new();
            property_paths(&schema, "", &mut paths);
            for (p, ty) in paths {
                ours.insert(format!("{} {} {p}", crd.spec.names.kind, v.name), ty);
            }
        }
    }
    ours
}

#[test]
fn every_upstream_v1_14_1_property_path_is_in_our_crds_with_its_type() {
    let upstream = upstream_crds::load();
    assert!(
        upstream.paths.len() > 200,
        "the fixture lists upstream's paths"
    );
    let ours = our_paths();
    let mut missing = Vec::new();
    let mut retyped = Vec::new();
    for fact in &upstream.paths {
        let key = format!("{} {} {}", fact.kind, fact.version, fact.path);
        match ours.get(&key) {
            None => missing.push(key),
            Some(ty) if *ty != fact.ty => {
                retyped.push(format!("{key}: upstream {}, ours {ty}", fact.ty))
            }
            Some(_) => {}
        }
    }
    assert!(
        missing.is_empty(),
        "paths of upstream v1.14.1 our CRDs lack (the API server would prune them): {missing:#?}"
    );
    assert!(
        retyped.is_empty(),
        "paths whose schema type differs from upstream v1.14.1's (the API server would refuse \
         or read differently what upstream writes): {retyped:#?}"
    );
}

#[test]
fn the_fixture_names_upstreams_crds_as_ours_do() {
    let upstream = upstream_crds::load();
    for crd in crds() {
        let kind = crd.spec.names.kind.as_str();
        let fact = upstream.crd(kind);
        assert_eq!(crd.spec.group, fact.group, "{kind}");
        assert_eq!(crd.spec.names.plural, fact.plural, "{kind}");
        assert_eq!(
            crd.spec.names.singular.as_deref(),
            Some(fact.singular.as_str())
        );
        assert_eq!(crd.spec.scope, fact.scope, "{kind}");
        let sub = crd.spec.versions[0]
            .subresources
            .as_ref()
            .expect("subresources");
        let mut ours = Vec::new();
        if sub.status.is_some() {
            ours.push("status");
        }
        if let Some(scale) = &sub.scale {
            ours.push("scale");
            assert_eq!(
                (
                    scale.spec_replicas_path.as_str(),
                    scale.status_replicas_path.as_str()
                ),
                (upstream.scale.0.as_str(), upstream.scale.1.as_str())
            );
        }
        assert_eq!(ours, fact.subresources, "{kind} subresources");
    }
}

// ---------------------------------------------------------------------------------------
// Structural schema rules (apiextensions-apiserver's structural schema validation).

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let props = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("openAPIV3Schema");
    serde_json::to_value(props).expect("schema serializes")
}

/// Every schema node with its path, depth first.
fn nodes<'a>(node: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
    out.push((path.clone(), node));
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            nodes(child, format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = node.get("items") {
        nodes(items, format!("{path}[]"), out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        nodes(values, format!("{path}{{}}"), out);
    }
    for key in ["anyOf", "oneOf", "allOf", "not"] {
        for sub in node
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            nodes(sub, format!("{path}<{key}>"), out);
        }
    }
}

fn structural_violations(kind: &str, schema: &Value) -> Vec<String> {
    let mut all = Vec::new();
    nodes(schema, kind.to_string(), &mut all);
    let allowed_formats = [
        "int32",
        "int64",
        "float",
        "double",
        "byte",
        "date",
        "date-time",
    ];
    let mut bad = Vec::new();
    for (path, node) in all {
        let Some(obj) = node.as_object() else {
            bad.push(format!("{path}: schema node is not an object"));
            continue;
        };
        for key in [
            "$ref",
            "$schema",
            "definitions",
            "$defs",
            "const",
            "title",
            "nullable",
        ] {
            if obj.contains_key(key) {
                bad.push(format!("{path}: has {key}"));
            }
        }
        for key in ["oneOf", "allOf", "not"] {
            if obj.contains_key(key) {
                bad.push(format!("{path}: {key} is not structural here"));
            }
        }
        let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&json!(true));
        if let Some(any_of) = obj.get("anyOf") {
            if !int_or_string {
                bad.push(format!("{path}: anyOf without x-kubernetes-int-or-string"));
            } else if any_of != &json!([{"type": "integer"}, {"type": "string"}]) {
                bad.push(format!("{path}: int-or-string anyOf is {any_of}"));
            }
        }
        let ty = obj.get("type");
        if ty.is_some_and(|t| !t.is_string()) {
            bad.push(format!("{path}: type must be one string, found {ty:?}"));
        }
        let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
        let in_any_of = path.ends_with("<anyOf>");
        if ty.is_none() && !int_or_string && !preserve && !in_any_of {
            bad.push(format!("{path}: no type"));
        }
        if int_or_string && ty.is_some() {
            bad.push(format!("{path}: int-or-string must not declare a type"));
        }
        if (obj.contains_key("properties") || obj.contains_key("additionalProperties"))
            && ty != Some(&json!("object"))
        {
            bad.push(format!("{path}: has properties but type {ty:?}"));
        }
        if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
            bad.push(format!(
                "{path}: properties and additionalProperties together"
            ));
        }
        if obj.contains_key("items") && ty != Some(&json!("array")) {
            bad.push(format!("{path}: has items but type {ty:?}"));
        }
        if ty == Some(&json!("array")) && !obj.contains_key("items") {
            bad.push(format!("{path}: array without items"));
        }
        if let Some(format) = obj.get("format").and_then(Value::as_str)
            && !allowed_formats.contains(&format)
        {
            bad.push(format!("{path}: format {format} unknown to the API server"));
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array)
            && values.iter().any(Value::is_null)
        {
            bad.push(format!("{path}: null in enum"));
        }
        for rule in obj
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or("");
            if text("rule").is_empty() || text("message").is_empty() {
                bad.push(format!("{path}: CEL rule without rule or message: {rule}"));
            }
        }
        if obj.get("uniqueItems") == Some(&json!(true)) {
            bad.push(format!("{path}: uniqueItems is forbidden"));
        }
    }
    bad
}

#[test]
fn schemas_are_structural() {
    for crd in crds() {
        let kind = crd.spec.names.kind.clone();
        let schema = schema_of(&crd);
        let bad = structural_violations(&kind, &schema);
        assert!(bad.is_empty(), "{kind}:\n{}", bad.join("\n"));
        // The root is what controller-gen writes: TypeMeta, ObjectMeta, spec, status.
        let props = schema["properties"].as_object().expect("root properties");
        let keys: Vec<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["apiVersion", "kind", "metadata", "spec", "status"],
            "{kind}"
        );
        assert_eq!(schema["properties"]["metadata"], json!({"type": "object"}));
    }
}

#[test]
fn structural_check_catches_what_kube_emits_raw() {
    // The checker itself must be able to fail: kube's un-reshaped schema for a
    // quantity map has `anyOf: [{}, {}]` and nullable optionals.
    let raw = json!({"type": "object", "properties": {
        "limits": {"type": "object", "additionalProperties":
            {"anyOf": [{}, {}], "x-kubernetes-int-or-string": true}},
        "weight": {"type": "integer", "nullable": true, "format": "uint32"},
        "ref": {"$ref": "#/definitions/X"}}});
    let bad = structural_violations("Raw", &raw);
    for expected in [
        "int-or-string anyOf",
        "has nullable",
        "format uint32",
        "has $ref",
    ] {
        assert!(
            bad.iter().any(|b| b.contains(expected)),
            "{expected} not reported in {bad:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The binary prints the same CRDs.

fn binary_crds_yaml() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .arg("crds")
        .output()
        .expect("run karpenter-tui crds");
    assert!(
        out.status.success(),
        "karpenter-tui crds failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("crds output is UTF-8")
}

#[test]
fn crds_subcommand_prints_the_library_crds() {
    assert_eq!(binary_crds_yaml(), crds_yaml());
}

// ---------------------------------------------------------------------------------------
// The independent validator (tests/peers/jsonschema.rs runs it).

fn yaml_files(rel: &str) -> Vec<PathBuf> {
    let dir = Path::new(MANIFEST_DIR).join(rel);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn valid_manifests_pass_the_schemas() {
    let mut files = yaml_files("tests/fixtures/v1/valid");
    files.extend(yaml_files("tests/fixtures/crd-schema/valid"));
    assert!(files.len() >= 2, "no valid fixtures found");
    let crds = binary_crds_yaml();
    for draft in ["2020-12", "7"] {
        let reports = jsonschema::check(&crds, &files, draft);
        let failures: Vec<String> = reports
            .iter()
            .filter(|r| !r.errors.is_empty())
            .map(|r| format!("{} ({}): {:?}", r.file, r.kind, r.errors))
            .collect();
        assert!(
            failures.is_empty(),
            "draft {draft}:\n{}",
            failures.join("\n")
        );
        for kind in KINDS {
            assert!(
                reports.iter().any(|r| r.kind == kind && !r.skipped),
                "draft {draft}: no {kind} was validated"
            );
        }
        for file in &files {
            let name = file.display().to_string();
            assert!(
                reports.iter().any(|r| r.file == name && !r.skipped),
                "{name}: no document of a CRD kind"
            );
        }
    }
}

/// The path a type-broken fixture names on its first line.
fn expected_path(file: &Path) -> String {
    let text = fs::read_to_string(file).expect("read fixture");
    let first = text.lines().next().unwrap_or("");
    first
        .strip_prefix("# expect-schema-error:")
        .map(|p| p.trim().to_string())
        .unwrap_or_else(|| {
            panic!(
                "{}: first line must be `# expect-schema-error: <path>`",
                file.display()
            )
        })
}

#[test]
fn type_errors_are_rejected_at_their_path() {
    let files = yaml_files("tests/fixtures/crd-schema/invalid");
    assert!(files.len() >= 10, "type-broken fixtures missing");
    let crds = binary_crds_yaml();
    for draft in ["2020-12", "7"] {
        let reports = jsonschema::check(&crds, &files, draft);
        for file in &files {
            let name = file.display().to_string();
            let want = expected_path(file);
            let docs: Vec<&jsonschema::Report> =
                reports.iter().filter(|r| r.file == name).collect();
            assert_eq!(docs.len(), 1, "{name}: expected one document");
            let doc = docs[0];
            assert!(!doc.skipped, "{name}: kind {} has no CRD", doc.kind);
            assert!(
                !doc.errors.is_empty(),
                "draft {draft}: {name} passed the schema, expected an error at {want}"
            );
            let elsewhere: Vec<&(String, String)> = doc
                .errors
                .iter()
                .filter(|(path, _)| *path != want)
                .collect();
            assert!(
                elsewhere.is_empty(),
                "draft {draft}: {name}: errors outside {want}: {elsewhere:?}"
            );
        }
    }
}
