//! The provider's shared state and what keeps it fresh: the region's catalog, the
//! NodeClasses and their resolutions, and what drift compares about running instances.
//! The background refreshers and the Kubernetes wiring hold an [`AwsHandle`] while the
//! controller owns the [`super::AwsCloud`].

use super::*;

/// What the background tasks and the provider share.
#[derive(Default)]
pub(super) struct Shared {
    /// Every instance type of the region with its offerings and prices.
    pub(super) catalog: RwLock<Arc<Catalog>>,
    pub(super) nodeclasses: RwLock<BTreeMap<String, NodeClassState>>,
    /// Per provider id, what drift compares (from launches and listings).
    pub(super) facts: Mutex<HashMap<String, Facts>>,
    pub(super) generation: AtomicU64,
    /// Every NodeClass has been listed once: before that, a missing one may just not have
    /// arrived yet.
    pub(super) listed: std::sync::atomic::AtomicBool,
    /// Each instance type's hardware facts, from the last catalog refresh: a RAID0
    /// NodeClass's ephemeral storage and which types a NodeClass can launch.
    pub(super) hardware: RwLock<Arc<HashMap<String, hardware::Hardware>>>,
    /// On-demand prices: the Pricing API's for the region, or the built-in table.
    pub(super) on_demand: RwLock<Arc<pricing::OnDemand>>,
    /// Interruption notices between the queue task and the controller.
    pub(super) inbox: Mutex<interruption::Inbox>,
    /// Wakes the queue's deleter: notices were handled.
    pub(super) acked: tokio::sync::Notify,
    /// What each capacity reservation can still take.
    pub(super) reservations: Mutex<capacity_reservation::Availability>,
}

/// A cheap handle on the provider's shared state, for the background refreshers and the
/// NodeClass wiring.
#[derive(Clone)]
pub struct AwsHandle {
    pub(super) clients: Arc<Clients>,
    pub(super) shared: Arc<Shared>,
    pub(super) opts: Arc<AwsOptions>,
}

impl AwsHandle {
    // The locks guard plain data that every writer leaves consistent, so a poisoned lock
    // (a panic elsewhere) is still safe to read.
    pub(super) fn catalog(&self) -> Arc<Catalog> {
        self.shared
            .catalog
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn nodeclasses(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, NodeClassState>> {
        self.shared
            .nodeclasses
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn nodeclasses_mut(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, NodeClassState>> {
        self.shared
            .nodeclasses
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn nodeclass(&self, name: &str) -> Option<NodeClassState> {
        self.nodeclasses().get(name).cloned()
    }

    pub(super) fn facts(&self) -> std::sync::MutexGuard<'_, HashMap<String, Facts>> {
        self.shared.facts.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn on_demand(&self) -> Arc<pricing::OnDemand> {
        self.shared
            .on_demand
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Said while on-demand prices are the built-in us-east-1 table (why, too).
    pub fn prices_note(&self) -> Option<String> {
        self.on_demand().source.note()
    }

    /// Reads the region's on-demand prices from the Pricing API. On a failure the prices
    /// last read stay (the built-in table until one succeeded) and the reason is kept for
    /// the note. True when the prices changed (the catalog is then built again).
    pub async fn refresh_prices(&self) -> bool {
        let region = self.clients.region.clone();
        let read = if self.opts.isolated_vpc {
            Err(CloudError(
                "ISOLATED_VPC: the Pricing API is not reached from an isolated VPC".into(),
            ))
        } else {
            pricing::fetch(&self.clients.pricing, &region).await
        };
        let mut current = self
            .shared
            .on_demand
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let next = match read {
            Ok(prices) => {
                tracing::info!(
                    "on-demand prices: {} instance types from the Pricing API for {region}",
                    prices.len()
                );
                pricing::OnDemand {
                    prices,
                    source: pricing::Source::PricingApi { region },
                }
            }
            Err(e) => {
                tracing::warn!("on-demand prices: {e}; keeping the prices last read");
                match &current.source {
                    pricing::Source::PricingApi { .. } => return false,
                    pricing::Source::BuiltIn { .. } => pricing::OnDemand {
                        prices: current.prices.clone(),
                        source: pricing::Source::BuiltIn { why: e.0 },
                    },
                }
            }
        };
        let changed = current.prices != next.prices;
        *current = Arc::new(next);
        changed
    }

    pub(super) fn hardware(&self) -> Arc<HashMap<String, hardware::Hardware>> {
        self.shared
            .hardware
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn inbox(&self) -> std::sync::MutexGuard<'_, interruption::Inbox> {
        self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn reservations(
        &self,
    ) -> std::sync::MutexGuard<'_, capacity_reservation::Availability> {
        self.shared
            .reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn bump(&self) {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Fetches instance types, offerings and spot prices again. On an error the previous
    /// catalog stays.
    pub async fn refresh_catalog(&self) -> Result<usize, CloudError> {
        let ec2 = &self.clients.ec2;
        let infos = instance_types::describe_types(ec2).await?;
        let zones = instance_types::describe_offerings(ec2).await?;
        let spot = instance_types::describe_spot_prices(ec2).await?;
        let on_demand = self.on_demand();
        let catalog = instance_types::catalog(
            &self.clients.region,
            &infos,
            &zones,
            &spot,
            &|t| on_demand.prices.get(t).copied(),
            &self.opts.capacity,
        )?;
        let n = catalog.instance_types.len();
        let hardware = hardware::of_all(&infos);
        let hardware_changed = {
            let mut h = self
                .shared
                .hardware
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let changed = **h != hardware;
            *h = Arc::new(hardware);
            changed
        };
        let changed = hardware_changed | {
            let mut c = self
                .shared
                .catalog
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let changed = **c != catalog;
            *c = Arc::new(catalog);
            changed
        };
        if changed {
            self.bump();
        }
        Ok(n)
    }

    /// The price of an offering in the current catalog. A reserved instance costs the
    /// type's on-demand price over [`capacity_reservation::PRICE_DIVISOR`], as its
    /// offering does.
    pub fn price(&self, instance_type: &str, zone: &str, ct: CapacityType) -> Option<f64> {
        if ct == CapacityType::Reserved {
            return self
                .price(instance_type, zone, CapacityType::OnDemand)
                .map(|p| p / capacity_reservation::PRICE_DIVISOR);
        }
        let c = self.catalog();
        let it = c.get(instance_type)?;
        it.offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == ct)
            .or_else(|| it.offerings.iter().find(|o| o.capacity_type == ct))
            .map(|o| o.price)
    }

    /// An instance as the controller sees it, priced from the current catalog.
    pub(super) fn priced(&self, d: &instances::Described) -> Instance {
        let price = self.price(&d.instance_type, &d.zone, d.capacity_type());
        d.instance(price.unwrap_or(0.0))
    }

    /// A NodeClass was created or changed: it is not Ready until resolved. Returns whether
    /// its spec is new (the watch also delivers our own status writes, which change
    /// nothing to resolve).
    pub fn set_nodeclass(&self, nc: &EC2NodeClass) -> bool {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let mut all = self.nodeclasses_mut();
        let status = nc.status.clone().unwrap_or_default();
        if let Some(old) = all.get_mut(&name)
            && old.spec == nc.spec
        {
            // Same spec: the resolution stands until the next refresh.
            old.status = status;
            old.generation = nc.metadata.generation;
            return false;
        }
        all.insert(
            name,
            NodeClassState {
                spec: nc.spec.clone(),
                generation: nc.metadata.generation,
                hash: nodeclass::hash(&nc.spec),
                resolved: Err(NotReady {
                    condition: "SubnetsReady",
                    reason: "AwaitingReconciliation".into(),
                    message: "not resolved yet".into(),
                }),
                status,
            },
        );
        drop(all);
        self.bump();
        true
    }

    pub fn remove_nodeclass(&self, name: &str) {
        let removed = self.nodeclasses_mut().remove(name).is_some();
        if removed {
            self.bump();
        }
    }

    /// Resolves every NodeClass again; returns the statuses that changed (to be written
    /// to the API server).
    pub async fn resolve_all(&self) -> Vec<(String, EC2NodeClassStatus)> {
        let known: Vec<(String, NodeClassState)> = self
            .nodeclasses()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut changed = Vec::new();
        for (name, state) in known {
            let nc = EC2NodeClass::new(&name, state.spec.clone());
            let resolved = nodeclass::resolve(
                &self.clients,
                &name,
                &nc,
                &self.opts.kubernetes_version,
                &self.opts.cluster.name,
            )
            .await;
            match &resolved {
                Err(e) => tracing::warn!("EC2NodeClass {name} is not ready: {e}"),
                Ok(r) if !r.capacity_reservations.is_empty() => {
                    self.reservations().sync(&r.capacity_reservations);
                    // The counts changed the offerings even when the resolution did not.
                    self.bump();
                }
                Ok(_) => {}
            }
            let status = nodeclass::status(
                &resolved,
                Some(&state.status),
                state.generation,
                chrono::Utc::now(),
            );
            let mut all = self.nodeclasses_mut();
            // The spec may have changed while resolving: that version resolves next time.
            let Some(entry) = all.get_mut(&name).filter(|e| e.spec == state.spec) else {
                continue;
            };
            let moved = entry.resolved != resolved;
            entry.resolved = resolved;
            if entry.status != status {
                entry.status = status.clone();
                changed.push((name, status));
            }
            drop(all);
            if moved {
                self.bump();
            }
        }
        changed
    }

    /// Every NodeClass has arrived (the watch listed them): from now on a pool whose
    /// NodeClass is missing or unresolved is reported as unable to launch.
    pub fn mark_listed(&self) {
        self.shared.listed.store(true, Ordering::SeqCst);
        self.bump();
    }

    /// The NodeClasses the provider knows.
    pub fn nodeclass_names(&self) -> Vec<String> {
        self.nodeclasses().keys().cloned().collect()
    }

    /// The resolution of a NodeClass (for tests and the console's explanations).
    pub fn resolved(&self, name: &str) -> Option<Result<Resolved, NotReady>> {
        self.nodeclasses().get(name).map(|s| s.resolved.clone())
    }

    /// Keeps the catalog and the NodeClasses fresh until the process ends: on-demand
    /// prices at once and every [`pricing::REFRESH`], instance types every
    /// [`CATALOG_REFRESH`], NodeClasses every [`NODECLASS_REFRESH`]. `statuses`
    /// receives what changed; `wake` is told when launch options may have changed.
    pub fn spawn_refreshers(
        &self,
        statuses: tokio::sync::mpsc::UnboundedSender<(String, EC2NodeClassStatus)>,
        wake: Arc<tokio::sync::Notify>,
        nodeclass_changed: Arc<tokio::sync::Notify>,
    ) {
        let h = self.clone();
        let w = wake.clone();
        tokio::spawn(async move {
            loop {
                if h.refresh_prices().await {
                    match h.refresh_catalog().await {
                        Ok(n) => tracing::debug!("repriced {n} EC2 instance types"),
                        Err(e) => tracing::warn!("repricing EC2 instance types: {e}"),
                    }
                }
                // The prices' source may have changed even when the prices did not.
                w.notify_one();
                tokio::time::sleep(pricing::REFRESH).await;
            }
        });
        let h = self.clone();
        let w = wake.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(CATALOG_REFRESH).await;
                match h.refresh_catalog().await {
                    Ok(n) => tracing::debug!("refreshed {n} EC2 instance types"),
                    Err(e) => tracing::warn!("refreshing EC2 instance types: {e}"),
                }
                w.notify_one();
            }
        });
        let h = self.clone();
        tokio::spawn(async move {
            loop {
                for s in h.resolve_all().await {
                    if statuses.send(s).is_err() {
                        return;
                    }
                }
                wake.notify_one();
                // A NodeClass change resolves at once; otherwise every interval.
                let _ = tokio::time::timeout(NODECLASS_REFRESH, nodeclass_changed.notified()).await;
            }
        });
    }
}

/// Prices of the provider's catalog, for NodeClaims read back from the API server.
pub fn price_book(handle: AwsHandle) -> crate::cloud::prices::PriceBook {
    Arc::new(move |t: &str, z: &str, ct: CapacityType| handle.price(t, z, ct))
}
