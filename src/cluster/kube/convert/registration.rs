//! The Node patch registration makes (upstream `nodeclaim/lifecycle/registration.go`):
//! the NodeClaim's labels and annotations over the Node's, its taints and startup taints
//! merged in by key and effect (unless the Node opts out with
//! `karpenter.sh/do-not-sync-taints`), the termination finalizer, an owner reference to
//! the NodeClaim, then `karpenter.sh/registered` and the `karpenter.sh/unregistered`
//! taint gone.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use crate::api::labels;
use crate::api::nodeclaim::Taint;
use crate::cluster::NodeSync;

/// The merge patch (with the resourceVersion read, so a concurrent writer conflicts)
/// that registers `node` for NodeClaim `nodeclaim` (uid `uid`).
pub fn registration_patch(node: &Node, nodeclaim: &str, uid: &str, sync: &NodeSync) -> Value {
    let meta = &node.metadata;
    let mut node_labels = meta.labels.clone().unwrap_or_default();
    let sync_taints = node_labels
        .get(labels::DO_NOT_SYNC_TAINTS)
        .is_none_or(|v| v != "true");
    node_labels.extend(sync.labels.clone());
    node_labels.insert(labels::REGISTERED.into(), "true".into());
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    annotations.extend(sync.annotations.clone());

    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| serde_json::to_value(t).ok())
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    if sync_taints {
        for t in &sync.taints {
            // Upstream's `Taints.Merge`: a taint with the same key and effect is kept as
            // the Node has it.
            if !taints
                .iter()
                .any(|have| have.key == t.key && have.effect == t.effect)
            {
                taints.push(t.clone());
            }
        }
    }
    let unregistered = Taint::unregistered();
    taints.retain(|t| !t.matches(&unregistered));

    let mut finalizers = meta.finalizers.clone().unwrap_or_default();
    if !finalizers
        .iter()
        .any(|f| f == labels::TERMINATION_FINALIZER)
    {
        finalizers.push(labels::TERMINATION_FINALIZER.into());
    }
    let api_version = format!("{}/v1", labels::KARPENTER_GROUP);
    let mut owners: Vec<Value> = meta
        .owner_references
        .iter()
        .flatten()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    let owned = meta.owner_references.iter().flatten().any(|o| {
        o.api_version == api_version && o.kind == "NodeClaim" && o.uid == uid && !uid.is_empty()
    });
    if !owned && !uid.is_empty() {
        owners.push(json!({
            "apiVersion": api_version,
            "kind": "NodeClaim",
            "name": nodeclaim,
            "uid": uid,
            "blockOwnerDeletion": true,
        }));
    }
    json!({
        "metadata": {
            "resourceVersion": meta.resource_version,
            "labels": node_labels,
            "annotations": annotations,
            "finalizers": finalizers,
            "ownerReferences": owners,
        },
        "spec": {"taints": taints},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::nodeclaim::TaintEffect;

    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {
                "name": "ip-10-0-0-1",
                "resourceVersion": "7",
                "labels": {"kubernetes.io/hostname": "ip-10-0-0-1"},
                "finalizers": ["example.com/keep"],
            },
            "spec": {"taints": [
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                {"key": "dedicated", "value": "kubelet", "effect": "NoSchedule"},
            ]},
        }))
        .unwrap()
    }

    fn sync() -> NodeSync {
        NodeSync {
            labels: [("team".to_string(), "web".to_string())].into(),
            annotations: [("note".to_string(), "x".to_string())].into(),
            taints: vec![
                Taint {
                    key: "dedicated".into(),
                    value: Some("web".into()),
                    effect: TaintEffect::NoSchedule,
                    time_added: None,
                },
                Taint {
                    key: "node.cilium.io/agent-not-ready".into(),
                    value: None,
                    effect: TaintEffect::NoExecute,
                    time_added: None,
                },
            ],
        }
    }

    /// What `kubectl get node -o yaml` shows after registration: labels, the registered
    /// label, the finalizer beside the Node's own, an owner reference to the NodeClaim,
    /// the NodeClaim's taints (the Node's own kept where key and effect match), and no
    /// unregistered taint.
    #[test]
    fn registration_syncs_the_nodeclaim_onto_the_node() {
        let p = registration_patch(&node(), "default-abc", "uid-1", &sync());
        let m = &p["metadata"];
        assert_eq!(m["resourceVersion"], "7");
        assert_eq!(m["labels"]["team"], "web");
        assert_eq!(m["labels"][labels::REGISTERED], "true");
        assert_eq!(m["labels"]["kubernetes.io/hostname"], "ip-10-0-0-1");
        assert_eq!(m["annotations"]["note"], "x");
        assert_eq!(
            m["finalizers"],
            json!(["example.com/keep", labels::TERMINATION_FINALIZER])
        );
        assert_eq!(m["ownerReferences"][0]["kind"], "NodeClaim");
        assert_eq!(m["ownerReferences"][0]["name"], "default-abc");
        assert_eq!(m["ownerReferences"][0]["uid"], "uid-1");
        let taints = p["spec"]["taints"].as_array().unwrap();
        let keys: Vec<&str> = taints.iter().map(|t| t["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["dedicated", "node.cilium.io/agent-not-ready"]);
        assert_eq!(taints[0]["value"], "kubelet", "the Node's own is kept");
    }

    /// A Node labelled `karpenter.sh/do-not-sync-taints=true` keeps its taints; only the
    /// unregistered taint goes.
    #[test]
    fn a_node_that_opts_out_keeps_its_taints() {
        let mut n = node();
        n.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(labels::DO_NOT_SYNC_TAINTS.into(), "true".into());
        let p = registration_patch(&n, "default-abc", "uid-1", &sync());
        let keys: Vec<&str> = p["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["dedicated"]);
    }
}
