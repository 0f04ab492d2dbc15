//! The API server side of the simulated cluster: the watch the controller reads
//! (`changes`, with a full listing after `resync`), the writes it makes, the eviction
//! API's PodDisruptionBudget check, the termination finalizer, and the API-outage chaos
//! switch.

use std::future::ready;

use chrono::{DateTime, Utc};

use super::SimCluster;
use crate::api::labels;
use crate::api::nodeclaim::Taint;
use crate::cluster::{Change, ClusterError, Object, ObjectRef, Write};
use crate::engine::pod::{Pod, PodKey};

impl crate::cluster::Cluster for SimCluster {
    fn changes(&mut self) -> Vec<Change> {
        if !self.resync {
            let due = |at: &DateTime<Utc>| *at + self.settings.watch_latency <= self.now;
            let mut out = Vec::new();
            while self.queue.front().is_some_and(|(at, _)| due(at)) {
                if let Some((_, c)) = self.queue.pop_front() {
                    out.push(c);
                }
            }
            return out;
        }
        self.resync = false;
        self.queue.clear();
        let mut out = Vec::new();
        out.extend(
            self.nodepools
                .values()
                .map(|p| Change::Applied(Object::NodePool(Box::new(p.clone())))),
        );
        out.extend(
            self.daemonsets
                .values()
                .map(|d| Change::Applied(Object::DaemonSet(Box::new(d.clone())))),
        );
        out.extend(
            self.nodeclaims
                .values()
                .map(|c| Change::Applied(Object::NodeClaim(Box::new(c.clone())))),
        );
        out.extend(
            self.nodes
                .values()
                .map(|n| Change::Applied(Object::Node(Box::new(n.object.clone())))),
        );
        out.extend(
            self.pods_in_order()
                .into_iter()
                .map(|p| Change::Applied(Object::Pod(Box::new(p.clone())))),
        );
        if !self.console_settings.is_empty() {
            out.push(Change::Applied(Object::Settings(
                self.console_settings.clone(),
            )));
        }
        self.pdb_allowed.clear();
        self.pods_dirty = true;
        self.refresh_pdbs();
        out.extend(self.queue.drain(..).map(|(_, c)| c));
        out
    }

    fn write(&mut self, write: Write) -> impl Future<Output = Result<(), ClusterError>> + Send {
        ready(self.apply_write(write))
    }
}

impl SimCluster {
    /// Starts the watch over: the next `changes()` lists every object (what a controller
    /// sees when it starts or its watch is re-established).
    pub fn resync(&mut self) {
        self.resync = true;
    }

    /// True (once) when the controller wrote since the last call: the cluster has
    /// reacting to do.
    pub fn take_written(&mut self) -> bool {
        std::mem::take(&mut self.written)
    }

    /// Writes the cluster accepted so far.
    pub fn writes(&self) -> usize {
        self.writes
    }

    /// Chaos: after `n` more accepted writes (counting from the start), every write
    /// fails as if the API server were gone; `None` brings it back.
    pub fn fail_writes_after(&mut self, n: Option<usize>) {
        self.fail_after = n;
    }

    /// Writes refused by the simulated outage.
    pub fn refused_writes(&self) -> usize {
        self.refused
    }

    fn apply_write(&mut self, write: Write) -> Result<(), ClusterError> {
        if self.fail_after.is_some_and(|n| self.writes >= n) {
            self.refused += 1;
            return Err(ClusterError::Api("simulated API server outage".into()));
        }
        let now = self.now;
        self.written = true;
        self.writes += 1;
        match write {
            Write::CreateNodeClaim(mut c) => {
                c.finalizer = true;
                self.nodeclaims.insert(c.name.clone(), (*c).clone());
                self.emit(Change::Applied(Object::NodeClaim(c)));
            }
            Write::SetLaunched {
                nodeclaim,
                launched,
            } => {
                let c = self
                    .nodeclaims
                    .get_mut(&nodeclaim)
                    .ok_or_else(|| not_found("NodeClaim", &nodeclaim))?;
                c.annotations.extend(launched.annotations.clone());
                c.launched = Some(*launched);
                let c = c.clone();
                self.emit(Change::Applied(Object::NodeClaim(Box::new(c))));
            }
            Write::DeleteNodeClaim { nodeclaim } => {
                let c = self
                    .nodeclaims
                    .get_mut(&nodeclaim)
                    .ok_or_else(|| not_found("NodeClaim", &nodeclaim))?;
                if c.deleting.is_none() {
                    c.deleting = Some(now);
                    let c = c.clone();
                    self.emit(Change::Applied(Object::NodeClaim(Box::new(c))));
                }
            }
            Write::RemoveFinalizer { nodeclaim } => {
                let c = self
                    .nodeclaims
                    .remove(&nodeclaim)
                    .ok_or_else(|| not_found("NodeClaim", &nodeclaim))?;
                self.emit(Change::Deleted(ObjectRef::NodeClaim(nodeclaim)));
                if let Some(l) = &c.launched {
                    self.registered.insert(l.provider_id.clone());
                    let node = self
                        .nodes
                        .values()
                        .find(|n| n.object.provider_id == l.provider_id)
                        .map(|n| n.object.name.clone());
                    if let Some(node) = node {
                        self.remove_node(&node);
                    }
                }
            }
            Write::Taint { node, taint } => {
                let n = self
                    .nodes
                    .get_mut(&node)
                    .ok_or_else(|| not_found("Node", &node))?;
                if !n
                    .object
                    .taints
                    .iter()
                    .any(|t| t.key == taint.key && t.effect == taint.effect)
                {
                    n.object.taints.push(taint);
                    let obj = n.object.clone();
                    self.schedule_dirty = true;
                    self.emit(Change::Applied(Object::Node(Box::new(obj))));
                }
            }
            Write::Untaint { node, taint } => {
                let n = self
                    .nodes
                    .get_mut(&node)
                    .ok_or_else(|| not_found("Node", &node))?;
                let before = n.object.taints.len();
                n.object
                    .taints
                    .retain(|t| t.key != taint.key || t.effect != taint.effect);
                if n.object.taints.len() != before {
                    let obj = n.object.clone();
                    self.schedule_dirty = true;
                    self.emit(Change::Applied(Object::Node(Box::new(obj))));
                }
            }
            Write::RegisterNode { node, sync, .. } => {
                let n = self
                    .nodes
                    .get_mut(&node)
                    .ok_or_else(|| not_found("Node", &node))?;
                let o = &mut n.object;
                let l = std::sync::Arc::make_mut(&mut o.labels);
                l.extend(sync.labels.clone());
                l.insert(labels::REGISTERED.into(), "true".into());
                o.annotations.extend(sync.annotations.clone());
                if o.labels
                    .get(labels::DO_NOT_SYNC_TAINTS)
                    .is_none_or(|v| v != "true")
                {
                    for t in sync.taints {
                        if !o
                            .taints
                            .iter()
                            .any(|h| h.key == t.key && h.effect == t.effect)
                        {
                            o.taints.push(t);
                        }
                    }
                }
                let unregistered = Taint::unregistered();
                o.taints.retain(|t| !t.matches(&unregistered));
                let obj = o.clone();
                self.schedule_dirty = true;
                self.emit(Change::Applied(Object::Node(Box::new(obj))));
            }
            Write::LabelNode { node, labels } => {
                let n = self
                    .nodes
                    .get_mut(&node)
                    .ok_or_else(|| not_found("Node", &node))?;
                std::sync::Arc::make_mut(&mut n.object.labels).extend(labels);
                let obj = n.object.clone();
                self.emit(Change::Applied(Object::Node(Box::new(obj))));
            }
            // The simulation keeps no status for others to read (`keeps_status` is false).
            Write::NodeClaimStatus { .. } | Write::NodePoolStatus { .. } => {}
            Write::Evict { pod } => {
                let p = self
                    .pods
                    .get(&pod)
                    .cloned()
                    .ok_or_else(|| not_found("Pod", &pod.to_string()))?;
                if let Some(pdb) = self.pdb_blocking(&p) {
                    return Err(ClusterError::DisruptionBudget { pod, pdb });
                }
                self.delete_pod(&pod);
            }
            Write::DeletePod { pod } => {
                if !self.pods.contains_key(&pod) {
                    return Err(not_found("Pod", &pod.to_string()));
                }
                self.delete_pod(&pod);
            }
            Write::Annotate {
                target,
                annotations,
            } => self.annotate(&target, annotations)?,
            Write::Relabel { target, labels } => self.relabel(&target, labels)?,
        }
        Ok(())
    }

    /// Sets and removes labels on a NodeClaim or a Node, and reports the object changed.
    fn relabel(
        &mut self,
        target: &ObjectRef,
        labels: std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<(), ClusterError> {
        match target {
            ObjectRef::NodeClaim(name) => {
                let c = self
                    .nodeclaims
                    .get_mut(name)
                    .ok_or_else(|| not_found("NodeClaim", name))?;
                apply(&mut c.labels, labels);
                let c = c.clone();
                self.emit(Change::Applied(Object::NodeClaim(Box::new(c))));
            }
            ObjectRef::Node(name) => {
                let n = self
                    .nodes
                    .get_mut(name)
                    .ok_or_else(|| not_found("Node", name))?;
                apply(std::sync::Arc::make_mut(&mut n.object.labels), labels);
                let obj = n.object.clone();
                self.emit(Change::Applied(Object::Node(Box::new(obj))));
            }
            other => {
                return Err(ClusterError::Api(format!("cannot relabel {other}")));
            }
        }
        Ok(())
    }

    /// Sets and removes annotations, and reports the object changed.
    fn annotate(
        &mut self,
        target: &ObjectRef,
        annotations: std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<(), ClusterError> {
        match target {
            ObjectRef::NodeClaim(name) => {
                let c = self
                    .nodeclaims
                    .get_mut(name)
                    .ok_or_else(|| not_found("NodeClaim", name))?;
                apply(&mut c.annotations, annotations);
                let c = c.clone();
                self.emit(Change::Applied(Object::NodeClaim(Box::new(c))));
            }
            ObjectRef::NodePool(name) => {
                let p = self
                    .nodepools
                    .get_mut(name)
                    .ok_or_else(|| not_found("NodePool", name))?;
                let mut map: std::collections::BTreeMap<String, String> = p
                    .metadata
                    .annotations
                    .take()
                    .unwrap_or_default()
                    .into_iter()
                    .collect();
                apply(&mut map, annotations);
                p.metadata.annotations = (!map.is_empty()).then(|| map.into_iter().collect());
                let p = p.clone();
                self.emit(Change::Applied(Object::NodePool(Box::new(p))));
            }
            ObjectRef::Settings => {
                apply(&mut self.console_settings, annotations);
                let s = self.console_settings.clone();
                self.emit(Change::Applied(Object::Settings(s)));
            }
            other => {
                return Err(ClusterError::Api(format!(
                    "annotations on {other} are not part of the protocol"
                )));
            }
        }
        Ok(())
    }

    /// Deletes a Node and, as the pod garbage collector does, every pod bound to it.
    fn remove_node(&mut self, node: &str) {
        if self.nodes.remove(node).is_none() {
            return;
        }
        self.schedule_dirty = true;
        self.emit(Change::Deleted(ObjectRef::Node(node.to_string())));
        let bound: Vec<PodKey> = self.index.bound_to(node).map(|p| p.key.clone()).collect();
        for k in bound {
            self.delete_pod(&k);
        }
    }
}

fn not_found(kind: &str, name: &str) -> ClusterError {
    ClusterError::NotFound {
        what: format!("{kind} {name}"),
    }
}

impl SimCluster {
    /// The PDB that refuses evicting `pod`, if any; otherwise takes one disruption from
    /// every PDB selecting it (status is recomputed from the pods on the next advance).
    fn pdb_blocking(&mut self, pod: &Pod) -> Option<String> {
        let selecting: Vec<(String, String)> = self
            .pdbs
            .values()
            .filter(|s| s.selects(pod))
            .map(|s| (s.namespace.clone(), s.name.clone()))
            .collect();
        let left = |k: &(String, String)| {
            self.pdb_allowed.get(k).copied().unwrap_or(0)
                - self.pdb_spent.get(k).copied().unwrap_or(0)
        };
        if let Some(k) = selecting.iter().find(|k| left(k) <= 0) {
            return Some(format!("{}/{}", k.0, k.1));
        }
        for k in selecting {
            *self.pdb_spent.entry(k).or_default() += 1;
        }
        None
    }
}

/// Sets (`Some`) and removes (`None`) keys of a label or annotation map.
fn apply(
    map: &mut std::collections::BTreeMap<String, String>,
    set: std::collections::BTreeMap<String, Option<String>>,
) {
    for (k, v) in set {
        match v {
            Some(v) => map.insert(k, v),
            None => map.remove(&k),
        };
    }
}
