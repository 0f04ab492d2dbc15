//! Where a node stands with disruption, in one place for every pane: the commands in
//! flight and the decisions waiting in this snapshot first (they are now), then the last
//! disruption pass's verdict (which may be up to a poll older). The Nodes table, its
//! explanation, the Blocked pane, the Decisions table and the details popups all read
//! it, so no two of them can disagree within one snapshot: a node whose decision was
//! approved since the pass reads "draining" everywhere, never "waiting for approval" in
//! one pane and "draining" in another.

use std::cell::OnceCell;
use std::collections::HashMap;

use crate::control::approvals::Decision;
use crate::control::controller::Snapshot;
use crate::control::journal::Entry;
use crate::control::orchestration::{Execution, Phase};
use crate::engine::approval::Policy;
use crate::engine::disruption::{Block, Outcome};
use crate::tui::views::queue::Queue;
use crate::tui::widgets::table::Tone;

/// What holds a node now, from the snapshot's decisions.
#[derive(Clone, Copy, Debug)]
pub enum Role<'a> {
    Running(&'a Execution),
    Pending(&'a Decision),
}

/// Nodes in a command in flight or a waiting decision: one pass over the decisions, so
/// building every row does not rescan them per node.
/// The budget queue is built only when a waiting decision's state is asked for: it walks
/// every node, and most callers (a Nodes row's short state) never need it.
pub struct Involvement<'a> {
    roles: HashMap<&'a str, Role<'a>>,
    snapshot: &'a Snapshot,
    queue: OnceCell<Queue>,
}

impl<'a> Involvement<'a> {
    pub fn of(s: &'a Snapshot) -> Involvement<'a> {
        let mut m = HashMap::new();
        // Commands in flight first: they win over waiting decisions.
        for e in &s.running {
            for c in e.command.nodeclaims() {
                m.entry(c).or_insert(Role::Running(e));
            }
        }
        for d in &s.pending {
            for c in d.command.nodeclaims() {
                m.entry(c).or_insert(Role::Pending(d));
            }
        }
        Involvement {
            roles: m,
            snapshot: s,
            queue: OnceCell::new(),
        }
    }

    /// The budget queue of this snapshot's waiting decisions: whether each would run.
    pub fn queue(&self) -> &Queue {
        self.queue.get_or_init(|| Queue::build(self.snapshot))
    }

    pub fn get(&self, nodeclaim: &str) -> Option<Role<'a>> {
        self.roles.get(nodeclaim).copied()
    }
}

/// What a command in flight is doing, as the Decisions table says it.
pub fn phase(e: &Execution) -> String {
    match &e.phase {
        Phase::WaitingForReplacements { claims } => format!("launching {}", claims.join(",")),
        Phase::Draining { .. } => "draining".into(),
        Phase::Deleted => "done".into(),
        Phase::Failed { reason } => format!("failed: {reason}"),
    }
}

/// The short form for the Nodes table's STATE column ("draining #3", "awaiting #2").
pub fn short(s: &Snapshot, role: Role) -> (String, Tone) {
    match role {
        Role::Running(e) => {
            let what = match &e.phase {
                Phase::WaitingForReplacements { .. } => "disrupting",
                Phase::Draining { .. } => "draining",
                Phase::Deleted => "deleted",
                Phase::Failed { .. } => "disruption failed",
            };
            (format!("{what} #{}", e.id), Tone::Bad)
        }
        Role::Pending(d) => {
            let what = if s.pauses.iter().any(|sc| sc.covers(&d.command)) {
                "paused"
            } else if d.policy == Policy::Auto {
                "queued"
            } else {
                "awaiting"
            };
            (format!("{what} #{}", d.id), Tone::Warn)
        }
    }
}

/// How a node's standing reads in the Blocked pane and the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// In a command in flight.
    Disrupting,
    /// In a decision waiting for approval, validation or a pause to lift.
    Waiting,
    /// The pass chose it or found it eligible.
    Candidate,
    /// The pass (or an operator's rejection) keeps it.
    Blocked,
    /// No pass has looked at it yet.
    Unseen,
}

/// Where the node stands, in full words, with its colour and kind.
pub fn standing(s: &Snapshot, inv: &Involvement, nodeclaim: &str) -> (String, Tone, Kind) {
    match inv.get(nodeclaim) {
        Some(Role::Running(e)) => (
            format!("in command #{} ({}): {}", e.id, e.command.method, phase(e)),
            Tone::Bad,
            Kind::Disrupting,
        ),
        Some(Role::Pending(d)) => {
            let (state, tone) = inv.queue().state(d);
            (
                format!("in decision #{} ({}): {state}", d.id, d.command.method),
                tone,
                Kind::Waiting,
            )
        }
        None => match s.outcomes.get(nodeclaim) {
            // The pass saw it in a decision that is no longer pending nor running: say
            // what became of it rather than repeat the pass's words.
            Some(Outcome::Blocked(Block::Held { why })) if why.starts_with("in decision #") => {
                match last_entry(s, nodeclaim) {
                    Some(e) => (
                        format!(
                            "decision #{} {} at {}; the next disruption pass looks again",
                            e.decision.unwrap_or_default(),
                            super::disruption::verb(e).0,
                            e.at.format("%H:%M:%S")
                        ),
                        Tone::Muted,
                        Kind::Blocked,
                    ),
                    None => (
                        "its decision is gone; the next disruption pass looks again".into(),
                        Tone::Muted,
                        Kind::Blocked,
                    ),
                }
            }
            Some(o @ Outcome::Chosen { .. }) => (o.to_string(), Tone::Warn, Kind::Candidate),
            Some(o @ Outcome::Eligible { .. }) => (o.to_string(), Tone::Accent, Kind::Candidate),
            Some(o @ Outcome::Blocked(_)) => (o.to_string(), Tone::Muted, Kind::Blocked),
            None => (
                "not looked at by a disruption pass yet".into(),
                Tone::Muted,
                Kind::Unseen,
            ),
        },
    }
}

/// The newest history entry about a decision over this node.
fn last_entry<'a>(s: &'a Snapshot, nodeclaim: &str) -> Option<&'a Entry> {
    s.history
        .iter()
        .find(|e| e.decision.is_some() && e.nodeclaims.iter().any(|c| c == nodeclaim))
}
