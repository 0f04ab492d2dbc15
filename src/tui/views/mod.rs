//! The views, one file each. A list view has columns, builds its rows from a snapshot
//! (once per snapshot, not per frame) and can describe a row in detail; the overview and
//! the help are drawn from precomputed data. `View` lists them in tab order.

pub mod details;
pub mod disruption;
pub mod events;
pub mod help;
pub mod nodepools;
pub mod nodes;
pub mod overview;
pub mod pending;
pub mod queue;
pub mod standing;
pub mod trends;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;

use crate::control::controller::Snapshot;
use crate::tui::app::App;
use crate::tui::keymap::Keymap;
use crate::tui::widgets::table::{Column, Row, Source, Tone};

/// The views, in tab order (keys 1-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum View {
    Overview,
    NodePools,
    Nodes,
    Pending,
    Disruption,
    Events,
    Help,
}

impl View {
    pub const ALL: [View; 7] = [
        View::Overview,
        View::NodePools,
        View::Nodes,
        View::Pending,
        View::Disruption,
        View::Events,
        View::Help,
    ];

    pub fn title(self) -> &'static str {
        match self {
            View::Overview => "Overview",
            View::NodePools => "NodePools",
            View::Nodes => "Nodes",
            View::Pending => "Pending",
            View::Disruption => "Disruption",
            View::Events => "Events",
            View::Help => "Help",
        }
    }

    /// The name `screenshot --view` takes.
    pub fn slug(self) -> &'static str {
        match self {
            View::Overview => "overview",
            View::NodePools => "nodepools",
            View::Nodes => "nodes",
            View::Pending => "pending",
            View::Disruption => "disruption",
            View::Events => "events",
            View::Help => "help",
        }
    }

    pub fn parse(s: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| {
            v.slug() == s.to_ascii_lowercase()
                || (s == "nodeclaims" && *v == View::Nodes)
                || (s == "pods" && *v == View::Pending)
                || (s == "journal" && *v == View::Events)
        })
    }
}

/// A row described in full: shown in a popup over the view.
#[derive(Clone, Debug, PartialEq)]
pub struct Details {
    pub title: String,
    /// Text lines with their colour (headings are Accent).
    pub lines: Vec<(Tone, String)>,
    pub scroll: u16,
    /// The row it describes, so a new snapshot can refresh it while it is open.
    pub row: Option<(View, String)>,
}

/// The columns of a list view.
pub fn columns(view: View) -> &'static [Column] {
    match view {
        View::NodePools => nodepools::COLUMNS,
        View::Nodes => nodes::COLUMNS,
        View::Pending => pending::COLUMNS,
        View::Disruption => disruption::COLUMNS,
        View::Events => events::COLUMNS,
        View::Help => help::COLUMNS,
        View::Overview => &[],
    }
}

/// Whether a view's rows show time (ages, countdowns): rebuilt once a second as the
/// clock moves; the others only when data changes.
pub fn moves_with_time(view: View) -> bool {
    matches!(view, View::Nodes | View::Pending | View::Disruption)
}

/// A list view's rows for one snapshot: built at once (the small views), or formatted
/// on demand (Nodes and Pending, thousands of rows of which a screen shows forty).
pub enum Rows {
    Built(Vec<Row>),
    OnDemand(Arc<dyn Source>),
}

/// The rows of a list view for a snapshot, with ages and countdowns at `now`.
pub fn rows(view: View, s: &Arc<Snapshot>, keymap: &Keymap, now: DateTime<Utc>) -> Rows {
    Rows::Built(match view {
        View::NodePools => nodepools::rows(s),
        View::Nodes => return Rows::OnDemand(Arc::new(nodes::NodeRows::new(Arc::clone(s), now))),
        View::Pending => {
            return Rows::OnDemand(Arc::new(pending::PendingRows::new(Arc::clone(s), now)));
        }
        View::Disruption => disruption::rows(s, now),
        View::Events => events::rows(s),
        View::Help => help::rows(keymap),
        View::Overview => Vec::new(),
    })
}

/// The details of one row, with ages at `now`.
pub fn details(view: View, s: &Snapshot, id: &str, now: DateTime<Utc>) -> Option<Details> {
    match view {
        View::NodePools => nodepools::details(s, id, now),
        View::Nodes => nodes::details(s, id, now),
        View::Pending => pending::details(s, id, now),
        View::Disruption => disruption::details(s, id, now),
        View::Events => events::details(s, id),
        View::Help | View::Overview => None,
    }
}

/// Draws the body of the view shown.
pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    match app.view {
        View::Overview => overview::render(frame, area, app),
        View::NodePools => nodepools::render(frame, area, app),
        View::Nodes => nodes::render(frame, area, app),
        View::Pending => pending::render(frame, area, app),
        View::Disruption => disruption::render(frame, area, app),
        View::Events => events::render(frame, area, app),
        View::Help => help::render(frame, area, app),
    }
}
