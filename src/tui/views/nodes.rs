//! Nodes: one row per NodeClaim in the style of eks-node-viewer (instance type, zone,
//! capacity type, price, age, CPU and memory request bars, pods / max pods), its
//! lifecycle, and why the disruption pass does or does not touch it. The panel under the
//! table spells out the selected node's explanation in full.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use serde_json::json;

use super::Details;
use super::details::{Builder, condition};
use super::standing::{self, Involvement};
use crate::control::controller::Snapshot;
use crate::engine::catalog::CapacityType;
use crate::engine::disruption::drift::PoolDrift;
use crate::engine::resources::Resources;
use crate::engine::state::StateNode;
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::{BarKind, Cell, Column, Row, Source, Tone, col};

/// Kept longest: the node, what it is doing and why the disruption pass does or does
/// not touch it; then its age, zone and state of the art (type, pool); the request bars,
/// pods and capacity type give way first.
pub const COLUMNS: &[Column] = &[
    col("NODE", Constraint::Length(29)).keep(9).shrink(18),
    col("STATE", Constraint::Length(14)).keep(8).shrink(11),
    col("POOL", Constraint::Length(9)).keep(5).shrink(7),
    col("TYPE", Constraint::Length(11)).keep(5).shrink(9),
    col("CPU", Constraint::Length(15)).keep(3).shrink(10),
    col("MEMORY", Constraint::Length(15)).keep(2).shrink(10),
    col("PODS", Constraint::Length(6)).keep(2).shrink(5),
    col("PRICE", Constraint::Length(7)).keep(4),
    col("CAP", Constraint::Length(4)).keep(1),
    col("ZONE", Constraint::Length(10)).keep(6),
    col("AGE", Constraint::Length(6)).keep(7).shrink(5),
    col("DISRUPTION", Constraint::Min(30)).keep(10).shrink(24),
];

/// What a node is doing, in the words of the NodeClaim lifecycle, at `now`.
pub fn lifecycle(
    s: &Snapshot,
    n: &StateNode,
    workload_pods: usize,
    now: DateTime<Utc>,
) -> (String, Tone) {
    lifecycle_in(
        s,
        &Involvement::of(s),
        &Drifts::of(s),
        n,
        workload_pods,
        now,
    )
}

fn lifecycle_in(
    s: &Snapshot,
    involved: &Involvement,
    drifts: &Drifts,
    n: &StateNode,
    workload_pods: usize,
    now: DateTime<Utc>,
) -> (String, Tone) {
    if n.deleting {
        return if workload_pods > 0 {
            ("draining".into(), Tone::Bad)
        } else {
            ("deleting".into(), Tone::Bad)
        };
    }
    if let Some(role) = involved.get(&n.nodeclaim) {
        return standing::short(s, role);
    }
    if !n.registered {
        return ("launching".into(), Tone::Muted);
    }
    if !n.ready {
        return ("not ready".into(), Tone::Bad);
    }
    if !n.initialized {
        return ("registered".into(), Tone::Muted);
    }
    if drifts.verdict(n).is_some() {
        return ("drifted".into(), Tone::Warn);
    }
    if let Some(at) = n.expires_at() {
        let left = at - now;
        if left <= TimeDelta::zero() {
            return ("expired".into(), Tone::Warn);
        }
        if left < TimeDelta::days(1) {
            return (format!("expires in {}", format::age(left)), Tone::Warn);
        }
    }
    ("initialized".into(), Tone::Ok)
}

/// Drift verdicts, judged as the disruption pass judges them (engine
/// `disruption::drift`), against each pool as it is in this snapshot: the recorded
/// verdict of another controller that hashed the NodeClaim, the NodeClass drift, the
/// NodePool template hash (NodePoolDrifted) or the requirements (RequirementsDrifted).
/// A template change shows at once, with its reason, not only after the next pass.
pub struct Drifts<'a> {
    pools: HashMap<&'a str, PoolDrift>,
}

impl<'a> Drifts<'a> {
    pub fn of(s: &'a Snapshot) -> Drifts<'a> {
        Drifts {
            pools: s
                .state
                .nodepools
                .iter()
                .map(|(name, p)| (name.as_str(), PoolDrift::new(p)))
                .collect(),
        }
    }

    /// Whether the node is drifted and why ("NodePoolDrifted, since 09:00:40 UTC"): one
    /// verdict for the table's state and the detail pane's Drifted condition.
    pub fn verdict(&self, n: &StateNode) -> Option<String> {
        let reason = match self.pools.get(n.nodepool.as_str()) {
            Some(pool) => pool.of(n).map(|r| r.to_string()),
            // Without its pool only what the node carries can tell.
            None => match &n.foreign_drift {
                Some(verdict) => verdict.clone(),
                None => n.nodeclass_drift.clone(),
            },
        }?;
        Some(match n.drifted_since {
            Some(t) => format!("{reason}, since {}", t.format("%H:%M:%S UTC")),
            None => reason,
        })
    }
}

/// Whether the node is drifted, and why (see [`Drifts`]).
pub fn drift_of(s: &Snapshot, n: &StateNode) -> Option<String> {
    Drifts::of(s).verdict(n)
}

/// Per node: requested resources and workload pods (DaemonSet pods count toward the
/// requests, not toward "draining").
///
/// One fold over the pods (no list per node): it runs for every new snapshot.
fn usage(s: &Snapshot) -> Vec<(Resources, usize, usize)> {
    let mut out = vec![(Resources::default(), 0, 0); s.state.nodes.len()];
    for (p, &n) in s.state.pods.iter().zip(&s.state.pod_nodes()) {
        let Some((r, count, workload)) = out.get_mut(n as usize) else {
            continue;
        };
        if p.is_terminal() {
            continue;
        }
        r.add(&p.requests);
        *count += 1;
        if !p.is_daemonset() && !p.is_static() {
            *workload += 1;
        }
    }
    out
}

fn capacity(c: CapacityType) -> &'static str {
    match c {
        CapacityType::Spot => "spot",
        CapacityType::OnDemand => "od",
        CapacityType::Reserved => "rsv",
    }
}

/// What every row of one snapshot shares: who is in a decision or command, the pools'
/// drift judges.
struct Context<'a> {
    involved: Involvement<'a>,
    drifts: Drifts<'a>,
}

impl<'a> Context<'a> {
    fn of(s: &'a Snapshot) -> Context<'a> {
        Context {
            involved: Involvement::of(s),
            drifts: Drifts::of(s),
        }
    }
}

/// The cell of node `i` (in `s.state.nodes`) in one column, `usage` its requests and pod
/// counts. A row is its cells column by column, so a sort can build one column alone.
fn cell(
    s: &Snapshot,
    cx: &Context,
    usage: &(Resources, usize, usize),
    i: usize,
    column: usize,
    now: DateTime<Utc>,
) -> Cell {
    let n = &s.state.nodes[i];
    let (req, pods, workload) = usage;
    match column {
        0 => Cell::text(n.name.clone()),
        1 => {
            let (state, tone) = lifecycle_in(s, &cx.involved, &cx.drifts, n, *workload, now);
            Cell::text(state).tone(tone)
        }
        2 => Cell::text(n.nodepool.clone()),
        3 => Cell::text(n.instance_type.clone()),
        4 => Cell::usage(req.cpu, n.allocatable.cpu, format::cores, BarKind::Cpu),
        5 => Cell::usage(
            req.memory,
            n.allocatable.memory,
            format::bytes,
            BarKind::Memory,
        ),
        6 => Cell::num(
            format!("{pods}/{}", n.allocatable.pods / 1000),
            *pods as f64,
        ),
        7 => Cell::num(format!("${:.4}", n.price), n.price),
        8 => Cell::text(capacity(n.capacity_type)),
        9 => Cell::text(n.zone.clone()),
        10 => {
            let age = now - n.created;
            Cell::num(format::age(age), age.num_seconds() as f64)
        }
        _ => {
            let (why, why_tone, kind) = standing::standing(s, &cx.involved, &n.nodeclaim);
            let why = if kind == standing::Kind::Unseen {
                "-".to_string()
            } else {
                why
            };
            Cell::text(why).tone(why_tone)
        }
    }
}

fn row(
    s: &Snapshot,
    cx: &Context,
    usage: &(Resources, usize, usize),
    i: usize,
    now: DateTime<Utc>,
) -> Row {
    Row::new(
        s.state.nodes[i].nodeclaim.clone(),
        (0..COLUMNS.len())
            .map(|c| cell(s, cx, usage, i, c, now))
            .collect(),
    )
}

/// Every row, formatted (what the table shows, row for row, when it formats on demand
/// through [`NodeRows`]).
pub fn rows(s: &Snapshot, now: DateTime<Utc>) -> Vec<Row> {
    let usage = usage(s);
    let cx = Context::of(s);
    usage
        .iter()
        .enumerate()
        .map(|(i, u)| row(s, &cx, u, i, now))
        .collect()
}

/// The Nodes table's rows of one snapshot, formatted on demand: a new snapshot costs
/// the ids and the per-node requests (one pass over the pods); the rest (lifecycle,
/// drift verdicts, explanations, text) only for the rows drawn or sorted by.
pub struct NodeRows {
    snapshot: Arc<Snapshot>,
    usage: Vec<(Resources, usize, usize)>,
    now: DateTime<Utc>,
}

impl NodeRows {
    pub fn new(snapshot: Arc<Snapshot>, now: DateTime<Utc>) -> NodeRows {
        NodeRows {
            usage: usage(&snapshot),
            snapshot,
            now,
        }
    }
}

impl Source for NodeRows {
    fn ids(&self) -> Vec<String> {
        self.snapshot
            .state
            .nodes
            .iter()
            .map(|n| n.nodeclaim.clone())
            .collect()
    }

    fn rows(&self, at: &[usize]) -> Vec<Row> {
        let s = &self.snapshot;
        let cx = Context::of(s);
        at.iter()
            .map(|&i| row(s, &cx, &self.usage[i], i, self.now))
            .collect()
    }

    fn column(&self, column: usize) -> Option<Vec<Cell>> {
        let s = &self.snapshot;
        let cx = Context::of(s);
        Some(
            self.usage
                .iter()
                .enumerate()
                .map(|(i, u)| cell(s, &cx, u, i, column, self.now))
                .collect(),
        )
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let [table, explain] =
        Layout::vertical([Constraint::Min(5), Constraint::Length(5)]).areas(area);
    let styles = app.theme.styles.clone();
    app.tables
        .nodes
        .render(frame, table, "Nodes", COLUMNS, &styles, true);
    let selected = app.tables.nodes.selected_id().map(str::to_string);
    let now = app.now();
    let s = &app.snapshot;
    let lines: Vec<Line> = match selected.as_deref().and_then(|id| s.state.node(id)) {
        None => vec![Line::styled("no node selected", styles.muted)],
        Some(n) => {
            let (inv, drifts) = (Involvement::of(s), Drifts::of(s));
            let (mut state, tone) = lifecycle_in(s, &inv, &drifts, n, 0, now);
            if let Some(why) = drifts.verdict(n) {
                state = format!("{state} ({why})");
            }
            let (why, _, _) = standing::standing(s, &inv, &n.nodeclaim);
            vec![
                Line::from(vec![
                    Span::styled(format!("{} ", n.name), styles.title),
                    Span::styled(format!("({}) ", n.nodeclaim), styles.muted),
                    Span::styled(state, tone.style(&styles)),
                    Span::styled(
                        format!(
                            "  {} {} {}  {}",
                            n.instance_type,
                            n.zone,
                            n.capacity_type.as_str(),
                            format::per_hour(n.price)
                        ),
                        styles.muted,
                    ),
                ]),
                Line::from(vec![Span::styled("why: ", styles.muted), Span::raw(why)]),
            ]
        }
    };
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(panel(
            "Disruption explanation",
            None,
            &styles,
        )),
        explain,
    );
}

/// The node as its NodeClaim, its conditions, its pods and the explanation.
pub fn details(s: &Snapshot, id: &str, now: DateTime<Utc>) -> Option<Details> {
    let n = s.state.node(id)?;
    let mut b = Builder::default();
    let taints: Vec<_> = n.taints.iter().collect();
    let mut status = json!({
        "nodeName": if n.registered { Some(&n.name) } else { None },
        "capacity": n.allocatable.to_map(),
        "allocatable": n.allocatable.to_map(),
    });
    if let Some(t) = n.last_pod_event {
        status["lastPodEventTime"] = json!(t.to_rfc3339());
    }
    let mut metadata = json!({
        "name": n.nodeclaim,
        "labels": &*n.labels,
        "annotations": n.annotations,
        "creationTimestamp": n.created.to_rfc3339(),
    });
    if n.deleting {
        metadata["deletionTimestamp"] = json!("(set)");
    }
    let object = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": metadata,
        "spec": {
            "taints": taints,
            "expireAfter": n
                .expire_after
                .and_then(|d| d.to_std().ok())
                .map(crate::api::duration::format_go)
                .unwrap_or_else(|| "Never".into()),
        },
        "status": status,
    });
    b.heading("Conditions");
    condition(
        &mut b,
        "Launched",
        true,
        &format!("{} in {}", n.instance_type, n.zone),
    );
    condition(&mut b, "Registered", n.registered, "");
    condition(&mut b, "Initialized", n.initialized, "");
    condition(&mut b, "Ready", n.ready, "");
    for f in &n.faults {
        let at = f.repair_at();
        b.line(
            Tone::Warn,
            format!(
                "unhealthy: {f}; repair due {} ({})",
                at.format("%H:%M:%S UTC"),
                format::relative(at - now)
            ),
        );
    }
    let drift = drift_of(s, n);
    condition(
        &mut b,
        "Drifted",
        drift.is_some(),
        drift.as_deref().unwrap_or_default(),
    );
    if let Some(at) = n.expires_at() {
        b.line(
            Tone::Muted,
            format!(
                "expires at {} ({})",
                at.format("%Y-%m-%d %H:%M:%S UTC"),
                format::relative(at - now)
            ),
        );
    }
    b.heading("Disruption");
    let (state, tone) = lifecycle(s, n, 0, now);
    b.line(tone, format!("lifecycle: {state}"));
    let (why, why_tone, _) = standing::standing(s, &Involvement::of(s), &n.nodeclaim);
    b.line(why_tone, why);
    let pods: Vec<&crate::engine::pod::Pod> = s
        .state
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
        .collect();
    b.heading(&format!("Pods ({})", pods.len()));
    for p in pods {
        b.line(
            Tone::Normal,
            format!(
                "{:<48} cpu {:>6}  memory {:>7}{}",
                p.key.to_string(),
                format::cores(p.requests.cpu),
                format::bytes(p.requests.memory),
                if p.do_not_disrupt().is_some() {
                    "  do-not-disrupt"
                } else {
                    ""
                }
            ),
        );
    }
    b.heading("NodeClaim");
    b.yaml(&object);
    Some(b.finish(format!("NodeClaim {} / Node {}", n.nodeclaim, n.name)))
}
