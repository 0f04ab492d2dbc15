//! CRD manifests for NodePool, NodeClaim and EC2NodeClass.
//!
//! The schemas start from kube's derive (`NodePool::crd()` etc.), which knows our types,
//! their CEL rules and printer columns. What the derive cannot express is reshaped here so
//! the result is what upstream's controller-gen emits for Karpenter v1
//! (`kubernetes-sigs/karpenter` `pkg/apis/crds/karpenter.sh_*.yaml`,
//! `aws/karpenter-provider-aws` `pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`):
//! a cluster that installed our CRDs accepts and defaults objects exactly as one running
//! upstream Karpenter would.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;
use serde_json::{Map, Value, json};

use super::ec2nodeclass::EC2NodeClass;
use super::nodeclaim::NodeClaim;
use super::nodepool::NodePool;

/// Upstream's `+kubebuilder:validation:Pattern` for EBS `volumeSize`: whole Gi/G/Ti/T within
/// EBS limits. Upstream declares the field as a plain string, so integers are rejected.
pub const EBS_VOLUME_SIZE_PATTERN: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";

/// The formats the API server knows (apiextensions-apiserver `supportedFormats`, the ones
/// our types can produce). schemars also emits Rust-only ones such as `uint32`.
const KUBERNETES_FORMATS: &[&str] = &[
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
];

/// How one kind's generated schema differs from upstream's, as data.
struct Shape {
    /// Field paths that carry a `default` upstream (`+kubebuilder:default`). serde defaults
    /// elsewhere (e.g. an empty template metadata) are ours alone and are dropped, so the
    /// API server does not write fields upstream leaves absent.
    defaults: &'static [&'static str],
    /// (object path, field): fields upstream marks `+required` although our types give them
    /// a serde default, which makes schemars leave them out of `required`.
    required: &'static [(&'static str, &'static str)],
    /// Paths whose subtree drops its CEL rules: shared Rust types reused in status, where
    /// upstream uses plain core types without the spec's admission rules.
    no_rules: &'static [&'static str],
    /// Paths upstream declares as a plain `integer` where our Rust type makes schemars
    /// add a format (`minValues`: upstream's `*int`, controller-gen writes no format).
    no_format: &'static [&'static str],
}

const NODEPOOL: Shape = Shape {
    defaults: &[
        "spec.disruption",
        "spec.disruption.consolidationPolicy",
        "spec.disruption.budgets",
        "spec.disruption.budgets[].nodes",
        "spec.template.spec.expireAfter",
        "status.nodes",
    ],
    required: &[
        ("spec.disruption", "consolidateAfter"),
        ("spec.disruption.budgets[]", "nodes"),
    ],
    no_rules: &[],
    no_format: &["spec.template.spec.requirements[].minValues"],
};

const NODECLAIM: Shape = Shape {
    defaults: &["spec.expireAfter"],
    required: &[],
    no_rules: &[],
    no_format: &["spec.requirements[].minValues"],
};

// Upstream declares EC2NodeClass `spec` omitempty; we keep kube's `required: [spec]` because
// a spec-less object could not be read back into our types (and is useless upstream too).
const EC2NODECLASS: Shape = Shape {
    defaults: &[
        "spec.metadataOptions",
        "spec.metadataOptions.httpEndpoint",
        "spec.metadataOptions.httpProtocolIPv6",
        "spec.metadataOptions.httpPutResponseHopLimit",
        "spec.metadataOptions.httpTokens",
        "status.capacityReservations[].reservationType",
        "status.capacityReservations[].state",
    ],
    required: &[("status.amis[]", "requirements")],
    no_rules: &["status.amis[].requirements"],
    no_format: &[],
};

/// The three CRDs Karpenter v1 on AWS installs, ready to apply to a cluster (attach mode
/// against a fresh cluster, or `kubectl apply` of `karpenter-tui crds`).
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        finish(NodePool::crd(), &NODEPOOL),
        finish(NodeClaim::crd(), &NODECLAIM),
        finish(EC2NodeClass::crd(), &EC2NODECLASS),
    ]
}

/// All CRDs as one multi-document YAML stream, each document opened by `---`, without null
/// fields, so the output can go straight to `kubectl apply -f -`.
pub fn crds_yaml() -> String {
    let mut out = String::new();
    for crd in crds() {
        let mut value = serde_json::to_value(&crd).expect("a CRD serializes to JSON");
        tidy_for_yaml(&mut value);
        out.push_str("---\n");
        out.push_str(&serde_norway::to_string(&value).expect("JSON values serialize to YAML"));
    }
    out
}

fn finish(mut crd: CustomResourceDefinition, shape: &Shape) -> CustomResourceDefinition {
    let names = &mut crd.spec.names;
    names.list_kind = Some(format!("{}List", names.kind));
    let kind = names.kind.clone();
    for version in &mut crd.spec.versions {
        let Some(schema) = version.schema.as_mut() else {
            continue;
        };
        if let Some(props) = schema.open_api_v3_schema.take() {
            schema.open_api_v3_schema = Some(reshape(&kind, props, shape));
        }
    }
    crd
}

/// Reshapes one openAPIV3Schema. Falls back to the derived schema if the reshaped one does
/// not read back (it always does; the tests compare the result with upstream's shape).
fn reshape(kind: &str, props: JSONSchemaProps, shape: &Shape) -> JSONSchemaProps {
    let Ok(mut root) = serde_json::to_value(&props) else {
        return props;
    };
    walk(&mut root, "", &mut |path, node| clean(path, node, shape));
    for (path, field) in shape.required {
        if let Some(node) = node_at(&mut root, path) {
            require(node, field);
        }
    }
    for path in shape.no_rules {
        if let Some(node) = node_at(&mut root, path) {
            walk_object(node, path, &mut |_, n| {
                n.remove("x-kubernetes-validations");
            });
        }
    }
    if kind == "EC2NodeClass"
        && let Some(size) = node_at(&mut root, "spec.blockDeviceMappings[].ebs.volumeSize")
    {
        // `+kubebuilder:validation:Type:=string` + the EBS pattern, as upstream.
        size.remove("anyOf");
        size.remove("x-kubernetes-int-or-string");
        size.insert("type".into(), json!("string"));
        size.insert("pattern".into(), json!(EBS_VOLUME_SIZE_PATTERN));
    }
    if let Some(root) = root.as_object_mut() {
        add_type_meta(root);
    }
    serde_json::from_value(root).unwrap_or(props)
}

/// Removes what schemars adds but controller-gen does not, and puts the structural forms
/// the API server expects in place of JSON Schema ones.
fn clean(path: &str, node: &mut Map<String, Value>, shape: &Shape) {
    node.remove("title");
    // Optional fields are plain optional upstream: an explicit null is pruned by the API
    // server instead of being stored, and enums list only real values.
    node.remove("nullable");
    if let Some(Value::Array(values)) = node.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if shape.no_format.contains(&path)
        || node
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| !KUBERNETES_FORMATS.contains(&f))
    {
        node.remove("format");
    }
    if node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        // kube's structural rewrite hoists the variants' types and leaves `anyOf: [{}, {}]`;
        // upstream (and OpenAPI clients such as kubectl explain) show the two types.
        node.remove("type");
        node.insert(
            "anyOf".into(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    if !shape.defaults.contains(&path) {
        node.remove("default");
    }
}

/// Adds the TypeMeta/ObjectMeta properties controller-gen puts at every CRD root.
fn add_type_meta(root: &mut Map<String, Value>) {
    root.remove("title");
    if let Some(Value::Object(props)) = root.get_mut("properties") {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
        );
        props.insert("metadata".into(), json!({"type": "object"}));
    }
}

fn require(node: &mut Map<String, Value>, field: &str) {
    let list = node.entry("required").or_insert_with(|| json!([]));
    if let Value::Array(fields) = list {
        if !fields.iter().any(|f| f == field) {
            fields.push(json!(field));
        }
        fields.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
}

/// Calls `f` on every schema node with its field path: `spec.disruption.budgets[].nodes`
/// (`[]` for list items, `{}` for map values).
fn walk(node: &mut Value, path: &str, f: &mut dyn FnMut(&str, &mut Map<String, Value>)) {
    if let Value::Object(obj) = node {
        walk_object(obj, path, f);
    }
}

fn walk_object(
    obj: &mut Map<String, Value>,
    path: &str,
    f: &mut dyn FnMut(&str, &mut Map<String, Value>),
) {
    f(path, obj);
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for (name, child) in props.iter_mut() {
            let child_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            walk(child, &child_path, f);
        }
    }
    if let Some(items) = obj.get_mut("items") {
        walk(items, &format!("{path}[]"), f);
    }
    if let Some(values) = obj.get_mut("additionalProperties") {
        walk(values, &format!("{path}{{}}"), f);
    }
    for key in ["anyOf", "allOf", "oneOf"] {
        if let Some(Value::Array(subs)) = obj.get_mut(key) {
            for sub in subs {
                walk(sub, path, f);
            }
        }
    }
}

/// The schema node at a `walk`-style path of object fields and list items.
fn node_at<'a>(root: &'a mut Value, path: &str) -> Option<&'a mut Map<String, Value>> {
    let mut node = root;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (name, item) = match segment.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (segment, false),
        };
        node = node.get_mut("properties")?.get_mut(name)?;
        if item {
            node = node.get_mut("items")?;
        }
    }
    node.as_object_mut()
}

/// Drops nulls (e.g. `creationTimestamp: null`) and writes whole-number bounds as integers
/// (`maximum: 100`, not `100.0`), as upstream's YAML has them.
fn tidy_for_yaml(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            for (key, v) in map.iter_mut() {
                if matches!(key.as_str(), "minimum" | "maximum")
                    && let Some(n) = v.as_f64()
                    && n.fract() == 0.0
                    && n.abs() < 9.0e15
                {
                    *v = json!(n as i64);
                }
                tidy_for_yaml(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_for_yaml),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(kind: &str) -> Value {
        let crd = crds()
            .into_iter()
            .find(|c| c.spec.names.kind == kind)
            .expect("kind is generated");
        let props = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.clone())
            .expect("schema present");
        serde_json::to_value(props).expect("schema serializes")
    }

    fn at(kind: &str, path: &str) -> Map<String, Value> {
        let mut root = schema(kind);
        node_at(&mut root, path)
            .cloned()
            .unwrap_or_else(|| panic!("{kind}: no schema node at {path}"))
    }

    /// Every (path, key value) pair in the schema where the node has `key`.
    fn collect(kind: &str, key: &str) -> Vec<(String, Value)> {
        let mut found = Vec::new();
        walk(&mut schema(kind), "", &mut |path, node| {
            if let Some(v) = node.get(key) {
                found.push((path.to_string(), v.clone()));
            }
        });
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }

    fn rules(kind: &str, path: &str) -> Vec<(String, String)> {
        let node = at(kind, path);
        let list = node.get("x-kubernetes-validations").cloned();
        list.and_then(|l| l.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|r| {
                (
                    r["rule"].as_str().unwrap_or("").into(),
                    r["message"].as_str().unwrap_or("").into(),
                )
            })
            .collect()
    }

    #[test]
    fn defaults_are_exactly_upstreams() {
        let expect = |kind, pairs: Vec<(&str, Value)>| {
            let want: Vec<(String, Value)> =
                pairs.into_iter().map(|(p, v)| (p.to_string(), v)).collect();
            assert_eq!(collect(kind, "default"), want, "{kind}");
        };
        expect(
            "NodePool",
            vec![
                ("spec.disruption", json!({"consolidateAfter": "0s"})),
                ("spec.disruption.budgets", json!([{"nodes": "10%"}])),
                ("spec.disruption.budgets[].nodes", json!("10%")),
                (
                    "spec.disruption.consolidationPolicy",
                    json!("WhenEmptyOrUnderutilized"),
                ),
                ("spec.template.spec.expireAfter", json!("720h")),
                ("status.nodes", json!(0)),
            ],
        );
        expect("NodeClaim", vec![("spec.expireAfter", json!("720h"))]);
        expect(
            "EC2NodeClass",
            vec![
                (
                    "spec.metadataOptions",
                    json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}),
                ),
                ("spec.metadataOptions.httpEndpoint", json!("enabled")),
                ("spec.metadataOptions.httpProtocolIPv6", json!("disabled")),
                ("spec.metadataOptions.httpPutResponseHopLimit", json!(1)),
                ("spec.metadataOptions.httpTokens", json!("required")),
                (
                    "status.capacityReservations[].reservationType",
                    json!("default"),
                ),
                ("status.capacityReservations[].state", json!("active")),
            ],
        );
    }

    #[test]
    fn required_fields_are_upstreams() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("NodePool", "", &["spec"]),
            ("NodePool", "spec", &["template"]),
            ("NodePool", "spec.disruption", &["consolidateAfter"]),
            ("NodePool", "spec.disruption.budgets[]", &["nodes"]),
            ("NodePool", "spec.template", &["spec"]),
            (
                "NodePool",
                "spec.template.spec",
                &["nodeClassRef", "requirements"],
            ),
            (
                "NodePool",
                "spec.template.spec.nodeClassRef",
                &["group", "kind", "name"],
            ),
            (
                "NodePool",
                "spec.template.spec.requirements[]",
                &["key", "operator"],
            ),
            (
                "NodePool",
                "spec.template.spec.taints[]",
                &["effect", "key"],
            ),
            (
                "NodePool",
                "spec.template.spec.startupTaints[]",
                &["effect", "key"],
            ),
            ("NodeClaim", "", &["spec"]),
            ("NodeClaim", "spec", &["nodeClassRef", "requirements"]),
            ("NodeClaim", "spec.nodeClassRef", &["group", "kind", "name"]),
            (
                "EC2NodeClass",
                "spec",
                &[
                    "amiSelectorTerms",
                    "securityGroupSelectorTerms",
                    "subnetSelectorTerms",
                ],
            ),
            ("EC2NodeClass", "spec.metadataOptions", &[]),
            ("EC2NodeClass", "status.amis[]", &["id", "requirements"]),
        ];
        for (kind, path, want) in cases {
            let node = at(kind, path);
            let got: Vec<&str> = node
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            assert_eq!(&got, want, "{kind} {path:?}");
        }
    }

    #[test]
    fn enums_bounds_and_patterns_are_upstreams() {
        let key = |kind, path, k: &str| at(kind, path).get(k).cloned().unwrap_or(Value::Null);
        let np = "NodePool";
        assert_eq!(
            key(np, "spec.disruption.consolidationPolicy", "enum"),
            json!(["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"])
        );
        assert_eq!(
            key(np, "spec.template.spec.taints[].effect", "enum"),
            json!(["NoSchedule", "PreferNoSchedule", "NoExecute"])
        );
        assert_eq!(
            key(np, "spec.disruption.budgets[].reasons[]", "enum"),
            json!(["Underutilized", "Empty", "Drifted"])
        );
        assert_eq!(key(np, "spec.weight", "minimum"), json!(1.0));
        assert_eq!(key(np, "spec.weight", "maximum"), json!(100.0));
        assert_eq!(
            key(np, "spec.template.spec.requirements[].minValues", "maximum"),
            json!(50.0)
        );
        assert_eq!(key(np, "spec.disruption.budgets", "maxItems"), json!(50));
        assert_eq!(
            key(np, "spec.template.spec.requirements", "maxItems"),
            json!(100)
        );
        assert_eq!(
            key(np, "spec.disruption.consolidateAfter", "pattern"),
            json!("^(([0-9]+(s|m|h))+|Never)$")
        );
        assert_eq!(
            key(np, "spec.disruption.budgets[].nodes", "pattern"),
            json!("^((100|[0-9]{1,2})%|[0-9]+)$")
        );
        let limits = at(np, "spec.limits");
        assert_eq!(
            limits["additionalProperties"]["anyOf"],
            json!([{"type": "integer"}, {"type": "string"}])
        );
        assert_eq!(
            limits["additionalProperties"]["x-kubernetes-int-or-string"],
            json!(true)
        );

        let nc = "EC2NodeClass";
        assert_eq!(
            key(nc, "spec.amiFamily", "enum"),
            json!([
                "AL2",
                "AL2023",
                "Bottlerocket",
                "Custom",
                "Windows2019",
                "Windows2022",
                "Windows2025"
            ])
        );
        assert_eq!(
            key(nc, "spec.metadataOptions.httpTokens", "enum"),
            json!(["required", "optional"])
        );
        assert_eq!(
            key(
                nc,
                "spec.metadataOptions.httpPutResponseHopLimit",
                "maximum"
            ),
            json!(64.0)
        );
        assert_eq!(key(nc, "spec.amiSelectorTerms", "minItems"), json!(1));
        assert_eq!(key(nc, "spec.amiSelectorTerms", "maxItems"), json!(30));
        assert_eq!(
            key(nc, "spec.subnetSelectorTerms[].id", "pattern"),
            json!("subnet-[0-9a-z]+")
        );
        let size = at(nc, "spec.blockDeviceMappings[].ebs.volumeSize");
        assert_eq!(size.get("type"), Some(&json!("string")));
        assert_eq!(size.get("pattern"), Some(&json!(EBS_VOLUME_SIZE_PATTERN)));
        assert!(size.get("anyOf").is_none());
    }

    #[test]
    fn cel_rules_sit_where_upstream_puts_them() {
        assert_eq!(
            rules("NodeClaim", "spec"),
            vec![(
                "self == oldSelf".to_string(),
                "spec is immutable".to_string()
            )]
        );
        let budgets = rules("NodePool", "spec.disruption.budgets");
        assert_eq!(
            budgets[0].0,
            "self.all(x, has(x.schedule) == has(x.duration))"
        );
        let class_ref = rules("NodePool", "spec.template.spec.nodeClassRef");
        assert!(class_ref.contains(&(
            "self.group == oldSelf.group".to_string(),
            "nodeClassRef.group is immutable".to_string()
        )));
        assert_eq!(rules("NodePool", "spec.template.metadata.labels").len(), 5);
        assert!(
            rules("EC2NodeClass", "spec")
                .iter()
                .any(|(_, m)| m == "must specify exactly one of ['role', 'instanceProfile']")
        );
        // Status is written by the controller; the spec's admission rules stay out of it.
        assert!(rules("EC2NodeClass", "status.amis[].requirements[].key").is_empty());
        assert_eq!(
            rules("EC2NodeClass", "spec.amiSelectorTerms[].alias").len(),
            3
        );
    }

    #[test]
    fn yaml_is_three_clean_documents_that_read_back() {
        let yaml = crds_yaml();
        assert!(yaml.starts_with("---\n"), "{}", &yaml[..40.min(yaml.len())]);
        assert_eq!(yaml.matches("\n---\n").count(), 2);
        for noise in [
            ": null",
            "nullable",
            "title:",
            "$ref",
            "creationTimestamp: ",
        ] {
            assert!(!yaml.contains(noise), "YAML contains {noise:?}");
        }
        assert!(
            yaml.contains("maximum: 100\n"),
            "whole-number bounds are integers"
        );
        let back: Vec<CustomResourceDefinition> = serde_norway::Deserializer::from_str(&yaml)
            .map(|doc| serde::Deserialize::deserialize(doc).expect("each document is a CRD"))
            .collect();
        assert_eq!(back, crds());
    }
}
