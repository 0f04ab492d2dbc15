//! What outlives the controller process: records in the cluster of the commands it is
//! carrying out and of the rejections an operator made, and the recovery that reads them
//! back on start, so a restart or a leader change loses no operator decision and leaves
//! no command half done.
//!
//! - A command's candidates carry `karpenter-tui.dev/command: <id>` and its spec (method,
//!   reason, how many replacements, who approved, when), written before anything else it
//!   does; its replacements carry `karpenter-tui.dev/replacement-of: <id>` from their
//!   creation. A new process takes such a command over in the phase the cluster shows
//!   (waiting for its replacements, or draining), or, when it died before creating every
//!   replacement, gives it up cleanly: candidates untainted, records cleared.
//! - A rejected decision's NodeClaims carry `karpenter-tui.dev/rejected-until` and the
//!   reason, so they stay held for the hour across restarts.
//!
//! Upstream Karpenter keeps its queue in memory and, on start, only untaints; taking the
//! command over is this tool's addition (its operators approve commands, and an approved
//! command must run once).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Controller;
use crate::api::protocol as keys;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, ClusterError, ObjectRef, Write};
use crate::control::approvals::Rejection;
use crate::control::orchestration::Phase;
use crate::engine::disruption::{
    CandidateSummary, Command, Method, Reason, Replacement, ReplacementOption,
};

/// The spec a command's candidates carry beside its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct CommandSpec {
    /// [`Method::metric_label`].
    method: String,
    /// [`Reason::as_str`].
    reason: String,
    /// How many replacement NodeClaims it creates.
    replacements: usize,
    /// Who approved it ("controller" for auto).
    actor: String,
    started: DateTime<Utc>,
    /// USD per hour.
    savings: f64,
}

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Writes a command's record on each of its candidates (the first thing a command
    /// does).
    pub(super) async fn record_command(&mut self, decision: u64) -> Result<(), ClusterError> {
        let Some(e) = self.disruption.orchestrator.execution(decision) else {
            return Ok(());
        };
        let actor = self
            .disruption
            .history
            .iter()
            .find(|h| {
                h.decision == Some(decision)
                    && h.action == crate::control::journal::Action::Executed
            })
            .map_or_else(|| "controller".to_string(), |h| h.actor.clone());
        let spec = CommandSpec {
            method: e.command.method.metric_label().to_string(),
            reason: e.command.reason.as_str().to_string(),
            replacements: e.command.replacements.len(),
            actor,
            started: e.started,
            savings: e.command.savings_per_hour,
        };
        let spec = serde_json::to_string(&spec).unwrap_or_default();
        let id = decision.to_string();
        let claims: Vec<String> = e.command.nodeclaims().map(str::to_string).collect();
        for claim in claims {
            let set = [
                (keys::COMMAND, Some(id.as_str())),
                (keys::COMMAND_SPEC, Some(spec.as_str())),
            ];
            self.try_annotate_claim(&claim, &set).await?;
        }
        Ok(())
    }

    /// Writes the gate's rejections of `claims` on them.
    pub(super) async fn record_rejections(&mut self, claims: &[String]) {
        let rejections: Vec<(String, Rejection)> = self
            .disruption
            .gate
            .rejections()
            .filter(|(c, _)| claims.contains(c))
            .map(|(c, r)| (c.clone(), r.clone()))
            .collect();
        for (claim, r) in rejections {
            let until = r.until.to_rfc3339();
            let set = [
                (keys::REJECTED_UNTIL, Some(until.as_str())),
                (keys::REJECTED_REASON, Some(r.reason.as_str())),
            ];
            self.annotate_claim(&claim, &set, "recording the rejection")
                .await;
        }
    }

    /// Sets or removes annotations on a NodeClaim, and on the controller's own copy at
    /// once (the watch's echo may take a while).
    pub(super) async fn try_annotate_claim(
        &mut self,
        claim: &str,
        set: &[(&str, Option<&str>)],
    ) -> Result<(), ClusterError> {
        let annotations: BTreeMap<String, Option<String>> = set
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect();
        self.cluster
            .write(Write::Annotate {
                target: ObjectRef::NodeClaim(claim.to_string()),
                annotations: annotations.clone(),
            })
            .await?;
        self.registry.annotate(claim, annotations);
        Ok(())
    }

    /// [`Self::try_annotate_claim`], a failure reported as `<doing> on <claim>: <error>`
    /// (the next round tries again).
    pub(super) async fn annotate_claim(
        &mut self,
        claim: &str,
        set: &[(&str, Option<&str>)],
        doing: &str,
    ) {
        if let Err(e) = self.try_annotate_claim(claim, set).await {
            self.error(format!("{doing} on {claim}: {e}"));
        }
    }

    /// Clears records nothing in memory stands behind any more: commands that ended
    /// (their candidates, if still here, and their replacements), and rejections whose
    /// hold is over.
    pub(super) async fn tidy_records(&mut self) {
        let running: BTreeSet<String> = self
            .disruption
            .orchestrator
            .running()
            .iter()
            .map(|e| e.id.to_string())
            .collect();
        let rejected: BTreeSet<String> = self
            .disruption
            .gate
            .rejections()
            .map(|(c, _)| c.clone())
            .collect();
        let mut clears: Vec<(String, Vec<&'static str>)> = Vec::new();
        for r in self.registry.with_records() {
            let a = &r.claim.annotations;
            let mut keys_to_clear = Vec::new();
            if a.get(keys::COMMAND).is_some_and(|id| !running.contains(id))
                && r.claim.deleting.is_none()
            {
                keys_to_clear.extend([keys::COMMAND, keys::COMMAND_SPEC]);
            }
            if a.get(keys::REPLACEMENT_OF)
                .is_some_and(|id| !running.contains(id))
            {
                keys_to_clear.push(keys::REPLACEMENT_OF);
            }
            if a.contains_key(keys::REJECTED_UNTIL) && !rejected.contains(&r.claim.name) {
                keys_to_clear.extend([keys::REJECTED_UNTIL, keys::REJECTED_REASON]);
            }
            if !keys_to_clear.is_empty() {
                clears.push((r.claim.name.clone(), keys_to_clear));
            }
        }
        for (claim, ks) in clears {
            let set: Vec<(&str, Option<&str>)> = ks.into_iter().map(|k| (k, None)).collect();
            self.annotate_claim(&claim, &set, "clearing a finished record")
                .await;
        }
    }

    /// The first round's recovery: rejections held again, commands in flight taken over
    /// (or given up cleanly), and `karpenter.sh/disrupted` taints that no command stands
    /// behind removed (upstream removes them on start).
    pub(super) async fn recover(&mut self, now: DateTime<Utc>) {
        for r in self.registry.records() {
            let a = &r.claim.annotations;
            let until = a
                .get(keys::REJECTED_UNTIL)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            if let Some(until) = until.filter(|t| *t > now) {
                let reason = a.get(keys::REJECTED_REASON).cloned().unwrap_or_default();
                self.disruption
                    .gate
                    .restore_rejection(&r.claim.name, Rejection { until, reason });
            }
        }
        let mut candidates: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        let mut replacements: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        let mut specs: BTreeMap<u64, CommandSpec> = BTreeMap::new();
        for r in self.registry.records() {
            let a = &r.claim.annotations;
            if let Some(id) = a.get(keys::COMMAND).and_then(|v| v.parse::<u64>().ok()) {
                candidates.entry(id).or_default().push(r.claim.name.clone());
                if let Some(spec) = a
                    .get(keys::COMMAND_SPEC)
                    .and_then(|s| serde_json::from_str::<CommandSpec>(s).ok())
                {
                    specs.insert(id, spec);
                }
            }
            if let Some(id) = a
                .get(keys::REPLACEMENT_OF)
                .and_then(|v| v.parse::<u64>().ok())
            {
                replacements
                    .entry(id)
                    .or_default()
                    .push(r.claim.name.clone());
            }
        }
        let mut adopted: BTreeSet<String> = BTreeSet::new();
        for (id, claims) in candidates {
            self.disruption.gate.note_id(id);
            let repl = replacements.remove(&id).unwrap_or_default();
            let spec = specs.remove(&id);
            match spec.and_then(|s| self.adopted_command(&claims, &repl, s)) {
                Some((command, phase, started)) => {
                    tracing::info!("taking over decision #{id} ({})", command.method);
                    adopted.extend(claims.iter().cloned());
                    self.disruption
                        .orchestrator
                        .adopt(id, command, phase, started);
                }
                None => {
                    self.error(format!(
                        "decision #{id} was interrupted before its replacements were created; giving it up"
                    ));
                    for c in &claims {
                        self.set_disrupted_taint(c, false).await;
                    }
                }
            }
        }
        for id in replacements.keys() {
            self.disruption.gate.note_id(*id);
        }
        let stray: Vec<String> = self
            .state
            .nodes
            .iter()
            .filter(|n| n.is_disrupted_tainted() && !n.deleting)
            .filter(|n| !adopted.contains(&n.nodeclaim))
            .map(|n| n.nodeclaim.clone())
            .collect();
        for claim in stray {
            self.set_disrupted_taint(&claim, false).await;
        }
        self.ingest(now);
    }

    /// The command a previous process left, as the cluster shows it: its phase, or None
    /// when it cannot go on (not every replacement was created).
    fn adopted_command(
        &self,
        claims: &[String],
        replacements: &[String],
        spec: CommandSpec,
    ) -> Option<(Command, Phase, DateTime<Utc>)> {
        let method = Method::from_label(&spec.method)?;
        let reason = Reason::parse(&spec.reason)?;
        let deleting = claims.iter().any(|c| {
            self.registry
                .get(c)
                .is_some_and(|r| r.claim.deleting.is_some())
        });
        if !deleting && replacements.len() < spec.replacements {
            return None;
        }
        let mut candidates = Vec::new();
        let mut budget = BTreeMap::new();
        for c in claims {
            let Some(n) = self
                .registry
                .get(c)
                .and_then(|r| r.pos)
                .map(|i| &self.state.nodes[i])
            else {
                continue;
            };
            *budget.entry(n.nodepool.clone()).or_insert(0) += 1;
            let pods = self
                .state
                .pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
                .filter(|p| crate::engine::state::is_reschedulable(p))
                .map(|p| p.key.clone())
                .collect();
            candidates.push(CandidateSummary::of(n, pods));
        }
        if candidates.is_empty() {
            return None;
        }
        let replacement = |claim: &String| -> Option<Replacement> {
            let r = self.registry.get(claim)?;
            let options = r
                .claim
                .launched
                .iter()
                .map(|l| ReplacementOption {
                    instance_type: l.instance_type.clone(),
                    price: l.price,
                    capacity_type: l.capacity_type,
                    zone: l.zone.clone(),
                })
                .collect();
            Some(Replacement {
                nodepool: r.claim.nodepool.clone(),
                options,
                capacity_types: Vec::new(),
                requirements: r.claim.requirements.clone(),
                requests: r.claim.requests.clone(),
                pods: Vec::new(),
            })
        };
        let command = Command {
            method,
            reason,
            candidates,
            replacements: replacements.iter().filter_map(replacement).collect(),
            savings_per_hour: spec.savings,
            budget,
        };
        let phase = if deleting {
            Phase::Draining {
                claims: replacements.to_vec(),
            }
        } else {
            Phase::WaitingForReplacements {
                claims: replacements.to_vec(),
            }
        };
        Some((command, phase, spec.started))
    }
}
