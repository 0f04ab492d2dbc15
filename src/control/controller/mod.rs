//! The controller: one task owns the [`ClusterState`] and runs every loop of the
//! autoscaler against it. Each [`Controller::reconcile`] reads the time from the clock,
//! applies the cluster's changes to the state, then runs, in upstream's spirit:
//!
//! 1. on its first round, recovery: commands a previous process left in flight are
//!    adopted from their records in the cluster, rejections are held again, and stray
//!    disruption taints removed ([`records`]);
//! 2. interruption handling (spot notices: the NodeClaim is deleted ahead of the reclaim);
//! 3. the NodeClaim lifecycle: every NodeClaim launches exactly once; a launch that
//!    failed is retried with backoff; a NodeClaim not launched within 5 min or not
//!    registered within 15 min is deleted (upstream `nodeclaim/lifecycle`) ([`launch`]);
//! 4. provisioning when the batch window closes (the scheduler's plan becomes nominations
//!    and new NodeClaims, launched at once);
//! 5. the disruption poll: every 10 s, and at once when a budget window, a
//!    `consolidateAfter`, a nomination, an expiry or a decision's validation delay runs
//!    out; a full pass only when something changed or came due, as upstream skips
//!    consolidation while the cluster is "consolidated" ([`commands`]);
//! 6. termination of deleting NodeClaims (drain in tiers honouring PDBs, refusals
//!    reported, then terminate the instance and remove the finalizer) ([`termination`]);
//! 7. garbage collection every 2 min (NodeClaims whose instance is gone, instances without
//!    a NodeClaim; upstream `nodeclaim/garbagecollection`);
//!
//! and publishes an immutable [`Snapshot`] when something changed and someone listens.
//! What an operator decided (approvals, rejections, pauses) and the commands in flight
//! are recorded in the cluster, so a restarted controller or a new leader carries them on.
//!
//! Every node is known by its NodeClaim's name through one index ([`registry`]).

mod commands;
mod ingest;
mod launch;
mod lifecycle;
mod measures;
mod notices;
mod protocol;
mod provisioner;
mod records;
mod registration;
mod registry;
mod reservations;
mod snapshot;
mod static_pools;
mod status;
mod termination;
pub mod trends;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::watch;

use super::approvals::PolicyTable;
use super::clock::Clock;
use super::disruption::{ActionError, DisruptionController, POLL_INTERVAL};
use super::events::{Event, EventKind};
use super::journal::Journal;
use crate::cloud::CloudProvider;
use crate::cluster::Cluster;
use crate::engine::approval::Scope;
use crate::engine::pod::PodKey;
use crate::engine::pod_places::PodPlaces;
use crate::engine::provisioning::{Batcher, UnavailableOfferings};
use crate::engine::state::ClusterState;

pub use snapshot::Snapshot;

/// Upstream liveness: a NodeClaim not launched within this is deleted.
pub const LAUNCH_TIMEOUT: TimeDelta = TimeDelta::minutes(5);
/// Upstream liveness: a launched NodeClaim whose Node has not registered within this is
/// deleted.
pub const REGISTRATION_TIMEOUT: TimeDelta = TimeDelta::minutes(15);
/// Upstream garbage collection runs every 2 minutes.
pub const GC_INTERVAL: TimeDelta = TimeDelta::minutes(2);
/// Instances younger than this are never garbage collected (their NodeClaim's status may
/// not have been written yet).
pub const GC_GRACE: TimeDelta = TimeDelta::seconds(30);
/// Upstream re-evaluates consolidation at least this often even when nothing changed.
pub const CONSOLIDATION_TIMEOUT: TimeDelta = TimeDelta::minutes(5);
/// Recent events kept for the console.
const RECENT_EVENTS: usize = 500;

/// How the controller is set up.
pub struct Settings {
    pub policy: PolicyTable,
    /// Upstream's `FEATURE_GATES` and `MIN_VALUES_POLICY`.
    pub features: crate::engine::features::Features,
    pub journal: Option<Journal>,
    /// The origin of event times (`t` = seconds since this).
    pub start: DateTime<Utc>,
    /// Seed for NodeClaim name suffixes.
    pub seed: u64,
}

/// The control loop over one cluster and one cloud.
pub struct Controller<C: Cluster, P: CloudProvider> {
    cluster: C,
    cloud: P,
    clock: Arc<dyn Clock>,
    start: DateTime<Utc>,

    /// Every node, by NodeClaim: the one identity index.
    registry: registry::NodeRegistry,
    state: Arc<ClusterState>,
    /// Where each of `state.pods` is (by key, by Node name, unbound), changed with it.
    places: PodPlaces,
    /// Full polls since the kept `places` were last audited against a fresh index.
    places_unaudited: u64,
    generation: u64,

    batcher: Batcher,
    unavailable: UnavailableOfferings,
    /// Pending pods and the NodeClaim provisioning placed each on.
    nominated: HashMap<PodKey, String>,
    /// Why the last provisioning round could not place a pending pod (the scheduler's
    /// words), for the console's pending-pods view.
    unschedulable: HashMap<PodKey, String>,
    announced_pending: HashSet<PodKey>,
    /// Why a pool can launch nothing (its NodeClass is missing or not ready), as last
    /// reported, so each reason is reported once.
    unlaunchable: HashMap<String, String>,

    /// The disruption loop: gate, orchestrator, journal, metrics.
    pub disruption: DisruptionController,
    /// Pauses a pool whose replacements keep failing (`control::breaker`).
    breaker: crate::control::breaker::Breaker,
    last_poll: Option<DateTime<Utc>>,
    /// When the last full pass ran, at which generation.
    last_pass: Option<(DateTime<Utc>, u64)>,
    last_gc: Option<DateTime<Utc>>,
    /// The cloud's [`CloudProvider::generation`] last seen: when it moves, instance types
    /// and drift verdicts are asked for again.
    cloud_generation: u64,

    /// Upstream's settings (`MIN_VALUES_POLICY`, `PREFERENCE_POLICY` for every
    /// simulation; the batch windows for the nomination window).
    features: crate::engine::features::Features,
    /// Each NodePool's status as last written (see `status.rs`).
    pool_status_written: HashMap<String, crate::cluster::PoolStatus>,
    /// The approval protocol's state in the cluster (decision records, requests, pauses).
    protocol: protocol::Protocol,
    /// The first round's recovery has run.
    recovered: bool,

    recent: VecDeque<Event>,
    fresh: Vec<Event>,
    /// Where events an operator must hear about are posted (`--notify`).
    notifier: Option<crate::control::notify::Notifier>,
    snapshot_tx: watch::Sender<Arc<Snapshot>>,
    /// Counts every change to the state and every event: what a snapshot would show.
    changes: u64,
    published: u64,
    /// The `next_round` of the last snapshot published: a round at or after it publishes
    /// even when nothing changed.
    published_round: Option<DateTime<Utc>>,
    /// When the embedded scenario's timeline ends (see [`Snapshot::scenario_end`]).
    scenario_end: Option<DateTime<Utc>>,
    rng: fastrand::Rng,
    stats: Stats,
    /// Attach mode: read and explain, never write (see [`Controller::observing`]).
    observe: bool,
    /// When the metrics' scrape-time gauges last got the state.
    state_shared: Option<DateTime<Utc>>,
    /// The last hour, a sample a minute, for the console's graphs (see `snapshot.rs`).
    trends: trends::Trends,
    /// Commands already counted as started in `trends`.
    trend_seen: trends::SeenCommands,
}

/// Totals for the run summary: the churn a run caused and what it cost.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub nodeclaims_created: usize,
    /// NodeClaims whose termination finished.
    pub nodeclaims_deleted: usize,
    /// Pods evicted or deleted by termination.
    pub evictions: usize,
    /// Of those, per reason their node went (the disruption reason, lower case, or what
    /// deleted it).
    pub evictions_by_reason: std::collections::BTreeMap<String, usize>,
    /// USD spent on launched instances so far (price × time).
    pub cost: f64,
    /// Disruption polls that ran a full pass, and the wall time they took.
    pub passes: usize,
    pub pass_seconds: f64,
    /// Provisioning rounds (solves) and their wall time.
    pub provisioning_rounds: usize,
    pub provisioning_seconds: f64,
    /// Executed decisions per method.
    pub disruptions: std::collections::BTreeMap<String, usize>,
    /// Errors reported (talking to the cluster or the cloud).
    pub errors: usize,
    /// Audits that found the kept index of the pods (`PodPlaces`) different from one
    /// built from scratch (each one replaced it; a test keeps this at zero).
    pub pod_index_misses: usize,
    /// Audits that found the registry's kept set of NodeClaims with records (decisions,
    /// requests, commands) different from a full look (each one healed it; a test keeps
    /// this at zero).
    pub record_index_misses: usize,
    /// When `cost` was last brought up to date.
    cost_at: Option<DateTime<Utc>>,
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// A controller that starts from whatever the cluster holds: it lists every object on
    /// its first reconcile, takes over the commands and holds recorded there, and removes
    /// disruption taints no command placed.
    pub fn new(cluster: C, cloud: P, clock: Arc<dyn Clock>, settings: Settings) -> Self {
        let mut disruption = DisruptionController::new(settings.policy, settings.journal);
        disruption.spot_to_spot = settings.features.spot_to_spot;
        disruption.node_repair = settings.features.node_repair;
        disruption.split_percent = settings.features.split_percent;
        // Every change to the state goes through `ingest`, which reports the nodes it
        // touches: the planner fingerprints only those.
        disruption.track_changes();
        let (snapshot_tx, _) = watch::channel(Arc::new(Snapshot::empty(settings.start)));
        Controller {
            cluster,
            cloud,
            clock,
            start: settings.start,
            registry: registry::NodeRegistry::default(),
            state: Arc::new(ClusterState::default()),
            places: PodPlaces::default(),
            places_unaudited: 0,
            generation: 0,
            batcher: Batcher::new(settings.features.batch_idle, settings.features.batch_max),
            unavailable: UnavailableOfferings::default(),
            nominated: HashMap::new(),
            unschedulable: HashMap::new(),
            announced_pending: HashSet::new(),
            unlaunchable: HashMap::new(),
            disruption,
            breaker: Default::default(),
            last_poll: None,
            last_pass: None,
            last_gc: None,
            cloud_generation: 0,
            pool_status_written: HashMap::new(),
            features: settings.features,
            protocol: protocol::Protocol::default(),
            recovered: false,
            recent: VecDeque::new(),
            fresh: Vec::new(),
            notifier: None,
            snapshot_tx,
            changes: 0,
            published: u64::MAX,
            published_round: None,
            scenario_end: None,
            rng: fastrand::Rng::with_seed(settings.seed),
            stats: Stats::default(),
            observe: false,
            state_shared: None,
            trends: trends::Trends::default(),
            trend_seen: trends::SeenCommands::default(),
        }
    }

    /// A controller that only watches: it builds the same state, budgets, candidates,
    /// decisions and explanations from the cluster, but provisions, disrupts, terminates
    /// and records nothing. Attach mode runs one beside a controller that does act (ours
    /// or upstream Karpenter), so the console explains what it sees with the same engine;
    /// operator actions then go to the API server, not to this controller's gate.
    pub fn observing(mut self) -> Self {
        self.observe = true;
        self.disruption.gate.policy = super::approvals::PolicyTable {
            rules: Vec::new(),
            default: |_| crate::engine::approval::Policy::Manual,
        };
        self
    }

    /// True for an attach-mode controller.
    pub fn is_observing(&self) -> bool {
        self.observe
    }

    /// The cluster and the cloud, to drive a simulation or to restart a controller.
    pub fn parts_mut(&mut self) -> (&mut C, &mut P) {
        (&mut self.cluster, &mut self.cloud)
    }

    /// The cluster and the cloud, read-only (a what-if forks the world from them).
    pub fn parts(&self) -> (&C, &P) {
        (&self.cluster, &self.cloud)
    }

    /// Stops the controller, handing back the cluster and the cloud (a restart builds a
    /// new controller from them).
    pub fn into_parts(self) -> (C, P) {
        (self.cluster, self.cloud)
    }

    /// The current state (shared, immutable).
    pub fn state(&self) -> &Arc<ClusterState> {
        &self.state
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A receiver of snapshots; the console holds one.
    pub fn subscribe(&mut self) -> watch::Receiver<Arc<Snapshot>> {
        self.published = u64::MAX;
        self.snapshot_tx.subscribe()
    }

    /// Events since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.fresh)
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Posts the events an operator must hear about to webhooks from now on.
    pub fn set_notifier(&mut self, notifier: crate::control::notify::Notifier) {
        self.notifier = Some(notifier);
    }

    /// The notifier, for the caller to flush at shutdown.
    pub fn take_notifier(&mut self) -> Option<crate::control::notify::Notifier> {
        self.notifier.take()
    }

    fn emit(&mut self, kind: EventKind) {
        self.notice_for_event(&kind);
        self.measure_event(&kind);
        let t = (self.now() - self.start).num_milliseconds() as f64 / 1000.0;
        let e = Event { t, kind };
        if let Some(n) = &self.notifier {
            n.offer(&e, self.now());
        }
        self.changes += 1;
        self.recent.push_back(e.clone());
        if self.recent.len() > RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.fresh.push(e);
    }

    /// Controller steps the journal failed to record, oldest first (kept to the first
    /// hundred: one reason repeats).
    pub fn journal_errors(&self) -> &[String] {
        &self.disruption.journal_errors
    }

    /// Reports a problem found outside the loops (a scenario step that could not run).
    pub fn record_error(&mut self, message: String) {
        self.error(message);
    }

    fn error(&mut self, message: String) {
        tracing::warn!("{message}");
        self.stats.errors += 1;
        self.emit(EventKind::Error { message });
    }

    /// One round of every loop at the clock's current time.
    pub async fn reconcile(&mut self) {
        let now = self.now();
        if self.observe {
            self.observe_round(now).await;
            return;
        }
        self.ingest(now);
        if !self.recovered {
            self.recovered = true;
            self.recover(now).await;
        }
        self.account_cost(now);
        let t = self.began();
        self.handle_interruptions(now).await;
        self.reconciled("interruption", t);
        let cloud_generation = self.cloud.generation();
        if cloud_generation != self.cloud_generation {
            self.cloud_generation = cloud_generation;
            self.refresh_instance_types(now);
            for c in self.registry.names() {
                self.refresh_node(&c, now);
            }
            if self.state.pods.iter().any(|p| p.is_provisionable()) {
                self.batcher.trigger(now);
            }
        } else if self.unavailable.expire(now) {
            self.refresh_instance_types(now);
        }
        self.protocol_round(now).await;
        let t = self.began();
        self.lifecycle(now).await;
        self.restamp_hashes(now).await;
        self.register_and_initialize().await;
        self.reconciled("nodeclaim.lifecycle", t);
        self.check_replacements(now).await;
        self.keep_static_pools(now).await;
        if self.batcher.take_if_closed(now) {
            let t = self.began();
            let began = std::time::Instant::now();
            self.provision(now).await;
            self.stats.provisioning_rounds += 1;
            self.stats.provisioning_seconds += began.elapsed().as_secs_f64();
            self.reconciled("provisioner", t);
        }
        if let Some(full) = self.poll_due(now) {
            self.last_poll = Some(now);
            // Pods still pending are looked at again (upstream requeues them): capacity
            // may have come back, or an offering left the unavailable cache.
            if self.state.pods.iter().any(|p| p.is_provisionable()) {
                self.batcher.trigger(now);
            }
            let t = self.began();
            self.disruption_poll(now, full).await;
            self.reconciled("disruption", t);
        }
        self.record_decisions().await;
        self.write_status(now).await;
        let t = self.began();
        self.terminate(now).await;
        self.reconciled("node.termination", t);
        if self.last_gc.is_none_or(|t| now - t >= GC_INTERVAL) {
            self.last_gc = Some(now);
            let t = self.began();
            self.garbage_collect(now).await;
            self.reconciled("nodeclaim.garbagecollection", t);
        }
        self.ingest(now);
        self.check_replacements(now).await;
        self.trip_breakers(now).await;
        self.disruption
            .metrics
            .set_node_count(self.registry.node_count());
        self.share_state(now);
        self.publish(now);
    }

    /// Attach mode's round: the state and the disruption pass, with nothing carried out.
    async fn observe_round(&mut self, now: DateTime<Utc>) {
        self.ingest(now);
        let hints = self.recorded_ids();
        self.disruption.gate.set_id_hints(hints.clone());
        self.follow_recorded_ids();
        self.sync_pauses();
        if self.last_poll.is_none_or(|t| now - t >= POLL_INTERVAL) {
            self.last_poll = Some(now);
            let state = Arc::clone(&self.state);
            self.disruption.explain = true;
            // The decisions the acting controller recorded come first, as it grouped
            // them; the pass then explains (and proposes) around them.
            for claims in hints.keys() {
                self.disruption.propose_recorded(&state, now, claims);
            }
            self.last_pass = Some((now, self.generation));
            // Every decision is manual here, so nothing is due and nothing runs; any
            // effect a pass returns is dropped all the same.
            self.disruption.revision = self.generation;
            let _ = self.disruption.tick(&state, now);
            drop(state);
            self.note_drift(now);
            self.drain_outbox();
        }
        self.publish(now);
    }

    /// Adds what the launched instances cost since the last round to the run's total.
    fn account_cost(&mut self, now: DateTime<Utc>) {
        if let Some(at) = self.stats.cost_at
            && now > at
        {
            let hourly: f64 = self.state.nodes.iter().map(|n| n.price).sum();
            let hours = (now - at).num_milliseconds() as f64 / 3_600_000.0;
            self.stats.cost += hourly * hours;
        }
        self.stats.cost_at = Some(now);
    }

    /// When the next reconcile has work to do on its own (without new changes): the next
    /// poll, or sooner an instant a disruption outcome changes by time alone or a
    /// decision comes due, the batch window's end, GC, and a quick look while anything
    /// is terminating or waiting to launch.
    pub fn next_wake(&self) -> DateTime<Utc> {
        let now = self.now();
        let mut t = self
            .last_poll
            .map_or(now, |p| p + POLL_INTERVAL)
            .min(self.last_gc.map_or(now, |g| g + GC_INTERVAL));
        if let Some(b) = self.batcher.closes_at() {
            t = t.min(b);
        }
        for d in self.disruption.timed_triggers() {
            if d > now {
                t = t.min(d);
            }
        }
        for r in self.registry.records() {
            if r.claim.deleting.is_some() {
                t = t.min(now + TimeDelta::seconds(1));
            } else if r.claim.launched.is_none() {
                let retry = r.launch.retry_at.unwrap_or(now);
                t = t.min(retry.min(r.claim.created + LAUNCH_TIMEOUT));
            }
        }
        t
    }

    /// Whether the disruption loop polls now, and with a full pass (`Some(true)`) or only
    /// moving what is in flight. A timed trigger (see
    /// [`DisruptionController::timed_triggers`]) counts once: at the first poll at or
    /// after it.
    fn poll_due(&self, now: DateTime<Utc>) -> Option<bool> {
        let timed = self
            .disruption
            .timed_triggers()
            .into_iter()
            .any(|t| t <= now && self.last_poll.is_none_or(|p| p < t));
        let regular = self.last_poll.is_none_or(|t| now - t >= POLL_INTERVAL);
        if !timed && !regular {
            return None;
        }
        let full = match self.last_pass {
            None => true,
            Some((at, generation)) => {
                timed
                    || generation != self.generation
                    || self.disruption.has_unseen_candidates()
                    || now - at >= CONSOLIDATION_TIMEOUT
            }
        };
        Some(full)
    }

    // ---- operator actions ----

    /// Approves a pending decision (re-validated first). The approval is recorded on its
    /// candidates before anything runs, so a restart carries it out.
    pub async fn approve(&mut self, id: u64, actor: &str) -> Result<(), ActionError> {
        let now = self.now();
        self.set_holds();
        let state = Arc::clone(&self.state);
        let result = self.disruption.approve(id, actor, &state, now);
        drop(state);
        self.drain_outbox();
        let effects = result?;
        self.apply_effects(effects, now).await;
        self.ingest(now);
        self.publish(now);
        Ok(())
    }

    /// Rejects a pending decision; its nodes are not proposed again for a while, and the
    /// rejection is recorded on them so a restart keeps it.
    pub async fn reject(&mut self, id: u64, reason: &str, actor: &str) -> Result<(), ActionError> {
        let now = self.now();
        let nodes: Vec<String> = self
            .disruption
            .gate
            .decision(id)
            .map(|d| d.command.nodeclaims().map(str::to_string).collect())
            .unwrap_or_default();
        let result = self.disruption.reject(id, reason, actor, now);
        self.drain_outbox();
        result?;
        self.record_rejections(&nodes).await;
        self.publish(now);
        Ok(())
    }

    /// Pauses voluntary disruption in a scope; `reason` (the operator's words, if any)
    /// goes into the journal and the DisruptionPaused Event.
    pub async fn pause(
        &mut self,
        scope: Scope,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<(), ActionError> {
        let now = self.now();
        let result = self.disruption.pause(scope.clone(), reason, actor, now);
        self.drain_outbox();
        result?;
        self.write_pause(&scope, Some(actor), reason).await;
        self.record_decisions().await;
        self.publish(now);
        Ok(())
    }

    pub async fn resume(&mut self, scope: &Scope, actor: &str) -> Result<bool, ActionError> {
        let now = self.now();
        let result = self.disruption.resume(scope, actor, now);
        self.drain_outbox();
        let resumed = result?;
        if resumed {
            if let Scope::NodePool(pool) = scope {
                self.breaker.reset(pool);
            }
            self.write_pause(scope, None, None).await;
            self.record_decisions().await;
        }
        self.publish(now);
        Ok(resumed)
    }

    /// Pauses each pool whose replacements keep failing, with the evidence as the
    /// pause's note, unless it is paused already (`control::breaker`).
    async fn trip_breakers(&mut self, now: DateTime<Utc>) {
        let state = Arc::clone(&self.state);
        let o = &self.disruption.orchestrator;
        let trips = self
            .breaker
            .observe(&state, o.running().iter().chain(o.finished()), now);
        for trip in trips {
            let scope = Scope::NodePool(trip.nodepool.clone());
            if self.disruption.gate.pauses().contains(&scope) {
                continue;
            }
            if let Err(e) = self
                .pause(
                    scope,
                    Some(&trip.evidence),
                    crate::api::protocol::BREAKER_ACTOR,
                )
                .await
            {
                self.error(format!(
                    "the circuit breaker could not pause {}: {e}",
                    trip.nodepool
                ));
            }
        }
    }

    /// The ids of pending decisions, oldest first.
    pub fn pending_decisions(&self) -> Vec<u64> {
        self.disruption.gate.pending().map(|d| d.id).collect()
    }
}

#[cfg(test)]
mod tests;
