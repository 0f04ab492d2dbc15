//! `export`: a live cluster written as a scenario file, so `whatif` (and `simulate`, and
//! the console's `--scenario`) can play its future. What it reads, and what becomes of
//! it:
//!
//! - NodePools and EC2NodeClasses: as they are (spec, labels, annotations but kubectl's
//!   last-applied copy). A NodePool naming an EC2NodeClass the cluster does not have (no
//!   AWS provider here) gets a minimal one, said on stderr.
//! - NodeClaims that launched and are not being deleted: running nodes
//!   (`docs/scenarios.md`), by their labels (pool, instance type, zone, capacity type).
//! - Pods not finished and not being deleted, by owner: a ReplicaSet's under its
//!   Deployment's name, any other owner's (StatefulSet, Job, ...) under its own, each a
//!   Deployment at the current pod count with the first pod's spec as the template;
//!   DaemonSets as they are (their pods, and static pods, come with their nodes); pods
//!   without an owner as bare pods.
//! - PodDisruptionBudgets as they are.
//!
//! The Scenario document starts at the export's time; no replica schedule or timeline
//! is invented: the workload holds still, and what changes is what the autoscaler does.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use serde_json::{Map, Value, json};

use crate::api::ec2nodeclass::EC2NodeClass;
use crate::api::labels;
use crate::api::nodeclaim::NodeClaim;
use crate::api::nodepool::NodePool;
use crate::cluster::scenario::API_VERSION;

/// The annotation kubectl keeps a whole copy of the object in: dropped, it would only
/// repeat the spec.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Pod labels a controller stamps on each pod (a revision, the pod's own name): not part
/// of the workload's template.
const STAMPED: [&str; 6] = [
    "pod-template-hash",
    "controller-revision-hash",
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "batch.kubernetes.io/job-completion-index",
    "batch.kubernetes.io/controller-uid",
];

/// The scenario text and what the export had to leave out or make up, for stderr.
pub struct Export {
    pub yaml: String,
    pub notes: Vec<String>,
}

async fn list<K>(api: Api<K>, what: &str) -> Result<Vec<K>, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| format!("listing {what}: {e}"))
}

/// Metadata for a document: name, namespace when given, labels and annotations when any.
fn meta(
    name: &str,
    namespace: Option<&str>,
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    if let Some(ns) = namespace {
        m.insert("namespace".into(), json!(ns));
    }
    if let Some(l) = labels.filter(|l| !l.is_empty()) {
        m.insert("labels".into(), json!(l));
    }
    let kept: BTreeMap<&String, &String> = annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != LAST_APPLIED)
        .collect();
    if !kept.is_empty() {
        m.insert("annotations".into(), json!(kept));
    }
    Value::Object(m)
}

fn spec_of<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object)
        .ok()
        .and_then(|v| v.get("spec").cloned())
        .unwrap_or(Value::Null)
}

/// A workload's name for a pod's owner: a ReplicaSet's Deployment (the ReplicaSet's name
/// less its `-<pod-template-hash>`), any other owner itself.
fn workload(pod: &Pod) -> Option<(String, String)> {
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?;
    let hash = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"));
    let name = match (owner.kind.as_str(), hash) {
        ("ReplicaSet", Some(h)) => owner
            .name
            .strip_suffix(&format!("-{h}"))
            .unwrap_or(&owner.name)
            .to_string(),
        _ => owner.name.clone(),
    };
    Some((owner.kind.clone(), name))
}

/// A pod's spec as a template's: not bound to a node.
fn template_spec(pod: &Pod) -> Value {
    let mut spec = pod
        .spec
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_else(|| json!({}));
    if let Value::Object(m) = &mut spec {
        m.remove("nodeName");
    }
    spec
}

fn template_labels(pod: &Pod) -> BTreeMap<String, String> {
    let mut l = pod.metadata.labels.clone().unwrap_or_default();
    for k in STAMPED {
        l.remove(k);
    }
    l
}

/// Reads the cluster and writes it as a scenario starting at `now`. `context` names the
/// cluster in the file's header.
pub async fn export(
    client: kube::Client,
    context: &str,
    now: DateTime<Utc>,
) -> Result<Export, String> {
    let mut notes = Vec::new();
    let mut docs: Vec<Value> = Vec::new();

    let mut pools = list(Api::<NodePool>::all(client.clone()), "NodePools").await?;
    pools.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let classes = match list(Api::<EC2NodeClass>::all(client.clone()), "EC2NodeClasses").await {
        Ok(c) => c,
        Err(e) => {
            notes.push(format!("no EC2NodeClasses read ({e})"));
            Vec::new()
        }
    };
    let class_names: Vec<String> = classes
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    for p in &pools {
        let name = p.metadata.name.clone().unwrap_or_default();
        docs.push(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": meta(&name, None, p.metadata.labels.as_ref(), p.metadata.annotations.as_ref()),
            "spec": spec_of(p),
        }));
    }
    let mut wanted: Vec<String> = pools
        .iter()
        .map(|p| p.spec.template.spec.node_class_ref.name.clone())
        .collect();
    wanted.sort();
    wanted.dedup();
    for c in &classes {
        let name = c.metadata.name.clone().unwrap_or_default();
        docs.push(json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": meta(&name, None, c.metadata.labels.as_ref(), c.metadata.annotations.as_ref()),
            "spec": spec_of(c),
        }));
    }
    for name in wanted.iter().filter(|n| !class_names.contains(n)) {
        notes.push(format!(
            "EC2NodeClass {name} is not in the cluster: the scenario gets a minimal one \
             (AL2023, subnets and security groups by tag)"
        ));
        docs.push(json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": name},
            "spec": {
                "role": "KarpenterNodeRole",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": context}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": context}}],
            },
        }));
    }

    let mut claims = list(Api::<NodeClaim>::all(client.clone()), "NodeClaims").await?;
    claims.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut nodes = 0;
    for c in &claims {
        let name = c.metadata.name.clone().unwrap_or_default();
        let l = c.metadata.labels.clone().unwrap_or_default();
        let launched = [
            labels::NODEPOOL,
            labels::INSTANCE_TYPE,
            labels::ZONE,
            labels::CAPACITY_TYPE,
        ]
        .iter()
        .all(|k| l.contains_key(*k));
        if c.metadata.deletion_timestamp.is_some() {
            notes.push(format!("NodeClaim {name} is being deleted: left out"));
            continue;
        }
        if !launched {
            notes.push(format!(
                "NodeClaim {name} has not launched (no instance type, zone or capacity type \
                 label yet): left out"
            ));
            continue;
        }
        nodes += 1;
        docs.push(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": meta(&name, None, Some(&l), None),
            "spec": spec_of(c),
        }));
    }

    let mut daemonsets = list(Api::<DaemonSet>::all(client.clone()), "DaemonSets").await?;
    daemonsets.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    for d in &daemonsets {
        docs.push(json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta(
                d.metadata.name.as_deref().unwrap_or_default(),
                d.metadata.namespace.as_deref(),
                None,
                None,
            ),
            "spec": spec_of(d),
        }));
    }

    let mut pods = list(Api::<Pod>::all(client.clone()), "Pods").await?;
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    // (namespace, name) -> (owner kinds, first pod, count)
    let mut groups: BTreeMap<(String, String), (Vec<String>, Pod, usize)> = BTreeMap::new();
    let mut bare = Vec::new();
    let mut finished = 0;
    for p in pods {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) || p.metadata.deletion_timestamp.is_some()
        {
            finished += 1;
            continue;
        }
        let ns = p
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        match workload(&p) {
            // A DaemonSet's pods come with their DaemonSet; a static pod (owned by its
            // Node) lives and dies with its node.
            Some((kind, _)) if kind == "DaemonSet" || kind == "Node" => {}
            Some((kind, name)) => {
                let g = groups
                    .entry((ns, name))
                    .or_insert_with(|| (Vec::new(), p.clone(), 0));
                if !g.0.contains(&kind) {
                    g.0.push(kind);
                }
                g.2 += 1;
            }
            None => bare.push(p),
        }
    }
    if finished > 0 {
        notes.push(format!("{finished} finished or deleting pod(s) left out"));
    }
    let mut workload_pods = 0;
    for ((ns, name), (kinds, pod, count)) in &groups {
        workload_pods += count;
        if kinds.iter().any(|k| k != "ReplicaSet") {
            notes.push(format!(
                "{ns}/{name} ({}): played as a Deployment of {count} pod(s)",
                kinds.join(", ")
            ));
        }
        let labels = template_labels(pod);
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        docs.push(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "replicas": count,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": meta(name, None, Some(&labels), Some(&annotations)),
                    "spec": template_spec(pod),
                },
            },
        }));
    }
    for p in &bare {
        docs.push(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta(
                p.metadata.name.as_deref().unwrap_or_default(),
                p.metadata.namespace.as_deref(),
                p.metadata.labels.as_ref(),
                p.metadata.annotations.as_ref(),
            ),
            "spec": template_spec(p),
        }));
    }

    let mut pdbs = list(
        Api::<PodDisruptionBudget>::all(client),
        "PodDisruptionBudgets",
    )
    .await?;
    pdbs.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    for p in &pdbs {
        docs.push(json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(
                p.metadata.name.as_deref().unwrap_or_default(),
                p.metadata.namespace.as_deref(),
                None,
                None,
            ),
            "spec": spec_of(p),
        }));
    }

    let at = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    docs.push(json!({
        "apiVersion": API_VERSION,
        "kind": "Scenario",
        "metadata": {"name": "export"},
        "spec": {"seed": 1, "duration": "6h", "start": at},
    }));

    let mut yaml = format!(
        "# Exported from context {context} at {at} by karpenter-tui export:\n\
         # {} NodePool(s), {nodes} running node(s), {} workload(s) of {workload_pods} pod(s), \
         {} bare pod(s), {} DaemonSet(s), {} PodDisruptionBudget(s).\n\
         # Play its future: karpenter-tui whatif THIS_FILE 6h POOL FIELD=VALUE\n",
        pools.len(),
        groups.len(),
        bare.len(),
        daemonsets.len(),
        pdbs.len(),
    );
    for d in &docs {
        yaml.push_str("---\n");
        yaml.push_str(
            &serde_norway::to_string(d).map_err(|e| format!("writing the scenario: {e}"))?,
        );
    }
    Ok(Export { yaml, notes })
}
