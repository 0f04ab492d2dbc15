//! Nodes: one row per NodeClaim in the style of eks-node-viewer (instance type, zone,
//! capacity type, price, age, CPU and memory request bars, pods / max pods), its
//! lifecycle, and why the disruption pass does or does not touch it. The panel under the
//! table spells out the selected node's explanation in full.

use std::collections::HashMap;

use chrono::TimeDelta;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use serde_json::json;

use super::Details;
use super::details::{Builder, condition};
use crate::control::controller::Snapshot;
use crate::control::orchestration::Phase;
use crate::engine::catalog::CapacityType;
use crate::engine::disruption::Outcome;
use crate::engine::resources::Resources;
use crate::engine::state::StateNode;
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::{BarKind, Cell, Column, Row, Tone, col};

pub const COLUMNS: &[Column] = &[
    col("NODE", Constraint::Length(29)),
    col("STATE", Constraint::Length(14)),
    col("POOL", Constraint::Length(9)),
    col("TYPE", Constraint::Length(11)),
    col("CPU", Constraint::Length(15)),
    col("MEMORY", Constraint::Length(15)),
    col("PODS", Constraint::Length(6)),
    col("PRICE", Constraint::Length(7)),
    col("CAP", Constraint::Length(4)),
    col("ZONE", Constraint::Length(10)),
    col("AGE", Constraint::Length(6)),
    col("DISRUPTION", Constraint::Min(10)),
];

/// Nodes in a command in flight or a waiting decision, with the words for it: one pass
/// over the decisions, so building every row does not rescan them per node.
pub fn involvement(s: &Snapshot) -> HashMap<&str, (String, Tone)> {
    let mut m = HashMap::new();
    // Commands in flight first: they win over waiting decisions (first match wins).
    for e in &s.running {
        let what = match &e.phase {
            Phase::WaitingForReplacements { .. } => "disrupting",
            Phase::Draining { .. } => "draining",
            Phase::Deleted => "deleted",
            Phase::Failed { .. } => "disruption failed",
        };
        for c in e.command.nodeclaims() {
            m.entry(c)
                .or_insert_with(|| (format!("{what} #{}", e.id), Tone::Bad));
        }
    }
    for d in &s.pending {
        for c in d.command.nodeclaims() {
            m.entry(c)
                .or_insert_with(|| (format!("awaiting #{}", d.id), Tone::Warn));
        }
    }
    m
}

/// What a node is doing, in the words of the NodeClaim lifecycle.
pub fn lifecycle(s: &Snapshot, n: &StateNode, workload_pods: usize) -> (String, Tone) {
    lifecycle_in(s, &involvement(s), n, workload_pods)
}

fn lifecycle_in(
    s: &Snapshot,
    involved: &HashMap<&str, (String, Tone)>,
    n: &StateNode,
    workload_pods: usize,
) -> (String, Tone) {
    if n.deleting {
        return if workload_pods > 0 {
            ("draining".into(), Tone::Bad)
        } else {
            ("deleting".into(), Tone::Bad)
        };
    }
    if let Some(v) = involved.get(n.nodeclaim.as_str()) {
        return v.clone();
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
    if drift_of(s, n).is_some() {
        return ("drifted".into(), Tone::Warn);
    }
    if let Some(at) = n.expires_at() {
        let left = at - s.at;
        if left <= TimeDelta::zero() {
            return ("expired".into(), Tone::Warn);
        }
        if left < TimeDelta::days(1) {
            return (format!("expires in {}", format::age(left)), Tone::Warn);
        }
    }
    ("initialized".into(), Tone::Ok)
}

/// Whether the node is drifted, and why when known: one verdict for the table's state and
/// the detail pane's Drifted condition. The engine's order (drift.rs): the Drifted
/// condition of another controller that hashed the NodeClaim (upstream Karpenter) is its
/// whole verdict; else the cloud provider's NodeClass drift; else the last disruption
/// pass's (our own hash or the requirements), with the time it was first seen.
pub fn drift_of(s: &Snapshot, n: &StateNode) -> Option<String> {
    if let Some(verdict) = &n.foreign_drift {
        return verdict.clone();
    }
    if let Some(why) = &n.nodeclass_drift {
        return Some(why.clone());
    }
    let by_pass = matches!(
        s.outcomes.get(&n.nodeclaim),
        Some(Outcome::Chosen { method, .. } | Outcome::Eligible { method, .. })
            if *method == crate::engine::disruption::Method::Drift
    );
    match n.drifted_since {
        Some(t) => Some(format!("since {}", t.format("%H:%M:%S UTC"))),
        None if by_pass => Some(String::new()),
        None => None,
    }
}

/// Per node: requested resources and workload pods (DaemonSet pods count toward the
/// requests, not toward "draining").
fn usage(s: &Snapshot) -> Vec<(Resources, usize, usize)> {
    let by_node = s.state.pods_by_node();
    by_node
        .iter()
        .map(|idx| {
            let mut r = Resources::default();
            let mut workload = 0;
            let mut count = 0;
            for &i in idx {
                let p = &s.state.pods[i];
                if p.is_terminal() {
                    continue;
                }
                r.add(&p.requests);
                count += 1;
                if !p.is_daemonset() && !p.is_static() {
                    workload += 1;
                }
            }
            (r, count, workload)
        })
        .collect()
}

fn capacity(c: CapacityType) -> &'static str {
    match c {
        CapacityType::Spot => "spot",
        CapacityType::OnDemand => "od",
        CapacityType::Reserved => "rsv",
    }
}

pub fn rows(s: &Snapshot) -> Vec<Row> {
    let usage = usage(s);
    let involved = involvement(s);
    s.state
        .nodes
        .iter()
        .zip(usage)
        .map(|(n, (req, pods, workload))| {
            let (state, tone) = lifecycle_in(s, &involved, n, workload);
            let age = s.at - n.created;
            let (why, why_tone) = match s.outcomes.get(&n.nodeclaim) {
                Some(o @ Outcome::Chosen { .. }) => (o.to_string(), Tone::Warn),
                Some(o @ Outcome::Eligible { .. }) => (o.to_string(), Tone::Accent),
                Some(o) => (o.to_string(), Tone::Muted),
                None => ("-".into(), Tone::Muted),
            };
            Row::new(
                n.nodeclaim.clone(),
                vec![
                    Cell::text(n.name.clone()),
                    Cell::text(state).tone(tone),
                    Cell::text(n.nodepool.clone()),
                    Cell::text(n.instance_type.clone()),
                    Cell::usage(req.cpu, n.allocatable.cpu, format::cores, BarKind::Cpu),
                    Cell::usage(
                        req.memory,
                        n.allocatable.memory,
                        format::bytes,
                        BarKind::Memory,
                    ),
                    Cell::num(format!("{pods}/{}", n.allocatable.pods / 1000), pods as f64),
                    Cell::num(format!("${:.4}", n.price), n.price),
                    Cell::text(capacity(n.capacity_type)),
                    Cell::text(n.zone.clone()),
                    Cell::num(format::age(age), age.num_seconds() as f64),
                    Cell::text(why).tone(why_tone),
                ],
            )
        })
        .collect()
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let [table, explain] =
        Layout::vertical([Constraint::Min(5), Constraint::Length(5)]).areas(area);
    let styles = app.theme.styles.clone();
    app.tables
        .nodes
        .render(frame, table, "Nodes", COLUMNS, &styles, true);
    let selected = app.tables.nodes.selected_row().map(|r| r.id.clone());
    let s = &app.snapshot;
    let lines: Vec<Line> = match selected.as_deref().and_then(|id| s.state.node(id)) {
        None => vec![Line::styled("no node selected", styles.muted)],
        Some(n) => {
            let (state, tone) = lifecycle(s, n, 0);
            let why = s
                .outcomes
                .get(&n.nodeclaim)
                .map(|o| o.to_string())
                .unwrap_or_else(|| "not looked at by a disruption pass yet".into());
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
pub fn details(s: &Snapshot, id: &str) -> Option<Details> {
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
        "labels": n.labels,
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
                format::relative(at - s.at)
            ),
        );
    }
    b.heading("Disruption");
    let (state, tone) = lifecycle(s, n, 0);
    b.line(tone, format!("lifecycle: {state}"));
    match s.outcomes.get(&n.nodeclaim) {
        Some(o) => b.line(Tone::Normal, o.to_string()),
        None => b.line(Tone::Muted, "not looked at by a disruption pass yet"),
    };
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
