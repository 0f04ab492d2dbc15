//! The rest of the NodeClaim lifecycle: launch retries and liveness, interruption,
//! deletion and garbage collection, and the instance types each pool may launch.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::{Controller, GC_GRACE, LAUNCH_TIMEOUT, REGISTRATION_TIMEOUT};
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, ClusterError, NodeClaimObject, Write};
use crate::control::events::EventKind;
use crate::control::upstream_events;
use crate::engine::catalog::CapacityType;

/// When a launched NodeClaim that has no Node is deleted for not registering, or None
/// when it never is. Upstream `nodeclaim/lifecycle/liveness.go`: a NodeClaim whose
/// Registered condition is True is never timed out (its Node may only be late to reach
/// our watch: seen when `kubectl create` wrote both and a loaded controller saw them a
/// round apart), and the 15 minutes count from that condition's last transition where
/// the cluster records one, else from the launch.
pub(super) fn registration_deadline(
    claim: &NodeClaimObject,
    launched_at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let registered = claim
        .conditions
        .iter()
        .find(|c| c.type_ == crate::api::nodeclaim::conditions::REGISTERED);
    match registered {
        Some(c) if c.status == "True" => None,
        Some(c) => {
            Some(crate::api::time::to_chrono(&c.last_transition_time) + REGISTRATION_TIMEOUT)
        }
        None => Some(launched_at + REGISTRATION_TIMEOUT),
    }
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Launches what has not launched (a NodeClaim a previous process created, or one
    /// whose launch failed and whose backoff is over), records launches the cluster has
    /// not recorded yet, and deletes NodeClaims past their liveness deadlines.
    pub(super) async fn lifecycle(&mut self, now: DateTime<Utc>) {
        // Only a claim not launched, or launched without a Node, has anything to do here;
        // the rest (nearly all, on a settled cluster) are passed over without copying
        // their names and looking each one up again (2.5% of 12 simulated hours).
        let due: Vec<String> = self
            .registry
            .records()
            .filter(|r| r.claim.deleting.is_none())
            .filter(|r| r.claim.launched.is_none() || r.node.is_none())
            .map(|r| r.claim.name.clone())
            .collect();
        for name in due {
            let Some(r) = self.registry.get(&name) else {
                continue;
            };
            if r.claim.deleting.is_some() {
                continue;
            }
            match &r.claim.launched {
                None if r.launch.unrecorded.is_some() => {
                    self.record_launch(&name).await;
                }
                None if now - r.claim.created >= LAUNCH_TIMEOUT => {
                    self.delete_nodeclaim(&name, "not launched within 5m (liveness)", now)
                        .await;
                    self.batcher.trigger(now);
                }
                None => {
                    if r.launch.retry_at.is_none_or(|t| t <= now) {
                        let cause = if r.launch.failures > 0 {
                            "provisioning (retry after a failed launch)"
                        } else {
                            "provisioning"
                        };
                        self.launch(&name, cause, now).await;
                    }
                }
                Some(l) => {
                    // Only a claim without a Node can be overdue: the deadline (a time
                    // sum per claim per round) is worked out for those alone.
                    let overdue =
                        || registration_deadline(&r.claim, l.at).is_some_and(|t| now >= t);
                    if r.node.is_none() && overdue() {
                        self.delete_nodeclaim(&name, "not registered within 15m (liveness)", now)
                            .await;
                        self.batcher.trigger(now);
                    }
                }
            }
        }
    }

    /// Re-stamps NodeClaims another controller hashed (upstream Karpenter's
    /// `nodepool-hash-version: v3`, on a cluster it used to manage) with our hash of their
    /// pool, as upstream's `nodepool/hash/controller.go` does on a hash-version change:
    /// a different way of hashing is not drift.
    pub(super) async fn restamp_hashes(&mut self, now: DateTime<Utc>) {
        use crate::api::labels::{NODEPOOL_HASH, NODEPOOL_HASH_VERSION};
        use crate::engine::disruption::drift::{HASH_VERSION, nodepool_hash};
        let due: Vec<(String, String)> = self
            .registry
            .with_records()
            .filter(|r| r.claim.deleting.is_none())
            .filter(|r| {
                r.claim
                    .annotations
                    .get(NODEPOOL_HASH_VERSION)
                    .is_some_and(|v| v != HASH_VERSION)
            })
            .filter_map(|r| {
                let pool = self.state.nodepools.get(&r.claim.nodepool)?;
                Some((r.claim.name.clone(), nodepool_hash(pool)))
            })
            .collect();
        for (name, hash) in due {
            let annotations = BTreeMap::from([
                (NODEPOOL_HASH.to_string(), Some(hash.clone())),
                (
                    NODEPOOL_HASH_VERSION.to_string(),
                    Some(HASH_VERSION.to_string()),
                ),
            ]);
            let w = Write::Annotate {
                target: crate::cluster::ObjectRef::NodeClaim(name.clone()),
                annotations,
            };
            match self.cluster.write(w).await {
                Ok(()) => {
                    let stamped = BTreeMap::from([
                        (NODEPOOL_HASH.to_string(), Some(hash)),
                        (
                            NODEPOOL_HASH_VERSION.to_string(),
                            Some(HASH_VERSION.to_string()),
                        ),
                    ]);
                    self.registry.annotate(&name, stamped);
                    self.refresh_node(&name, now);
                }
                Err(ClusterError::NotFound { .. }) => {}
                Err(e) => self.error(format!("re-stamping the nodepool hash of {name}: {e}")),
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
                let scope = self.cloud.offering_scope(pool);
                let types =
                    self.unavailable
                        .apply(&self.cloud.instance_types(pool), scope.as_deref(), now);
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

    /// Starts deleting a NodeClaim (termination takes it from there); its pods are
    /// provisioned for at once.
    pub(super) async fn delete_nodeclaim(&mut self, name: &str, reason: &str, now: DateTime<Utc>) {
        let Some(r) = self.registry.get(name) else {
            return;
        };
        if r.claim.deleting.is_some() {
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
        if let Some(r) = self.registry.get_mut(name) {
            r.delete_reason.get_or_insert_with(|| reason.to_string());
            r.claim.deleting = Some(now);
        }
        self.refresh_node(name, now);
        self.deletion_started(name, now);
    }

    /// Interruption notices (upstream's interruption controller,
    /// `pkg/controllers/interruption/utils.go` in the AWS provider): a NodeClaim the
    /// notice names is deleted now, so its pods move before the instance goes; a
    /// rebalance recommendation is only reported. A spot interruption also takes the
    /// offering out for a while. Notices for instances no NodeClaim owns, or already
    /// deleting, change nothing. Every notice is acknowledged once handled.
    pub(super) async fn handle_interruptions(&mut self, now: DateTime<Utc>) {
        let notices = self.cloud.interruptions();
        if notices.is_empty() {
            return;
        }
        let mut unavailable = false;
        for i in &notices {
            let Some(claim) = self
                .registry
                .claim_of_instance(&i.instance)
                .map(str::to_string)
            else {
                continue;
            };
            let Some(record) = self.registry.get(&claim) else {
                continue;
            };
            if record.claim.deleting.is_some() {
                continue;
            }
            let nodepool = record.claim.nodepool.clone();
            let launched = record
                .claim
                .launched
                .as_ref()
                .map(|l| (l.instance_type.clone(), l.zone.clone(), l.capacity_type));
            let node = record.node.clone();
            let reason = i.kind.as_str();
            self.post(upstream_events::interruption(
                node.as_deref(),
                &claim,
                i.kind,
            ));
            if i.kind.offering_unavailable()
                && let Some((instance_type, zone, ct)) = &launched
                && *ct == CapacityType::Spot
            {
                self.unavailable.mark(instance_type, zone, *ct, None, now);
                unavailable = true;
            }
            if !i.kind.drains() {
                self.emit(EventKind::InterruptionWarning {
                    nodeclaim: claim.clone(),
                    reason: reason.to_string(),
                });
                continue;
            }
            let node_name = self.node_name(&claim);
            self.disruption.involuntary(&claim, &node_name, reason, now);
            self.emit(EventKind::Interrupted {
                nodeclaim: claim.clone(),
                reason: reason.to_string(),
            });
            let capacity_type = launched.as_ref().map_or("", |l| l.2.as_str());
            self.disruption
                .metrics
                .interrupted(reason, &nodepool, capacity_type);
            self.post(upstream_events::terminating_on_interruption(
                node.as_deref(),
                &claim,
            ));
            self.delete_nodeclaim(&claim, reason, now).await;
        }
        if unavailable {
            self.refresh_instance_types(now);
        }
        self.cloud.acknowledge(&notices);
    }

    /// NodeClaims whose instance is gone are deleted (their pods are gone with it);
    /// instances with no NodeClaim are terminated, whatever made them (a launch recorded
    /// nowhere, a NodeClaim deleted by hand).
    pub(super) async fn garbage_collect(&mut self, now: DateTime<Utc>) {
        let instances = match self.cloud.list().await {
            Ok(i) => i,
            Err(e) => {
                self.error(format!("listing instances for garbage collection: {e}"));
                return;
            }
        };
        self.sync_capacity_types(&instances, now).await;
        self.expire_capacity_blocks(now).await;
        let live: HashSet<&str> = instances.iter().map(|i| i.provider_id.as_str()).collect();
        let lost: Vec<String> = self
            .registry
            .records()
            .filter(|r| r.provider_id().is_some_and(|p| !live.contains(p)))
            .map(|r| r.claim.name.clone())
            .collect();
        let unrecorded: HashSet<String> = self
            .registry
            .records()
            .filter_map(|r| r.launch.unrecorded.as_ref())
            .map(|l| l.provider_id.clone())
            .collect();
        let orphans: Vec<String> = instances
            .iter()
            .filter(|i| self.registry.claim_of_provider(&i.provider_id).is_none())
            .filter(|i| !unrecorded.contains(&i.provider_id))
            .filter(|i| now - i.launched >= GC_GRACE)
            .map(|i| i.provider_id.clone())
            .collect();
        for name in lost {
            let first = self
                .registry
                .get_mut(&name)
                .is_some_and(|r| !std::mem::replace(&mut r.instance_gone, true));
            if first {
                self.emit(EventKind::Interrupted {
                    nodeclaim: name.clone(),
                    reason: "instance no longer exists".into(),
                });
                let node = self.node_name(&name);
                self.disruption
                    .involuntary(&name, &node, "instance no longer exists", now);
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

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;
    use crate::api::nodepool::NodePool;
    use crate::cluster::template::nodeclaim_for;
    use crate::engine::requirements::Requirements;
    use crate::engine::resources::Resources;

    fn registered(status: &str, at: DateTime<Utc>) -> Condition {
        Condition {
            type_: crate::api::nodeclaim::conditions::REGISTERED.into(),
            status: status.into(),
            reason: "Test".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: crate::api::time::from_chrono(at),
        }
    }

    #[test]
    fn a_nodeclaim_the_cluster_records_as_registered_is_never_timed_out() {
        let launched = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let pool = NodePool::unconstrained("default");
        let mut claim = nodeclaim_for(
            "default-a",
            &pool,
            &Requirements::default(),
            &["m5.large".to_string()],
            Resources::default(),
            launched,
        );
        // Nothing recorded: 15 minutes from the launch.
        assert_eq!(
            registration_deadline(&claim, launched),
            Some(launched + REGISTRATION_TIMEOUT)
        );
        // Registered=True (its Node is only late to reach the watch): no deadline, even
        // months after the launch.
        claim.conditions = vec![registered("True", launched)];
        assert_eq!(registration_deadline(&claim, launched), None);
        // Registered=Unknown since later: 15 minutes from that transition.
        let later = launched + TimeDelta::hours(3);
        claim.conditions = vec![registered("Unknown", later)];
        assert_eq!(
            registration_deadline(&claim, launched),
            Some(later + REGISTRATION_TIMEOUT)
        );
    }
}
