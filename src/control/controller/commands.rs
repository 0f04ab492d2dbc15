//! The disruption poll from the controller's side: what holds every disruption (the view
//! of the cluster is incomplete, a scale-up is landing), the pass, the drift times it
//! reports, carrying out the commands' effects against the cluster, failing a command the
//! moment its replacement fails, and turning the journal into events.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Controller;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, Write};
use crate::control::events::EventKind;
use crate::control::orchestration::{Effect, Phase};
use crate::control::upstream_events;
use crate::engine::disruption::{Block, Outcome, Prepared};
use crate::engine::pod_places::PodPlaces;
use crate::engine::state::disrupted_taint;

/// How often the controller audits its kept index of the pods: one full poll in this
/// many (as the disruption planner audits the changes reported to it).
const PLACES_AUDIT_EVERY: u64 = 64;

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Tells the disruption loop what holds it (upstream's disruption controller waits
    /// for `cluster.Synced`; drift and consolidation also wait while pods are on their way
    /// to NodeClaims that are not initialized, whose capacity a simulation cannot count
    /// on).
    pub(super) fn set_holds(&mut self) {
        let unlaunched = self
            .registry
            .records()
            .find(|r| r.claim.deleting.is_none() && r.claim.launched.is_none())
            .map(|r| format!("NodeClaim {} is not launched yet", r.claim.name));
        self.disruption.unsynced = if self.cluster.synced() {
            unlaunched
        } else {
            Some("the initial listing of the cluster is not complete".into())
        };
        self.disruption
            .metrics
            .set_synced(self.disruption.unsynced.is_none());
        let now = self.now();
        self.disruption.scaling_up = self
            .registry
            .records()
            .filter(|r| r.claim.deleting.is_none())
            .filter(|r| r.nominated_until.is_some_and(|t| now < t))
            .filter(|r| r.pos.is_none_or(|i| !self.state.nodes[i].initialized))
            .map(|r| r.claim.name.clone())
            .min();
    }

    /// Compares the kept index of the pods, and the registry's set of NodeClaims with
    /// records, with ones built from scratch, at one full poll in [`PLACES_AUDIT_EVERY`]
    /// (every one in unit tests), and replaces them when they differ: a change an index
    /// missed shows up here, counted, instead of as a wrong decision.
    fn audit_places(&mut self) {
        self.places_unaudited += 1;
        if !cfg!(test) && self.places_unaudited < PLACES_AUDIT_EVERY {
            return;
        }
        self.places_unaudited = 0;
        if self.registry.audit_records() {
            tracing::error!("the kept set of NodeClaims with records had drifted; rebuilt it");
            self.stats.record_index_misses += 1;
        }
        let fresh = PodPlaces::of(&self.state.pods);
        if fresh != self.places {
            tracing::error!("the kept index of the pods had drifted from the pods; rebuilt it");
            self.stats.pod_index_misses += 1;
            self.places = fresh;
        }
    }

    pub(super) async fn disruption_poll(&mut self, now: DateTime<Utc>, full: bool) {
        self.set_holds();
        if full {
            self.audit_places();
        }
        let state = Arc::clone(&self.state);
        self.disruption.explain = self.snapshot_tx.receiver_count() > 0;
        self.disruption.revision = self.generation;
        let effects = {
            let prepared = Prepared::placed(&state, &self.places).with_policies(&self.features);
            if full {
                self.last_pass = Some((now, self.generation));
                let began = std::time::Instant::now();
                let effects = self.disruption.poll(&prepared, now, true);
                self.stats.passes += 1;
                self.stats.pass_seconds += began.elapsed().as_secs_f64();
                effects
            } else {
                self.disruption.poll(&prepared, now, false)
            }
        };
        // Shared while it changes, the state would be copied whole.
        drop(state);
        if full {
            self.note_drift(now);
            self.announce_blocks();
        }
        self.apply_effects(effects, now).await;
    }

    /// Records since when each node has been drifted, from the pass's verdicts: drift
    /// replaces nodes in that order (upstream sorts by the Drifted condition's
    /// transition time).
    pub(super) fn note_drift(&mut self, now: DateTime<Utc>) {
        let Some(pass) = self.disruption.last_pass.as_ref() else {
            return;
        };
        let drifted = &pass.drifted;
        let mut changed: Vec<(usize, Option<DateTime<Utc>>)> = Vec::new();
        for r in self.registry.records_mut() {
            let since = match (drifted.contains_key(&r.claim.name), r.drifted_since) {
                (true, None) => Some(now),
                (true, s) => s,
                (false, _) => None,
            };
            if since != r.drifted_since {
                r.drifted_since = since;
                if let Some(i) = r.pos {
                    changed.push((i, since));
                }
            }
        }
        for (i, since) in changed {
            // Not a change of the cluster (the generation stays): the next pass need not
            // run for it, but the console shows it.
            self.changes += 1;
            Arc::make_mut(&mut self.state).nodes[i].drifted_since = since;
        }
    }

    /// Fails, at once, every command whose replacement NodeClaim failed to launch, was
    /// deleted, or never got created: its candidates are untainted in the same round
    /// (upstream's queue gives up the moment a replacement is gone).
    pub(super) async fn check_replacements(&mut self, now: DateTime<Utc>) {
        let mut failed: Vec<(String, String)> = Vec::new();
        let mut waiting: Vec<String> = Vec::new();
        for e in self.disruption.orchestrator.running() {
            let Phase::WaitingForReplacements { claims } = &e.phase else {
                continue;
            };
            for c in claims {
                match self.registry.get(c) {
                    None => failed.push((c.clone(), "it is gone".into())),
                    Some(r)
                        if r.claim.deleting.is_none()
                            && r.pos.is_none_or(|i| !self.state.nodes[i].initialized) =>
                    {
                        waiting.push(c.clone());
                    }
                    Some(r) if r.claim.deleting.is_some() => failed.push((
                        c.clone(),
                        r.delete_reason
                            .clone()
                            .unwrap_or_else(|| "it is being deleted".into()),
                    )),
                    Some(_) => {}
                }
            }
        }
        // Upstream's queue says so on every look while it waits (deduped).
        if self.noticing() {
            self.post(
                waiting
                    .iter()
                    .map(|c| upstream_events::waiting_on_readiness(c)),
            );
        }
        let mut effects = Vec::new();
        for (claim, why) in failed {
            effects.extend(self.disruption.replacement_failed(&claim, &why, now));
        }
        if !effects.is_empty() {
            self.apply_effects(effects, now).await;
        }
    }

    /// Carries out disruption effects against the cluster.
    pub(super) async fn apply_effects(&mut self, effects: Vec<Effect>, now: DateTime<Utc>) {
        let mut aborted: Vec<u64> = Vec::new();
        for effect in effects {
            let decision = match &effect {
                Effect::Record { decision } | Effect::CreateNodeClaim { decision, .. } => {
                    Some(*decision)
                }
                _ => None,
            };
            if decision.is_some_and(|d| aborted.contains(&d)) {
                continue;
            }
            match effect {
                Effect::Record { decision } => {
                    if let Err(e) = self.record_command(decision).await {
                        let why = format!("recording the command failed: {e}");
                        self.error(format!("disruption #{decision}: {why}"));
                        self.disruption.abort(decision, &why, now);
                        aborted.push(decision);
                    }
                }
                Effect::Taint { nodeclaim } => self.set_disrupted_taint(&nodeclaim, true).await,
                Effect::Untaint { nodeclaim } => self.set_disrupted_taint(&nodeclaim, false).await,
                Effect::CreateNodeClaim {
                    name,
                    decision,
                    replacement,
                } => {
                    let reason = self
                        .disruption
                        .orchestrator
                        .execution(decision)
                        .map(|e| e.command.reason);
                    let label = reason.map_or("disruption".to_string(), |r| {
                        r.as_str().to_ascii_lowercase()
                    });
                    self.create_replacement(
                        &name,
                        decision,
                        &replacement,
                        &format!("disruption #{decision}"),
                        &label,
                        now,
                    )
                    .await;
                    if let Some(r) = reason
                        && self.registry.contains(&name)
                    {
                        self.post([upstream_events::launching(&name, r.as_str())]);
                    }
                }
                Effect::Delete { nodeclaim } => {
                    let running = self
                        .disruption
                        .orchestrator
                        .running()
                        .iter()
                        .find(|e| e.command.nodeclaims().any(|c| c == nodeclaim))
                        .map(|e| (e.command.reason, e.id));
                    let reason = running.map_or("disruption".to_string(), |(r, id)| {
                        format!("{} (decision #{id})", r.as_str().to_ascii_lowercase())
                    });
                    if let Some((r, _)) = running
                        && self.noticing()
                    {
                        let node = self.registry.get(&nodeclaim).and_then(|r| r.node.clone());
                        let n =
                            upstream_events::terminating(node.as_deref(), &nodeclaim, r.as_str());
                        self.post(n);
                    }
                    self.delete_nodeclaim(&nodeclaim, &reason, now).await;
                }
            }
        }
        self.drain_outbox();
    }

    /// Adds or removes `karpenter.sh/disrupted:NoSchedule` on a NodeClaim's Node (nothing
    /// to do before it registers: nothing can land there).
    pub(super) async fn set_disrupted_taint(&mut self, claim: &str, on: bool) {
        let Some(node) = self.registry.node_of(claim).map(|n| n.name.clone()) else {
            return;
        };
        let taint = disrupted_taint();
        let w = if on {
            Write::Taint {
                node: node.clone(),
                taint,
            }
        } else {
            Write::Untaint {
                node: node.clone(),
                taint,
            }
        };
        if let Err(e) = self.cluster.write(w).await {
            let verb = if on { "tainting" } else { "untainting" };
            self.error(format!("{verb} {node}: {e}"));
        }
    }

    /// DisruptionBlocked events for nodes whose reason changed since the last pass. Waits
    /// that end by themselves (consolidateAfter, a nomination, initialization, deletion)
    /// and holds by the gate (reported as decision events) are not events; everything
    /// else an operator could act on or should know is, once per change.
    pub(super) fn announce_blocks(&mut self) {
        let Some(pass) = self.disruption.last_pass.as_ref() else {
            return;
        };
        // Once per node and kind of block: counts and times in the words change every
        // pass without telling the operator anything new. Only a new kind is put in
        // words (every node's outcome is looked at each pass).
        let mut fresh: Vec<(String, &Block, String)> = Vec::new();
        // Records and outcomes are both in NodeClaim order: walked side by side, each
        // record costs a compare or two instead of a lookup (a tenth of the string
        // compares at a thousand nodes).
        let mut outcomes = pass.outcomes.iter().peekable();
        for r in self.registry.records_mut() {
            while outcomes
                .next_if(|(claim, _)| claim.as_str() < r.claim.name.as_str())
                .is_some()
            {}
            let block = match outcomes.next_if(|(claim, _)| **claim == r.claim.name) {
                Some((_, Outcome::Blocked(b))) => Some(b),
                _ => None,
            };
            if matches!(block, Some(Block::NotEvaluated)) {
                // A fast pass did not look: the last word on the node still stands.
                continue;
            }
            let now = block.filter(|b| announced(b));
            let kind = now.map(std::mem::discriminant);
            if let Some(b) = now
                && r.reported_block != kind
            {
                fresh.push((r.claim.name.clone(), b, b.to_string()));
            }
            r.reported_block = kind;
        }
        fresh.sort_by(|a, b| a.0.cmp(&b.0));
        let mut notices = Vec::new();
        if self.noticing() {
            for (claim, block, words) in &fresh {
                let node = self.registry.get(claim).and_then(|r| r.node.clone());
                // Upstream reports a budget on the NodePool, not on each node, and a move
                // a Balanced pool's score rejects with a metric only, no Event
                // (disruption/balanced.go: rejections would bury the approvals).
                let upstream =
                    (!matches!(block, Block::Budget { .. } | Block::BalancedScore { .. }))
                        .then(|| block.event_reason());
                notices.extend(match upstream {
                    Some("Unconsolidatable") => {
                        upstream_events::unconsolidatable(node.as_deref(), claim, words)
                    }
                    Some("NodeRepairBlocked") => {
                        upstream_events::repair_blocked(node.as_deref(), claim, words)
                    }
                    Some(_) => upstream_events::blocked(node.as_deref(), claim, words),
                    None => Vec::new(),
                });
                // A pod whose do-not-disrupt duration holds the node, and until when.
                if let Block::PodDoNotDisrupt {
                    pod,
                    until: Some(at),
                } = block
                {
                    let uid = self
                        .places
                        .position(pod)
                        .map_or("", |i| self.state.pods[i].uid.as_str());
                    let at = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                    notices.push(upstream_events::do_not_disrupt_until(pod, uid, &at));
                }
            }
            for a in &pass.balanced_approvals {
                let node = a
                    .nodeclaim
                    .as_ref()
                    .and_then(|c| self.registry.get(c).and_then(|r| r.node.clone()));
                let candidate = a.nodeclaim.as_deref().map(|c| (node.as_deref(), c));
                notices.extend(upstream_events::consolidation_approved(
                    &a.nodepool,
                    candidate,
                    &a.score,
                ));
            }
            // Upstream: every pass, for each pool with nodes whose budget allows none.
            for b in &pass.budgets {
                if b.total == 0 {
                    continue;
                }
                for r in crate::api::nodepool::DisruptionReason::ALL {
                    if b.reason(r).limit == Some(0) {
                        notices.push(upstream_events::nodepool_blocked(&b.nodepool, r.as_str()));
                    }
                }
            }
        }
        let fresh: Vec<(String, String)> = fresh.into_iter().map(|(c, _, w)| (c, w)).collect();
        self.post(notices);
        for (claim, reason) in fresh {
            let node = self.node_name(&claim);
            self.emit(EventKind::DisruptionBlocked {
                nodeclaim: claim,
                node,
                reason,
            });
        }
    }

    /// A NodeClaim's Node name, or its own name before it registered.
    pub(super) fn node_name(&self, claim: &str) -> String {
        self.registry
            .get(claim)
            .and_then(|r| r.node.clone())
            .unwrap_or_else(|| claim.to_string())
    }

    /// Turns the disruption loop's journal entries into events.
    pub(super) fn drain_outbox(&mut self) {
        use crate::control::journal::Action;
        for (e, command) in std::mem::take(&mut self.disruption.outbox) {
            self.notice_for_entry(&e);
            let id = e.decision.unwrap_or(0);
            let kind = match e.action {
                Action::Proposed => {
                    let Some(cmd) = command else { continue };
                    if matches!(cmd.reason, crate::engine::disruption::Reason::Underutilized) {
                        let notices = upstream_events::consolidation_candidates(&cmd, id, |c| {
                            self.registry.get(c).is_some_and(|r| r.node.is_some())
                        });
                        self.post(notices);
                    }
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
                        nodeclaims: e.nodeclaims,
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
                    reason: e.note,
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
}

/// Whether a node's block is announced as a DisruptionBlocked event: waits that end by
/// themselves (consolidateAfter, a nomination, initialization, deletion) are not.
fn announced(block: &Block) -> bool {
    !block.is_transient()
        && !matches!(
            block,
            Block::ConsolidateAfter { .. } | Block::Nominated { .. }
        )
}
