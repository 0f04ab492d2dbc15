//! Creating NodeClaims and launching each exactly once (upstream
//! `nodeclaim/lifecycle/launch.go`): a NodeClaim with a provider id is never launched
//! again; a launch is retried only after the cloud reported it failed, with backoff; an
//! instance whose launch could not be recorded in the cluster is recorded again, not
//! launched again; a NodeClaim nothing can launch (insufficient capacity everywhere) is
//! deleted and its pods provisioned again.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use super::Controller;
use crate::api::labels;
use crate::api::protocol as keys;
use crate::cloud::{CloudProvider, LaunchError, LaunchRequest};
use crate::cluster::template::nodeclaim_for;
use crate::cluster::{Cluster, Launched, NodeClaimObject, Write};
use crate::control::events::EventKind;
use crate::engine::catalog::InstanceType;
use crate::engine::disruption::Replacement;
use crate::engine::provisioning::{Launch, launch_order};

/// The first retry of a failed launch waits this long; each further one twice as long.
const LAUNCH_BACKOFF: TimeDelta = TimeDelta::seconds(1);
/// The longest wait between launch attempts.
const LAUNCH_BACKOFF_MAX: TimeDelta = TimeDelta::minutes(2);

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// A fresh NodeClaim name for a pool: `<pool>-<5 lowercase alphanumerics>`, as the
    /// API server's generateName gives.
    pub(super) fn claim_name(&mut self, pool: &str) -> String {
        let registry = &self.registry;
        crate::api::generate_name::generate_name(&mut self.rng, pool, |n| registry.contains(n))
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
        self.measure_created(&claim, reason);
        self.registry.created(claim);
        self.stats.nodeclaims_created += 1;
        true
    }

    /// Creates the NodeClaim a disruption command asked for, recorded as that command's
    /// replacement.
    pub(super) async fn create_replacement(
        &mut self,
        name: &str,
        decision: u64,
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
        let mut claim = nodeclaim_for(
            name,
            &pool,
            &r.requirements,
            &types,
            r.requests.clone(),
            now,
        );
        claim
            .annotations
            .insert(keys::REPLACEMENT_OF.into(), decision.to_string());
        self.create_and_launch(claim, cause, reason, now).await;
    }

    /// Asks the cloud for an instance for a NodeClaim.
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
    /// NodeClass, and the labels and taints its node registers with. None for a NodeClaim
    /// that has launched (or whose launch waits to be recorded): it never launches twice.
    fn launch_request(&self, name: &str) -> Option<(LaunchRequest, Vec<Arc<InstanceType>>)> {
        let record = self.registry.get(name)?;
        if record.claim.launched.is_some() || record.launch.unrecorded.is_some() {
            return None;
        }
        let claim = &record.claim;
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
            requests: claim.requests.clone(),
        };
        Some((request, allowed))
    }

    /// Keeps offerings the cloud had no capacity for out of the next solves; refusals met
    /// inside the pool's placement group hold for that group only.
    fn mark_unavailable(&mut self, nodepool: &str, offerings: &[Launch], now: DateTime<Utc>) {
        let scope = self
            .state
            .nodepools
            .get(nodepool)
            .and_then(|p| self.cloud.offering_scope(p));
        for o in offerings {
            self.unavailable.mark(
                &o.instance_type,
                &o.zone,
                o.capacity_type,
                scope.as_deref(),
                now,
            );
        }
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
        let Some(claim) = self.registry.get(name).map(|r| r.claim.clone()) else {
            return;
        };
        match result {
            Ok(launched) => {
                self.mark_unavailable(&claim.nodepool, &launched.unavailable, now);
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
                    capacity: it.map(|t| t.capacity.clone()).unwrap_or_default(),
                    allocatable: it.map(|t| t.allocatable()).unwrap_or_default(),
                    labels: {
                        let mut l = it.map(|t| t.labels.clone()).unwrap_or_default();
                        l.extend(launched.labels.clone());
                        l
                    },
                    hostname: i.hostname.clone(),
                    at: now,
                    image_id: i.image_id.clone(),
                    annotations: launched.annotations.clone(),
                };
                if let Some(r) = self.registry.get_mut(name) {
                    r.launch.unrecorded = Some(status);
                    r.launch.last_error = None;
                }
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
                self.record_launch(name).await;
            }
            Err(LaunchError::InsufficientCapacity { offerings, .. }) => {
                self.mark_unavailable(&claim.nodepool, &offerings, now);
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
                let Some(r) = self.registry.get_mut(name) else {
                    return;
                };
                r.launch.failures += 1;
                let exponent = (r.launch.failures - 1).min(16);
                let wait = (LAUNCH_BACKOFF * 2i32.pow(exponent)).min(LAUNCH_BACKOFF_MAX);
                r.launch.retry_at = Some(now + wait);
                let fresh = r.launch.last_error.as_deref() != Some(message.as_str());
                r.launch.last_error = Some(message.clone());
                if fresh {
                    self.emit(EventKind::NodeClaimLaunchFailed {
                        nodeclaim: name.to_string(),
                        nodepool: claim.nodepool.clone(),
                        message,
                    });
                }
            }
        }
    }

    /// Writes a launch the cloud made into the NodeClaim's status. On failure the
    /// instance stays remembered and the next round writes it again: it is never
    /// launched a second time (and if the NodeClaim goes, garbage collection takes the
    /// instance). True when recorded.
    pub(super) async fn record_launch(&mut self, name: &str) -> bool {
        let Some(status) = self
            .registry
            .get(name)
            .and_then(|r| r.launch.unrecorded.clone())
        else {
            return false;
        };
        let w = Write::SetLaunched {
            nodeclaim: name.to_string(),
            launched: Box::new(status.clone()),
        };
        if let Err(e) = self.cluster.write(w).await {
            self.error(format!("recording the launch of {name}: {e}"));
            return false;
        }
        if let Some(r) = self.registry.get_mut(name) {
            r.launch.unrecorded = None;
        }
        self.registry.launched(name, status);
        let now = self.now();
        self.refresh_node(name, now);
        true
    }
}
