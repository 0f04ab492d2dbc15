//! NodePools: weight, limits against what the pool runs, consolidation policy and
//! timers, node count and cost; under the table, the selected pool's disruption budgets:
//! each budget's window (active now, next opening or closing) and what each reason may
//! still disrupt.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Details;
use super::details::Builder;
use crate::api::nodepool::{ConsolidationPolicy, DisruptionReason, NodePool};
use crate::api::quantity::Quantity;
use crate::control::approvals::Scope;
use crate::control::controller::Snapshot;
use crate::engine::disruption::PoolBudgets;
use crate::engine::resources::{Resources, parse_milli};
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::theme::Styles;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::{BarKind, Cell, Column, Row, Tone, col};

pub const COLUMNS: &[Column] = &[
    col("NODEPOOL", Constraint::Length(16)),
    col("WEIGHT", Constraint::Length(6)),
    col("NODES", Constraint::Length(5)),
    col("CPU / LIMIT", Constraint::Length(18)),
    col("MEMORY / LIMIT", Constraint::Length(18)),
    col("POLICY", Constraint::Length(13)),
    col("AFTER", Constraint::Length(6)),
    col("EXPIRE", Constraint::Length(7)),
    col("COST", Constraint::Length(9)),
    col("BUDGETS (allowed now)", Constraint::Min(20)),
    col("STATE", Constraint::Length(10)),
];

/// What a pool's nodes add up to: what its `limits` are checked against (upstream counts
/// the capacity of every NodeClaim of the pool).
pub struct Usage {
    pub nodes: usize,
    pub capacity: Resources,
    pub cost: f64,
}

pub fn usage(s: &Snapshot, pool: &str) -> Usage {
    let mut u = Usage {
        nodes: 0,
        capacity: Resources::default(),
        cost: 0.0,
    };
    for n in s.state.nodes.iter().filter(|n| n.nodepool == pool) {
        u.cost += n.price;
        u.capacity.add(&n.allocatable);
        if !n.deleting {
            u.nodes += 1;
        }
    }
    u
}

fn limit(p: &NodePool, resource: &str) -> Option<i64> {
    p.spec
        .limits
        .get(resource)
        .and_then(|q: &Quantity| parse_milli(&q.to_string()).ok())
}

pub fn policy(p: &NodePool) -> &'static str {
    match p.spec.disruption.consolidation_policy {
        ConsolidationPolicy::WhenEmpty => "WhenEmpty",
        ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenUnderutil",
        ConsolidationPolicy::Balanced => "Balanced",
    }
}

/// "E:1 D:1 U:0": what each budgeted reason may still disrupt.
pub fn allowed_summary(b: Option<&PoolBudgets>) -> String {
    let Some(b) = b else {
        return "-".into();
    };
    DisruptionReason::ALL
        .iter()
        .map(|r| {
            let a = b.allowed(*r);
            let n = if a == usize::MAX {
                "∞".into()
            } else {
                a.to_string()
            };
            format!("{}:{n}", &r.as_str()[..1])
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn rows(s: &Snapshot) -> Vec<Row> {
    s.state
        .nodepools
        .iter()
        .map(|(name, p)| {
            let u = usage(s, name);
            let budgets = s.budgets.iter().find(|b| &b.nodepool == name);
            let paused =
                s.pauses.contains(&Scope::NodePool(name.clone())) || s.pauses.contains(&Scope::All);
            let bar = |used: i64, lim: Option<i64>, kind: BarKind, fmt: fn(i64) -> String| match lim
            {
                Some(l) => Cell::usage(used, l, fmt, kind),
                None => Cell::num(format!("{} / none", fmt(used)), used as f64),
            };
            let blocked = budgets.is_some_and(|b| b.reasons.iter().any(|r| r.allowed == 0));
            Row::new(
                name.clone(),
                vec![
                    Cell::text(name.clone()),
                    Cell::num(
                        p.spec.weight.unwrap_or(0).to_string(),
                        p.spec.weight.unwrap_or(0) as f64,
                    ),
                    Cell::num(u.nodes.to_string(), u.nodes as f64),
                    bar(u.capacity.cpu, limit(p, "cpu"), BarKind::Cpu, format::cores),
                    bar(
                        u.capacity.memory,
                        limit(p, "memory"),
                        BarKind::Memory,
                        format::bytes,
                    ),
                    Cell::text(policy(p)),
                    Cell::text(
                        p.spec
                            .disruption
                            .consolidate_after
                            .as_ref()
                            .map(|d| d.to_string())
                            .unwrap_or_else(|| "0s".into()),
                    ),
                    Cell::text(p.spec.template.spec.expire_after.to_string()),
                    Cell::num(format::per_hour(u.cost), u.cost).tone(Tone::Accent),
                    Cell::text(allowed_summary(budgets)).tone(if blocked {
                        Tone::Warn
                    } else {
                        Tone::Normal
                    }),
                    if paused {
                        Cell::text("paused").tone(Tone::Warn)
                    } else {
                        Cell::text("active").tone(Tone::Ok)
                    },
                ],
            )
        })
        .collect()
}

/// The budget lines of one pool (also used by the details popup).
pub fn budget_lines(s: &Snapshot, b: &PoolBudgets, styles: &Styles) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    lines.push(Line::from(vec![
        Span::styled(format!("{} ", b.nodepool), styles.title),
        Span::styled(
            format!(
                "{} node{} counted, {} disrupting now",
                b.total,
                if b.total == 1 { "" } else { "s" },
                b.disrupting
            ),
            styles.muted,
        ),
    ]));
    for w in &b.windows {
        let reasons = if w.reasons.is_empty() {
            "all reasons".to_string()
        } else {
            w.reasons
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let (state, style) = match (&w.error, &w.schedule, w.active) {
            (Some(e), _, _) => (format!("invalid: {e}"), styles.bad),
            (None, None, _) => ("always active".to_string(), styles.ok),
            (None, Some(_), true) => (
                match w.closes_at {
                    Some(t) => format!(
                        "ACTIVE, closes {} ({})",
                        t.format("%H:%M UTC"),
                        format::relative(t - s.at)
                    ),
                    None => "ACTIVE".into(),
                },
                styles.warn,
            ),
            (None, Some(_), false) => (
                match w.opens_at {
                    Some(t) => format!(
                        "inactive, opens {} ({})",
                        t.format("%a %H:%M UTC"),
                        format::relative(t - s.at)
                    ),
                    None => "inactive".into(),
                },
                styles.muted,
            ),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("  budget[{}] ", w.index), styles.muted),
            Span::raw(format!("nodes {:<5} (= {:<3}) ", w.nodes, w.limit)),
            Span::raw(format!("{reasons:<28} ")),
            Span::styled(
                w.schedule
                    .as_deref()
                    .map(|sc| format!("schedule \"{sc}\" "))
                    .unwrap_or_default(),
                styles.muted,
            ),
            Span::styled(state, style),
        ]));
    }
    let mut spans = vec![Span::styled("  allowed now: ", styles.muted)];
    for r in &b.reasons {
        let (n, style) = match (r.limit, r.allowed) {
            (None, _) => ("unbounded".to_string(), styles.ok),
            (Some(_), 0) => ("0".to_string(), styles.bad),
            (Some(_), a) => (a.to_string(), styles.ok),
        };
        spans.push(Span::raw(format!("{} ", r.reason.as_str())));
        spans.push(Span::styled(n, style));
        if let Some(t) = r.next_change {
            spans.push(Span::styled(
                format!(" (changes {})", format::relative(t - s.at)),
                styles.muted,
            ));
        }
        spans.push(Span::raw("   "));
    }
    lines.push(Line::from(spans));
    lines
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let styles = app.theme.styles.clone();
    let [table, budgets] =
        Layout::vertical([Constraint::Min(5), Constraint::Length(9)]).areas(area);
    app.tables
        .nodepools
        .render(frame, table, "NodePools", COLUMNS, &styles, true);
    let selected = app.tables.nodepools.selected_row().map(|r| r.id.clone());
    let s = &app.snapshot;
    let lines = match selected
        .as_deref()
        .and_then(|id| s.budgets.iter().find(|b| b.nodepool == id))
    {
        Some(b) => budget_lines(s, b, &styles),
        None => vec![Line::styled(
            "no budgets evaluated yet (the first disruption pass runs 10 s after start)",
            styles.muted,
        )],
    };
    frame.render_widget(
        Paragraph::new(lines).block(panel("Disruption budgets", None, &styles)),
        budgets,
    );
}

pub fn details(s: &Snapshot, id: &str) -> Option<Details> {
    let p = s.state.nodepools.get(id)?;
    let mut b = Builder::default();
    let u = usage(s, id);
    b.heading("Usage");
    b.line(
        Tone::Normal,
        format!(
            "{} nodes, cpu {}, memory {}, {} ({})",
            u.nodes,
            format::cores(u.capacity.cpu),
            format::bytes(u.capacity.memory),
            format::per_hour(u.cost),
            format::per_month(u.cost)
        ),
    );
    if let Some(budgets) = s.budgets.iter().find(|b| b.nodepool == id) {
        b.heading("Budgets");
        let plain = Styles::plain();
        for l in budget_lines(s, budgets, &plain) {
            let text: String = l.spans.iter().map(|sp| sp.content.as_ref()).collect();
            b.line(Tone::Normal, text);
        }
    }
    let paused: Vec<String> = s
        .pauses
        .iter()
        .filter(|sc| matches!(sc, Scope::All) || **sc == Scope::NodePool(id.to_string()))
        .map(|sc| sc.to_string())
        .collect();
    if !paused.is_empty() {
        b.heading("Paused");
        b.line(
            Tone::Warn,
            format!("disruption paused by: {}", paused.join(", ")),
        );
    }
    b.heading("NodePool");
    b.yaml(p);
    Some(b.finish(format!("NodePool {id}")))
}
