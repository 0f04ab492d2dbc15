//! The immutable picture of the controller the console renders: published after every
//! change on a `watch` channel, shared by `Arc`, never locked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Controller;
use super::trends::{self, Reading, Trends};
use crate::cloud::CloudProvider;
use crate::cluster::Cluster;
use crate::control::approvals::Decision;
use crate::control::events::Event;
use crate::control::journal::Entry;
use crate::control::orchestration::Execution;
use crate::engine::approval::Scope;
use crate::engine::disruption::{Outcome, PoolBudgets};
use crate::engine::pod::PodKey;
use crate::engine::state::ClusterState;

/// Everything the console shows, at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub at: DateTime<Utc>,
    /// When the controller started: events' `t` counts from here.
    pub started: DateTime<Utc>,
    /// Bumped on every change the controller applied.
    pub generation: u64,
    /// Every change and event the controller had counted when it published: two
    /// snapshots of one controller with the same count (and state) differ only in time,
    /// the second is a heartbeat.
    pub changes: u64,
    /// NodePools, nodes, pods, PDBs: shared with the controller until it next changes.
    pub state: Arc<ClusterState>,
    /// Decisions waiting for approval (or for a pause to lift).
    pub pending: Vec<Decision>,
    /// Commands in flight.
    pub running: Vec<Execution>,
    /// Recently finished commands, newest first.
    pub finished: Vec<Execution>,
    pub pauses: Vec<Scope>,
    /// Budgets per pool at the last pass.
    pub budgets: Vec<PoolBudgets>,
    /// Why each node is or is not being disrupted, as of the last pass.
    pub outcomes: BTreeMap<String, Outcome>,
    /// Recent events, oldest first.
    pub events: Vec<Event>,
    /// Recent decisions' fates and operator actions, newest first.
    pub history: Vec<Entry>,
    /// Pending pods nominated to a NodeClaim or node (pod -> NodeClaim or node name).
    pub nominated: HashMap<PodKey, String>,
    /// Pending pods the last provisioning round could not place, with the scheduler's
    /// reason.
    pub unschedulable: HashMap<PodKey, String>,
    /// The last hour, one sample a minute: what the overview's graphs draw.
    pub trends: Trends,
    /// By when the controller runs its next round on its own (its next poll or timer):
    /// it publishes again by then even when nothing changed, so a console that hears
    /// nothing for longer knows its data is stale, and a quiet cluster is not mistaken
    /// for a hung console.
    pub next_round: DateTime<Utc>,
    /// When the embedded scenario's timeline plays its last event (None outside a
    /// simulation): after it, the cluster stays live but nothing more is scripted.
    pub scenario_end: Option<DateTime<Utc>>,
    /// Said when the prices behind the costs are not the region's own (a fallback table).
    pub prices_note: Option<String>,
}

impl Snapshot {
    pub fn empty(at: DateTime<Utc>) -> Snapshot {
        Snapshot {
            at,
            started: at,
            generation: 0,
            changes: 0,
            state: Arc::new(ClusterState::default()),
            pending: Vec::new(),
            running: Vec::new(),
            finished: Vec::new(),
            pauses: Vec::new(),
            budgets: Vec::new(),
            outcomes: BTreeMap::new(),
            events: Vec::new(),
            history: Vec::new(),
            nominated: HashMap::new(),
            unschedulable: HashMap::new(),
            trends: Trends::default(),
            next_round: at,
            scenario_end: None,
            prices_note: None,
        }
    }

    /// The embedded scenario has played its whole timeline.
    pub fn scenario_ended(&self) -> bool {
        self.scenario_end.is_some_and(|end| self.at >= end)
    }
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Builds the snapshot of this moment.
    pub fn snapshot(&self) -> Snapshot {
        let d = &self.disruption;
        let pass = d.last_pass.as_ref();
        Snapshot {
            at: self.now(),
            started: self.start,
            generation: self.generation,
            changes: self.changes,
            state: Arc::clone(&self.state),
            pending: d.gate.pending().cloned().collect(),
            running: d.orchestrator.running().to_vec(),
            finished: d.orchestrator.finished().cloned().collect(),
            pauses: d.gate.pauses().to_vec(),
            budgets: pass.map(|p| p.budgets.clone()).unwrap_or_default(),
            outcomes: pass.map(|p| p.outcomes.clone()).unwrap_or_default(),
            events: self.recent.iter().cloned().collect(),
            history: d.history.iter().cloned().collect(),
            nominated: self.nominated.clone(),
            unschedulable: self.unschedulable.clone(),
            trends: self.trends.clone(),
            next_round: self.next_wake().max(self.now()),
            scenario_end: self.scenario_end,
            prices_note: self.cloud.prices_note(),
        }
    }

    /// Tells the snapshots when the embedded scenario's timeline ends (the simulation
    /// sets it; live controllers have none).
    pub fn set_scenario_end(&mut self, end: Option<DateTime<Utc>>) {
        self.scenario_end = end;
    }

    /// When the embedded scenario's timeline ends, as set.
    pub fn scenario_end(&self) -> Option<DateTime<Utc>> {
        self.scenario_end
    }

    /// Publishes a snapshot if anyone listens and something changed since the last one,
    /// or the last one's `next_round` has come (a heartbeat: "still here, nothing new"),
    /// or a minute of cluster time has passed (so the graphs move on).
    pub(super) fn publish(&mut self, now: DateTime<Utc>) {
        if self.snapshot_tx.receiver_count() == 0 {
            return;
        }
        let due = self.published_round.is_some_and(|t| now >= t);
        let minute_over = self
            .trends
            .latest()
            .is_none_or(|s| trends::minute_of(now) > s.minute);
        if self.published == self.changes && !minute_over && !due {
            return;
        }
        self.record_trends(now);
        self.published = self.changes;
        let s = Arc::new(self.snapshot());
        self.published_round = Some(s.next_round);
        self.snapshot_tx.send_replace(s);
    }

    /// Adds this moment to the last hour's trends: what the nodes cost, nodes per pool,
    /// pods pending, commands started since the last reading.
    fn record_trends(&mut self, now: DateTime<Utc>) {
        let mut pools: BTreeMap<&str, usize> = self
            .state
            .nodepools
            .keys()
            .map(|p| (p.as_str(), 0))
            .collect();
        let mut cost = 0.0;
        for n in &self.state.nodes {
            cost += n.price;
            if !n.deleting {
                *pools.entry(n.nodepool.as_str()).or_default() += 1;
            }
        }
        let pending_pods = self
            .state
            .pods
            .iter()
            .filter(|p| p.node_name.is_none() && !p.is_terminal() && p.deleting.is_none())
            .count();
        let orchestrator = &self.disruption.orchestrator;
        let ids = orchestrator
            .running()
            .iter()
            .chain(orchestrator.finished())
            .map(|e| e.id);
        let started = self.trend_seen.count_new(ids);
        let reading = Reading {
            cost_per_hour: cost,
            nodes: pools.into_iter().map(|(p, n)| (p.to_string(), n)).collect(),
            pending_pods,
            started,
        };
        self.trends.record(now, reading);
    }
}
