//! The controller: one task owns the [`ClusterState`] and runs every loop of the
//! autoscaler against it. Each [`Controller::reconcile`] reads the time from the clock,
//! applies the cluster's changes to the state, then runs, in upstream's spirit:
//!
//! 1. interruption handling (spot notices: the NodeClaim is deleted ahead of the reclaim);
//! 2. the NodeClaim lifecycle (launch; a NodeClaim not launched within 5 min or not
//!    registered within 15 min is deleted; upstream `nodeclaim/lifecycle` liveness);
//! 3. provisioning when the batch window closes (the scheduler's plan becomes nominations
//!    and new NodeClaims, launched at once);
//! 4. the disruption poll (every 10 s; a full pass only when the cluster changed, a
//!    node's time-based condition came due, or 5 min passed, as upstream skips
//!    consolidation while the cluster is "consolidated"), the approval gate and
//!    orchestration;
//! 5. termination of deleting NodeClaims (drain in tiers honouring PDBs, then terminate
//!    the instance and remove the finalizer);
//! 6. garbage collection every 2 min (NodeClaims whose instance is gone, instances without
//!    a NodeClaim; upstream `nodeclaim/garbagecollection`);
//!
//! and publishes an immutable [`Snapshot`] when something changed and someone listens.
//! Everything it knows is rebuilt from the cluster on start: a restart loses pending
//! decisions (they are proposed again) and commands in flight (their taint is removed,
//! as upstream does on start), never capacity or pods.

mod ingest;
mod lifecycle;
mod notices;
mod protocol;
mod provisioner;
mod snapshot;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::watch;

use super::approvals::{PolicyTable, Scope};
use super::clock::Clock;
use super::disruption::{ActionError, DisruptionController, POLL_INTERVAL};
use super::events::{Event, EventKind};
use super::journal::Journal;
use super::orchestration::Effect;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, NodeClaimObject, NodeObject, Write};
use crate::engine::pod::PodKey;
use crate::engine::provisioning::{Batcher, Nominations, UnavailableOfferings};
use crate::engine::state::{ClusterState, disrupted_taint};

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
    pub spot_to_spot: bool,
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

    nodeclaims: BTreeMap<String, NodeClaimObject>,
    nodes: BTreeMap<String, NodeObject>,
    claim_by_provider: HashMap<String, String>,
    node_by_provider: HashMap<String, String>,
    claim_of_node: HashMap<String, String>,
    state: Arc<ClusterState>,
    pod_pos: HashMap<PodKey, usize>,
    /// NodeClaim name -> index into `state.nodes`.
    node_pos: HashMap<String, usize>,
    last_pod_event: HashMap<String, DateTime<Utc>>,
    generation: u64,

    batcher: Batcher,
    unavailable: UnavailableOfferings,
    nominations: Nominations,
    nominated: HashMap<PodKey, String>,
    /// Why the last provisioning round could not place a pending pod (the scheduler's
    /// words), for the console's pending-pods view.
    unschedulable: HashMap<PodKey, String>,
    announced_pending: HashSet<PodKey>,
    announced_registered: HashSet<String>,
    announced_initialized: HashSet<String>,
    announced_deleting: HashSet<String>,
    delete_reasons: HashMap<String, String>,
    instance_gone: HashSet<String>,
    launch_errors: HashMap<String, String>,
    /// Why a pool can launch nothing (its NodeClass is missing or not ready), as last
    /// reported, so each reason is reported once.
    unlaunchable: HashMap<String, String>,

    /// The disruption loop: gate, orchestrator, journal, metrics.
    pub disruption: DisruptionController,
    last_poll: Option<DateTime<Utc>>,
    last_pass: Option<(DateTime<Utc>, u64)>,
    last_gc: Option<DateTime<Utc>>,
    /// The cloud's [`CloudProvider::generation`] last seen: when it moves, instance types
    /// and drift verdicts are asked for again.
    cloud_generation: u64,
    blocked: HashMap<
        String,
        (
            std::mem::Discriminant<crate::engine::disruption::Block>,
            String,
        ),
    >,

    /// The approval protocol's state in the cluster (decision records, requests, pauses).
    protocol: protocol::Protocol,

    recent: VecDeque<Event>,
    fresh: Vec<Event>,
    snapshot_tx: watch::Sender<Arc<Snapshot>>,
    /// Counts every change to the state and every event: what a snapshot would show.
    changes: u64,
    published: u64,
    rng: fastrand::Rng,
    stats: Stats,
    /// Attach mode: read and explain, never write (see [`Controller::observing`]).
    observe: bool,
}

/// Totals for the run summary.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub nodeclaims_created: usize,
    /// Disruption polls that ran a full pass, and the wall time they took.
    pub passes: usize,
    pub pass_seconds: f64,
    /// Provisioning rounds (solves) and their wall time.
    pub provisioning_rounds: usize,
    pub provisioning_seconds: f64,
    pub disruptions: BTreeMap<String, usize>,
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// A controller that starts from whatever the cluster holds: it lists every object on
    /// its first reconcile and removes disruption taints no command of its own placed.
    pub fn new(cluster: C, cloud: P, clock: Arc<dyn Clock>, settings: Settings) -> Self {
        let mut disruption = DisruptionController::new(settings.policy, settings.journal);
        disruption.spot_to_spot = settings.spot_to_spot;
        let (snapshot_tx, _) = watch::channel(Arc::new(Snapshot::empty(settings.start)));
        Controller {
            cluster,
            cloud,
            clock,
            start: settings.start,
            nodeclaims: BTreeMap::new(),
            nodes: BTreeMap::new(),
            claim_by_provider: HashMap::new(),
            node_by_provider: HashMap::new(),
            claim_of_node: HashMap::new(),
            state: Arc::new(ClusterState::default()),
            pod_pos: HashMap::new(),
            node_pos: HashMap::new(),
            last_pod_event: HashMap::new(),
            generation: 0,
            batcher: Batcher::default(),
            unavailable: UnavailableOfferings::default(),
            nominations: Nominations::default(),
            nominated: HashMap::new(),
            unschedulable: HashMap::new(),
            announced_pending: HashSet::new(),
            announced_registered: HashSet::new(),
            announced_initialized: HashSet::new(),
            announced_deleting: HashSet::new(),
            delete_reasons: HashMap::new(),
            instance_gone: HashSet::new(),
            launch_errors: HashMap::new(),
            unlaunchable: HashMap::new(),
            disruption,
            last_poll: None,
            last_pass: None,
            last_gc: None,
            cloud_generation: 0,
            blocked: HashMap::new(),
            protocol: protocol::Protocol::default(),
            recent: VecDeque::new(),
            fresh: Vec::new(),
            snapshot_tx,
            changes: 0,
            published: u64::MAX,
            rng: fastrand::Rng::with_seed(settings.seed),
            stats: Stats::default(),
            observe: false,
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
            default: |_| super::approvals::Policy::Manual,
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

    fn emit(&mut self, kind: EventKind) {
        self.notice_for_event(&kind);
        let t = (self.now() - self.start).num_milliseconds() as f64 / 1000.0;
        let e = Event { t, kind };
        self.changes += 1;
        self.recent.push_back(e.clone());
        if self.recent.len() > RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.fresh.push(e);
    }

    /// Reports a problem found outside the loops (a scenario step that could not run).
    pub fn record_error(&mut self, message: String) {
        self.error(message);
    }

    fn error(&mut self, message: String) {
        tracing::warn!("{message}");
        self.emit(EventKind::Error { message });
    }

    /// One round of every loop at the clock's current time.
    pub async fn reconcile(&mut self) {
        let now = self.now();
        if self.observe {
            self.observe_round(now).await;
            return;
        }
        let first = self.last_poll.is_none() && self.generation == 0;
        self.ingest(now);
        if first {
            self.remove_stray_disruption_taints().await;
        }
        self.handle_interruptions(now).await;
        let cloud_generation = self.cloud.generation();
        if cloud_generation != self.cloud_generation {
            self.cloud_generation = cloud_generation;
            self.refresh_instance_types(now);
            let claims: Vec<String> = self.nodeclaims.keys().cloned().collect();
            for c in claims {
                self.refresh_node(&c, now);
            }
            if self.state.pods.iter().any(|p| p.is_provisionable()) {
                self.batcher.trigger(now);
            }
        } else if self.unavailable.expire(now) {
            self.refresh_instance_types(now);
        }
        self.protocol_round(now).await;
        self.lifecycle(now).await;
        if self.batcher.take_if_closed(now) {
            let began = std::time::Instant::now();
            self.provision(now).await;
            self.stats.provisioning_rounds += 1;
            self.stats.provisioning_seconds += began.elapsed().as_secs_f64();
        }
        if self.last_poll.is_none_or(|t| now - t >= POLL_INTERVAL) {
            self.last_poll = Some(now);
            // Pods still pending are looked at again (upstream requeues them): capacity
            // may have come back, or an offering left the unavailable cache.
            if self.state.pods.iter().any(|p| p.is_provisionable()) {
                self.batcher.trigger(now);
            }
            self.disruption_poll(now).await;
        }
        self.record_decisions().await;
        self.terminate(now).await;
        if self.last_gc.is_none_or(|t| now - t >= GC_INTERVAL) {
            self.last_gc = Some(now);
            self.garbage_collect(now).await;
        }
        self.ingest(now);
        self.disruption.metrics.set_node_count(self.nodes.len());
        self.publish(now);
    }

    /// Attach mode's round: the state and the disruption pass, with nothing carried out.
    async fn observe_round(&mut self, now: DateTime<Utc>) {
        self.ingest(now);
        let hints = self.recorded_ids();
        self.disruption.gate.set_id_hints(hints);
        self.sync_pauses();
        if self.last_poll.is_none_or(|t| now - t >= POLL_INTERVAL) {
            self.last_poll = Some(now);
            let state = Arc::clone(&self.state);
            self.disruption.explain = true;
            self.last_pass = Some((now, self.generation));
            // Every decision is manual here, so nothing is due and nothing runs; any
            // effect a pass returns is dropped all the same.
            let _ = self.disruption.tick(&state, now);
            drop(state);
            self.drain_outbox();
        }
        self.publish(now);
    }

    /// When the next reconcile has work to do on its own (without new changes).
    pub fn next_wake(&self) -> DateTime<Utc> {
        let now = self.now();
        let mut t = self
            .last_poll
            .map_or(now, |p| p + POLL_INTERVAL)
            .min(self.last_gc.map_or(now, |g| g + GC_INTERVAL));
        if let Some(b) = self.batcher.closes_at() {
            t = t.min(b);
        }
        let busy = self.nodeclaims.values().any(|c| c.deleting.is_some());
        if busy {
            t = t.min(now + TimeDelta::seconds(1));
        }
        for c in self.nodeclaims.values() {
            if c.launched.is_none() && c.deleting.is_none() {
                t = t.min(now + TimeDelta::seconds(10));
            }
        }
        t
    }

    /// On start, upstream removes `karpenter.sh/disrupted` taints from nodes that are not
    /// being deleted: the commands that placed them died with the previous process.
    async fn remove_stray_disruption_taints(&mut self) {
        let stray: Vec<String> = self
            .state
            .nodes
            .iter()
            .filter(|n| n.is_disrupted_tainted() && !n.deleting)
            .map(|n| n.name.clone())
            .collect();
        for node in stray {
            let w = Write::Untaint {
                node: node.clone(),
                taint: disrupted_taint(),
            };
            if let Err(e) = self.cluster.write(w).await {
                self.error(format!("removing the disruption taint from {node}: {e}"));
            }
        }
        self.ingest(self.now());
    }

    /// Carries out disruption effects against the cluster.
    async fn apply_effects(&mut self, effects: Vec<Effect>, now: DateTime<Utc>) {
        for effect in effects {
            match effect {
                Effect::Taint { node } | Effect::Untaint { node }
                    if !self.nodes.contains_key(&node) =>
                {
                    // Not registered yet: nothing to taint (and nothing can land there).
                }
                Effect::Taint { node } => {
                    let w = Write::Taint {
                        node: node.clone(),
                        taint: disrupted_taint(),
                    };
                    if let Err(e) = self.cluster.write(w).await {
                        self.error(format!("tainting {node}: {e}"));
                    }
                }
                Effect::Untaint { node } => {
                    let w = Write::Untaint {
                        node: node.clone(),
                        taint: disrupted_taint(),
                    };
                    if let Err(e) = self.cluster.write(w).await {
                        self.error(format!("untainting {node}: {e}"));
                    }
                }
                Effect::CreateNodeClaim { name, replacement } => {
                    let id = name
                        .rsplit_once("-replacement-")
                        .and_then(|(_, rest)| rest.split('-').next());
                    let cause =
                        id.map_or("disruption".to_string(), |id| format!("disruption #{id}"));
                    // The metric's reason is the command's, as upstream labels replacements.
                    let reason = id
                        .and_then(|id| id.parse::<u64>().ok())
                        .and_then(|id| {
                            self.disruption
                                .orchestrator
                                .running()
                                .iter()
                                .find(|e| e.id == id)
                        })
                        .map_or("disruption".to_string(), |e| {
                            e.command.reason.as_str().to_ascii_lowercase()
                        });
                    self.create_replacement(&name, &replacement, &cause, &reason, now)
                        .await;
                }
                Effect::Delete { node } => {
                    let claim = self
                        .claim_of_node
                        .get(&node)
                        .cloned()
                        .unwrap_or(node.clone());
                    self.delete_nodeclaim(&claim, "disruption", now).await;
                }
            }
        }
        self.drain_outbox();
    }

    async fn disruption_poll(&mut self, now: DateTime<Utc>) {
        let full = match self.last_pass {
            None => true,
            Some((at, generation)) => {
                generation != self.generation
                    || self.disruption.has_unseen_candidates()
                    || now - at >= CONSOLIDATION_TIMEOUT
                    || self.time_trigger_between(at, now)
            }
        };
        let state = Arc::clone(&self.state);
        self.disruption.explain = self.snapshot_tx.receiver_count() > 0;
        let effects = if full {
            self.last_pass = Some((now, self.generation));
            let began = std::time::Instant::now();
            let effects = self.disruption.tick(&state, now);
            self.stats.passes += 1;
            self.stats.pass_seconds += began.elapsed().as_secs_f64();
            effects
        } else {
            self.disruption.advance(&state, now)
        };
        // Shared while it changes, the state would be copied whole.
        drop(state);
        if full {
            self.announce_blocks();
        }
        self.apply_effects(effects, now).await;
    }

    /// True when some node's time-based disruption condition came due in `(from, to]`:
    /// expiry, `consolidateAfter` since its last pod event, or the end of a nomination.
    fn time_trigger_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
        let within = |t: DateTime<Utc>| from < t && t <= to;
        self.state.nodes.iter().any(|n| {
            let after = self
                .state
                .nodepools
                .get(&n.nodepool)
                .and_then(|p| p.spec.disruption.consolidate_after.as_ref())
                .and_then(|d| d.value())
                .and_then(|d| TimeDelta::from_std(d).ok())
                .unwrap_or_default();
            n.expires_at().is_some_and(within)
                || within(n.last_pod_event.unwrap_or(n.created) + after)
                || n.nominated_until.is_some_and(within)
        })
    }

    /// DisruptionBlocked events for nodes whose reason changed since the last pass. Waits
    /// that end by themselves (consolidateAfter, a nomination, initialization, deletion)
    /// and holds by the gate (reported as decision events) are not events; everything
    /// else an operator could act on or should know is, once per change.
    fn announce_blocks(&mut self) {
        use crate::engine::disruption::{Block, Outcome};
        let Some(pass) = self.disruption.last_pass.as_ref() else {
            return;
        };
        let mut now_blocked: HashMap<String, (std::mem::Discriminant<Block>, String)> =
            HashMap::new();
        for (node, outcome) in &pass.outcomes {
            let Outcome::Blocked(block) = outcome else {
                continue;
            };
            if matches!(block, Block::NotEvaluated) {
                // A fast pass did not look: the last word on the node still stands.
                if let Some(prev) = self.blocked.get(node) {
                    now_blocked.insert(node.clone(), prev.clone());
                }
                continue;
            }
            if matches!(
                block,
                Block::ConsolidateAfter { .. }
                    | Block::NotEvaluated
                    | Block::Nominated { .. }
                    | Block::NotInitialized
                    | Block::Deleting
                    | Block::Held { .. }
            ) {
                continue;
            }
            now_blocked.insert(
                node.clone(),
                (std::mem::discriminant(block), block.to_string()),
            );
        }
        // Once per node and kind of block: counts and times in the words change every
        // pass without telling the operator anything new.
        let mut fresh: Vec<(String, String)> = now_blocked
            .iter()
            .filter(|(n, (kind, _))| self.blocked.get(*n).is_none_or(|(k, _)| k != kind))
            .map(|(n, (_, m))| (n.clone(), m.clone()))
            .collect();
        fresh.sort();
        self.blocked = now_blocked;
        for (node, reason) in fresh {
            self.emit(EventKind::DisruptionBlocked { node, reason });
        }
    }

    /// Turns the disruption loop's journal entries into events.
    fn drain_outbox(&mut self) {
        use super::journal::Action;
        for (e, command) in std::mem::take(&mut self.disruption.outbox) {
            self.notice_for_entry(&e);
            let id = e.decision.unwrap_or(0);
            let kind = match e.action {
                Action::Proposed => {
                    let Some(cmd) = command else { continue };
                    EventKind::DisruptionProposed {
                        id,
                        method: cmd.method.as_str().to_string(),
                        reason: cmd.reason.as_str().to_string(),
                        policy: e
                            .detail
                            .strip_prefix("policy ")
                            .unwrap_or(&e.detail)
                            .to_string(),
                        candidates: cmd.candidates,
                        replacement: cmd.replacements,
                        savings: cmd.savings_per_hour,
                    }
                }
                Action::Approved => EventKind::DisruptionApproved { id, actor: e.actor },
                Action::Rejected => EventKind::DisruptionRejected {
                    id,
                    actor: e.actor,
                    reason: e.detail,
                },
                Action::Withdrawn => EventKind::DisruptionWithdrawn {
                    id,
                    reason: e.detail,
                },
                Action::Executed => {
                    let method = e.method.clone().unwrap_or_default();
                    *self.stats.disruptions.entry(method.clone()).or_default() += 1;
                    EventKind::DisruptionExecuted {
                        id,
                        method,
                        reason: e.reason.unwrap_or_default(),
                        nodes: e.nodes,
                    }
                }
                Action::Completed => EventKind::DisruptionCompleted { id },
                Action::Failed => EventKind::DisruptionFailed {
                    id,
                    reason: e.detail,
                },
                Action::Paused => EventKind::DisruptionPaused {
                    scope: e.detail,
                    actor: e.actor,
                },
                Action::Resumed => EventKind::DisruptionResumed {
                    scope: e.detail,
                    actor: e.actor,
                },
                Action::Involuntary => continue,
            };
            self.emit(kind);
        }
    }

    // ---- operator actions ----

    /// Approves a pending decision (re-validated first).
    pub async fn approve(&mut self, id: u64, actor: &str) -> Result<(), ActionError> {
        let now = self.now();
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

    /// Rejects a pending decision; its nodes are not proposed again for a while.
    pub async fn reject(&mut self, id: u64, reason: &str, actor: &str) -> Result<(), ActionError> {
        let now = self.now();
        let result = self.disruption.reject(id, reason, actor, now);
        self.drain_outbox();
        result?;
        self.publish(now);
        Ok(())
    }

    pub async fn pause(&mut self, scope: Scope, actor: &str) -> Result<(), ActionError> {
        let now = self.now();
        let result = self.disruption.pause(scope.clone(), actor, now);
        self.drain_outbox();
        result?;
        self.write_pause(&scope, Some(actor)).await;
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
            self.write_pause(scope, None).await;
            self.record_decisions().await;
        }
        self.publish(now);
        Ok(resumed)
    }

    /// The ids of pending decisions, oldest first.
    pub fn pending_decisions(&self) -> Vec<u64> {
        self.disruption.gate.pending().map(|d| d.id).collect()
    }
}

#[cfg(test)]
mod tests;
