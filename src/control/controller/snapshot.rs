//! The immutable picture of the controller the console renders: published after every
//! change on a `watch` channel, shared by `Arc`, never locked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Controller;
use super::trends::{self, Reading, Trends};
use crate::cloud::CloudProvider;
use crate::cluster::Cluster;
use crate::control::approvals::{Decision, Scope};
use crate::control::events::Event;
use crate::control::journal::Entry;
use crate::control::orchestration::Execution;
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
}

impl Snapshot {
    pub fn empty(at: DateTime<Utc>) -> Snapshot {
        Snapshot {
            at,
            started: at,
            generation: 0,
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
        }
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
        }
    }

    /// Publishes a snapshot if something changed since the last one and anyone listens,
    /// and once a minute of cluster time even if nothing did, so the graphs move on.
    pub(super) fn publish(&mut self, now: DateTime<Utc>) {
        if self.snapshot_tx.receiver_count() == 0 {
            return;
        }
        let minute_over = self
            .trends
            .latest()
            .is_none_or(|s| trends::minute_of(now) > s.minute);
        if self.published == self.changes && !minute_over {
            return;
        }
        self.record_trends(now);
        self.published = self.changes;
        let s = Arc::new(self.snapshot());
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
