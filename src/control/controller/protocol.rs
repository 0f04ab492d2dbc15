//! The approval protocol through the API server (docs/attach.md), the controller's side.
//!
//! The API server holds the state; the gate mirrors it:
//! - a decision awaiting approval is recorded on its candidate NodeClaims
//!   (`karpenter-tui.dev/decision: <id>` and a summary), and its id is taken again when a
//!   restarted controller proposes the same candidates, so a restart loses no decision and
//!   an approval written meanwhile still finds it;
//! - a console approves or rejects by writing `karpenter-tui.dev/approve|reject: <id>`
//!   (and its actor) on a candidate NodeClaim; the controller checks the id names a
//!   pending decision that holds that NodeClaim, acts through the gate (which re-validates
//!   before anything runs), and clears the request;
//! - pauses are `karpenter-tui.dev/paused: <actor>` on a NodePool, or on the settings
//!   ConfigMap for every pool (and `paused-reason.<Reason>` there for one reason).
//!
//! Who may approve is whoever RBAC lets patch NodeClaims. Every action names its actor in
//! the journal and in an Event.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::Controller;
use crate::api::protocol as keys;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, ObjectRef, Write};
use crate::control::approvals::Decision;
use crate::engine::approval::{Policy, Scope};
use crate::engine::disruption::Reason;

/// How long a request may wait for the decision it names to be proposed again (a
/// restarted controller's first passes).
const REQUEST_PATIENCE: chrono::TimeDelta = chrono::TimeDelta::minutes(2);

/// Why a request is not carried out now.
enum Request {
    /// It names a decision this process will propose again once it has looked.
    Wait,
    /// It is already carried out (the command runs).
    Done,
    Refused(String),
}

/// What the controller knows of the protocol's state in the cluster.
#[derive(Debug, Default)]
pub struct Protocol {
    /// Annotations of the settings ConfigMap.
    pub settings: BTreeMap<String, String>,
    /// Decision id -> NodeClaims carrying its record.
    recorded: BTreeMap<u64, BTreeSet<String>>,
    /// Requests already acted on (NodeClaim, annotation, value): a watch may deliver the
    /// object again before the request's removal arrives.
    handled: HashSet<(String, &'static str, String)>,
    /// When each request was first seen: one naming a decision recorded in the cluster
    /// that this process has not proposed again yet waits, but not forever.
    first_seen: HashMap<(String, &'static str, String), DateTime<Utc>>,
    /// Pauses this controller wrote and has not yet seen come back from the cluster.
    expected: HashMap<Scope, bool>,
}

/// Where a scope's pause is written.
pub fn pause_target(scope: &Scope) -> (ObjectRef, String) {
    match scope {
        Scope::All => (ObjectRef::Settings, keys::PAUSED.to_string()),
        Scope::NodePool(p) => (ObjectRef::NodePool(p.clone()), keys::PAUSED.to_string()),
        Scope::Reason(r) => (
            ObjectRef::Settings,
            format!("{}{}", keys::PAUSED_REASON_PREFIX, r.as_str()),
        ),
    }
}

/// One line for `kubectl describe`: what the decision would do.
pub fn summary(d: &Decision) -> String {
    let c = &d.command;
    let nodes: Vec<&str> = c.node_names().collect();
    let replace = if c.replacements.is_empty() {
        String::new()
    } else {
        let types: Vec<&str> = c
            .replacements
            .iter()
            .filter_map(|r| r.options.first().map(|o| o.instance_type.as_str()))
            .collect();
        format!(" -> {}", types.join(", "))
    };
    format!(
        "#{} {} ({}) {}{}, saves ${:.3}/h",
        d.id,
        c.method.as_str(),
        c.reason.as_str(),
        nodes.join(", "),
        replace,
        c.savings_per_hour
    )
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// The pauses the cluster asks for, from NodePool and settings annotations.
    pub(super) fn wanted_pauses(&self) -> BTreeMap<String, (Scope, String)> {
        let mut out = BTreeMap::new();
        for (name, pool) in &self.state.nodepools {
            let annotations = pool.metadata.annotations.as_ref();
            // Ours: the paused annotation. Upstream (attach): budgets set to zero, with the
            // originals saved beside them.
            let actor = annotations.and_then(|a| match a.get(keys::PAUSED) {
                Some(actor) => Some(actor.clone()),
                None if a.contains_key(keys::SAVED_BUDGETS) => Some(
                    a.get(keys::PAUSED_BY)
                        .cloned()
                        .unwrap_or_else(|| "unknown".into()),
                ),
                None => None,
            });
            if let Some(actor) = actor {
                let s = Scope::NodePool(name.clone());
                out.insert(s.to_string(), (s, actor));
            }
        }
        for (k, actor) in &self.protocol.settings {
            let scope = if k == keys::PAUSED {
                Some(Scope::All)
            } else {
                k.strip_prefix(keys::PAUSED_REASON_PREFIX)
                    .and_then(Reason::parse)
                    .map(Scope::Reason)
            };
            if let Some(s) = scope {
                out.insert(s.to_string(), (s, actor.clone()));
            }
        }
        out
    }

    /// Brings the gate's pauses in line with the cluster's annotations.
    pub(super) fn sync_pauses(&mut self) {
        let wanted = self.wanted_pauses();
        let now = self.now();
        // Our own writes, once seen, are no longer expectations.
        let expected = std::mem::take(&mut self.protocol.expected);
        for (scope, on) in expected {
            if wanted.contains_key(&scope.to_string()) != on {
                self.protocol.expected.insert(scope, on);
            }
        }
        for (scope, actor) in wanted.values() {
            if self.protocol.expected.contains_key(scope)
                || self.disruption.gate.pauses().contains(scope)
            {
                continue;
            }
            if let Err(e) = self.disruption.pause(scope.clone(), None, actor, now) {
                self.error(format!("pause {scope} asked by {actor}: {e}"));
            }
        }
        let lifted: Vec<Scope> = self
            .disruption
            .gate
            .pauses()
            .iter()
            .filter(|s| {
                !wanted.contains_key(&s.to_string()) && !self.protocol.expected.contains_key(*s)
            })
            .cloned()
            .collect();
        for scope in lifted {
            if let Scope::NodePool(pool) = &scope {
                self.breaker.reset(pool);
            }
            if let Err(e) = self.disruption.resume(&scope, "cluster", now) {
                self.error(format!("resume {scope}: {e}"));
            }
        }
        self.drain_outbox();
    }

    /// Records a pause (or its end) in the cluster, as a console's request would. A
    /// NodePool's pause carries its note (the operator's words or the breaker's
    /// evidence) beside it, so every console shows why.
    pub(super) async fn write_pause(
        &mut self,
        scope: &Scope,
        actor: Option<&str>,
        note: Option<&str>,
    ) {
        let (target, key) = pause_target(scope);
        let mut annotations = BTreeMap::new();
        annotations.insert(key, actor.map(str::to_string));
        if matches!(scope, Scope::NodePool(_)) {
            annotations.insert(
                keys::PAUSED_NOTE.to_string(),
                note.filter(|_| actor.is_some()).map(str::to_string),
            );
        }
        self.protocol
            .expected
            .insert(scope.clone(), actor.is_some());
        if let Err(e) = self
            .cluster
            .write(Write::Annotate {
                target,
                annotations,
            })
            .await
        {
            self.protocol.expected.remove(scope);
            self.error(format!("recording the pause of {scope}: {e}"));
        }
    }

    /// Acts on approve/reject requests written on NodeClaims.
    async fn serve_requests(&mut self) {
        let mut requests: Vec<(String, &'static str, String, String, String)> = Vec::new();
        for r in self.registry.with_records() {
            let (name, claim) = (&r.claim.name, &r.claim);
            for key in [keys::APPROVE, keys::REJECT] {
                if let Some(v) = claim.annotations.get(key) {
                    let actor = claim
                        .annotations
                        .get(keys::ACTOR)
                        .cloned()
                        .unwrap_or_else(|| "unknown".into());
                    let why = claim
                        .annotations
                        .get(keys::REJECT_REASON)
                        .cloned()
                        .unwrap_or_default();
                    requests.push((name.clone(), key, v.clone(), actor, why));
                }
            }
        }
        // Forget requests whose annotation is gone: a new one with the same value is new.
        let present = |(claim, key, value): &(String, &'static str, String)| {
            requests
                .iter()
                .any(|(c, k, v, _, _)| c == claim && k == key && v == value)
        };
        self.protocol.handled.retain(present);
        self.protocol.first_seen.retain(|k, _| present(k));
        let now = self.now();
        for (claim, key, value, actor, why) in requests {
            let mark = (claim.clone(), key, value.clone());
            if self.protocol.handled.contains(&mark) {
                continue;
            }
            let seen = *self.protocol.first_seen.entry(mark.clone()).or_insert(now);
            let result = match self.check_request(&claim, &value, now - seen) {
                Err(Request::Wait) => continue,
                Err(Request::Done) => Ok(()),
                Err(Request::Refused(e)) => Err(e),
                Ok(id) if key == keys::APPROVE => {
                    self.approve(id, &actor).await.map_err(|e| e.to_string())
                }
                Ok(id) => {
                    let why = if why.is_empty() {
                        format!("rejected by {actor}")
                    } else {
                        why
                    };
                    self.reject(id, &why, &actor)
                        .await
                        .map_err(|e| e.to_string())
                }
            };
            self.protocol.handled.insert(mark);
            let verb = if key == keys::APPROVE {
                "approval"
            } else {
                "rejection"
            };
            if let Err(e) = result {
                let note = format!("{verb} of {value} by {actor} on {claim} refused: {e}");
                self.error(note.clone());
                self.notice(
                    ObjectRef::NodeClaim(claim.clone()),
                    "DisruptionRequestRefused",
                    note,
                    true,
                );
            }
            // The request is done either way: clear it so no one acts on it twice.
            if self.registry.contains(&claim) {
                let clear = [
                    (key, None),
                    (keys::ACTOR, None),
                    (keys::REJECT_REASON, None),
                ];
                self.annotate_claim(&claim, &clear, "clearing the request")
                    .await;
            }
        }
    }

    /// The decision id a request on `claim` names, if it is pending and holds `claim`.
    /// A request for a decision recorded in the cluster that this process has not
    /// proposed again yet (it just started) waits for the first pass; one for a command
    /// already running is done.
    fn check_request(
        &self,
        claim: &str,
        value: &str,
        waited: chrono::TimeDelta,
    ) -> Result<u64, Request> {
        let id: u64 = value
            .trim()
            .trim_start_matches('#')
            .parse()
            .map_err(|_| Request::Refused(format!("{value:?} is not a decision id")))?;
        let Some(d) = self.disruption.gate.decision(id) else {
            if self.disruption.orchestrator.execution(id).is_some() {
                return Err(Request::Done);
            }
            let recorded = self
                .registry
                .get(claim)
                .is_some_and(|r| r.claim.annotations.get(keys::DECISION) == Some(&id.to_string()));
            if recorded && waited < REQUEST_PATIENCE {
                return Err(Request::Wait);
            }
            return Err(Request::Refused(format!("no pending decision #{id}")));
        };
        if !d.command.nodeclaims().any(|n| n == claim) {
            return Err(Request::Refused(format!(
                "NodeClaim {claim} is not a candidate of #{id}"
            )));
        }
        Ok(id)
    }

    /// Ids recorded on NodeClaims, keyed by the candidates' NodeClaims, so the gate gives
    /// a re-proposed decision its old id.
    pub(super) fn recorded_ids(&self) -> HashMap<BTreeSet<String>, u64> {
        let mut by_id: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
        for r in self.registry.with_records() {
            if let Some(id) = r
                .claim
                .annotations
                .get(keys::DECISION)
                .and_then(|v| v.parse::<u64>().ok())
            {
                by_id.entry(id).or_default().insert(r.claim.name.clone());
            }
        }
        by_id.into_iter().map(|(id, claims)| (claims, id)).collect()
    }

    /// An observing console's decisions take the ids the acting controller recorded for
    /// the same candidates, when that controller renumbers them (a restart, a new
    /// leader): the console's "approve #N" then names what the cluster names #N.
    pub(super) fn follow_recorded_ids(&mut self) {
        let recorded = self.recorded_ids();
        let moves: Vec<(u64, u64)> = self
            .disruption
            .gate
            .pending()
            .filter_map(|d| {
                let claims: BTreeSet<String> = d.command.nodeclaims().map(str::to_string).collect();
                let id = *recorded.get(&claims)?;
                (id != d.id).then_some((d.id, id))
            })
            .collect();
        for (from, to) in moves {
            if self.disruption.gate.renumber(from, to) {
                self.changes += 1;
            }
        }
    }

    /// Writes and clears decision records so the cluster shows what awaits approval.
    pub(super) async fn record_decisions(&mut self) {
        let awaiting: BTreeMap<u64, (BTreeSet<String>, String)> = self
            .disruption
            .gate
            .pending()
            .filter(|d| {
                d.policy == Policy::Manual || self.disruption.gate.paused_by(&d.command).is_some()
            })
            .map(|d| {
                let claims = d
                    .command
                    .nodeclaims()
                    .filter(|c| self.registry.contains(c))
                    .map(str::to_string)
                    .collect();
                (d.id, (claims, summary(d)))
            })
            .collect();
        // Records on the cluster that no longer name a waiting decision go (also those a
        // previous process left).
        let mut stale: Vec<String> = Vec::new();
        for r in self.registry.with_records() {
            let name = &r.claim.name;
            if let Some(id) = r.claim.annotations.get(keys::DECISION)
                && id
                    .parse::<u64>()
                    .ok()
                    .is_none_or(|id| awaiting.get(&id).is_none_or(|(c, _)| !c.contains(name)))
                && r.claim.deleting.is_none()
            {
                stale.push(name.clone());
            }
        }
        for name in stale {
            let clear = [(keys::DECISION, None), (keys::DECISION_SUMMARY, None)];
            self.annotate_claim(&name, &clear, "clearing the decision record")
                .await;
        }
        for (id, (claims, text)) in &awaiting {
            let fresh = self.protocol.recorded.get(id) != Some(claims);
            for claim in claims {
                let has = self
                    .registry
                    .get(claim)
                    .and_then(|r| r.claim.annotations.get(keys::DECISION))
                    .is_some_and(|v| *v == id.to_string());
                if has {
                    continue;
                }
                let id_text = id.to_string();
                let set = [
                    (keys::DECISION, Some(id_text.as_str())),
                    (keys::DECISION_SUMMARY, Some(text.as_str())),
                ];
                self.annotate_claim(claim, &set, &format!("recording decision #{id}"))
                    .await;
            }
            if fresh && self.noticing() {
                for claim in claims {
                    self.notice(
                        ObjectRef::NodeClaim(claim.clone()),
                        "DisruptionAwaitingApproval",
                        text.clone(),
                        false,
                    );
                }
            }
        }
        self.protocol.recorded = awaiting.into_iter().map(|(id, (c, _))| (id, c)).collect();
        self.tidy_records().await;
    }

    /// The protocol's inbound half, before the loops act: the gate learns the recorded
    /// decision ids (for proposals this round), pauses follow the cluster, and requests
    /// are served. The outbound half, [`Self::record_decisions`], runs after the poll.
    pub(super) async fn protocol_round(&mut self, _now: DateTime<Utc>) {
        let hints = self.recorded_ids();
        self.disruption.gate.set_id_hints(hints);
        self.sync_pauses();
        self.serve_requests().await;
    }
}
