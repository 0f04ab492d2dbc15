//! RBAC rules as sets, for the tests that compare what manifests grant (deploy/ and the
//! Helm chart) with what the controller needs.

use std::collections::BTreeSet;

use serde_json::Value;

/// One permission: (apiGroup, resource, verb, resourceName or "").
pub type Grant = (String, String, String, String);

/// A YAML/JSON list of strings; empty when absent.
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().expect("a string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Every permission a Role's or ClusterRole's rules grant.
pub fn grants(role: &Value) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let mut names = strings(&rule["resourceNames"]);
        if names.is_empty() {
            names.push(String::new());
        }
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        out.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                    }
                }
            }
        }
    }
    out
}
