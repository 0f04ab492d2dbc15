//! The controller's writes as Kubernetes API calls. Each one is retried per
//! [`super::retry`]; read-modify-write calls (finalizers, taints) send the resourceVersion
//! they read, so a concurrent writer makes them conflict and re-read instead of
//! overwriting what it did.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::convert;
use super::retry::retrying;
use crate::api::nodeclaim::{NodeClaim, NodeClaimStatus, Taint};
use crate::api::nodepool::NodePool;
use crate::cluster::{ClusterError, Launched, NodeClaimObject, NodeSync, ObjectRef, PoolStatus};
use crate::engine::pod::PodKey;

/// Everything a write needs, cloned into its future so the cluster is not borrowed
/// while the call is in flight.
#[derive(Clone)]
pub struct Writer {
    pub client: kube::Client,
    /// Where the settings ConfigMap lives.
    pub namespace: String,
}

fn api_error(what: &str, e: kube::Error) -> ClusterError {
    match &e {
        kube::Error::Api(s) if s.code == 404 => ClusterError::NotFound {
            what: what.to_string(),
        },
        _ => ClusterError::Api(format!("{what}: {e}")),
    }
}

fn merge() -> PatchParams {
    PatchParams::default()
}

impl Writer {
    fn nodeclaims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Creates the NodeClaim under the name the controller chose, with the pool as its
    /// owner and the termination finalizer.
    pub async fn create_nodeclaim(
        &self,
        claim: &NodeClaimObject,
        pool: Option<&NodePool>,
    ) -> Result<(), ClusterError> {
        let what = format!("NodeClaim {}", claim.name);
        let pool = pool.ok_or_else(|| ClusterError::NotFound {
            what: format!("NodePool {}", claim.nodepool),
        })?;
        let manifest = convert::nodeclaim_manifest(claim, pool);
        let api = self.nodeclaims();
        retrying(&what, || async {
            api.create(&PostParams::default(), &manifest).await
        })
        .await
        .map(drop)
        .map_err(|e| api_error(&what, e))
    }

    /// Records the launch: the instance's labels on the object first, then status
    /// (providerID, allocatable, condition Launched) through the status subresource, as
    /// upstream writes metadata before status: a watcher never sees Launched=True on a
    /// claim that does not yet say which instance type it got.
    pub async fn set_launched(&self, name: &str, launched: &Launched) -> Result<(), ClusterError> {
        let what = format!("NodeClaim {name}");
        let api = self.nodeclaims();
        let labels = convert::launched_labels(launched);
        retrying(&what, || async {
            api.patch(name, &merge(), &Patch::Merge(labels.clone()))
                .await
        })
        .await
        .map_err(|e| api_error(&what, e))?;
        let status = convert::launched_status(launched);
        retrying(&what, || async {
            api.patch_status(name, &merge(), &Patch::Merge(status.clone()))
                .await
        })
        .await
        .map(drop)
        .map_err(|e| api_error(&what, e))
    }

    pub async fn delete_nodeclaim(&self, name: &str) -> Result<(), ClusterError> {
        let what = format!("NodeClaim {name}");
        let api = self.nodeclaims();
        retrying(&what, || async {
            api.delete(name, &DeleteParams::default()).await
        })
        .await
        .map(drop)
        .map_err(|e| api_error(&what, e))
    }

    /// Registration's write to the Node (upstream `registration.go` `syncNode`, then the
    /// unregistered taint's removal and the registered label), sent with the
    /// resourceVersion it read: lists (taints, finalizers, owner references) are replaced
    /// whole by a merge patch, so a concurrent writer must make it conflict and re-read.
    pub async fn register_node(
        &self,
        node: &str,
        nodeclaim: &str,
        sync: &NodeSync,
    ) -> Result<(), ClusterError> {
        let what = format!("NodeClaim {nodeclaim}");
        let claims = self.nodeclaims();
        let uid = retrying(&what, || async { claims.get(nodeclaim).await })
            .await
            .map_err(|e| api_error(&what, e))?
            .metadata
            .uid
            .unwrap_or_default();
        let what = format!("Node {node}");
        let api = self.nodes();
        retrying(&what, || async {
            let n = api.get(node).await?;
            let patch = convert::registration_patch(&n, nodeclaim, &uid, sync);
            api.patch(node, &merge(), &Patch::Merge(patch))
                .await
                .map(drop)
        })
        .await
        .map_err(|e| api_error(&what, e))
    }

    /// Sets labels on a Node with a merge patch.
    pub async fn label_node(
        &self,
        node: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), ClusterError> {
        let patch = json!({"metadata": {"labels": labels}});
        merge_patch(self.nodes(), &format!("Node {node}"), node, &patch).await
    }

    /// Sets and removes labels on a NodeClaim or a Node (a merge patch: `null` removes).
    pub async fn relabel(
        &self,
        target: &ObjectRef,
        labels: &BTreeMap<String, Option<String>>,
    ) -> Result<(), ClusterError> {
        let patch = json!({"metadata": {"labels": labels}});
        match target {
            ObjectRef::NodeClaim(_) | ObjectRef::Node(_) => self.patch_meta(target, &patch).await,
            other => Err(ClusterError::Api(format!("cannot relabel {other}"))),
        }
    }

    /// A merge patch on a NodeClaim, Node or NodePool's metadata.
    async fn patch_meta(&self, target: &ObjectRef, patch: &Value) -> Result<(), ClusterError> {
        match target {
            ObjectRef::NodeClaim(name) => {
                merge_patch(self.nodeclaims(), &format!("NodeClaim {name}"), name, patch).await
            }
            ObjectRef::Node(name) => {
                merge_patch(self.nodes(), &format!("Node {name}"), name, patch).await
            }
            ObjectRef::NodePool(name) => {
                let api: Api<NodePool> = Api::all(self.client.clone());
                merge_patch(api, &format!("NodePool {name}"), name, patch).await
            }
            other => Err(ClusterError::Api(format!("cannot patch {other}"))),
        }
    }

    /// Writes a NodeClaim's status subresource (a merge patch: the conditions list is
    /// replaced whole, which is what the one controller owning them wants).
    pub async fn nodeclaim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
    ) -> Result<(), ClusterError> {
        let patch = json!({ "status": status });
        status_patch(
            self.nodeclaims(),
            &format!("NodeClaim {name} status"),
            name,
            &patch,
        )
        .await
    }

    /// Writes a NodePool's status subresource.
    pub async fn nodepool_status(
        &self,
        name: &str,
        status: &PoolStatus,
    ) -> Result<(), ClusterError> {
        let patch = convert::nodepool_status_patch(status);
        let api: Api<NodePool> = Api::all(self.client.clone());
        status_patch(api, &format!("NodePool {name} status"), name, &patch).await
    }

    /// Termination is done: the Node goes (upstream's termination controller deletes it
    /// before the instance, and then lifts the Node's termination finalizer, which
    /// registration put there), then the NodeClaim's finalizer, which lets it go too.
    pub async fn remove_finalizer(
        &self,
        name: &str,
        node: Option<&str>,
    ) -> Result<(), ClusterError> {
        if let Some(node) = node {
            let what = format!("Node {node}");
            let nodes = self.nodes();
            match retrying(&what, || async {
                nodes.delete(node, &DeleteParams::default()).await
            })
            .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(api_error(&what, e)),
            }
            match retrying(&what, || async {
                let n = nodes.get(node).await?;
                let finalizers = n.metadata.finalizers.clone().unwrap_or_default();
                if !finalizers
                    .iter()
                    .any(|f| f == crate::cluster::TERMINATION_FINALIZER)
                {
                    return Ok(());
                }
                let kept: Vec<&String> = finalizers
                    .iter()
                    .filter(|f| *f != crate::cluster::TERMINATION_FINALIZER)
                    .collect();
                let patch = json!({"metadata": {
                    "finalizers": kept,
                    "resourceVersion": n.metadata.resource_version,
                }});
                nodes
                    .patch(node, &merge(), &Patch::Merge(patch))
                    .await
                    .map(drop)
            })
            .await
            {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(api_error(&what, e)),
            }
        }
        let what = format!("NodeClaim {name}");
        let api = self.nodeclaims();
        retrying(&what, || async {
            let claim = api.get(name).await?;
            let finalizers: Vec<String> = claim
                .metadata
                .finalizers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f != crate::cluster::TERMINATION_FINALIZER)
                .collect();
            let patch = json!({"metadata": {
                "finalizers": finalizers,
                "resourceVersion": claim.metadata.resource_version,
            }});
            api.patch(name, &merge(), &Patch::Merge(patch)).await
        })
        .await
        .map(drop)
        .map_err(|e| api_error(&what, e))
    }

    /// Adds (`add`) or removes a taint, matching by key and effect.
    pub async fn taint(&self, node: &str, taint: &Taint, add: bool) -> Result<(), ClusterError> {
        let what = format!("Node {node}");
        let api = self.nodes();
        let wanted = serde_json::to_value(taint).map_err(|e| ClusterError::Api(e.to_string()))?;
        retrying(&what, || async {
            let n = api.get(node).await?;
            let mut taints: Vec<Value> = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .map(|t| {
                    t.iter()
                        .filter_map(|t| serde_json::to_value(t).ok())
                        .collect()
                })
                .unwrap_or_default();
            let same = |t: &Value| t["key"] == wanted["key"] && t["effect"] == wanted["effect"];
            let had = taints.iter().any(same);
            if add == had {
                return Ok(());
            }
            if add {
                taints.push(wanted.clone());
            } else {
                taints.retain(|t| !same(t));
            }
            let patch = json!({
                "metadata": {"resourceVersion": n.metadata.resource_version},
                "spec": {"taints": taints},
            });
            api.patch(node, &merge(), &Patch::Merge(patch))
                .await
                .map(drop)
        })
        .await
        .map_err(|e| api_error(&what, e))
    }

    /// The eviction API. A 429 naming a disruption budget is the PDB's answer, not
    /// throttling: it goes back to termination, which tries again on its next round.
    pub async fn evict(&self, pod: &PodKey) -> Result<(), ClusterError> {
        let what = format!("pod {pod}");
        let api = self.pods(&pod.namespace);
        let r = retrying(&what, || async {
            match api.evict(&pod.name, &EvictParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 429 && is_budget(&s) => {
                    Ok(Some(pdb_name(&s)))
                }
                r => r.map(|_| None),
            }
        })
        .await;
        match r {
            Ok(Some(pdb)) => Err(ClusterError::DisruptionBudget {
                pod: pod.clone(),
                pdb,
            }),
            Ok(None) => Ok(()),
            Err(e) => Err(api_error(&what, e)),
        }
    }

    pub async fn delete_pod(&self, pod: &PodKey) -> Result<(), ClusterError> {
        let what = format!("pod {pod}");
        let api = self.pods(&pod.namespace);
        match retrying(&what, || async {
            api.delete(&pod.name, &DeleteParams::default()).await
        })
        .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(api_error(&what, e)),
        }
    }

    /// Sets or removes annotations with a merge patch (`null` removes a key).
    pub async fn annotate(
        &self,
        target: &ObjectRef,
        annotations: &BTreeMap<String, Option<String>>,
    ) -> Result<(), ClusterError> {
        let patch = json!({"metadata": {"annotations": annotations}});
        match target {
            ObjectRef::NodeClaim(_) | ObjectRef::NodePool(_) => {
                self.patch_meta(target, &patch).await
            }
            ObjectRef::Settings => {
                let what = format!("ConfigMap {}/{}", self.namespace, super::SETTINGS);
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
                // Server-side apply would create it; a merge patch does not, so create the
                // object first when it is missing.
                let r = retrying(&what, || async {
                    api.patch(super::SETTINGS, &merge(), &Patch::Merge(patch.clone()))
                        .await
                })
                .await;
                match r {
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        let mut cm = ConfigMap::default();
                        cm.metadata.name = Some(super::SETTINGS.into());
                        cm.metadata.annotations = Some(
                            annotations
                                .iter()
                                .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                                .collect(),
                        );
                        retrying(&what, || async {
                            api.create(&PostParams::default(), &cm).await
                        })
                        .await
                        .map(drop)
                        .map_err(|e| api_error(&what, e))
                    }
                    r => r.map(drop).map_err(|e| api_error(&what, e)),
                }
            }
            other => Err(ClusterError::Api(format!(
                "annotations on {other} are not part of the protocol"
            ))),
        }
    }
}

/// A JSON merge patch, retried.
async fn merge_patch<K>(
    api: Api<K>,
    what: &str,
    name: &str,
    patch: &Value,
) -> Result<(), ClusterError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    retrying(what, || async {
        api.patch(name, &merge(), &Patch::Merge(patch)).await
    })
    .await
    .map(drop)
    .map_err(|e| api_error(what, e))
}

/// A JSON merge patch of the status subresource, retried.
async fn status_patch<K>(
    api: Api<K>,
    what: &str,
    name: &str,
    patch: &Value,
) -> Result<(), ClusterError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    retrying(what, || async {
        api.patch_status(name, &merge(), &Patch::Merge(patch)).await
    })
    .await
    .map(drop)
    .map_err(|e| api_error(what, e))
}

/// The eviction API answers 429 with cause `DisruptionBudget` when a PDB refuses.
fn is_budget(s: &kube::core::Status) -> bool {
    s.details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "DisruptionBudget"))
        || s.message.contains("disruption budget")
}

/// The PDB's name from the cause message ("The disruption budget NAME needs ...").
fn pdb_name(s: &kube::core::Status) -> String {
    let text = s
        .details
        .as_ref()
        .and_then(|d| d.causes.iter().find(|c| c.reason == "DisruptionBudget"))
        .map(|c| c.message.clone())
        .unwrap_or_else(|| s.message.clone());
    text.split_whitespace()
        .skip_while(|w| *w != "budget")
        .nth(1)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '.'))
        .filter(|w| !w.is_empty())
        .unwrap_or("(unnamed)")
        .to_string()
}
