//! EC2NodeClass: karpenter.k8s.aws/v1beta1 -> karpenter.k8s.aws/v1.
//!
//! Mirrors `ConvertFrom` in aws/karpenter-provider-aws `pkg/apis/v1/ec2nodeclass_conversion.go`
//! (alias from amiFamily, Ubuntu to AL2) and the guide's "Before You Start" section (new
//! metadataOptions default, Ubuntu removed, registration taint for Custom AMIs) and
//! changelog (AL2023 user data no longer overrides Karpenter's own settings).

use serde_json::{Map, Value, json};

use super::{Notes, child_mapping, drop_status};
use crate::api::labels::UNREGISTERED_TAINT_KEY;
use crate::api::manifest::type_name;

/// Converts a v1beta1 EC2NodeClass in place. Its kubelet, if any, arrives later from the
/// NodePools that reference it.
pub(super) fn convert_ec2nodeclass(value: &mut Value, notes: &mut Notes) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    object.insert("apiVersion".into(), "karpenter.k8s.aws/v1".into());
    drop_status(object, notes);
    let Some(spec) = child_mapping(object, "spec", "spec", true, notes) else {
        return;
    };
    convert_ami_selection(spec, notes);
    keep_imds_hop_limit(spec, notes);
    if spec.get("userData").is_some_and(|u| !u.is_null()) {
        notes.warn(
            "spec.userData",
            "review it: in v1 Karpenter's generated settings take precedence over the ones it manages in userData (AL2023 NodeConfig, Bottlerocket TOML), so kubelet settings belong in this EC2NodeClass's spec.kubelet instead",
        );
    }
}

/// v1 requires amiSelectorTerms. Upstream's conversion: with an EKS-optimized family and no
/// terms, the terms become `[{alias: <family>@latest}]` and amiFamily goes (the alias implies
/// it); with terms, both are kept; Ubuntu becomes AL2; Custom keeps its terms.
fn convert_ami_selection(spec: &mut Map<String, Value>, notes: &mut Notes) {
    let family = match spec.get("amiFamily") {
        None | Some(Value::Null) => None,
        Some(Value::String(f)) => Some(f.clone()),
        Some(other) => {
            notes.error(
                "spec.amiFamily",
                format!("expected a string, found {}", type_name(other)),
            );
            return;
        }
    };
    let (has_terms, has_alias) = match spec.get("amiSelectorTerms") {
        None | Some(Value::Null) => (false, false),
        Some(Value::Array(terms)) => (
            !terms.is_empty(),
            terms.iter().any(|t| t.get("alias").is_some()),
        ),
        Some(other) => {
            notes.error(
                "spec.amiSelectorTerms",
                format!("expected a list, found {}", type_name(other)),
            );
            return;
        }
    };
    if has_alias {
        return; // already written the v1 way
    }
    let Some(family) = family else {
        notes.error(
            "spec.amiFamily",
            "required field is missing: v1beta1 required it, and v1 needs it (or an alias in amiSelectorTerms, which is derived from it) to bootstrap nodes",
        );
        return;
    };
    match family.as_str() {
        "AL2" | "AL2023" | "Bottlerocket" | "Windows2019" | "Windows2022" if !has_terms => {
            let alias = format!("{}@latest", family.to_lowercase());
            spec.insert("amiSelectorTerms".into(), json!([{ "alias": alias }]));
            spec.remove("amiFamily");
            let advice = if family.starts_with("Windows") {
                "Windows aliases only allow latest".to_string()
            } else {
                format!("pin a version ({}@<version>) to roll AMIs out when you choose", family.to_lowercase())
            };
            notes.warn(
                "spec.amiSelectorTerms",
                format!(
                    "required in v1; set to alias {alias}, which replaces amiFamily {family}; @latest follows each new EKS-optimized AMI and drifts nodes onto it: {advice}"
                ),
            );
        }
        "Custom" if !has_terms => notes.error(
            "spec.amiSelectorTerms",
            "required in v1, and amiFamily Custom cannot use an alias: select your AMIs with id, name, tags or ssmParameter terms",
        ),
        "Custom" => {
            let taint_in_user_data =
                spec.get("userData").and_then(Value::as_str).is_some_and(|u| u.contains(UNREGISTERED_TAINT_KEY));
            if !taint_in_user_data {
                notes.warn(
                    "spec.userData",
                    format!(
                        "with amiFamily Custom, v1 nodes must register with the {UNREGISTERED_TAINT_KEY}:NoExecute taint: add it to the kubelet's registerWithTaints in your userData (Karpenter removes it once the node registers)"
                    ),
                );
            }
        }
        ubuntu if ubuntu.starts_with("Ubuntu") => convert_ubuntu(spec, has_terms, notes),
        // EKS-optimized family with explicit terms: v1 keeps both (amiFamily is required
        // without an alias). Unknown families are left for `validate` to report.
        _ => {}
    }
}

/// The guide's "Ubuntu AMIFamily Removed": with amiSelectorTerms, Ubuntu AMIs boot with
/// AL2's user data, which has the same format; without them there is nothing to select.
fn convert_ubuntu(spec: &mut Map<String, Value>, has_terms: bool, notes: &mut Notes) {
    if !has_terms {
        notes.error(
            "spec.amiSelectorTerms",
            "v1 dropped the Ubuntu amiFamily and cannot discover Ubuntu AMIs: select them with id, name, tags or ssmParameter terms",
        );
        return;
    }
    spec.insert("amiFamily".into(), "AL2".into());
    notes.warn(
        "spec.amiFamily",
        "Ubuntu was dropped in v1; set to AL2, whose user-data format Ubuntu shares, as upstream's conversion does (switch to Custom if that stops working)",
    );
    if spec.get("blockDeviceMappings").is_none_or(Value::is_null) {
        // Ubuntu's former default root volume; AL2's default uses another device name.
        spec.insert(
            "blockDeviceMappings".into(),
            json!([{
                "deviceName": "/dev/sda1",
                "rootVolume": true,
                "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"},
            }]),
        );
        notes.warn(
            "spec.blockDeviceMappings",
            "set to Ubuntu's former default root volume (/dev/sda1, 20Gi gp3, encrypted), since AL2's default uses another device",
        );
    }
}

/// v1 lowered the default IMDS hop limit from 2 to 1, which cuts off pods without
/// hostNetwork. Upstream's conversion copies metadataOptions as stored, and a v1beta1 object
/// in the cluster was stored with the v1beta1 default 2, so converted objects keep 2; the
/// guide then tells users to set the field explicitly if their pods need IMDS. We write the
/// 2 into the manifest, so applying it does not silently change behaviour, and say how to
/// opt into v1's safer default.
fn keep_imds_hop_limit(spec: &mut Map<String, Value>, notes: &mut Notes) {
    if spec.get("metadataOptions").is_none_or(Value::is_null) {
        spec.insert("metadataOptions".into(), json!({}));
    }
    let options = match spec.get_mut("metadataOptions") {
        Some(Value::Object(m)) => m,
        Some(other) => {
            notes.error(
                "spec.metadataOptions",
                format!("expected a mapping, found {}", type_name(other)),
            );
            return;
        }
        None => return,
    };
    if options.contains_key("httpPutResponseHopLimit") {
        return;
    }
    options.insert("httpPutResponseHopLimit".into(), 2.into());
    notes.warn(
        "spec.metadataOptions.httpPutResponseHopLimit",
        "set to 2, v1beta1's default, so pods without hostNetwork keep IMDS access; v1 defaults to 1 (EKS best practice): remove this line once no such pod needs IMDS",
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::manifest::{Diagnostic, Severity};

    fn class(spec: Value) -> Value {
        json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "metadata": {"name": "default"}, "spec": spec})
    }

    fn base(extra: Value) -> Value {
        let mut spec = json!({
            "role": "KarpenterNodeRole",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        });
        if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra) {
            s.extend(e);
        }
        spec
    }

    fn run(spec: Value) -> (Value, Vec<Diagnostic>) {
        let mut value = class(spec);
        let mut notes = Notes::new("f.yaml", 1);
        convert_ec2nodeclass(&mut value, &mut notes);
        (value, notes.diagnostics)
    }

    fn errors(d: &[Diagnostic]) -> Vec<&str> {
        d.iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.path.as_str())
            .collect()
    }

    #[test]
    fn families_without_terms_become_latest_aliases() {
        for (family, alias) in [
            ("AL2", "al2@latest"),
            ("AL2023", "al2023@latest"),
            ("Bottlerocket", "bottlerocket@latest"),
            ("Windows2019", "windows2019@latest"),
            ("Windows2022", "windows2022@latest"),
        ] {
            let (v, d) = run(base(json!({"amiFamily": family})));
            assert_eq!(v["apiVersion"], "karpenter.k8s.aws/v1");
            assert_eq!(
                v["spec"]["amiSelectorTerms"],
                json!([{"alias": alias}]),
                "{family}"
            );
            assert!(v["spec"].get("amiFamily").is_none(), "{family}");
            let w = d
                .iter()
                .find(|d| d.path == "spec.amiSelectorTerms")
                .expect("warned");
            assert!(w.message.contains("@latest"), "{w}");
        }
    }

    #[test]
    fn explicit_terms_keep_the_family() {
        let terms = json!([{"tags": {"team": "a"}, "owner": "self"}]);
        let (v, d) = run(base(
            json!({"amiFamily": "AL2023", "amiSelectorTerms": terms}),
        ));
        assert_eq!(v["spec"]["amiFamily"], "AL2023");
        assert_eq!(v["spec"]["amiSelectorTerms"], terms);
        assert!(errors(&d).is_empty());
    }

    #[test]
    fn custom_needs_terms() {
        let (_, d) = run(base(json!({"amiFamily": "Custom"})));
        assert_eq!(errors(&d), vec!["spec.amiSelectorTerms"]);
        let (v, d) = run(base(
            json!({"amiFamily": "Custom", "amiSelectorTerms": [{"id": "ami-0123"}]}),
        ));
        assert_eq!(v["spec"]["amiFamily"], "Custom");
        assert!(errors(&d).is_empty());
        assert!(
            d.iter()
                .any(|d| d.message.contains("karpenter.sh/unregistered:NoExecute"))
        );
    }

    #[test]
    fn custom_with_the_taint_in_user_data_is_not_nagged() {
        let user_data =
            "registerWithTaints:\n  - key: karpenter.sh/unregistered\n    effect: NoExecute\n";
        let (_, d) = run(base(
            json!({"amiFamily": "Custom", "amiSelectorTerms": [{"id": "ami-0123"}], "userData": user_data}),
        ));
        assert!(
            !d.iter().any(|d| d.message.contains("registerWithTaints")),
            "{d:?}"
        );
    }

    #[test]
    fn missing_family_is_an_error() {
        let (_, d) = run(base(json!({})));
        assert_eq!(errors(&d), vec!["spec.amiFamily"]);
    }

    #[test]
    fn ubuntu_becomes_al2_with_its_root_volume_or_fails_without_terms() {
        let (v, d) = run(base(
            json!({"amiFamily": "Ubuntu", "amiSelectorTerms": [{"id": "ami-0abc"}]}),
        ));
        assert_eq!(v["spec"]["amiFamily"], "AL2");
        assert_eq!(
            v["spec"]["blockDeviceMappings"][0]["deviceName"],
            "/dev/sda1"
        );
        assert!(errors(&d).is_empty());
        let (_, d) = run(base(json!({"amiFamily": "Ubuntu"})));
        assert_eq!(errors(&d), vec!["spec.amiSelectorTerms"]);
    }

    #[test]
    fn hop_limit_2_is_kept_explicitly_unless_set() {
        let (v, d) = run(base(json!({"amiFamily": "AL2"})));
        assert_eq!(
            v["spec"]["metadataOptions"],
            json!({"httpPutResponseHopLimit": 2})
        );
        assert!(
            d.iter()
                .any(|d| d.path == "spec.metadataOptions.httpPutResponseHopLimit")
        );
        let (v, _) = run(base(
            json!({"amiFamily": "AL2", "metadataOptions": {"httpTokens": "optional"}}),
        ));
        assert_eq!(
            v["spec"]["metadataOptions"],
            json!({"httpTokens": "optional", "httpPutResponseHopLimit": 2})
        );
        let (v, d) = run(base(
            json!({"amiFamily": "AL2", "metadataOptions": {"httpPutResponseHopLimit": 1}}),
        ));
        assert_eq!(
            v["spec"]["metadataOptions"],
            json!({"httpPutResponseHopLimit": 1})
        );
        assert!(!d.iter().any(|d| d.path.starts_with("spec.metadataOptions")));
    }

    #[test]
    fn user_data_always_warns() {
        let (v, d) = run(base(
            json!({"amiFamily": "AL2023", "userData": "#!/bin/bash\necho hi\n"}),
        ));
        assert_eq!(v["spec"]["userData"], "#!/bin/bash\necho hi\n");
        assert!(
            d.iter()
                .any(|d| d.path == "spec.userData" && d.message.contains("spec.kubelet"))
        );
    }

    #[test]
    fn wrong_shapes_are_errors() {
        let (_, d) = run(base(json!({"amiFamily": 3})));
        assert_eq!(errors(&d), vec!["spec.amiFamily"]);
        let (_, d) = run(base(
            json!({"amiFamily": "AL2", "amiSelectorTerms": {"id": "x"}}),
        ));
        assert_eq!(errors(&d), vec!["spec.amiSelectorTerms"]);
        let (_, d) = run(base(json!({"amiFamily": "AL2", "metadataOptions": "x"})));
        assert_eq!(errors(&d), vec!["spec.metadataOptions"]);
        let (_, d) = run(json!("nope"));
        assert_eq!(errors(&d), vec!["spec"]);
    }
}
