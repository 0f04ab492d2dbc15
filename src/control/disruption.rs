//! The disruption loop over time: every poll (upstream: 10 s) it withdraws pending
//! decisions the cluster has outgrown, runs a disruption pass, hands new commands to the
//! approval gate, starts the ones that may run, and advances the commands in flight. The
//! operator's approve / reject / pause / resume come in here too, and everything that
//! happens is journaled and counted.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use crate::engine::disruption::validation::{revalidate, revalidate_in};
use crate::engine::disruption::{self, Command, Options, Pass, Prepared, Reason, SimSlot};
use crate::engine::fast_hash::{FastMap, FastSet};
use crate::engine::scheduling::Simulator;
use crate::engine::state::ClusterState;

use super::approvals::{Decision, Gate, GateError, PolicyTable};
use super::journal::{Action, Entry, Journal, JournalError};
use super::metrics::Metrics;
use super::orchestration::{Effect, Orchestrator, Phase};
use crate::engine::approval::Scope;

/// The actor name the controller journals its own steps under.
pub const CONTROLLER: &str = "controller";

/// How often the disruption loop polls (upstream's disruption controller: every 10 s).
pub const POLL_INTERVAL: chrono::TimeDelta = chrono::TimeDelta::seconds(10);

/// Why an operator action failed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error(transparent)]
    Gate(#[from] GateError),
    /// Not journaled, so not done: the decision is unchanged.
    #[error("not done, the journal refused it: {0}")]
    Journal(#[from] JournalError),
}

/// Gate, orchestrator, journal and metrics, driven by one owner.
#[derive(Debug)]
pub struct DisruptionController {
    pub gate: Gate,
    pub orchestrator: Orchestrator,
    pub spot_to_spot: bool,
    /// Repair unhealthy nodes (feature gate `NodeRepair`).
    pub node_repair: bool,
    /// Split consolidation's share, in percent (`None`: off).
    pub split_percent: Option<f64>,
    /// Evaluate and explain every node each pass (a console is watching); otherwise
    /// passes stop at the first command, as upstream's do.
    pub explain: bool,
    /// Why nothing voluntary may run now (cluster state not synced), set by the owner
    /// before each poll.
    pub unsynced: Option<String>,
    /// The NodeClaim pods are nominated to that is not initialized yet, if any, set by
    /// the owner before each poll: drift and consolidation wait for it.
    pub scaling_up: Option<String>,
    /// The owner's count of changes to the state, set before each poll: the same number
    /// promises the same state, so the planner carries its simulations over.
    pub revision: u64,
    /// Carries simulation verdicts from pass to pass (only what changed is simulated).
    planner: disruption::Planner,
    /// Where the next fast pass resumes single-node consolidation.
    single_node_start: usize,
    /// Single-node candidates a truncated fast pass has not reached yet: the next poll
    /// resumes even if the cluster did not change.
    unseen: usize,
    pub journal: Option<Journal>,
    pub metrics: Metrics,
    /// The latest pass: outcomes, budgets, eligible counts for the console.
    pub last_pass: Option<Pass>,
    /// Journal writes that failed for controller entries (operator entries fail the action
    /// instead), newest last.
    pub journal_errors: Vec<String>,
    /// Everything journaled since the owner last took it, with the command of proposals:
    /// the controller turns these into events.
    pub outbox: Vec<(Entry, Option<Command>)>,
    /// Recent decisions' fates (approved, rejected, executed, withdrawn, ...) and pauses,
    /// newest first: the console's history, which must outlive the event ring.
    pub history: VecDeque<Entry>,
}

/// Journal entries kept for the console's history.
const HISTORY_KEPT: usize = 300;

fn entry(action: Action, actor: &str, now: DateTime<Utc>) -> Entry {
    Entry {
        at: now,
        actor: actor.to_string(),
        action,
        decision: None,
        method: None,
        reason: None,
        nodes: Vec::new(),
        nodeclaims: Vec::new(),
        savings_per_hour: None,
        detail: String::new(),
        note: None,
    }
}

fn decision_entry(
    action: Action,
    actor: &str,
    id: u64,
    cmd: &Command,
    detail: &str,
    now: DateTime<Utc>,
) -> Entry {
    Entry {
        decision: Some(id),
        method: Some(cmd.method.as_str().to_string()),
        reason: Some(cmd.reason.as_str().to_string()),
        nodes: cmd.node_names().map(str::to_string).collect(),
        nodeclaims: cmd.nodeclaims().map(str::to_string).collect(),
        savings_per_hour: Some(cmd.savings_per_hour),
        detail: detail.to_string(),
        ..entry(action, actor, now)
    }
}

impl DisruptionController {
    pub fn new(policy: PolicyTable, journal: Option<Journal>) -> DisruptionController {
        DisruptionController {
            gate: Gate::new(policy),
            orchestrator: Orchestrator::new(),
            spot_to_spot: false,
            node_repair: false,
            split_percent: None,
            explain: true,
            unsynced: None,
            scaling_up: None,
            revision: 0,
            planner: disruption::Planner::default(),
            single_node_start: 0,
            unseen: 0,
            journal,
            metrics: Metrics::new(),
            last_pass: None,
            journal_errors: Vec::new(),
            outbox: Vec::new(),
            history: VecDeque::new(),
        }
    }

    fn options(&self) -> Options {
        Options {
            spot_to_spot: self.spot_to_spot,
            repair: self.node_repair,
            split_percent: self.split_percent,
            held: Default::default(),
            reserved: self.reserved(),
            unsynced: self.unsynced.clone(),
            scaling_up: self.scaling_up.clone(),
            fast: !self.explain,
            single_node_start: self.single_node_start,
        }
    }

    /// NodeClaims that hold budget although their nodes may not show it yet: waiting
    /// decisions and the candidates of commands in flight.
    pub fn reserved(&self) -> FastSet<String> {
        let mut out: FastSet<String> = self.gate.reserved().into_iter().collect();
        for e in self.orchestrator.running() {
            out.extend(e.command.nodeclaims().map(str::to_string));
        }
        out
    }

    /// The instants time alone changes what this loop would do: the last pass's next
    /// change (a budget window, a `consolidateAfter`, a nomination, an expiry), each auto
    /// decision's validation delay ending, each rejection expiring.
    pub fn timed_triggers(&self) -> Vec<DateTime<Utc>> {
        let mut out = self.gate.due_times();
        out.extend(self.last_pass.as_ref().and_then(|p| p.next_change));
        out
    }

    /// Journals a controller step; a failure is remembered, not fatal.
    fn note(&mut self, e: Entry) {
        self.note_with(e, None);
    }

    fn note_with(&mut self, e: Entry, command: Option<Command>) {
        if let Some(j) = self.journal.as_mut()
            && let Err(err) = j.record(&e)
        {
            tracing::warn!("{err}");
            if self.journal_errors.len() < 100 {
                self.journal_errors.push(err.to_string());
            }
        }
        self.remember(&e);
        self.outbox.push((e, command));
    }

    fn remember(&mut self, e: &Entry) {
        if e.action != Action::Proposed {
            self.history.push_front(e.clone());
            self.history.truncate(HISTORY_KEPT);
        }
    }

    /// Journals an operator action; the action happens only if this succeeds.
    fn note_operator(&mut self, e: Entry) -> Result<(), JournalError> {
        if let Some(j) = self.journal.as_mut() {
            j.record(&e)?;
        }
        self.remember(&e);
        self.outbox.push((e, None));
        Ok(())
    }

    /// Simulations the planner ran and carried over since the controller started.
    pub fn planner_stats(&self) -> disruption::incremental::Stats {
        self.planner.stats
    }

    /// Promises that the owner reports every change to a node or its pods (see
    /// [`disruption::Planner::track_changes`]).
    pub fn track_changes(&mut self) {
        self.planner.track_changes();
    }

    /// Audits the owner's change reports at every pass (tests of the owner).
    pub fn audit_changes_always(&mut self) {
        self.planner.audit_always();
    }

    /// The node of this NodeClaim changed, appeared or went.
    pub fn node_changed(&mut self, claim: &str) {
        self.planner.node_changed(claim);
    }

    /// A pod bound to the node of this name came, went or changed.
    pub fn pods_changed_on(&mut self, node: &str) {
        self.planner.pods_changed_on(node);
    }

    /// True while a fast pass stopped short of some candidates without finding a command.
    pub fn has_unseen_candidates(&self) -> bool {
        self.unseen > 0
    }

    /// For an observing console: proposes the decision an acting controller recorded on
    /// exactly `claims`, by a pass that looks at those nodes alone, so the console shows
    /// (and approves) what the cluster records rather than a grouping of its own. The id
    /// comes from the gate's hints. False when the pass finds no such decision now.
    pub fn propose_recorded(
        &mut self,
        state: &ClusterState,
        now: DateTime<Utc>,
        claims: &std::collections::BTreeSet<String>,
    ) -> bool {
        if self
            .gate
            .pending()
            .any(|d| d.command.nodeclaims().any(|c| claims.contains(c)))
        {
            return false;
        }
        let held = state
            .nodes
            .iter()
            .filter(|n| !claims.contains(&n.nodeclaim))
            .map(|n| {
                (
                    n.nodeclaim.clone(),
                    "not part of the recorded decision".into(),
                )
            })
            .collect();
        let pass = disruption::plan(
            state,
            now,
            &Options {
                held,
                ..self.options()
            },
        );
        let found = pass
            .expirations
            .iter()
            .chain(pass.command.iter())
            .find(|c| {
                let mine: std::collections::BTreeSet<String> =
                    c.nodeclaims().map(str::to_string).collect();
                &mine == claims
            })
            .cloned();
        let Some(cmd) = found else {
            return false;
        };
        self.propose(cmd, state, now)
    }

    /// Hands a command to the gate and journals the proposal; false when a pending
    /// decision already holds one of its nodes.
    fn propose(&mut self, cmd: Command, state: &ClusterState, now: DateTime<Utc>) -> bool {
        let Some(d) = self.gate.propose(cmd, &state.nodepools, now) else {
            return false;
        };
        let detail = format!("policy {}", d.policy);
        let e = decision_entry(Action::Proposed, CONTROLLER, d.id, &d.command, &detail, now);
        let cmd = d.command.clone();
        self.note_with(e, Some(cmd));
        true
    }

    /// Runs `simulate` on a simulator over `prepared`, the controller's state at
    /// `revision`, outside a poll (provisioning): the planner is brought up to that state
    /// first and hands the simulator the topology counts it keeps, and keeps those the
    /// simulator needed. A fresh simulator counted every bound pod into each group of the
    /// pending pods at every provisioning round (4% of the 1,000-node day).
    pub fn simulate_in<'p, R>(
        &mut self,
        prepared: &'p Prepared<'p>,
        revision: u64,
        simulate: impl FnOnce(&mut Simulator<'p>) -> R,
    ) -> R {
        self.revision = revision;
        let options = self.options();
        self.planner.prepare(prepared, revision, &options);
        let mut slot = None;
        let out = simulate(prepared.simulator(&mut slot));
        self.planner.adopt_groups(prepared, &slot);
        out
    }

    /// One disruption poll at `now`: withdraw stale decisions, run a pass, propose, run
    /// what may run, advance what is in flight. Returns the changes to make to the cluster.
    pub fn tick(&mut self, state: &ClusterState, now: DateTime<Utc>) -> Vec<Effect> {
        self.poll(&Prepared::new(state), now, true)
    }

    /// A poll without a new pass (the cluster has not changed since the last one, as
    /// upstream skips consolidation while the cluster is "consolidated"): run what may
    /// run and advance what is in flight.
    pub fn advance(&mut self, state: &ClusterState, now: DateTime<Utc>) -> Vec<Effect> {
        self.poll(&Prepared::new(state), now, false)
    }

    /// [`DisruptionController::tick`] (`pass`) or [`DisruptionController::advance`] over
    /// a state the caller prepared: the controller's, with its kept index of the pods.
    /// One preparation of the state (and one simulator) serves every re-validation and
    /// the pass: they all simulate against the same state.
    pub fn poll<'s>(
        &mut self,
        prepared: &'s Prepared<'s>,
        now: DateTime<Utc>,
        pass: bool,
    ) -> Vec<Effect> {
        let state = prepared.state;
        let mut slot = None;
        if !pass {
            let mut effects = self.run_due(prepared, &mut slot, now);
            effects.extend(self.advance_in_flight(state, now));
            self.metrics.set_pending(self.gate.pending().count());
            return effects;
        }
        let options = self.options();
        // The planner hands the simulator the topology counts it keeps across polls
        // before anything simulates.
        self.planner.prepare(prepared, self.revision, &options);
        // 1. Withdraw what went stale while waiting.
        let pending: Vec<(u64, Command)> = self
            .gate
            .pending()
            .map(|d| (d.id, d.command.clone()))
            .collect();
        for (id, cmd) in pending {
            if let Err(why) = revalidate_in(&cmd, prepared, &mut slot, now, &options) {
                self.withdraw(id, &cmd, &why, CONTROLLER, now);
            }
        }

        // 2. A pass that leaves held and in-flight nodes alone.
        let mut held: FastMap<String, String> = self.gate.held(now).into_iter().collect();
        held.extend(self.orchestrator.in_flight());
        let pass = self.planner.plan_in(
            prepared,
            &mut slot,
            self.revision,
            now,
            &Options {
                held,
                ..options.clone()
            },
        );

        // 3. New proposals.
        for cmd in pass.expirations.iter().chain(pass.command.iter()) {
            self.propose(cmd.clone(), state, now);
        }

        // 4. Run what may run.
        let mut effects = self.run_due(prepared, &mut slot, now);
        // 5. Advance the commands in flight.
        effects.extend(self.advance_in_flight(state, now));

        // The console reads outcomes from the pass: nodes the gate or the orchestrator now
        // holds show that, not the pass's verdict from before the gate saw it.
        let mut pass = pass;
        let mut held: FastMap<String, String> = self.gate.held(now).into_iter().collect();
        held.extend(self.orchestrator.in_flight());
        for (node, why) in held {
            if let Some(o) = pass.outcomes.get_mut(&node) {
                *o = disruption::Outcome::Blocked(disruption::Block::Held { why });
            }
        }
        self.metrics.observe_pass(&pass);
        self.metrics.set_pending(self.gate.pending().count());
        if pass.command.is_none() && pass.single_node_evaluated < pass.single_node_candidates {
            self.single_node_start = self
                .single_node_start
                .wrapping_add(pass.single_node_evaluated);
            let left = if self.unseen == 0 {
                pass.single_node_candidates
            } else {
                self.unseen
            };
            self.unseen = left.saturating_sub(pass.single_node_evaluated);
        } else {
            self.unseen = 0;
        }
        self.last_pass = Some(pass);
        effects
    }

    fn run_due<'p>(
        &mut self,
        prepared: &'p Prepared<'p>,
        slot: &mut SimSlot<'p>,
        now: DateTime<Utc>,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.unsynced.is_some() {
            return effects;
        }
        for id in self.gate.due(now) {
            let waits = self.gate.decision(id).is_some_and(|d| {
                self.scaling_up.is_some()
                    && matches!(d.command.reason, Reason::Drifted | Reason::Underutilized)
            });
            if waits {
                // It keeps its place and its budget until the scale-up lands.
                continue;
            }
            // Each run changes what the next one must count as held.
            let options = self.options();
            let Some(cmd) = self.gate.decision(id).map(|d| d.command.clone()) else {
                continue;
            };
            match revalidate_in(&cmd, prepared, slot, now, &options) {
                Ok(()) => {
                    if let Ok(d) = self.gate.take(id) {
                        effects.extend(self.execute(d, CONTROLLER, now));
                    }
                }
                Err(why) => self.withdraw(id, &cmd, &why, CONTROLLER, now),
            }
        }

        effects
    }

    /// Takes back a decision the cluster outgrew (upstream abandons a command that fails
    /// validation), saying why.
    fn withdraw(&mut self, id: u64, cmd: &Command, why: &str, actor: &str, now: DateTime<Utc>) {
        self.gate.withdraw(id, why.to_string(), now);
        self.metrics.failed_validation(cmd);
        self.note(decision_entry(Action::Withdrawn, actor, id, cmd, why, now));
    }

    fn advance_in_flight(&mut self, state: &ClusterState, now: DateTime<Utc>) -> Vec<Effect> {
        let before: Vec<u64> = self.orchestrator.running().iter().map(|e| e.id).collect();
        let effects = self.orchestrator.poll(state, now);
        let done: Vec<(u64, Command, Phase)> = self
            .orchestrator
            .finished()
            .filter(|e| before.contains(&e.id))
            .filter(|e| !self.orchestrator.running().iter().any(|r| r.id == e.id))
            .map(|e| (e.id, e.command.clone(), e.phase.clone()))
            .collect();
        for (id, cmd, phase) in done {
            let (action, detail) = match phase {
                Phase::Failed { reason } => (Action::Failed, reason),
                _ => (Action::Completed, "candidates deleted and gone".into()),
            };
            self.note(decision_entry(action, CONTROLLER, id, &cmd, &detail, now));
        }
        effects
    }

    fn execute(&mut self, d: Decision, actor: &str, now: DateTime<Utc>) -> Vec<Effect> {
        self.metrics.executed(&d.command);
        self.note(decision_entry(
            Action::Executed,
            actor,
            d.id,
            &d.command,
            "",
            now,
        ));
        self.orchestrator.start(d.id, d.command, d.proposed_at, now)
    }

    /// An operator approves a pending decision: re-validated against `state` first, and
    /// withdrawn instead of run if the cluster moved on.
    pub fn approve(
        &mut self,
        id: u64,
        actor: &str,
        state: &ClusterState,
        now: DateTime<Utc>,
    ) -> Result<Vec<Effect>, ActionError> {
        let d = self
            .gate
            .decision(id)
            .cloned()
            .ok_or(GateError::Unknown(id))?;
        if let Some(scope) = self.gate.paused_by(&d.command) {
            return Err(GateError::Paused {
                id,
                scope: scope.clone(),
            }
            .into());
        }
        if let Err(reason) = revalidate(&d.command, state, now, &self.options()) {
            // The controller withdraws it (the cluster moved on), not the operator who
            // asked: the journal says who did what.
            let why = format!("{reason} (re-validated when {actor} approved it)");
            self.withdraw(id, &d.command, &why, CONTROLLER, now);
            return Err(GateError::Stale { id, reason }.into());
        }
        self.note_operator(decision_entry(
            Action::Approved,
            actor,
            id,
            &d.command,
            "",
            now,
        ))?;
        let d = self.gate.take(id)?;
        Ok(self.execute(d, actor, now))
    }

    /// An operator rejects a pending decision; its nodes are left alone for a while.
    pub fn reject(
        &mut self,
        id: u64,
        reason: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ActionError> {
        let d = self
            .gate
            .decision(id)
            .cloned()
            .ok_or(GateError::Unknown(id))?;
        self.note_operator(decision_entry(
            Action::Rejected,
            actor,
            id,
            &d.command,
            reason,
            now,
        ))?;
        self.gate.reject(id, reason, now)?;
        Ok(())
    }

    /// Pauses voluntary disruption in a scope.
    /// `note` is the operator's reason, when they gave one.
    pub fn pause(
        &mut self,
        scope: Scope,
        note: Option<&str>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ActionError> {
        self.note_operator(Entry {
            detail: scope.to_string(),
            note: note.map(str::to_string),
            ..entry(Action::Paused, actor, now)
        })?;
        self.gate.pause(scope);
        Ok(())
    }

    /// Lifts a pause. Returns false when the scope was not paused.
    pub fn resume(
        &mut self,
        scope: &Scope,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, ActionError> {
        if !self.gate.pauses().contains(scope) {
            return Ok(false);
        }
        self.note_operator(Entry {
            detail: scope.to_string(),
            ..entry(Action::Resumed, actor, now)
        })?;
        Ok(self.gate.resume(scope))
    }

    /// Records a disruption nobody chose (instance gone, spot interruption).
    pub fn involuntary(&mut self, nodeclaim: &str, node: &str, why: &str, now: DateTime<Utc>) {
        self.gate.note_involuntary(nodeclaim, why, now);
        self.note(Entry {
            nodes: vec![node.to_string()],
            nodeclaims: vec![nodeclaim.to_string()],
            detail: why.to_string(),
            ..entry(Action::Involuntary, CONTROLLER, now)
        });
    }

    /// A command's record could not be written: it is abandoned before it touched
    /// anything, journaled as failed.
    pub fn abort(&mut self, id: u64, why: &str, now: DateTime<Utc>) {
        if let Some(cmd) = self.orchestrator.abort(id, why, now) {
            self.failed(id, &cmd, why, now);
        }
    }

    /// Counts and journals a command that failed.
    fn failed(&mut self, id: u64, cmd: &Command, why: &str, now: DateTime<Utc>) {
        self.metrics.failed(cmd);
        self.note(decision_entry(
            Action::Failed,
            CONTROLLER,
            id,
            cmd,
            why,
            now,
        ));
    }

    /// A replacement NodeClaim failed to launch or was deleted: its command fails now,
    /// journaled with why; returns the effects that untaint the candidates (nothing when
    /// no command waited for it).
    pub fn replacement_failed(
        &mut self,
        nodeclaim: &str,
        why: &str,
        now: DateTime<Utc>,
    ) -> Vec<Effect> {
        let Some((id, cmd, reason, effects)) =
            self.orchestrator.replacement_failed(nodeclaim, why, now)
        else {
            return Vec::new();
        };
        self.failed(id, &cmd, &reason, now);
        effects
    }
}
