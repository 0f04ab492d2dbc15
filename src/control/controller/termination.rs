//! Termination of deleting NodeClaims (upstream `node/termination`): taint the node,
//! drain it a step at a time honouring PDBs, report a drain that cannot proceed
//! (upstream's `FailedDraining`, at most every 2 minutes per node), then terminate the
//! instance and remove the finalizer.

use chrono::{DateTime, TimeDelta, Utc};

use super::Controller;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, ClusterError, NodeClaimObject, Write};
use crate::control::events::EventKind;
use crate::control::upstream_events;
use crate::engine::pod::PodKey;
use crate::engine::state::disrupted_taint;
use crate::engine::termination::drain_step;

/// Upstream's event recorder drops a repeat of the same event within this (the
/// `FailedDraining` of one node is reported at most this often).
const DRAIN_REPORT_EVERY: TimeDelta = TimeDelta::minutes(2);

/// How many waiting pods a drain report names.
const DRAIN_REPORT_PODS: usize = 5;

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Drains deleting NodeClaims' nodes a step at a time; when a node is drained (or
    /// never registered, or its instance is gone) terminates the instance and removes
    /// the finalizer.
    pub(super) async fn terminate(&mut self, now: DateTime<Utc>) {
        let deleting: Vec<NodeClaimObject> = self
            .registry
            .records()
            .filter(|r| r.claim.deleting.is_some() && r.claim.finalizer)
            .map(|r| r.claim.clone())
            .collect();
        for claim in deleting {
            let name = claim.name.clone();
            let reason = self
                .registry
                .get(&name)
                .and_then(|r| r.delete_reason.clone())
                .unwrap_or_else(|| "deleted".into());
            if let Some(r) = self.registry.get_mut(&name)
                && !std::mem::replace(&mut r.announced_deleting, true)
            {
                self.emit(EventKind::NodeClaimDeleting {
                    nodeclaim: name.clone(),
                    reason: reason.clone(),
                });
            }
            let record = self.registry.get(&name);
            let node = record
                .and_then(|r| r.pos)
                .map(|i| self.state.nodes[i].clone())
                .filter(|_| self.registry.node_of(&name).is_some());
            let gone = record.is_some_and(|r| r.instance_gone);
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
                let expires = claim
                    .termination_grace_period
                    .map(|g| (started + g).to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
                if let Some(at) = &expires
                    && self.noticing()
                {
                    let n = upstream_events::termination_grace_period_expiring(
                        Some(&node.name),
                        &name,
                        at,
                    );
                    self.post(n);
                }
                if !step.drained {
                    // Pods the drain cannot move now (a PDB, do-not-disrupt), and those
                    // the eviction API refuses below.
                    let mut refused: Vec<(PodKey, String)> = step
                        .waiting
                        .iter()
                        .filter(|(_, why)| why != "terminating" && !why.starts_with("drains after"))
                        .cloned()
                        .collect();
                    let why = self.drain_reason(&reason);
                    for pod in step.evict {
                        match self.cluster.write(Write::Evict { pod: pod.clone() }).await {
                            Ok(()) => {
                                self.disruption.metrics.eviction_request(200);
                                self.evicted(pod, &node.name, &why);
                            }
                            // A PDB said no: try again next round.
                            Err(ClusterError::DisruptionBudget { pod, pdb }) => {
                                self.disruption.metrics.eviction_request(429);
                                refused
                                    .push((pod, format!("PDB {pdb} allows no more disruptions")));
                            }
                            Err(ClusterError::NotFound { .. }) => {
                                self.disruption.metrics.eviction_request(404);
                            }
                            Err(e) => self.error(format!("evicting {pod}: {e}")),
                        }
                    }
                    for pod in step.force_delete {
                        match self
                            .cluster
                            .write(Write::DeletePod { pod: pod.clone() })
                            .await
                        {
                            Ok(()) => {
                                if let Some(at) = &expires {
                                    self.post([upstream_events::disrupted_pod_delete(&pod, at)]);
                                }
                                self.evicted(pod, &node.name, &why);
                            }
                            Err(ClusterError::NotFound { .. }) => {}
                            Err(e) => self.error(format!("deleting {pod}: {e}")),
                        }
                    }
                    self.report_drain(&name, &node.name, &refused, now);
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
                    if let Some(r) = self.registry.get_mut(&name) {
                        r.claim.finalizer = false;
                    }
                    self.stats.nodeclaims_deleted += 1;
                    self.measure_terminated(&claim, now);
                }
                Err(e) => self.error(format!("removing the finalizer of {name}: {e}")),
            }
        }
    }

    /// The `reason` of a drained pod: the disruption reason of the command deleting its
    /// node (lower case, as upstream's `karpenter_pods_drained_total` labels it), or what
    /// deleted the node.
    fn drain_reason(&self, delete_reason: &str) -> String {
        delete_reason
            .split(" (")
            .next()
            .unwrap_or(delete_reason)
            .to_string()
    }

    fn evicted(&mut self, pod: PodKey, node: &str, reason: &str) {
        self.stats.evictions += 1;
        *self
            .stats
            .evictions_by_reason
            .entry(reason.to_string())
            .or_default() += 1;
        self.disruption
            .metrics
            .pod_drained(upstream_events::eviction_reason(reason));
        self.emit(EventKind::PodEvicted {
            pod,
            node: node.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Reports pods a drain cannot move: when it starts, when what blocks it changes, and
    /// every [`DRAIN_REPORT_EVERY`] while it lasts; forgets the report once nothing is
    /// refused.
    fn report_drain(
        &mut self,
        claim: &str,
        node: &str,
        refused: &[(PodKey, String)],
        now: DateTime<Utc>,
    ) {
        let Some(r) = self.registry.get_mut(claim) else {
            return;
        };
        if refused.is_empty() {
            r.drain_reported = None;
            return;
        }
        let mut parts: Vec<String> = refused
            .iter()
            .take(DRAIN_REPORT_PODS)
            .map(|(pod, why)| format!("pod {pod}: {why}"))
            .collect();
        if refused.len() > DRAIN_REPORT_PODS {
            parts.push(format!("and {} more", refused.len() - DRAIN_REPORT_PODS));
        }
        let message = parts.join("; ");
        let due = match &r.drain_reported {
            None => true,
            Some((at, said)) => *said != message || now - *at >= DRAIN_REPORT_EVERY,
        };
        if !due {
            return;
        }
        r.drain_reported = Some((now, message.clone()));
        self.post([upstream_events::failed_draining(node, &message)]);
        self.emit(EventKind::DrainBlocked {
            nodeclaim: claim.to_string(),
            node: node.to_string(),
            message,
        });
    }
}
