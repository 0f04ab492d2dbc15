//! Operator actions: approve, approve all, reject, pause and resume. Every one passes
//! through `App::dangerous`, the one gate that refuses them in read-only mode and asks
//! for confirmation where configured (approve-all always asks; reject and pause-all ask
//! by default). The confirmation of a reject or a pause takes an optional reason.

use super::{App, Confirm, Effect, LineInput, Mode};
use crate::engine::approval::Scope;
use crate::tui::console::Request;
use crate::tui::keymap::Action;
use crate::tui::views::{self, View};

impl App {
    /// The one gate for actions that change the cluster: read-only mode refuses them
    /// (visibly), configured actions ask for confirmation, the rest go out at once.
    pub(super) fn dangerous(
        &mut self,
        action: Action,
        request: Request,
        prompt: String,
    ) -> Vec<Effect> {
        debug_assert!(action.dangerous());
        if self.source.read_only {
            self.warn(format!(
                "read-only: {} refused ({} is attached without write access)",
                action.name(),
                self.source.label
            ));
            return Vec::new();
        }
        // Approving many at once always asks, whatever the config says.
        if self.settings.confirm.contains(&action) || action == Action::ApproveAll {
            let reason = request.takes_reason().then(LineInput::default);
            self.mode = Mode::Confirm(Confirm {
                prompt,
                request,
                reason,
            });
            return Vec::new();
        }
        self.send(request)
    }

    pub(crate) fn send(&mut self, request: Request) -> Vec<Effect> {
        self.in_flight += 1;
        vec![Effect::Request(request)]
    }

    /// The decision the cursor is on: a decision row, or the decision holding the
    /// selected node.
    pub fn selected_decision(&self) -> Option<u64> {
        let id = self.tables.get(self.view)?.selected_id()?;
        match self.view {
            View::Disruption => views::disruption::decision_id(id),
            View::Nodes => self
                .snapshot
                .pending
                .iter()
                .find(|d| d.command.nodeclaims().any(|n| n == id))
                .map(|d| d.id),
            _ => None,
        }
    }

    pub(super) fn selected_pool(&self) -> Option<String> {
        let row = self.tables.get(self.view)?.selected_row()?;
        match self.view {
            View::NodePools => Some(row.id.clone()),
            View::Nodes => self
                .snapshot
                .state
                .node(&row.id)
                .map(|n| n.nodepool.clone()),
            View::Disruption => {
                let id = views::disruption::decision_id(&row.id)?;
                let d = self.snapshot.pending.iter().find(|d| d.id == id)?;
                d.command.candidates.first().map(|c| c.nodepool.clone())
            }
            _ => None,
        }
    }

    pub(super) fn approve_selected(&mut self) -> Vec<Effect> {
        let Some(id) = self.selected_decision() else {
            self.warn("no decision selected: pick one in the Disruption view (5)".into());
            return Vec::new();
        };
        let nodes = self.decision_nodes(id);
        self.dangerous(
            Action::Approve,
            Request::Approve { ids: vec![id] },
            format!("Approve decision #{id}, disrupting {nodes}?"),
        )
    }

    pub(super) fn approve_visible(&mut self) -> Vec<Effect> {
        if self.view != View::Disruption {
            self.warn("approve-all works on the decisions shown in the Disruption view (5)".into());
            return Vec::new();
        }
        let ids: Vec<u64> = self
            .tables
            .decisions
            .visible()
            .filter_map(|r| views::disruption::decision_id(&r.id))
            .collect();
        if ids.is_empty() {
            self.warn("no decisions to approve".into());
            return Vec::new();
        }
        // Name what it touches: the pools, and the nodes (the first few, then a count).
        let candidates: Vec<_> = ids
            .iter()
            .filter_map(|id| self.snapshot.pending.iter().find(|d| d.id == *id))
            .flat_map(|d| d.command.candidates.iter())
            .collect();
        let nodes = candidates.len();
        let mut pools: Vec<&str> = candidates.iter().map(|c| c.nodepool.as_str()).collect();
        pools.sort_unstable();
        pools.dedup();
        const NAMED: usize = 6;
        let mut names: Vec<&str> = candidates
            .iter()
            .take(NAMED)
            .map(|c| c.node.as_str())
            .collect();
        let more = format!("+{} more", nodes.saturating_sub(NAMED));
        if nodes > NAMED {
            names.push(&more);
        }
        let prompt = format!(
            "Approve all {} visible decision{}, disrupting {nodes} node{} of nodepool{} {}: {}?",
            ids.len(),
            if ids.len() == 1 { "" } else { "s" },
            if nodes == 1 { "" } else { "s" },
            if pools.len() == 1 { "" } else { "s" },
            pools.join(", "),
            names.join(", "),
        );
        let queue = views::queue::Queue::build(&self.snapshot);
        let over = ids.iter().filter(|id| !queue.fits(**id)).count();
        let prompt = if over > 0 {
            format!("{prompt} ({over} would not run now: budget or pause)")
        } else {
            prompt
        };
        self.dangerous(Action::ApproveAll, Request::Approve { ids }, prompt)
    }

    pub(super) fn reject_selected(&mut self) -> Vec<Effect> {
        let Some(id) = self.selected_decision() else {
            self.warn("no decision selected: pick one in the Disruption view (5)".into());
            return Vec::new();
        };
        let nodes = self.decision_nodes(id);
        let reason = format!("rejected from the console by {}", self.source.actor);
        self.dangerous(
            Action::Reject,
            Request::Reject { id, reason },
            format!("Reject decision #{id} ({nodes})?"),
        )
    }

    pub(super) fn toggle_pause(
        &mut self,
        scope: Scope,
        paused: bool,
        action: Action,
    ) -> Vec<Effect> {
        let (request, verb) = if paused {
            (Request::Resume(scope.clone()), "Resume")
        } else {
            (
                Request::Pause {
                    scope: scope.clone(),
                    reason: None,
                },
                "Pause",
            )
        };
        self.dangerous(action, request, format!("{verb} disruption of {scope}?"))
    }

    pub(super) fn decision_nodes(&self, id: u64) -> String {
        match self.snapshot.pending.iter().find(|d| d.id == id) {
            Some(d) => {
                let names: Vec<&str> = d.command.node_names().collect();
                match names.len() {
                    1 => format!("node {}", names[0]),
                    n => format!("{n} nodes: {}", names.join(", ")),
                }
            }
            None => "nodes no longer pending".into(),
        }
    }
}
