//! Carrying out an approved disruption command safely.
//!
//! Mirrors upstream `disruption/orchestration` and `queue.go`: taint the candidates
//! `karpenter.sh/disrupted:NoSchedule` (no new pods land there), create the replacements,
//! wait until every replacement is Initialized, then delete the candidates (termination
//! drains them). If a replacement fails to launch or does not initialize in time, the
//! candidates are untainted and the failure reported; replacements that did come up stay
//! (they are ordinary capacity and consolidation will judge them).
//!
//! The orchestrator does no I/O: it returns [`Effect`]s for the controller to apply to the
//! cluster (simulated or real) and reads the outcome from the next state snapshot.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::engine::disruption::{Command, Replacement};
use crate::engine::state::ClusterState;

/// Upstream waits this long for replacements to initialize before giving up.
pub const REPLACEMENT_TIMEOUT: TimeDelta = TimeDelta::minutes(10);

/// How many finished executions are kept for the console.
const FINISHED_KEPT: usize = 50;

/// A change to make to the cluster. Nodes are named by their NodeClaim.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Effect {
    /// Record the command on its candidates before anything else happens, so a restarted
    /// controller takes it over (the first effect of every command).
    Record { decision: u64 },
    /// Add `karpenter.sh/disrupted:NoSchedule` to the NodeClaim's Node.
    Taint { nodeclaim: String },
    /// Remove it again (the command failed).
    Untaint { nodeclaim: String },
    /// Create a NodeClaim for a replacement of decision `decision`, named `name`.
    CreateNodeClaim {
        name: String,
        decision: u64,
        replacement: Replacement,
    },
    /// Delete the NodeClaim: termination drains it and deletes the instance.
    Delete { nodeclaim: String },
}

/// Where an execution stands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Phase {
    /// Replacements launched, not all initialized yet.
    WaitingForReplacements {
        claims: Vec<String>,
    },
    /// Candidates deleted and draining; the replacements stay protected until the
    /// candidates are gone (their pods are moving onto them).
    Draining {
        claims: Vec<String>,
    },
    /// Candidates gone: done as far as disruption goes.
    Deleted,
    Failed {
        reason: String,
    },
}

/// One command being carried out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Execution {
    pub id: u64,
    pub command: Command,
    /// When its decision was proposed: a decision's age counts from here, through
    /// approval and execution.
    pub proposed: DateTime<Utc>,
    pub started: DateTime<Utc>,
    pub phase: Phase,
    pub finished: Option<DateTime<Utc>>,
    /// Which replacements the state has shown so far: one that appeared and then went
    /// away failed to launch; one not seen yet may still be on its way through a watch.
    seen: Vec<bool>,
}

/// Every command in flight and the recently finished ones.
#[derive(Clone, Debug, Default)]
pub struct Orchestrator {
    pub timeout: Option<TimeDelta>,
    running: Vec<Execution>,
    finished: VecDeque<Execution>,
}

impl Orchestrator {
    pub fn new() -> Orchestrator {
        Orchestrator::default()
    }

    fn timeout(&self) -> TimeDelta {
        self.timeout.unwrap_or(REPLACEMENT_TIMEOUT)
    }

    /// Starts a command (of a decision proposed at `proposed`): taints its candidates and
    /// launches its replacements, or deletes the candidates at once when there is
    /// nothing to wait for.
    pub fn start(
        &mut self,
        id: u64,
        command: Command,
        proposed: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Vec<Effect> {
        let mut effects = vec![Effect::Record { decision: id }];
        effects.extend(command.nodeclaims().map(|n| Effect::Taint {
            nodeclaim: n.to_string(),
        }));
        let mut claims = Vec::new();
        for (k, r) in command.replacements.iter().enumerate() {
            let name = replacement_name(&r.nodepool, id, k);
            claims.push(name.clone());
            effects.push(Effect::CreateNodeClaim {
                name,
                decision: id,
                replacement: r.clone(),
            });
        }
        let mut exec = Execution {
            id,
            command,
            proposed,
            started: now,
            seen: vec![false; claims.len()],
            phase: Phase::WaitingForReplacements { claims },
            finished: None,
        };
        if exec.command.replacements.is_empty() {
            effects.extend(delete_all(&exec.command));
            exec.phase = Phase::Draining { claims: Vec::new() };
        }
        self.running.push(exec);
        effects
    }

    /// Advances every running command against the current state.
    pub fn poll(&mut self, state: &ClusterState, now: DateTime<Utc>) -> Vec<Effect> {
        let mut effects = Vec::new();
        let timeout = self.timeout();
        let mut still = Vec::new();
        for mut exec in std::mem::take(&mut self.running) {
            if let Phase::Draining { .. } = &exec.phase {
                let gone = exec
                    .command
                    .nodeclaims()
                    .all(|n| state.nodes.iter().all(|x| x.nodeclaim != n));
                if gone {
                    exec.phase = Phase::Deleted;
                    exec.finished = Some(now);
                    self.finish(exec);
                } else {
                    still.push(exec);
                }
                continue;
            }
            let Phase::WaitingForReplacements { claims } = &exec.phase else {
                continue;
            };
            let found: Vec<_> = claims
                .iter()
                .map(|c| state.nodes.iter().find(|n| &n.nodeclaim == c))
                .collect();
            for (seen, n) in exec.seen.iter_mut().zip(&found) {
                *seen |= n.is_some();
            }
            let failed = found
                .iter()
                .zip(claims)
                .zip(&exec.seen)
                .find(|((n, _), seen)| match n {
                    Some(n) => n.deleting,
                    None => **seen,
                })
                .map(|((_, c), _)| format!("replacement {c} failed to launch"));
            let initialized = found.iter().all(|n| n.is_some_and(|n| n.initialized));
            if let Some(reason) = failed.or_else(|| {
                (!initialized && now - exec.started >= timeout).then(|| {
                    format!(
                        "replacements not initialized after {} min",
                        timeout.num_minutes()
                    )
                })
            }) {
                effects.extend(untaint_all(&exec.command));
                exec.phase = Phase::Failed { reason };
                exec.finished = Some(now);
                self.finish(exec);
            } else if initialized {
                effects.extend(delete_all(&exec.command));
                exec.phase = Phase::Draining {
                    claims: claims.clone(),
                };
                still.push(exec);
            } else {
                still.push(exec);
            }
        }
        self.running = still;
        effects
    }

    fn finish(&mut self, exec: Execution) {
        self.finished.push_front(exec);
        self.finished.truncate(FINISHED_KEPT);
    }

    /// A replacement NodeClaim failed (its launch failed, or it was deleted): its command
    /// fails now, not at the timeout (upstream's queue gives up the moment a replacement
    /// is gone). Returns the failed command's id, the command, why, and the effects that
    /// untaint its candidates; None when no command waits for that NodeClaim.
    pub fn replacement_failed(
        &mut self,
        nodeclaim: &str,
        why: &str,
        now: DateTime<Utc>,
    ) -> Option<(u64, Command, String, Vec<Effect>)> {
        let i = self.running.iter().position(|e| {
            matches!(&e.phase, Phase::WaitingForReplacements { claims } if claims.iter().any(|c| c == nodeclaim))
        })?;
        let mut exec = self.running.remove(i);
        let reason = format!("replacement {nodeclaim} failed: {why}");
        let effects = untaint_all(&exec.command).collect();
        exec.phase = Phase::Failed {
            reason: reason.clone(),
        };
        exec.finished = Some(now);
        let out = (exec.id, exec.command.clone(), reason, effects);
        self.finish(exec);
        Some(out)
    }

    /// Takes over a command a previous process started (found in the cluster's records
    /// after a restart or a leader change), in the phase the cluster shows.
    pub fn adopt(&mut self, id: u64, command: Command, phase: Phase, started: DateTime<Utc>) {
        if self.running.iter().any(|e| e.id == id) {
            return;
        }
        let seen = match &phase {
            Phase::WaitingForReplacements { claims } => vec![false; claims.len()],
            _ => Vec::new(),
        };
        self.running.push(Execution {
            id,
            command,
            // A previous process proposed it; the cluster's record keeps when it started.
            proposed: started,
            started,
            phase,
            finished: None,
            seen,
        });
    }

    /// Nodes of running commands (candidates and their replacements), with the words to
    /// show. A replacement is protected until its candidates are gone: until their pods
    /// have moved, it looks empty.
    pub fn in_flight(&self) -> HashMap<String, String> {
        let mut out = HashMap::new();
        for e in &self.running {
            let (claims, waiting) = match &e.phase {
                Phase::WaitingForReplacements { claims } => (claims, "waiting for its replacement"),
                Phase::Draining { claims } => (claims, "draining"),
                _ => continue,
            };
            for n in e.command.nodeclaims() {
                out.insert(
                    n.to_string(),
                    format!(
                        "being disrupted by decision #{} ({}), {waiting}",
                        e.id, e.command.method
                    ),
                );
            }
            for c in claims {
                out.insert(
                    c.clone(),
                    format!(
                        "replacement in decision #{} ({}), taking over its pods",
                        e.id, e.command.method
                    ),
                );
            }
        }
        out
    }

    pub fn running(&self) -> &[Execution] {
        &self.running
    }

    /// A running command by id.
    pub fn execution(&self, id: u64) -> Option<&Execution> {
        self.running.iter().find(|e| e.id == id)
    }

    /// Gives up a command before it touched anything (its record could not be written):
    /// it ends failed with `why`, and nothing of it is carried out.
    pub fn abort(&mut self, id: u64, why: &str, now: DateTime<Utc>) -> Option<Command> {
        let i = self.running.iter().position(|e| e.id == id)?;
        let mut exec = self.running.remove(i);
        exec.phase = Phase::Failed {
            reason: why.to_string(),
        };
        exec.finished = Some(now);
        let cmd = exec.command.clone();
        self.finish(exec);
        Some(cmd)
    }

    pub fn finished(&self) -> impl Iterator<Item = &Execution> {
        self.finished.iter()
    }
}

fn delete_all(cmd: &Command) -> impl Iterator<Item = Effect> + '_ {
    cmd.nodeclaims().map(|n| Effect::Delete {
        nodeclaim: n.to_string(),
    })
}

fn untaint_all(cmd: &Command) -> impl Iterator<Item = Effect> + '_ {
    cmd.nodeclaims().map(|n| Effect::Untaint {
        nodeclaim: n.to_string(),
    })
}

/// The name of a command's `k`-th replacement NodeClaim: the decision id in the name
/// ties it to its command across restarts, as the `replacement-of` record does.
pub fn replacement_name(nodepool: &str, id: u64, k: usize) -> String {
    format!("{nodepool}-replacement-{id}-{k}")
}

/// Applies an effect to an in-process cluster state, the way the embedded simulation does:
/// a new NodeClaim appears launching (not initialized) on its cheapest option; a deleted
/// node is marked deleting (termination drains and removes it). Effects naming a node
/// that no longer exists are ignored: it is already gone.
pub fn apply(state: &mut ClusterState, effect: &Effect, now: DateTime<Utc>) {
    use crate::engine::state::{StateNode, disrupted_taint};
    match effect {
        Effect::Record { .. } => {}
        Effect::Taint { nodeclaim } => {
            if let Some(n) = state.node_mut(nodeclaim)
                && !n.is_disrupted_tainted()
            {
                n.taints.push(disrupted_taint());
            }
        }
        Effect::Untaint { nodeclaim } => {
            if let Some(n) = state.node_mut(nodeclaim) {
                let t = disrupted_taint();
                n.taints.retain(|x| x.key != t.key || x.effect != t.effect);
            }
        }
        Effect::Delete { nodeclaim } => {
            if let Some(n) = state.node_mut(nodeclaim) {
                n.deleting = true;
            }
        }
        Effect::CreateNodeClaim {
            name, replacement, ..
        } => {
            let Some(option) = replacement.options.first() else {
                return;
            };
            let Some(pool) = state.nodepools.get(&replacement.nodepool).cloned() else {
                return;
            };
            let Some(it) = state
                .instance_types
                .get(&replacement.nodepool)
                .and_then(|types| types.iter().find(|t| t.name == option.instance_type))
                .cloned()
            else {
                return;
            };
            let mut n = StateNode::launched(name, &pool, &it, option.capacity_type, now);
            n.initialized = false;
            n.ready = false;
            state.nodes.push(n);
        }
    }
}
