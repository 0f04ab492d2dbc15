//! The NodeClaim lifecycle: creation and launch, liveness timeouts, interruption,
//! termination (drain, terminate the instance, remove the finalizer) and garbage
//! collection.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use super::{Controller, GC_GRACE, LAUNCH_TIMEOUT, REGISTRATION_TIMEOUT};
use crate::api::labels;
use crate::api::nodepool::NodePool;
use crate::cloud::{CloudProvider, LaunchError, LaunchRequest};
use crate::cluster::{Cluster, ClusterError, Launched, NodeClaimObject, Write};
use crate::control::events::EventKind;
use crate::engine::catalog::InstanceType;
use crate::engine::disruption::Replacement;
use crate::engine::provisioning::launch_order;
use crate::engine::requirements::{Requirement, Requirements};
use crate::engine::resources::Resources;
use crate::engine::scheduling::MAX_INSTANCE_TYPES;
use crate::engine::state::disrupted_taint;
use crate::engine::termination::drain_step;

/// A NodeClaim for `pool`, as upstream's `NodeClaimTemplate.ToNodeClaim` builds it: the
/// template's labels, annotations (plus the nodepool hash), taints, startup taints,
/// expireAfter and terminationGracePeriod, and the round's requirements narrowed to the
/// instance types it may launch as.
pub(super) fn nodeclaim_for(
    name: &str,
    pool: &NodePool,
    requirements: &Requirements,
    instance_types: &[String],
    requests: Resources,
    now: DateTime<Utc>,
) -> NodeClaimObject {
    let t = &pool.spec.template;
    let mut reqs = requirements.clone();
    reqs.add(Requirement::in_values(
        labels::INSTANCE_TYPE,
        instance_types.iter().take(MAX_INSTANCE_TYPES).cloned(),
    ));
    let mut claim_labels = t.metadata.labels.clone();
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    claim_labels.insert(labels::NODEPOOL.into(), pool_name.clone());
    let mut annotations = t.metadata.annotations.clone();
    annotations.insert(
        labels::NODEPOOL_HASH.into(),
        crate::engine::disruption::drift::nodepool_hash(pool),
    );
    let duration = |d: Option<std::time::Duration>| d.and_then(|d| TimeDelta::from_std(d).ok());
    NodeClaimObject {
        name: name.to_string(),
        nodepool: pool_name,
        requirements: reqs,
        requests,
        labels: claim_labels,
        annotations,
        taints: t.spec.taints.clone(),
        startup_taints: t.spec.startup_taints.clone(),
        expire_after: duration(t.spec.expire_after.value()),
        termination_grace_period: duration(
            t.spec
                .termination_grace_period
                .as_ref()
                .and_then(|d| d.value()),
        ),
        created: now,
        deleting: None,
        finalizer: true,
        launched: None,
    }
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// A fresh NodeClaim name for a pool: `<pool>-<5 lowercase alphanumerics>`, as the
    /// API server's generateName gives.
    pub(super) fn claim_name(&mut self, pool: &str) -> String {
        let claims = &self.nodeclaims;
        crate::api::generate_name::generate_name(&mut self.rng, pool, |n| claims.contains_key(n))
    }

    /// Creates a NodeClaim in the cluster and launches it right away. `reason` is the
    /// `karpenter_nodeclaims_created_total` label: `provisioned` or the disruption reason.
    pub(super) async fn create_and_launch(
        &mut self,
        claim: NodeClaimObject,
        cause: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) {
        let name = claim.name.clone();
        if self.create_claim(claim, reason).await {
            self.launch(&name, cause, now).await;
        }
    }

    /// Creates a NodeClaim in the cluster; false (with an error event) when the write
    /// failed.
    pub(super) async fn create_claim(&mut self, claim: NodeClaimObject, reason: &str) -> bool {
        let name = claim.name.clone();
        if let Err(e) = self
            .cluster
            .write(Write::CreateNodeClaim(Box::new(claim.clone())))
            .await
        {
            self.error(format!("creating NodeClaim {name}: {e}"));
            return false;
        }
        // Our own write is known before the watch reports it back.
        self.disruption
            .metrics
            .nodeclaim_created(reason, &claim.nodepool);
        self.nodeclaims.insert(name.clone(), claim);
        self.stats.nodeclaims_created += 1;
        true
    }

    /// Creates the NodeClaim a disruption command asked for.
    pub(super) async fn create_replacement(
        &mut self,
        name: &str,
        r: &Replacement,
        cause: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) {
        let Some(pool) = self.state.nodepools.get(&r.nodepool).cloned() else {
            self.error(format!(
                "replacement {name}: NodePool {} no longer exists",
                r.nodepool
            ));
            return;
        };
        let mut types: Vec<String> = Vec::new();
        for o in &r.options {
            if !types.contains(&o.instance_type) {
                types.push(o.instance_type.clone());
            }
        }
        let claim = nodeclaim_for(
            name,
            &pool,
            &r.requirements,
            &types,
            r.requests.clone(),
            now,
        );
        self.create_and_launch(claim, cause, reason, now).await;
    }

    /// Asks the cloud for an instance for a NodeClaim. Out-of-capacity offerings are
    /// remembered for 3 minutes; a NodeClaim nothing can launch is deleted and its pods
    /// provisioned again (upstream deletes it on InsufficientCapacity).
    pub(super) async fn launch(&mut self, name: &str, cause: &str, now: DateTime<Utc>) {
        let Some((request, allowed)) = self.launch_request(name) else {
            return;
        };
        let result = self.cloud.create(request).await;
        self.launch_result(name, cause, &allowed, result, now).await;
    }

    /// Launches the NodeClaims of one provisioning round together, so the cloud can merge
    /// launches of the same shape (upstream's CreateFleet batching).
    pub(super) async fn launch_all(&mut self, names: &[String], cause: &str, now: DateTime<Utc>) {
        let mut requests = Vec::new();
        let mut launching = Vec::new();
        for name in names {
            if let Some((request, allowed)) = self.launch_request(name) {
                requests.push(request);
                launching.push((name, allowed));
            }
        }
        let results = self.cloud.create_all(requests).await;
        for ((name, allowed), result) in launching.into_iter().zip(results) {
            self.launch_result(name, cause, &allowed, result, now).await;
        }
    }

    /// What the cloud is asked for a NodeClaim: its offerings in launch order, the pool's
    /// NodeClass, and the labels and taints its node registers with.
    fn launch_request(&self, name: &str) -> Option<(LaunchRequest, Vec<Arc<InstanceType>>)> {
        let claim = self.nodeclaims.get(name)?;
        let types = self
            .state
            .instance_types
            .get(&claim.nodepool)
            .cloned()
            .unwrap_or_default();
        let allowed: Vec<_> = types
            .into_iter()
            .filter(|it| {
                claim
                    .requirements
                    .get(labels::INSTANCE_TYPE)
                    .is_none_or(|r| r.has(&it.name))
            })
            .collect();
        let offerings = launch_order(&claim.requirements, &allowed);
        let mut node_labels = claim.requirements.labels();
        node_labels.extend(claim.labels.clone());
        node_labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
        // The instance type, zone and capacity type labels come from the offering that
        // launches (the kubelet and the cloud provider add them), not from the request.
        for key in [labels::INSTANCE_TYPE, labels::ZONE, labels::CAPACITY_TYPE] {
            node_labels.remove(key);
        }
        let mut taints = claim.taints.clone();
        taints.extend(claim.startup_taints.clone());
        let request = LaunchRequest {
            nodeclaim: name.to_string(),
            nodepool: claim.nodepool.clone(),
            offerings,
            nodeclass: self
                .state
                .nodepools
                .get(&claim.nodepool)
                .map(|p| p.spec.template.spec.node_class_ref.name.clone()),
            labels: node_labels,
            taints,
        };
        Some((request, allowed))
    }

    /// Records what came of a launch.
    async fn launch_result(
        &mut self,
        name: &str,
        cause: &str,
        allowed: &[Arc<InstanceType>],
        result: Result<crate::cloud::Launched, LaunchError>,
        now: DateTime<Utc>,
    ) {
        let Some(claim) = self.nodeclaims.get(name).cloned() else {
            return;
        };
        match result {
            Ok(launched) => {
                for o in &launched.unavailable {
                    self.unavailable
                        .mark(&o.instance_type, &o.zone, o.capacity_type, now);
                }
                if !launched.unavailable.is_empty() {
                    self.refresh_instance_types(now);
                }
                let i = launched.instance;
                let it = allowed.iter().find(|t| t.name == i.instance_type);
                let status = Launched {
                    provider_id: i.provider_id.clone(),
                    instance_type: i.instance_type.clone(),
                    zone: i.zone.clone(),
                    capacity_type: i.capacity_type,
                    price: i.price,
                    allocatable: it.map(|t| t.allocatable()).unwrap_or_default(),
                    labels: it.map(|t| t.labels.clone()).unwrap_or_default(),
                    hostname: i.hostname.clone(),
                    at: now,
                    image_id: i.image_id.clone(),
                    annotations: launched.annotations.clone(),
                };
                let w = Write::SetLaunched {
                    nodeclaim: name.to_string(),
                    launched: Box::new(status.clone()),
                };
                if let Err(e) = self.cluster.write(w).await {
                    // The instance exists without a record: garbage collection takes it.
                    self.error(format!("recording the launch of {name}: {e}"));
                    return;
                }
                self.launch_errors.remove(name);
                self.claim_by_provider
                    .insert(i.provider_id.clone(), name.to_string());
                if let Some(c) = self.nodeclaims.get_mut(name) {
                    c.annotations.extend(status.annotations.clone());
                    c.launched = Some(status);
                }
                self.refresh_node(name, now);
                let instance_types = claim
                    .requirements
                    .get(labels::INSTANCE_TYPE)
                    .map(|r| r.values().to_vec())
                    .unwrap_or_default();
                self.emit(EventKind::NodeClaimCreated {
                    nodeclaim: name.to_string(),
                    nodepool: claim.nodepool.clone(),
                    instance_types,
                    instance_type: i.instance_type,
                    zone: i.zone,
                    capacity_type: i.capacity_type,
                    price: i.price,
                    cause: cause.to_string(),
                });
            }
            Err(LaunchError::InsufficientCapacity { offerings, .. }) => {
                for o in &offerings {
                    self.unavailable
                        .mark(&o.instance_type, &o.zone, o.capacity_type, now);
                }
                self.refresh_instance_types(now);
                let message = format!(
                    "insufficient capacity for all {} offering(s)",
                    offerings.len()
                );
                self.emit(EventKind::NodeClaimLaunchFailed {
                    nodeclaim: name.to_string(),
                    nodepool: claim.nodepool.clone(),
                    message: message.clone(),
                });
                self.delete_nodeclaim(name, &message, now).await;
                self.batcher.trigger(now);
            }
            Err(e @ LaunchError::Other { .. }) => {
                let message = e.to_string();
                if self.launch_errors.insert(name.to_string(), message.clone())
                    != Some(message.clone())
                {
                    self.emit(EventKind::NodeClaimLaunchFailed {
                        nodeclaim: name.to_string(),
                        nodepool: claim.nodepool.clone(),
                        message,
                    });
                }
            }
        }
    }

    /// Re-applies the unavailable-offerings cache to every pool's instance types.
    pub(super) fn refresh_instance_types(&mut self, now: DateTime<Utc>) {
        let fresh: BTreeMap<String, _> = self
            .state
            .nodepools
            .iter()
            .map(|(p, pool)| {
                let types = self
                    .unavailable
                    .apply(&self.cloud.instance_types(pool), now);
                (p.clone(), types)
            })
            .collect();
        self.state_mut().instance_types = fresh;
        self.report_unlaunchable();
    }

    /// Reports, once per reason, the pools the cloud can launch nothing for (an
    /// EC2NodeClass that is missing or not Ready), so a pod left pending says why.
    pub(super) fn report_unlaunchable(&mut self) {
        let now: HashMap<String, String> = self
            .state
            .nodepools
            .iter()
            .filter_map(|(name, pool)| Some((name.clone(), self.cloud.unlaunchable(pool)?)))
            .collect();
        for (pool, why) in &now {
            if self.unlaunchable.get(pool) != Some(why) {
                self.error(format!("NodePool {pool} can launch nothing: {why}"));
            }
        }
        self.unlaunchable = now;
    }

    /// Starts deleting a NodeClaim (termination takes it from there).
    pub(super) async fn delete_nodeclaim(&mut self, name: &str, reason: &str, now: DateTime<Utc>) {
        let Some(claim) = self.nodeclaims.get(name) else {
            return;
        };
        if claim.deleting.is_some() {
            return;
        }
        let w = Write::DeleteNodeClaim {
            nodeclaim: name.to_string(),
        };
        match self.cluster.write(w).await {
            Ok(()) | Err(ClusterError::NotFound { .. }) => {}
            Err(e) => {
                self.error(format!("deleting NodeClaim {name}: {e}"));
                return;
            }
        }
        self.delete_reasons
            .entry(name.to_string())
            .or_insert_with(|| reason.to_string());
        if let Some(c) = self.nodeclaims.get_mut(name) {
            c.deleting = Some(now);
        }
        self.refresh_node(name, now);
    }

    /// Launches NodeClaims that have not launched; deletes those past their liveness
    /// deadlines.
    pub(super) async fn lifecycle(&mut self, now: DateTime<Utc>) {
        // Name, creation and launch time: the liveness clocks.
        type Clocks = (String, DateTime<Utc>, Option<DateTime<Utc>>);
        let claims: Vec<Clocks> = self
            .nodeclaims
            .values()
            .filter(|c| c.deleting.is_none())
            .map(|c| (c.name.clone(), c.created, c.launched.as_ref().map(|l| l.at)))
            .collect();
        for (name, created, launched_at) in claims {
            if launched_at.is_none() {
                if now - created >= LAUNCH_TIMEOUT {
                    self.delete_nodeclaim(&name, "not launched within 5m (liveness)", now)
                        .await;
                    self.batcher.trigger(now);
                } else {
                    self.launch(&name, "provisioning (retry)", now).await;
                }
                continue;
            }
            let registered = self.announced_registered.contains(&name);
            if !registered && launched_at.is_some_and(|t| now - t >= REGISTRATION_TIMEOUT) {
                self.delete_nodeclaim(&name, "not registered within 15m (liveness)", now)
                    .await;
                self.batcher.trigger(now);
            }
        }
    }

    /// Spot interruption notices: the NodeClaim is deleted now so its pods move before
    /// the instance goes (upstream's interruption controller).
    pub(super) async fn handle_interruptions(&mut self, now: DateTime<Utc>) {
        for i in self.cloud.interruptions() {
            let Some(claim) = self.claim_by_provider.get(&i.provider_id).cloned() else {
                continue;
            };
            let node = self
                .node_pos
                .get(&claim)
                .map(|&p| self.state.nodes[p].name.clone())
                .unwrap_or(claim.clone());
            self.disruption.involuntary(&node, &i.kind, now);
            self.emit(EventKind::Interrupted {
                nodeclaim: claim.clone(),
                reason: i.kind.clone(),
            });
            self.delete_nodeclaim(&claim, &i.kind, now).await;
        }
    }

    /// Drains deleting NodeClaims' nodes a step at a time; when a node is drained (or
    /// never registered, or its instance is gone) terminates the instance and removes
    /// the finalizer.
    pub(super) async fn terminate(&mut self, now: DateTime<Utc>) {
        let deleting: Vec<NodeClaimObject> = self
            .nodeclaims
            .values()
            .filter(|c| c.deleting.is_some() && c.finalizer)
            .cloned()
            .collect();
        for claim in deleting {
            let name = claim.name.clone();
            if self.announced_deleting.insert(name.clone()) {
                let reason = self
                    .delete_reasons
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| "deleted".into());
                self.emit(EventKind::NodeClaimDeleting {
                    nodeclaim: name.clone(),
                    reason,
                });
            }
            let node = self
                .node_pos
                .get(&name)
                .map(|&i| self.state.nodes[i].clone())
                .filter(|n| self.nodes.contains_key(&n.name));
            let gone = self.instance_gone.contains(&name);
            if let (Some(node), false) = (node, gone) {
                if !node.is_disrupted_tainted() {
                    let w = Write::Taint {
                        node: node.name.clone(),
                        taint: disrupted_taint(),
                    };
                    if let Err(e) = self.cluster.write(w).await {
                        self.error(format!("tainting {} for termination: {e}", node.name));
                    }
                }
                let pods: Vec<_> = self
                    .state
                    .pods
                    .iter()
                    .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()))
                    .collect();
                let started = claim.deleting.unwrap_or(now);
                let step = drain_step(&node, &pods, &self.state.pdbs, started, now);
                if !step.drained {
                    for pod in step.evict {
                        match self.cluster.write(Write::Evict { pod: pod.clone() }).await {
                            Ok(()) => self.emit(EventKind::PodEvicted {
                                pod,
                                node: node.name.clone(),
                            }),
                            // A PDB said no: try again next round.
                            Err(ClusterError::DisruptionBudget { .. }) => {}
                            Err(ClusterError::NotFound { .. }) => {}
                            Err(e) => self.error(format!("evicting {pod}: {e}")),
                        }
                    }
                    for pod in step.force_delete {
                        match self
                            .cluster
                            .write(Write::DeletePod { pod: pod.clone() })
                            .await
                        {
                            Ok(()) => self.emit(EventKind::PodEvicted {
                                pod,
                                node: node.name.clone(),
                            }),
                            Err(ClusterError::NotFound { .. }) => {}
                            Err(e) => self.error(format!("deleting {pod}: {e}")),
                        }
                    }
                    continue;
                }
            }
            if let Some(l) = &claim.launched
                && let Err(e) = self.cloud.delete(&l.provider_id).await
            {
                self.error(format!("terminating {}: {e}", l.provider_id));
                continue;
            }
            match self
                .cluster
                .write(Write::RemoveFinalizer {
                    nodeclaim: name.clone(),
                })
                .await
            {
                Ok(()) | Err(ClusterError::NotFound { .. }) => {
                    if let Some(c) = self.nodeclaims.get_mut(&name) {
                        c.finalizer = false;
                    }
                    self.disruption
                        .metrics
                        .nodeclaim_terminated(&claim.nodepool);
                }
                Err(e) => self.error(format!("removing the finalizer of {name}: {e}")),
            }
        }
    }

    /// NodeClaims whose instance is gone are deleted (their pods are gone with it);
    /// instances with no NodeClaim are terminated.
    pub(super) async fn garbage_collect(&mut self, now: DateTime<Utc>) {
        let instances = match self.cloud.list().await {
            Ok(i) => i,
            Err(e) => {
                self.error(format!("listing instances for garbage collection: {e}"));
                return;
            }
        };
        let live: HashSet<&str> = instances.iter().map(|i| i.provider_id.as_str()).collect();
        let lost: Vec<String> = self
            .nodeclaims
            .values()
            .filter(|c| {
                c.launched
                    .as_ref()
                    .is_some_and(|l| !live.contains(l.provider_id.as_str()))
            })
            .map(|c| c.name.clone())
            .collect();
        let orphans: Vec<String> = instances
            .iter()
            .filter(|i| !self.claim_by_provider.contains_key(&i.provider_id))
            .filter(|i| now - i.launched >= GC_GRACE)
            .map(|i| i.provider_id.clone())
            .collect();
        for name in lost {
            if self.instance_gone.insert(name.clone()) {
                self.emit(EventKind::Interrupted {
                    nodeclaim: name.clone(),
                    reason: "instance no longer exists".into(),
                });
                let node = self
                    .node_pos
                    .get(&name)
                    .map(|&p| self.state.nodes[p].name.clone())
                    .unwrap_or(name.clone());
                self.disruption
                    .involuntary(&node, "instance no longer exists", now);
            }
            self.delete_nodeclaim(&name, "instance no longer exists (garbage collection)", now)
                .await;
        }
        for id in orphans {
            match self.cloud.delete(&id).await {
                Ok(()) => self.emit(EventKind::InstanceGarbageCollected { provider_id: id }),
                Err(e) => self.error(format!("terminating orphaned instance {id}: {e}")),
            }
        }
    }
}
