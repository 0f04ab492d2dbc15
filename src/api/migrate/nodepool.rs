//! NodePool and NodeClaim: karpenter.sh/v1beta1 -> karpenter.sh/v1.
//!
//! Mirrors `ConvertFrom` in kubernetes-sigs/karpenter `pkg/apis/v1/nodepool_conversion.go`
//! and `nodeclaim_conversion.go`, and the guide's changelog (renamed consolidation policy,
//! required consolidateAfter, expireAfter moved into the template, kubelet moved to the
//! EC2NodeClass, deprecated annotations removed).

use serde_json::{Map, Value};

use super::{KubeletMove, Notes, child_mapping, drop_status, join};
use crate::api::labels::{
    AWS_GROUP, DEPRECATED_DO_NOT_CONSOLIDATE, DEPRECATED_DO_NOT_EVICT, DO_NOT_DISRUPT,
    V1BETA1_KUBELET_CONVERSION,
};
use crate::api::manifest::type_name;

/// The API version both kinds move to.
const V1: &str = "karpenter.sh/v1";
/// Prefix of the annotations upstream's conversion webhooks write for their own use.
const COMPATIBILITY_PREFIX: &str = "compatibility.karpenter.sh/";

/// Converts a v1beta1 NodePool in place; returns its kubelet for the EC2NodeClass.
pub(super) fn convert_nodepool(value: &mut Value, notes: &mut Notes) -> Option<KubeletMove> {
    let object = value.as_object_mut()?;
    object.insert("apiVersion".into(), V1.into());
    let parked_kubelet = convert_metadata(object, "metadata", false, notes);
    drop_status(object, notes);
    let spec = child_mapping(object, "spec", "spec", true, notes)?;
    let moved_expiry = convert_disruption(spec, notes);

    let template = child_mapping(spec, "template", "spec.template", true, notes)?;
    convert_metadata(template, "spec.template.metadata", true, notes);
    let tspec = child_mapping(template, "spec", "spec.template.spec", true, notes)?;
    let expiry_path = "spec.template.spec.expireAfter";
    match (moved_expiry, tspec.get("expireAfter")) {
        (Some(moved), Some(present)) if moved != *present => notes.error(
            expiry_path,
            format!("{present} disagrees with spec.disruption.expireAfter {moved}, which moves here in v1: keep one"),
        ),
        (Some(moved), _) => {
            tspec.insert("expireAfter".into(), moved);
            notes.warn(
                "spec.disruption.expireAfter",
                "moved to spec.template.spec.expireAfter, where v1 keeps it",
            );
        }
        (None, Some(_)) => {}
        (None, None) => notes.warn(
            expiry_path,
            "not set: v1beta1 defaulted spec.disruption.expireAfter to 720h and v1 defaults this field to 720h too, so nodes still expire after 30 days",
        ),
    }
    // The guide's changelog, "Behavior Changes" and "API Moves".
    notes.warn(
        expiry_path,
        "v1 expiration is forceful: an expired node drains at once, without waiting for a replacement, regardless of disruption budgets (set terminationGracePeriod to bound how long PDBs and do-not-disrupt pods can hold the drain); expireAfter is now part of the template, so changing it rolls the pool's NodeClaims through drift",
    );
    convert_claim_spec(tspec, "spec.template.spec", parked_kubelet, notes)
}

/// Converts a v1beta1 NodeClaim in place; returns its kubelet for the EC2NodeClass.
/// Its expireAfter is filled in from its NodePool later, when that is in the input.
pub(super) fn convert_nodeclaim(value: &mut Value, notes: &mut Notes) -> Option<KubeletMove> {
    let object = value.as_object_mut()?;
    object.insert("apiVersion".into(), V1.into());
    let parked_kubelet = convert_metadata(object, "metadata", true, notes);
    drop_status(object, notes);
    let spec = child_mapping(object, "spec", "spec", true, notes)?;
    convert_claim_spec(spec, "spec", parked_kubelet, notes)
}

/// The parts NodePool templates and NodeClaims share: nodeClassRef and kubelet.
fn convert_claim_spec(
    spec: &mut Map<String, Value>,
    path: &str,
    parked_kubelet: Option<(String, Value)>,
    notes: &mut Notes,
) -> Option<KubeletMove> {
    let reference = convert_node_class_ref(spec, &join(path, "nodeClassRef"), notes);
    let kubelet_path = join(path, "kubelet");
    let (kubelet_path, kubelet) = match spec.remove("kubelet") {
        None | Some(Value::Null) => parked_kubelet?,
        Some(k @ Value::Object(_)) => (kubelet_path, k),
        Some(other) => {
            notes.error(
                kubelet_path,
                format!("expected a mapping, found {}", type_name(&other)),
            );
            return None;
        }
    };
    let (group, kind, name) = reference?;
    if group != AWS_GROUP || kind != "EC2NodeClass" {
        notes.error(
            kubelet_path,
            format!("v1 moves kubelet settings to the NodeClass, but this one is a {kind}.{group}, not an EC2NodeClass: move them there yourself"),
        );
        return None;
    }
    Some(KubeletMove {
        node_class: name,
        kubelet,
        path: kubelet_path,
    })
}

/// `{apiVersion, kind, name}` -> `{group, kind, name}`; upstream takes the group from the
/// apiVersion and defaults group and kind to the provider's NodeClass when absent.
/// Returns (group, kind, name) when the reference is usable.
fn convert_node_class_ref(
    spec: &mut Map<String, Value>,
    path: &str,
    notes: &mut Notes,
) -> Option<(String, String, String)> {
    let reference = child_mapping(spec, "nodeClassRef", path, true, notes)?;
    let from_api_version = match reference.remove("apiVersion") {
        None | Some(Value::Null) => None,
        Some(Value::String(api_version)) => match api_version.split_once('/') {
            Some((group, _)) if !group.is_empty() => Some(group.to_string()),
            _ => {
                notes.error(
                    join(path, "apiVersion"),
                    format!("{api_version:?} has no API group: expected group/version, e.g. karpenter.k8s.aws/v1beta1"),
                );
                return None;
            }
        },
        Some(other) => {
            notes.error(
                join(path, "apiVersion"),
                format!("expected a string, found {}", type_name(&other)),
            );
            return None;
        }
    };
    let group = match (from_api_version, reference.get("group")) {
        (Some(g), None) => g,
        (Some(g), Some(Value::String(existing))) if g == *existing => g,
        (Some(g), Some(existing)) => {
            notes.error(
                join(path, "group"),
                format!("{existing} disagrees with apiVersion's group {g:?}"),
            );
            return None;
        }
        (None, Some(Value::String(existing))) => existing.clone(),
        (None, Some(other)) => {
            notes.error(
                join(path, "group"),
                format!("expected a string, found {}", type_name(other)),
            );
            return None;
        }
        (None, None) => {
            notes.warn(
                join(path, "group"),
                format!("required in v1; set to {AWS_GROUP} (the EC2NodeClass group), as upstream does when apiVersion is absent"),
            );
            AWS_GROUP.to_string()
        }
    };
    reference.insert("group".into(), Value::String(group.clone()));
    let kind = match reference.get("kind") {
        Some(Value::String(k)) if !k.is_empty() => k.clone(),
        None | Some(Value::Null) => {
            notes.warn(
                join(path, "kind"),
                "required in v1; set to EC2NodeClass, as upstream does when kind is absent",
            );
            reference.insert("kind".into(), "EC2NodeClass".into());
            "EC2NodeClass".to_string()
        }
        Some(other) => {
            notes.error(
                join(path, "kind"),
                format!("expected a kind name, found {other}"),
            );
            return None;
        }
    };
    match reference.get("name") {
        Some(Value::String(n)) if !n.is_empty() => Some((group, kind, n.clone())),
        None | Some(Value::Null) => {
            notes.error(join(path, "name"), "required field is missing");
            None
        }
        Some(other) => {
            notes.error(
                join(path, "name"),
                format!("expected a NodeClass name, found {other}"),
            );
            None
        }
    }
}

/// Renames WhenUnderutilized, makes consolidateAfter explicit, and takes out expireAfter
/// (returned, to be moved into the template).
fn convert_disruption(spec: &mut Map<String, Value>, notes: &mut Notes) -> Option<Value> {
    let disruption = child_mapping(spec, "disruption", "spec.disruption", false, notes)?;
    // v1beta1 defaulted the policy to WhenUnderutilized; v1 defaults to its new name.
    let underutilized = match disruption.get("consolidationPolicy") {
        None => true,
        Some(Value::String(p)) if p == "WhenUnderutilized" => {
            disruption.insert(
                "consolidationPolicy".into(),
                "WhenEmptyOrUnderutilized".into(),
            );
            true
        }
        Some(_) => false,
    };
    if !disruption.contains_key("consolidateAfter") {
        if underutilized {
            // Upstream's conversion: "set the v1 duration to 0" for WhenUnderutilized.
            disruption.insert("consolidateAfter".into(), "0s".into());
            notes.warn(
                "spec.disruption.consolidateAfter",
                "required in v1; set to 0s, which is how v1beta1 consolidated underutilized nodes (raise it to consolidate less eagerly)",
            );
        } else {
            notes.error(
                "spec.disruption.consolidateAfter",
                "required field is missing (v1beta1 required it with WhenEmpty too): how long a node must stay empty before it is removed",
            );
        }
    }
    disruption.remove("expireAfter")
}

/// Handles `metadata.annotations` at `path` (an object's metadata or a template's):
/// strips upstream's conversion annotations and, where `node_annotations`, replaces the
/// removed do-not-evict / do-not-consolidate with do-not-disrupt. Returns a kubelet that
/// upstream's webhook had parked in an annotation, with the annotation's path.
fn convert_metadata(
    parent: &mut Map<String, Value>,
    path: &str,
    node_annotations: bool,
    notes: &mut Notes,
) -> Option<(String, Value)> {
    let metadata = child_mapping(parent, "metadata", path, false, notes)?;
    let annotations_path = join(path, "annotations");
    let annotations = child_mapping(metadata, "annotations", &annotations_path, false, notes)?;
    let at = |key: &str| format!("{annotations_path}[{key}]");

    let mut parked = None;
    let compat: Vec<String> = annotations
        .keys()
        .filter(|k| k.starts_with(COMPATIBILITY_PREFIX))
        .cloned()
        .collect();
    for key in compat {
        let Some(value) = annotations.remove(&key) else {
            continue;
        };
        if key == V1BETA1_KUBELET_CONVERSION {
            match value.as_str().map(serde_json::from_str::<Value>) {
                Some(Ok(kubelet @ Value::Object(_))) => parked = Some((at(&key), kubelet)),
                _ => {
                    notes.error(
                        at(&key),
                        "expected the kubelet configuration as a JSON object",
                    );
                    continue;
                }
            }
        }
        notes.warn(
            at(&key),
            "removed: upstream's conversion webhook writes it for its own bookkeeping, and this conversion carries the data itself",
        );
    }
    if node_annotations {
        // Guide: "karpenter.sh/do-not-consolidate and karpenter.sh/do-not-evict are both
        // replaced by karpenter.sh/do-not-disrupt".
        for old in [DEPRECATED_DO_NOT_EVICT, DEPRECATED_DO_NOT_CONSOLIDATE] {
            let Some(value) = annotations.remove(old) else {
                continue;
            };
            let message = if annotations.contains_key(DO_NOT_DISRUPT) {
                format!("removed in v1; {DO_NOT_DISRUPT} is already set")
            } else {
                annotations.insert(DO_NOT_DISRUPT.into(), value);
                format!("removed in v1; replaced by {DO_NOT_DISRUPT}")
            };
            notes.warn(at(old), message);
        }
    }
    parked
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::manifest::{Diagnostic, Severity};

    fn pool(spec: Value) -> Value {
        json!({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "metadata": {"name": "np"}, "spec": spec})
    }

    fn template(extra: Value) -> Value {
        let mut spec = json!({
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
            "nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"},
        });
        if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra) {
            s.extend(e);
        }
        json!({"spec": spec})
    }

    fn run(
        mut value: Value,
        f: fn(&mut Value, &mut Notes) -> Option<KubeletMove>,
    ) -> (Value, Option<KubeletMove>, Vec<Diagnostic>) {
        let mut notes = Notes::new("f.yaml", 1);
        let kubelet = f(&mut value, &mut notes);
        (value, kubelet, notes.diagnostics)
    }

    fn paths(diags: &[Diagnostic], severity: Severity) -> Vec<&str> {
        diags
            .iter()
            .filter(|d| d.severity == severity)
            .map(|d| d.path.as_str())
            .collect()
    }

    #[test]
    fn node_class_ref_api_version_becomes_group() {
        let (v, _, d) = run(
            pool(json!({"template": template(json!({}))})),
            convert_nodepool,
        );
        assert_eq!(v["apiVersion"], "karpenter.sh/v1");
        assert_eq!(
            v["spec"]["template"]["spec"]["nodeClassRef"],
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
        );
        assert!(paths(&d, Severity::Error).is_empty(), "{d:?}");
    }

    #[test]
    fn node_class_ref_defaults_group_and_kind_with_warnings() {
        let t = json!({"spec": {"requirements": [], "nodeClassRef": {"name": "default"}}});
        let (v, _, d) = run(pool(json!({"template": t})), convert_nodepool);
        assert_eq!(
            v["spec"]["template"]["spec"]["nodeClassRef"],
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
        );
        let w = paths(&d, Severity::Warning);
        assert!(
            w.contains(&"spec.template.spec.nodeClassRef.group"),
            "{w:?}"
        );
        assert!(w.contains(&"spec.template.spec.nodeClassRef.kind"), "{w:?}");
    }

    #[test]
    fn node_class_ref_without_name_or_group_is_an_error() {
        let t = json!({"spec": {"requirements": [], "nodeClassRef": {"apiVersion": "v1beta1", "kind": "EC2NodeClass"}}});
        let (_, _, d) = run(pool(json!({"template": t})), convert_nodepool);
        assert_eq!(
            paths(&d, Severity::Error),
            vec!["spec.template.spec.nodeClassRef.apiVersion"]
        );
        let t = json!({"spec": {"requirements": [], "nodeClassRef": {"kind": "EC2NodeClass"}}});
        let (_, _, d) = run(pool(json!({"template": t})), convert_nodepool);
        assert_eq!(
            paths(&d, Severity::Error),
            vec!["spec.template.spec.nodeClassRef.name"]
        );
        let (_, _, d) = run(
            pool(json!({"template": {"spec": {"requirements": []}}})),
            convert_nodepool,
        );
        assert_eq!(
            paths(&d, Severity::Error),
            vec!["spec.template.spec.nodeClassRef"]
        );
    }

    #[test]
    fn when_underutilized_is_renamed_and_gets_consolidate_after_0s() {
        let spec = json!({"template": template(json!({})), "disruption": {"consolidationPolicy": "WhenUnderutilized"}});
        let (v, _, d) = run(pool(spec), convert_nodepool);
        assert_eq!(
            v["spec"]["disruption"]["consolidationPolicy"],
            "WhenEmptyOrUnderutilized"
        );
        assert_eq!(v["spec"]["disruption"]["consolidateAfter"], "0s");
        assert!(paths(&d, Severity::Warning).contains(&"spec.disruption.consolidateAfter"));
    }

    #[test]
    fn defaulted_policy_also_gets_consolidate_after_and_a_set_value_is_kept() {
        let spec = json!({"template": template(json!({})), "disruption": {"expireAfter": "Never"}});
        let (v, _, _) = run(pool(spec), convert_nodepool);
        assert_eq!(v["spec"]["disruption"], json!({"consolidateAfter": "0s"}));
        let spec = json!({"template": template(json!({})), "disruption": {"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "Never"}});
        let (v, _, _) = run(pool(spec), convert_nodepool);
        assert_eq!(v["spec"]["disruption"]["consolidateAfter"], "Never");
    }

    #[test]
    fn when_empty_keeps_its_consolidate_after_and_requires_it() {
        let spec = json!({"template": template(json!({})), "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}});
        let (v, _, d) = run(pool(spec), convert_nodepool);
        assert_eq!(
            v["spec"]["disruption"],
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
        );
        assert!(paths(&d, Severity::Error).is_empty());
        let spec = json!({"template": template(json!({})), "disruption": {"consolidationPolicy": "WhenEmpty"}});
        let (_, _, d) = run(pool(spec), convert_nodepool);
        assert_eq!(
            paths(&d, Severity::Error),
            vec!["spec.disruption.consolidateAfter"]
        );
    }

    #[test]
    fn expire_after_moves_into_the_template_and_never_is_kept() {
        for expiry in ["336h", "Never"] {
            let spec = json!({"template": template(json!({})), "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m", "expireAfter": expiry}});
            let (v, _, d) = run(pool(spec), convert_nodepool);
            assert_eq!(v["spec"]["template"]["spec"]["expireAfter"], expiry);
            assert!(v["spec"]["disruption"].get("expireAfter").is_none());
            let w = paths(&d, Severity::Warning);
            assert!(w.contains(&"spec.disruption.expireAfter"), "{w:?}");
            assert_eq!(
                w.iter()
                    .filter(|p| **p == "spec.template.spec.expireAfter")
                    .count(),
                1,
                "{w:?}"
            );
        }
    }

    #[test]
    fn absent_expire_after_says_both_default_to_720h() {
        let (v, _, d) = run(
            pool(json!({"template": template(json!({}))})),
            convert_nodepool,
        );
        assert!(v["spec"]["template"]["spec"].get("expireAfter").is_none());
        assert!(
            d.iter()
                .any(|d| d.path == "spec.template.spec.expireAfter" && d.message.contains("720h"))
        );
        assert!(d.iter().any(|d| d.message.contains("forceful")));
    }

    #[test]
    fn kubelet_leaves_the_nodepool() {
        let spec = json!({"template": template(json!({"kubelet": {"maxPods": 110}}))});
        let (v, k, _) = run(pool(spec), convert_nodepool);
        assert!(v["spec"]["template"]["spec"].get("kubelet").is_none());
        assert_eq!(
            k,
            Some(KubeletMove {
                node_class: "default".into(),
                kubelet: json!({"maxPods": 110}),
                path: "spec.template.spec.kubelet".into()
            })
        );
    }

    #[test]
    fn kubelet_for_a_foreign_node_class_is_an_error() {
        let t = json!({"spec": {"requirements": [], "kubelet": {"maxPods": 5}, "nodeClassRef": {"apiVersion": "example.com/v1", "kind": "KWOKNodeClass", "name": "x"}}});
        let (_, k, d) = run(pool(json!({"template": t})), convert_nodepool);
        assert!(k.is_none());
        assert_eq!(
            paths(&d, Severity::Error),
            vec!["spec.template.spec.kubelet"]
        );
    }

    #[test]
    fn deprecated_annotations_become_do_not_disrupt() {
        let mut t = template(json!({}));
        t["metadata"] = json!({"annotations": {"karpenter.sh/do-not-evict": "true", "team": "a"}});
        let (v, _, d) = run(pool(json!({"template": t})), convert_nodepool);
        assert_eq!(
            v["spec"]["template"]["metadata"]["annotations"],
            json!({"karpenter.sh/do-not-disrupt": "true", "team": "a"})
        );
        assert!(
            paths(&d, Severity::Warning)
                .contains(&"spec.template.metadata.annotations[karpenter.sh/do-not-evict]")
        );
    }

    #[test]
    fn conversion_annotations_are_stripped_and_a_parked_kubelet_is_recovered() {
        let mut v = pool(json!({"template": template(json!({}))}));
        v["metadata"]["annotations"] = json!({
            "compatibility.karpenter.sh/v1beta1-kubelet-conversion": "{\"maxPods\":42}",
            "keep": "me",
        });
        let (v, k, d) = run(v, convert_nodepool);
        assert_eq!(v["metadata"]["annotations"], json!({"keep": "me"}));
        assert_eq!(k.map(|k| k.kubelet), Some(json!({"maxPods": 42})));
        assert!(d.iter().any(|d| {
            d.path
                .starts_with("metadata.annotations[compatibility.karpenter.sh/")
        }));
    }

    #[test]
    fn status_is_dropped_with_a_warning() {
        let mut v = pool(json!({"template": template(json!({}))}));
        v["status"] = json!({"resources": {"cpu": "4"}});
        let (v, _, d) = run(v, convert_nodepool);
        assert!(v.get("status").is_none());
        assert!(paths(&d, Severity::Warning).contains(&"status"));
    }

    #[test]
    fn unknown_fields_are_kept() {
        let spec = json!({"template": template(json!({"futureField": 1})), "weight": 10, "limits": {"cpu": 100}});
        let (v, _, _) = run(pool(spec), convert_nodepool);
        assert_eq!(v["spec"]["template"]["spec"]["futureField"], 1);
        assert_eq!(v["spec"]["weight"], 10);
        assert_eq!(v["spec"]["limits"]["cpu"], 100);
    }

    #[test]
    fn nodeclaim_converts_ref_kubelet_and_annotations() {
        let v = json!({
            "apiVersion": "karpenter.sh/v1beta1", "kind": "NodeClaim",
            "metadata": {"name": "c", "annotations": {"karpenter.sh/do-not-consolidate": "true"}},
            "spec": {
                "requirements": [],
                "kubelet": {"maxPods": 20},
                "nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"},
            },
        });
        let (v, k, d) = run(v, convert_nodeclaim);
        assert_eq!(v["apiVersion"], "karpenter.sh/v1");
        assert_eq!(v["spec"]["nodeClassRef"]["group"], "karpenter.k8s.aws");
        assert_eq!(
            v["metadata"]["annotations"],
            json!({"karpenter.sh/do-not-disrupt": "true"})
        );
        assert_eq!(k.map(|k| k.path), Some("spec.kubelet".to_string()));
        assert!(paths(&d, Severity::Error).is_empty());
    }

    #[test]
    fn wrong_shapes_are_errors_not_panics() {
        for spec in [
            json!([]),
            json!({"template": "x"}),
            json!({"template": {"spec": 3}}),
            json!({"disruption": [], "template": template(json!({}))}),
        ] {
            let (_, _, d) = run(pool(spec), convert_nodepool);
            assert!(!paths(&d, Severity::Error).is_empty());
        }
    }
}
