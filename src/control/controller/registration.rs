//! Registration and initialization of a launched NodeClaim's Node, as upstream's
//! lifecycle controller does them (`nodeclaim/lifecycle/registration.go` and
//! `initialization.go`): once the kubelet's Node appears, its NodeClaim's labels,
//! annotations and taints are synced onto it with the termination finalizer, an owner
//! reference and `karpenter.sh/registered`, and the `karpenter.sh/unregistered` taint
//! goes; once it is Ready with its startup and ephemeral taints gone and its requested
//! extended resources registered, it gets `karpenter.sh/initialized`. The state reads
//! both labels, as upstream's `StateNode.Registered()`/`Initialized()` do, so a console
//! attached to an upstream cluster and our own controller agree on what they mean.

use std::collections::BTreeMap;

use super::Controller;
use crate::api::labels;
use crate::api::nodeclaim::Taint;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, ClusterError, NodeClaimObject, NodeObject, NodeSync, Write};

/// Taints a node carries only while it starts (upstream `scheduling.KnownEphemeralTaints`
/// and `KnownEphemeralTaintKeyPrefixes`): they do not count against it before it is
/// initialized, and initialization waits for them to go.
pub(super) fn is_ephemeral(t: &Taint) -> bool {
    use crate::api::nodeclaim::TaintEffect::{NoExecute, NoSchedule};
    let value = t.value.as_deref().unwrap_or("");
    match (t.key.as_str(), t.effect) {
        ("node.kubernetes.io/not-ready", NoSchedule | NoExecute) => true,
        ("node.kubernetes.io/unreachable", NoSchedule) => true,
        ("node.cloudprovider.kubernetes.io/uninitialized", NoSchedule) => value == "true",
        (labels::UNREGISTERED_TAINT_KEY, NoExecute) => true,
        (key, _) => key.starts_with("readiness.k8s.io/"),
    }
}

/// A label the Node carries with value "true".
pub(super) fn has_label(node: &NodeObject, key: &str) -> bool {
    node.labels.get(key).is_some_and(|v| v == "true")
}

/// Why a registered Node is not initialized yet, as upstream's Initialized condition
/// words it (reason, message); `None` once it may be.
pub(super) fn not_initialized(
    claim: &NodeClaimObject,
    node: &NodeObject,
) -> Option<(&'static str, String)> {
    if !node.ready {
        return Some(("NodeNotReady", "Node status is NotReady".into()));
    }
    let taint_text = |t: &Taint| match &t.value {
        Some(v) => format!("{}={v}:{}", t.key, t.effect.as_str()),
        None => format!("{}:{}", t.key, t.effect.as_str()),
    };
    if let Some(t) = node
        .taints
        .iter()
        .find(|t| claim.startup_taints.iter().any(|s| s.matches(t)))
    {
        return Some((
            "StartupTaintsExist",
            format!("StartupTaint {:?} still exists", taint_text(t)),
        ));
    }
    if let Some(t) = node.taints.iter().find(|t| is_ephemeral(t)) {
        return Some((
            "KnownEphemeralTaintsExist",
            format!("KnownEphemeralTaint {:?} still exists", taint_text(t)),
        ));
    }
    // Extended resources (GPUs, ...) the pods asked for: the kubelet reports them zero
    // until the device plugin registers. (Upstream checks every request; cpu, memory and
    // pods are always reported by a Ready kubelet.)
    if let Some(name) = claim
        .requests
        .extended
        .iter()
        .find(|(name, milli)| *milli > 0 && node.allocatable.get(name) == 0)
        .map(|(name, _)| name)
    {
        return Some((
            "ResourceNotRegistered",
            format!("Resource {name:?} was requested but not registered"),
        ));
    }
    None
}

/// What registration copies onto the Node.
fn sync_of(claim: &NodeClaimObject) -> NodeSync {
    let mut node_labels = claim.labels.clone();
    node_labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    if let Some(l) = &claim.launched {
        node_labels.insert(labels::INSTANCE_TYPE.into(), l.instance_type.clone());
        node_labels.insert(labels::ZONE.into(), l.zone.clone());
        node_labels.insert(
            labels::CAPACITY_TYPE.into(),
            l.capacity_type.as_str().into(),
        );
    }
    let mut taints = claim.taints.clone();
    taints.extend(claim.startup_taints.clone());
    NodeSync {
        labels: node_labels,
        annotations: claim.annotations.clone(),
        taints,
    }
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Registers and initializes the Nodes that are due (each write once; a failed one
    /// is tried again next round).
    pub(super) async fn register_and_initialize(&mut self) {
        enum Due {
            /// The Node, what to sync onto it, and whether it came with the unregistered
            /// taint.
            Register(String, NodeSync, bool),
            Initialize(String),
        }
        let due: Vec<(String, Due)> = self
            .registry
            .records()
            .filter(|r| r.claim.deleting.is_none() && r.claim.launched.is_some())
            .filter(|r| !(r.registration_written && r.initialization_written))
            .filter_map(|r| {
                let node = self.registry.node_of(&r.claim.name)?;
                let name = r.claim.name.clone();
                if !has_label(node, labels::REGISTERED) {
                    if r.registration_written {
                        return None;
                    }
                    let tainted = node.taints.iter().any(|t| {
                        t.key == labels::UNREGISTERED_TAINT_KEY
                            && t.effect == crate::api::nodeclaim::TaintEffect::NoExecute
                    });
                    return Some((
                        name,
                        Due::Register(node.name.clone(), sync_of(&r.claim), tainted),
                    ));
                }
                if has_label(node, labels::INITIALIZED) || r.initialization_written {
                    return None;
                }
                not_initialized(&r.claim, node)
                    .is_none()
                    .then(|| (name, Due::Initialize(node.name.clone())))
            })
            .collect();
        for (claim, due) in due {
            let (write, what) = match due {
                Due::Register(node, sync, tainted) => (
                    {
                        // Upstream `registration.go`: a Node that registered without the
                        // taint may have run pods before its labels and taints were synced.
                        if !tainted {
                            self.post([
                                crate::control::upstream_events::unregistered_taint_missing(&claim),
                            ]);
                        }
                        Write::RegisterNode {
                            node: node.clone(),
                            nodeclaim: claim.clone(),
                            sync: Box::new(sync),
                        }
                    },
                    format!("registering Node {node} of NodeClaim {claim}"),
                ),
                Due::Initialize(node) => (
                    Write::LabelNode {
                        node: node.clone(),
                        labels: BTreeMap::from([(labels::INITIALIZED.into(), "true".into())]),
                    },
                    format!("marking Node {node} of NodeClaim {claim} initialized"),
                ),
            };
            let registering = matches!(write, Write::RegisterNode { .. });
            match self.cluster.write(write).await {
                Ok(()) => {
                    if let Some(r) = self.registry.get_mut(&claim) {
                        if registering {
                            r.registration_written = true;
                        } else {
                            r.initialization_written = true;
                        }
                    }
                }
                // The Node went meanwhile; its removal arrives by watch.
                Err(ClusterError::NotFound { .. }) => {}
                Err(e) => self.error(format!("{what}: {e}")),
            }
        }
    }
}
