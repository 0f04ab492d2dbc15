//! Capacity reservations after the launch (the AWS provider's
//! `pkg/controllers/capacityreservation/capacitytype` and `.../expiration`): a node whose
//! reservation ended runs on as on-demand and is relabelled so, which also reprices it
//! for consolidation; a node in a capacity block about to end is drained ahead of it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Controller;
use crate::api::labels;
use crate::cloud::{CloudProvider, Instance};
use crate::cluster::{Cluster, ClusterError, ObjectRef, Write};
use crate::engine::catalog::CapacityType;

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// NodeClaims recorded `reserved` whose instance the cloud now reports on-demand get
    /// `karpenter.sh/capacity-type: on-demand` and lose the reservation labels, on the
    /// NodeClaim and on its registered Node.
    pub(super) async fn sync_capacity_types(&mut self, instances: &[Instance], now: DateTime<Utc>) {
        let ended: Vec<(String, Option<String>, f64)> = instances
            .iter()
            .filter(|i| i.capacity_type == CapacityType::OnDemand)
            .filter_map(|i| {
                let name = self.registry.claim_of_provider(&i.provider_id)?;
                let r = self.registry.get(name)?;
                let reserved = r
                    .claim
                    .launched
                    .as_ref()
                    .is_some_and(|l| l.capacity_type == CapacityType::Reserved);
                (reserved && r.claim.deleting.is_none())
                    .then(|| (name.to_string(), r.node.clone(), i.price))
            })
            .collect();
        if ended.is_empty() {
            return;
        }
        let mut set: BTreeMap<String, Option<String>> = BTreeMap::from([(
            labels::CAPACITY_TYPE.to_string(),
            Some(CapacityType::OnDemand.as_str().to_string()),
        )]);
        for l in labels::RESERVED_CAPACITY_LABELS {
            set.insert(l.to_string(), None);
        }
        for (claim, node, price) in ended {
            let mut targets = vec![ObjectRef::NodeClaim(claim.clone())];
            targets.extend(node.map(ObjectRef::Node));
            for target in targets {
                let write = Write::Relabel {
                    target: target.clone(),
                    labels: set.clone(),
                };
                match self.cluster.write(write).await {
                    Ok(()) | Err(ClusterError::NotFound { .. }) => {}
                    Err(e) => self.error(format!("relabelling {target} as on-demand: {e}")),
                }
            }
            if let Some(r) = self.registry.get_mut(&claim) {
                r.claim.labels.insert(
                    labels::CAPACITY_TYPE.into(),
                    CapacityType::OnDemand.as_str().into(),
                );
                for l in labels::RESERVED_CAPACITY_LABELS {
                    r.claim.labels.remove(l);
                }
                if let Some(l) = r.claim.launched.as_mut() {
                    l.capacity_type = CapacityType::OnDemand;
                    l.price = price;
                    for k in labels::RESERVED_CAPACITY_LABELS {
                        l.labels.remove(k);
                    }
                }
            }
            tracing::info!(
                "NodeClaim {claim}: its capacity reservation ended; it runs on as on-demand"
            );
            self.refresh_node(&claim, now);
        }
    }

    /// Deletes the NodeClaims whose instances are in capacity blocks about to end, so
    /// their pods move first.
    pub(super) async fn expire_capacity_blocks(&mut self, now: DateTime<Utc>) {
        for provider_id in self.cloud.expiring() {
            let Some(claim) = self
                .registry
                .claim_of_provider(&provider_id)
                .map(str::to_string)
            else {
                continue;
            };
            if self
                .registry
                .get(&claim)
                .is_some_and(|r| r.claim.deleting.is_none())
            {
                tracing::info!(
                    "NodeClaim {claim}: initiating delete for capacity block expiration"
                );
                self.delete_nodeclaim(&claim, "capacity block expiring", now)
                    .await;
            }
        }
    }
}
