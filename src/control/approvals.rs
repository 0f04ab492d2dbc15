//! The approval gate: the one place a disruption decision waits for a human, is paused,
//! rejected or approved. Every destructive disruption passes through here.
//!
//! Policy is auto or manual per NodePool and per reason. Where it comes from, most specific
//! first: a `--approval POOL/REASON=POLICY` flag, the NodePool annotation
//! `karpenter-tui.dev/approval` naming the reason (`Underutilized=manual`), a
//! `--approval POOL=POLICY` flag, the annotation without a reason (`manual`), a
//! `--approval REASON=POLICY` flag, a bare `--approval POLICY` flag, then the console's
//! default: manual for Underutilized and Drifted, auto for Empty and Expired.
//!
//! A pause (scope all, one NodePool, or one reason) holds every voluntary disruption in its
//! scope, expiration included. Involuntary disruptions (instance gone, spot interruption)
//! cannot be paused; they are recorded and shown as such.
//!
//! The words of a policy and a pause ([`Policy`], [`Rule`], [`Scope`]) are
//! `engine::approval`'s: scenario files and flags state them too, below this layer.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::api::nodepool::NodePool;
use crate::engine::approval::{Policy, Rule, Scope};
use crate::engine::disruption::{Command, Reason};

/// The NodePool annotation that sets its approval policy.
pub const APPROVAL_ANNOTATION: &str = "karpenter-tui.dev/approval";

/// How long a rejected candidate is not proposed again, unless configured.
pub const DEFAULT_REJECT_FOR: TimeDelta = TimeDelta::hours(1);

/// How long an auto decision waits between being proposed and being re-validated and run
/// (upstream `commandValidationDelay`): a decision made on a cluster in motion is checked
/// against the cluster 15 s later, and abandoned if it moved. Expiration does not wait
/// (upstream's expiration controller deletes at the due time).
pub const VALIDATION_DELAY: TimeDelta = TimeDelta::seconds(15);

/// When an auto decision may run: after the validation delay, or at once for expiry.
fn runs_at(d: &Decision) -> DateTime<Utc> {
    if d.command.reason == Reason::Expired {
        d.proposed_at
    } else {
        d.proposed_at + VALIDATION_DELAY
    }
}

/// How many withdrawn decisions the gate remembers for the console.
const WITHDRAWN_KEPT: usize = 50;

/// The console's default: a human approves what costs workloads a restart for savings
/// (Underutilized), for hygiene (Drifted) or on a health signal that may be false
/// (Unhealthy); empty and expired nodes go on their own.
pub fn console_default(reason: Reason) -> Policy {
    match reason {
        Reason::Underutilized | Reason::Drifted | Reason::Unhealthy => Policy::Manual,
        Reason::Empty | Reason::Expired => Policy::Auto,
    }
}

/// All policy sources together.
#[derive(Clone, Debug)]
pub struct PolicyTable {
    pub rules: Vec<Rule>,
    pub default: fn(Reason) -> Policy,
}

impl Default for PolicyTable {
    fn default() -> Self {
        PolicyTable {
            rules: Vec::new(),
            default: console_default,
        }
    }
}

impl PolicyTable {
    /// Every decision runs on its own (the headless controller's default, like upstream).
    pub fn all_auto() -> Self {
        PolicyTable {
            rules: Vec::new(),
            default: |_| Policy::Auto,
        }
    }

    /// The policy for a reason in a pool (see the module doc for the order).
    pub fn resolve(&self, pool: Option<&NodePool>, pool_name: &str, reason: Reason) -> Policy {
        let rule = |p: Option<&str>, r: Option<Reason>| {
            self.rules
                .iter()
                .rev()
                .find(|x| x.nodepool.as_deref() == p && x.reason == r)
                .map(|x| x.policy)
        };
        let (ann_reason, ann_all) = pool
            .and_then(|p| p.metadata.annotations.as_ref())
            .and_then(|a| a.get(APPROVAL_ANNOTATION))
            .map(|v| annotation_policies(v, reason))
            .unwrap_or((None, None));
        rule(Some(pool_name), Some(reason))
            .or(ann_reason)
            .or_else(|| rule(Some(pool_name), None))
            .or(ann_all)
            .or_else(|| rule(None, Some(reason)))
            .or_else(|| rule(None, None))
            .unwrap_or((self.default)(reason))
    }
}

/// Reads the annotation (`manual`, or `Underutilized=manual,Drifted=auto`): the policy for
/// this reason and the one for all reasons. Parts that do not parse are skipped, so a typo
/// falls back to the next source rather than blocking the pool; each decision records the
/// policy it got, which the console shows.
fn annotation_policies(value: &str, reason: Reason) -> (Option<Policy>, Option<Policy>) {
    let mut specific = None;
    let mut all = None;
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match Rule::parse(part) {
            Ok(Rule {
                nodepool: None,
                reason: Some(r),
                policy,
            }) if r == reason => specific = Some(policy),
            Ok(Rule {
                nodepool: None,
                reason: None,
                policy,
            }) => all = Some(policy),
            _ => {}
        }
    }
    (specific, all)
}

/// A decision held by the gate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    pub id: u64,
    pub command: Command,
    pub proposed_at: DateTime<Utc>,
    pub policy: Policy,
}

/// A decision taken back, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Withdrawn {
    pub decision: Decision,
    pub at: DateTime<Utc>,
    pub reason: String,
}

/// A disruption nobody can pause: the instance went away or the cloud reclaimed it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Involuntary {
    /// The NodeClaim.
    pub node: String,
    pub at: DateTime<Utc>,
    pub why: String,
}

/// An operator's rejection of a node: it is not proposed again until `until`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rejection {
    pub until: DateTime<Utc>,
    pub reason: String,
}

/// Why an operator action did not happen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("no pending decision #{0}")]
    Unknown(u64),
    #[error("decision #{id} is paused by scope {scope}: resume it first")]
    Paused { id: u64, scope: Scope },
    #[error("decision #{id} was withdrawn: {reason}")]
    Stale { id: u64, reason: String },
}

/// The gate's state: pending decisions, rejections, pauses.
#[derive(Clone, Debug)]
pub struct Gate {
    pub policy: PolicyTable,
    /// How long a rejected node is not proposed again.
    pub reject_for: TimeDelta,
    pending: BTreeMap<u64, Decision>,
    /// NodeClaim -> its rejection.
    rejected: HashMap<String, Rejection>,
    pauses: Vec<Scope>,
    withdrawn: VecDeque<Withdrawn>,
    involuntary: VecDeque<Involuntary>,
    next_id: u64,
    /// Ids recorded in the cluster by candidates (NodeClaims): a decision proposed again
    /// after a restart takes its old id, so approvals written meanwhile still find it.
    id_hints: HashMap<BTreeSet<String>, u64>,
}

impl Gate {
    pub fn new(policy: PolicyTable) -> Gate {
        Gate {
            policy,
            reject_for: DEFAULT_REJECT_FOR,
            pending: BTreeMap::new(),
            rejected: HashMap::new(),
            pauses: Vec::new(),
            withdrawn: VecDeque::new(),
            involuntary: VecDeque::new(),
            next_id: 1,
            id_hints: HashMap::new(),
        }
    }

    /// Takes a freshly proposed command. Returns the new decision, or None when a pending
    /// decision already holds one of its nodes.
    pub fn propose(
        &mut self,
        command: Command,
        nodepools: &BTreeMap<String, NodePool>,
        now: DateTime<Utc>,
    ) -> Option<&Decision> {
        let taken = self.pending.values().any(|d| {
            d.command
                .nodeclaims()
                .any(|n| command.nodeclaims().any(|m| m == n))
        });
        if taken {
            return None;
        }
        // The strictest policy over the command's pools: one manual pool makes it manual.
        let policy = command
            .candidates
            .iter()
            .map(|c| {
                self.policy
                    .resolve(nodepools.get(&c.nodepool), &c.nodepool, command.reason)
            })
            .max_by_key(|p| *p == Policy::Manual)
            .unwrap_or((self.policy.default)(command.reason));
        let nodes: BTreeSet<String> = command.nodeclaims().map(str::to_string).collect();
        let id = match self.id_hints.get(&nodes) {
            Some(id) if !self.pending.contains_key(id) => *id,
            _ => {
                self.next_id += 1;
                self.next_id - 1
            }
        };
        self.pending.insert(
            id,
            Decision {
                id,
                command,
                proposed_at: now,
                policy,
            },
        );
        self.pending.get(&id)
    }

    /// Learns the ids recorded in the cluster; new ids start above every one of them.
    pub fn set_id_hints(&mut self, hints: HashMap<BTreeSet<String>, u64>) {
        if let Some(max) = hints.values().max() {
            self.next_id = self.next_id.max(max + 1);
        }
        self.id_hints = hints;
    }

    /// An id in use elsewhere (a command a previous process started): new ids start
    /// above it.
    pub fn note_id(&mut self, id: u64) {
        self.next_id = self.next_id.max(id + 1);
    }

    /// The pause covering a command, if any.
    pub fn paused_by(&self, cmd: &Command) -> Option<&Scope> {
        self.pauses.iter().find(|s| s.covers(cmd))
    }

    /// Auto decisions no pause holds whose validation delay is over: ready to run
    /// (after re-validation).
    pub fn due(&self, now: DateTime<Utc>) -> Vec<u64> {
        self.pending
            .values()
            .filter(|d| d.policy == Policy::Auto && self.paused_by(&d.command).is_none())
            .filter(|d| runs_at(d) <= now)
            .map(|d| d.id)
            .collect()
    }

    /// When each auto decision's validation delay ends and each rejection expires: the
    /// gate has work then whatever else happens.
    pub fn due_times(&self) -> Vec<DateTime<Utc>> {
        let validations = self
            .pending
            .values()
            .filter(|d| d.policy == Policy::Auto && self.paused_by(&d.command).is_none())
            .map(runs_at);
        let holds = self.rejected.values().map(|r| r.until);
        validations.chain(holds).collect()
    }

    /// NodeClaims of waiting decisions for a budgeted reason: they hold their pool's
    /// budget as a command in flight does, so a pass never proposes past the budget and
    /// everything waiting can be approved at once.
    pub fn reserved(&self) -> HashSet<String> {
        self.pending
            .values()
            .filter(|d| d.command.reason.budget_reason().is_some())
            .flat_map(|d| d.command.nodeclaims().map(str::to_string))
            .collect()
    }

    /// Removes a decision to run it: approved by an operator, or due. Refuses while a pause
    /// covers it.
    pub fn take(&mut self, id: u64) -> Result<Decision, GateError> {
        let d = self.pending.get(&id).ok_or(GateError::Unknown(id))?;
        if let Some(scope) = self.paused_by(&d.command) {
            return Err(GateError::Paused {
                id,
                scope: scope.clone(),
            });
        }
        self.pending.remove(&id).ok_or(GateError::Unknown(id))
    }

    /// Withdraws a decision that went stale.
    pub fn withdraw(&mut self, id: u64, reason: String, now: DateTime<Utc>) -> Option<Withdrawn> {
        let decision = self.pending.remove(&id)?;
        let w = Withdrawn {
            decision,
            at: now,
            reason,
        };
        self.withdrawn.push_front(w.clone());
        self.withdrawn.truncate(WITHDRAWN_KEPT);
        Some(w)
    }

    /// Rejects a decision: its nodes are not proposed again for `reject_for`.
    pub fn reject(
        &mut self,
        id: u64,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Decision, GateError> {
        let d = self.pending.remove(&id).ok_or(GateError::Unknown(id))?;
        for n in d.command.nodeclaims() {
            self.rejected.insert(
                n.to_string(),
                Rejection {
                    until: now + self.reject_for,
                    reason: reason.to_string(),
                },
            );
        }
        Ok(d)
    }

    /// Takes back a rejection found in the cluster (a restarted controller, a new
    /// leader), unless one is known already.
    pub fn restore_rejection(&mut self, nodeclaim: &str, rejection: Rejection) {
        self.rejected
            .entry(nodeclaim.to_string())
            .or_insert(rejection);
    }

    /// Rejections in force, by NodeClaim.
    pub fn rejections(&self) -> impl Iterator<Item = (&String, &Rejection)> {
        self.rejected.iter()
    }

    /// Gives a pending decision the id the cluster records for it (an observing console
    /// follows the controller that acts). False when `from` is not pending or `to` is
    /// taken.
    pub fn renumber(&mut self, from: u64, to: u64) -> bool {
        if from == to || self.pending.contains_key(&to) {
            return false;
        }
        let Some(mut d) = self.pending.remove(&from) else {
            return false;
        };
        d.id = to;
        self.pending.insert(to, d);
        self.next_id = self.next_id.max(to + 1);
        true
    }

    /// Pauses a scope (idempotent).
    pub fn pause(&mut self, scope: Scope) {
        if !self.pauses.contains(&scope) {
            self.pauses.push(scope);
        }
    }

    /// Lifts a pause; false when the scope was not paused.
    pub fn resume(&mut self, scope: &Scope) -> bool {
        let before = self.pauses.len();
        self.pauses.retain(|s| s != scope);
        self.pauses.len() != before
    }

    pub fn pauses(&self) -> &[Scope] {
        &self.pauses
    }

    pub fn pending(&self) -> impl Iterator<Item = &Decision> {
        self.pending.values()
    }

    pub fn decision(&self, id: u64) -> Option<&Decision> {
        self.pending.get(&id)
    }

    pub fn withdrawn(&self) -> impl Iterator<Item = &Withdrawn> {
        self.withdrawn.iter()
    }

    /// Records an involuntary disruption (never gated, never paused).
    pub fn note_involuntary(&mut self, node: &str, why: &str, now: DateTime<Utc>) {
        self.involuntary.push_front(Involuntary {
            node: node.to_string(),
            at: now,
            why: why.to_string(),
        });
        self.involuntary.truncate(WITHDRAWN_KEPT);
    }

    pub fn involuntary(&self) -> impl Iterator<Item = &Involuntary> {
        self.involuntary.iter()
    }

    /// NodeClaims the pass must leave alone, with the words to show: in a pending
    /// decision, or rejected recently. Forgets expired rejections.
    pub fn held(&mut self, now: DateTime<Utc>) -> HashMap<String, String> {
        self.rejected.retain(|_, r| r.until > now);
        let mut out = HashMap::new();
        for (node, r) in &self.rejected {
            out.insert(
                node.clone(),
                format!(
                    "rejected by an operator ({}); not proposed again until {}",
                    r.reason,
                    r.until.format("%H:%M:%S UTC")
                ),
            );
        }
        for d in self.pending.values() {
            let why = match (d.policy, self.paused_by(&d.command)) {
                (_, Some(scope)) => format!(
                    "in decision #{} ({}), paused by scope {scope}",
                    d.id, d.command.method
                ),
                (Policy::Manual, None) => format!(
                    "in decision #{} ({}), waiting for approval",
                    d.id, d.command.method
                ),
                (Policy::Auto, None) => format!(
                    "in decision #{} ({}), validated and run at {}",
                    d.id,
                    d.command.method,
                    runs_at(d).format("%H:%M:%S UTC")
                ),
            };
            for n in d.command.nodeclaims() {
                out.insert(n.to_string(), why.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_source_wins() {
        let mut pool = NodePool::unconstrained("gpu");
        let table = PolicyTable::default();
        assert_eq!(
            table.resolve(Some(&pool), "gpu", Reason::Underutilized),
            Policy::Manual
        );
        assert_eq!(
            table.resolve(Some(&pool), "gpu", Reason::Empty),
            Policy::Auto
        );

        pool.metadata.annotations = Some(
            [(
                APPROVAL_ANNOTATION.to_string(),
                "auto, Drifted=manual".to_string(),
            )]
            .into(),
        );
        assert_eq!(
            table.resolve(Some(&pool), "gpu", Reason::Underutilized),
            Policy::Auto
        );
        assert_eq!(
            table.resolve(Some(&pool), "gpu", Reason::Drifted),
            Policy::Manual
        );

        let table = PolicyTable {
            rules: vec![
                Rule::parse("manual").unwrap(),
                Rule::parse("gpu/Drifted=auto").unwrap(),
            ],
            ..Default::default()
        };
        // A flag for pool and reason beats the annotation's reason.
        assert_eq!(
            table.resolve(Some(&pool), "gpu", Reason::Drifted),
            Policy::Auto
        );
        // The annotation for all reasons beats a bare flag.
        assert_eq!(
            table.resolve(Some(&pool), "gpu", Reason::Empty),
            Policy::Auto
        );
        // Another pool: the bare flag.
        assert_eq!(table.resolve(None, "web", Reason::Empty), Policy::Manual);
    }
}
