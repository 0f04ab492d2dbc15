//! Pending pods: every pod without a node, why it waits (the scheduler's reason from the
//! last provisioning round), and the NodeClaim or node it is nominated to.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use serde_json::json;

use super::Details;
use super::details::{Builder, condition};
use crate::control::controller::Snapshot;
use crate::engine::pod::Pod;
use crate::engine::state::StateNode;
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::widgets::table::{Cell, Column, Row, Source, Tone, col};

/// Kept longest: the pod and why it waits (the operator's question, with room for the
/// scheduler's words, whose point may come late); the nomination goes first (it is in
/// the reason's words too), then the requests.
pub const COLUMNS: &[Column] = &[
    col("POD", Constraint::Length(40)).keep(9).shrink(20),
    col("CPU", Constraint::Length(6)).keep(4).shrink(5),
    col("MEMORY", Constraint::Length(7)).keep(4).shrink(6),
    col("AGE", Constraint::Length(6)).keep(6).shrink(5),
    col("NOMINATED TO", Constraint::Length(28)).keep(1),
    col("WHY PENDING", Constraint::Min(60)).keep(10).shrink(51),
];

/// Pods waiting for a node.
pub fn is_pending(p: &Pod) -> bool {
    p.node_name.is_none() && !p.is_terminal() && p.deleting.is_none()
}

/// Nodes by NodeClaim name and node name: where a nomination points.
pub struct Nominees<'a>(HashMap<&'a str, &'a StateNode>);

impl<'a> Nominees<'a> {
    pub fn of(s: &'a Snapshot) -> Self {
        let mut m = HashMap::with_capacity(s.state.nodes.len() * 2);
        for n in &s.state.nodes {
            m.insert(n.nodeclaim.as_str(), n);
            m.insert(n.name.as_str(), n);
        }
        Nominees(m)
    }
}

/// Why the pod waits, in the scheduler's words where there are some.
pub fn reason(s: &Snapshot, nominees: &Nominees, p: &Pod) -> (String, Tone) {
    if let Some(node) = s.nominated.get(&p.key) {
        let what = match nominees.0.get(node.as_str()) {
            Some(n) if !n.registered => "its NodeClaim is launching",
            Some(n) if !n.initialized => "its node is registering",
            Some(_) => "waiting for the kube-scheduler to bind it",
            None => "waiting for the NodeClaim to appear",
        };
        return (format!("nominated: {what}"), Tone::Ok);
    }
    if let Some(why) = s.unschedulable.get(&p.key) {
        return (why.clone(), Tone::Bad);
    }
    if !p.unschedulable {
        return ("waiting for the kube-scheduler".into(), Tone::Muted);
    }
    (
        "unschedulable on existing nodes; in the provisioning batch".into(),
        Tone::Warn,
    )
}

/// The cell of pod `p` in one column (`key` its name); a row is its cells column by
/// column, so a sort can build one column alone.
fn cell(
    s: &Snapshot,
    nominees: &Nominees,
    p: &Pod,
    key: &str,
    column: usize,
    now: DateTime<Utc>,
) -> Cell {
    match column {
        0 => Cell::text(key),
        1 => Cell::num(format::cores(p.requests.cpu), p.requests.cpu as f64),
        2 => Cell::num(format::bytes(p.requests.memory), p.requests.memory as f64),
        3 => {
            let age = now - p.created;
            Cell::num(format::age(age), age.num_seconds() as f64)
        }
        4 => Cell::text(
            s.nominated
                .get(&p.key)
                .cloned()
                .unwrap_or_else(|| "-".into()),
        ),
        _ => {
            let (why, tone) = reason(s, nominees, p);
            Cell::text(why).tone(tone)
        }
    }
}

fn row(s: &Snapshot, nominees: &Nominees, p: &Pod, key: String, now: DateTime<Utc>) -> Row {
    let cells = (0..COLUMNS.len())
        .map(|c| cell(s, nominees, p, &key, c, now))
        .collect();
    Row::new(key, cells)
}

/// Every row, formatted (what the table shows, row for row, when it formats on demand
/// through [`PendingRows`]).
pub fn rows(s: &Snapshot, now: DateTime<Utc>) -> Vec<Row> {
    let nominees = Nominees::of(s);
    s.state
        .pods
        .iter()
        .filter(|p| is_pending(p))
        .map(|p| row(s, &nominees, p, p.key.to_string(), now))
        .collect()
}

/// The Pending table's rows of one snapshot, formatted on demand: a new snapshot costs
/// finding the pending pods and their names; reasons and text only for the rows drawn
/// or sorted by.
pub struct PendingRows {
    snapshot: Arc<Snapshot>,
    /// Positions in `state.pods` of the pending pods, in that order.
    pods: Vec<usize>,
    now: DateTime<Utc>,
}

impl PendingRows {
    pub fn new(snapshot: Arc<Snapshot>, now: DateTime<Utc>) -> PendingRows {
        PendingRows {
            pods: snapshot
                .state
                .pods
                .iter()
                .enumerate()
                .filter(|(_, p)| is_pending(p))
                .map(|(i, _)| i)
                .collect(),
            snapshot,
            now,
        }
    }
}

impl Source for PendingRows {
    fn ids(&self) -> Vec<String> {
        self.pods
            .iter()
            .map(|&i| self.snapshot.state.pods[i].key.to_string())
            .collect()
    }

    fn rows(&self, at: &[usize]) -> Vec<Row> {
        let s = &self.snapshot;
        let nominees = Nominees::of(s);
        at.iter()
            .map(|&i| {
                let p = &s.state.pods[self.pods[i]];
                row(s, &nominees, p, p.key.to_string(), self.now)
            })
            .collect()
    }

    fn column(&self, column: usize) -> Option<Vec<Cell>> {
        let s = &self.snapshot;
        let nominees = Nominees::of(s);
        Some(
            self.pods
                .iter()
                .map(|&i| {
                    let p = &s.state.pods[i];
                    let key = if column == 0 {
                        p.key.to_string()
                    } else {
                        String::new()
                    };
                    cell(s, &nominees, p, &key, column, self.now)
                })
                .collect(),
        )
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let styles = app.theme.styles.clone();
    app.tables
        .pending
        .render(frame, area, "Pending pods", COLUMNS, &styles, true);
}

pub fn details(s: &Snapshot, id: &str, _now: DateTime<Utc>) -> Option<Details> {
    let p = s.state.pods.iter().find(|p| p.key.to_string() == id)?;
    let mut b = Builder::default();
    let (why, tone) = reason(s, &Nominees::of(s), p);
    b.heading("Conditions");
    condition(
        &mut b,
        "PodScheduled",
        false,
        if p.unschedulable { "Unschedulable" } else { "" },
    );
    b.heading("Why pending");
    b.line(tone, why);
    if let Some(n) = s.nominated.get(&p.key) {
        b.line(Tone::Normal, format!("nominated to {n}"));
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": p.key.namespace,
            "name": p.key.name,
            "labels": p.labels,
            "annotations": p.annotations,
            "ownerReferences": p.owner.as_ref().map(|o| vec![json!({"kind": o.kind, "name": o.name})]),
            "creationTimestamp": p.created.to_rfc3339(),
        },
        "spec": {
            "nodeSelector": p.node_selector,
            "priorityClassName": if p.priority_class_name.is_empty() { None } else { Some(&p.priority_class_name) },
            "tolerations": p.tolerations.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            "resources": {"requests": p.requests.to_map()},
        },
        "status": {"phase": "Pending"},
    });
    b.heading("Pod");
    b.yaml(&object);
    Some(b.finish(format!("Pod {id}")))
}
