//! Static NodePools (`spec.replicas`) kept at their count: the engine's
//! [`crate::engine::static_pools::plan`] carried out with the controller's own create,
//! launch and delete paths. Runs every round once the cluster is synced (upstream's
//! static provisioning controller waits for `cluster.Synced` so it never over-provisions
//! from a partial view).

use chrono::{DateTime, Utc};

use super::Controller;
use crate::cloud::CloudProvider;
use crate::cluster::Cluster;
use crate::cluster::template::nodeclaim_for;
use crate::control::metrics::PROVISIONED;
use crate::engine::disruption::candidates;
use crate::engine::static_pools::{self, LiveClaim};

/// The deletion reason static scale-down gives its NodeClaims.
const SCALE_DOWN: &str = "static NodePool scaled down";

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    pub(super) async fn keep_static_pools(&mut self, now: DateTime<Utc>) {
        if !self.cluster.synced() {
            return;
        }
        let state = std::sync::Arc::clone(&self.state);
        let statics: Vec<_> = state
            .nodepools
            .values()
            .filter(|p| p.spec.replicas.is_some())
            .collect();
        if statics.is_empty() {
            return;
        }
        // What scale-down weighs of each NodeClaim's node (upstream's
        // static/deprovisioning getDeprovisioningCandidates): its pods, DaemonSet pods
        // aside (a node with only those is empty), any active do-not-disrupt, and the
        // rescheduling cost of all its pods times its lifetime remaining.
        let pods_by_node = state.pods_by_node();
        let weigh = |claim: &str| {
            let Some(i) = state.nodes.iter().position(|n| n.nodeclaim == claim) else {
                return (0, false, 0.0);
            };
            let pods: Vec<_> = pods_by_node[i].iter().map(|&p| &state.pods[p]).collect();
            let workload = pods.iter().filter(|p| !p.is_daemonset()).count();
            let protected = pods
                .iter()
                .any(|p| candidates::do_not_disrupt_until(p, now).is_some());
            let rescheduling: f64 = pods.iter().map(|p| candidates::eviction_cost(p)).sum();
            let cost = rescheduling * candidates::lifetime_remaining(&state.nodes[i], now);
            (workload, protected, cost)
        };
        let mut plans = Vec::new();
        for pool in statics {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let live: Vec<LiveClaim> = self
                .registry
                .records()
                .filter(|r| r.claim.nodepool == name && r.claim.deleting.is_none())
                .map(|r| {
                    let (pods, do_not_disrupt, cost) = weigh(&r.claim.name);
                    LiveClaim {
                        name: r.claim.name.clone(),
                        launched: r.claim.launched.is_some(),
                        pods,
                        do_not_disrupt,
                        cost,
                    }
                })
                .collect();
            if let Some(plan) = static_pools::plan(pool, &live) {
                let shape = static_pools::claim_shape(
                    pool,
                    state.instance_types.get(&name).map_or(&[][..], |v| v),
                    &state.daemonsets,
                );
                plans.push((pool.clone(), plan, shape));
            }
        }
        drop(state);

        let mut created = Vec::new();
        for (pool, plan, shape) in plans {
            if let Some(why) = &plan.limited
                && plan.create == 0
            {
                tracing::debug!("{why}");
            }
            for claim in &plan.delete {
                self.delete_nodeclaim(claim, SCALE_DOWN, now).await;
            }
            if plan.create == 0 {
                continue;
            }
            let Some((requirements, types, requests)) = shape else {
                self.error(format!(
                    "static NodePool {}: no instance type can launch from its template",
                    plan.nodepool
                ));
                continue;
            };
            for _ in 0..plan.create {
                let name = self.claim_name(&plan.nodepool);
                let object =
                    nodeclaim_for(&name, &pool, &requirements, &types, requests.clone(), now);
                if self.create_claim(object, PROVISIONED).await {
                    created.push(name);
                }
            }
        }
        if !created.is_empty() {
            self.launch_all(&created, "static NodePool replicas", now)
                .await;
        }
    }
}
