//! Provisioning when a batch closes: the scheduler's plan for the pods that need a home
//! becomes nominations (pods placed on existing or in-flight nodes) and new NodeClaims,
//! created and launched at once.

use chrono::{DateTime, Utc};

use super::Controller;
use crate::cloud::CloudProvider;
use crate::cluster::Cluster;
use crate::cluster::template::nodeclaim_for;
use crate::control::events::EventKind;
use crate::control::metrics::PROVISIONED;
use crate::engine::disruption::Prepared;

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    pub(super) async fn provision(&mut self, now: DateTime<Utc>) {
        // Nothing may share the state while it changes below (a shared state is copied
        // whole on the first write): what reads it lives in this block.
        let (results, pools) = {
            let state = std::sync::Arc::clone(&self.state);
            let prepared = Prepared::placed(&state, &self.places).with_policies(&self.features);
            let pods = prepared.pending();
            if pods.is_empty() {
                return;
            }
            // The same simulation as a solve of the pending pods over the state, handed
            // the topology counts the disruption planner keeps (unit-test builds check
            // them against a fresh count).
            let results = self
                .disruption
                .simulate_in(&prepared, self.generation, |sim| sim.provision(pods));
            let pools: Vec<_> = results
                .new_nodeclaims
                .iter()
                .map(|c| state.nodepools.get(&c.nodepool).cloned())
                .collect();
            (results, pools)
        };

        for n in &results.nominations {
            // The simulation names nodes as pods do (Node name, or the NodeClaim's before
            // it registered); nominations are kept by NodeClaim.
            let Some(claim) = self.registry.resolve(&n.node).map(str::to_string) else {
                continue;
            };
            self.nominate(&claim, now);
            for pod in &n.pods {
                if self.nominated.get(pod) != Some(&claim) {
                    self.nominated.insert(pod.clone(), claim.clone());
                    self.unschedulable.remove(pod);
                    self.emit(EventKind::PodNominated {
                        pod: pod.clone(),
                        node: n.node.clone(),
                    });
                }
            }
        }
        // Every NodeClaim of the round is created first and then launched together, so the
        // cloud can merge launches of the same shape into one call.
        let mut created: Vec<(String, &[crate::engine::pod::PodKey])> = Vec::new();
        for (claim, pool) in results.new_nodeclaims.iter().zip(pools) {
            let Some(pool) = pool else {
                continue;
            };
            let name = self.claim_name(&claim.nodepool);
            let types: Vec<String> = claim
                .instance_types
                .iter()
                .map(|t| t.name.clone())
                .collect();
            let mut object = nodeclaim_for(
                &name,
                &pool,
                &claim.requirements,
                &types,
                claim.requests.clone(),
                now,
            );
            if claim.min_values_relaxed {
                // Upstream's BestEffort policy marks what it relaxed.
                object.annotations.insert(
                    crate::api::labels::NODECLAIM_MIN_VALUES_RELAXED.into(),
                    "true".into(),
                );
            }
            if self.create_claim(object, PROVISIONED).await {
                created.push((name, &claim.pods));
            }
        }
        let names: Vec<String> = created.iter().map(|(n, _)| n.clone()).collect();
        self.launch_all(&names, "provisioning", now).await;
        for (name, pods) in created {
            if self
                .registry
                .get(&name)
                .is_none_or(|r| r.claim.launched.is_none() && r.launch.unrecorded.is_none())
            {
                continue;
            }
            self.nominate(&name, now);
            for pod in pods {
                self.nominated.insert(pod.clone(), name.clone());
                self.unschedulable.remove(pod);
                self.emit(EventKind::PodNominated {
                    pod: pod.clone(),
                    node: name.clone(),
                });
            }
        }
        if self.noticing() {
            let failed = results
                .errors
                .iter()
                .map(|(pod, why)| crate::control::upstream_events::failed_scheduling(pod, why));
            self.post(failed.collect::<Vec<_>>());
            let pools = results
                .pools_without_types
                .iter()
                .map(|p| crate::control::upstream_events::no_compatible_instance_types(p, false));
            self.post(pools.collect::<Vec<_>>());
        }
        for (pod, why) in &results.errors {
            tracing::debug!("{pod} stays pending: {why}");
            // Placed nowhere this round: it is on its way to no node.
            self.nominated.remove(pod);
            if self.unschedulable.get(pod) != Some(why) {
                self.unschedulable.insert(pod.clone(), why.clone());
                self.changes += 1;
            }
        }
    }
}
