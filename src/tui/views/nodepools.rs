//! NodePools: weight, limits against what the pool runs, consolidation policy and
//! timers, node count and cost; under the table, the selected pool's disruption budgets:
//! each budget's window (active now, next opening or closing) and what each reason may
//! still disrupt.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Details;
use super::details::Builder;
use crate::api::nodepool::{ConsolidationPolicy, DisruptionReason, NodePool};
use crate::api::quantity::Quantity;
use crate::control::controller::Snapshot;
use crate::engine::approval::Scope;
use crate::engine::disruption::PoolBudgets;
use crate::engine::resources::{Resources, parse_milli};
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::theme::Styles;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::{BarKind, Cell, Column, Row, Tone, col};

/// Kept longest: the pool, its state (paused or not) and what its budgets allow now,
/// then nodes and cost; the timers and limits bars give way first.
pub const COLUMNS: &[Column] = &[
    col("NODEPOOL", Constraint::Length(16)).keep(10).shrink(10),
    col("WEIGHT", Constraint::Length(6)).keep(1),
    col("NODES", Constraint::Length(10)).keep(7).shrink(5),
    col("CPU / LIMIT", Constraint::Length(18))
        .keep(3)
        .shrink(10),
    col("MEMORY / LIMIT", Constraint::Length(18))
        .keep(3)
        .shrink(10),
    col("POLICY", Constraint::Length(13)).keep(5).shrink(9),
    col("AFTER", Constraint::Length(6)).keep(2),
    col("EXPIRE", Constraint::Length(7)).keep(2),
    col("COST", Constraint::Length(9)).keep(6),
    col("BUDGETS (allowed now)", Constraint::Min(20))
        .keep(9)
        .shrink(12),
    col("STATE", Constraint::Length(10)).keep(8).shrink(6),
];

/// What a pool's nodes add up to: what its `limits` are checked against (upstream counts
/// the capacity of every NodeClaim of the pool).
/// The cost and capacity count every node of the pool, deleting ones too (they still
/// run and bill until they are gone); `nodes` and `deleting` split the same set.
pub struct Usage {
    pub nodes: usize,
    pub deleting: usize,
    pub capacity: Resources,
    pub cost: f64,
}

impl Usage {
    /// "5", or "5 (+1)" while one is deleting: the count the cost is over.
    pub fn count(&self) -> String {
        if self.deleting == 0 {
            self.nodes.to_string()
        } else {
            format!("{} (+{})", self.nodes, self.deleting)
        }
    }
}

pub fn usage(s: &Snapshot, pool: &str) -> Usage {
    let mut u = Usage {
        nodes: 0,
        deleting: 0,
        capacity: Resources::default(),
        cost: 0.0,
    };
    for n in s.state.nodes.iter().filter(|n| n.nodepool == pool) {
        u.cost += n.price;
        u.capacity.add(&n.allocatable);
        if n.deleting {
            u.deleting += 1;
        } else {
            u.nodes += 1;
        }
    }
    u
}

/// The pause that covers the pool, if any (all disruption, or this pool).
pub fn paused_by(s: &Snapshot, pool: &str) -> Option<Scope> {
    s.pauses
        .iter()
        .find(|sc| matches!(sc, Scope::All) || **sc == Scope::NodePool(pool.to_string()))
        .cloned()
}

/// The circuit breaker's evidence while it holds the pool paused (`control::breaker`):
/// read from the pool's pause annotations, which every console sees.
pub fn breaker_tripped(s: &Snapshot, pool: &str) -> Option<String> {
    use crate::api::protocol as keys;
    let a = s.state.nodepools.get(pool)?.metadata.annotations.as_ref()?;
    (a.get(keys::PAUSED).map(String::as_str) == Some(keys::BREAKER_ACTOR)).then(|| {
        a.get(keys::PAUSED_NOTE)
            .cloned()
            .unwrap_or_else(|| "replacements failed".into())
    })
}

/// What the pool may disrupt now: "paused" while a pause covers it (its budgets allow
/// nothing then, whatever they say), else [`allowed_summary`].
pub fn budget_summary(s: &Snapshot, pool: &str) -> (String, Tone) {
    if breaker_tripped(s, pool).is_some() {
        return ("tripped".into(), Tone::Bad);
    }
    if paused_by(s, pool).is_some() {
        return ("paused".into(), Tone::Warn);
    }
    let budgets = s.budgets.iter().find(|b| b.nodepool == pool);
    let blocked = budgets.is_some_and(|b| {
        DisruptionReason::LISTABLE
            .iter()
            .any(|r| b.allowed(*r) == 0)
    });
    (
        allowed_summary(budgets),
        if blocked { Tone::Warn } else { Tone::Normal },
    )
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

/// "E:1 D:1 U:0": what each reason a budget may list may still disrupt (repair's
/// allowance is in the budget panel: its initial would read as Underutilized's).
pub fn allowed_summary(b: Option<&PoolBudgets>) -> String {
    let Some(b) = b else {
        return "-".into();
    };
    DisruptionReason::LISTABLE
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
            let paused = paused_by(s, name).is_some();
            let (allowed, allowed_tone) = budget_summary(s, name);
            let bar = |used: i64, lim: Option<i64>, kind: BarKind, fmt: fn(i64) -> String| match lim
            {
                Some(l) => Cell::usage(used, l, fmt, kind),
                None => Cell::num(format!("{} / none", fmt(used)), used as f64),
            };
            Row::new(
                name.clone(),
                vec![
                    Cell::text(name.clone()),
                    Cell::num(
                        p.spec.weight.unwrap_or(0).to_string(),
                        p.spec.weight.unwrap_or(0) as f64,
                    ),
                    Cell::num(u.count(), u.nodes as f64),
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
                    Cell::text(allowed).tone(allowed_tone),
                    if breaker_tripped(s, name).is_some() {
                        Cell::text("breaker").tone(Tone::Bad)
                    } else if paused {
                        Cell::text("paused").tone(Tone::Warn)
                    } else {
                        Cell::text("active").tone(Tone::Ok)
                    },
                ],
            )
        })
        .collect()
}

/// A window's opening or closing time: in UTC, or in the pool's budget zone and in UTC
/// (`17:00 CET / 16:00 UTC`), so an operator reading either clock sees when.
fn window_time(t: DateTime<Utc>, zone: Option<chrono_tz::Tz>, fmt: &str) -> String {
    match zone {
        None => format!("{} UTC", t.format(fmt)),
        Some(z) => {
            let local = t.with_timezone(&z);
            format!(
                "{} {} / {} UTC",
                local.format(fmt),
                local.format("%Z"),
                t.format("%H:%M")
            )
        }
    }
}

/// The budget lines of one pool (also used by the details popup).
pub fn budget_lines(
    s: &Snapshot,
    b: &PoolBudgets,
    styles: &Styles,
    now: DateTime<Utc>,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    lines.push(Line::from(vec![
        Span::styled(format!("{} ", b.nodepool), styles.title),
        Span::styled(
            format!(
                "{} node{} counted, {} disrupting now{}",
                b.total,
                if b.total == 1 { "" } else { "s" },
                b.disrupting,
                match b.timezone {
                    Some(z) => format!(", schedules in {}", z.name()),
                    None => String::new(),
                }
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
                        window_time(t, b.timezone, "%H:%M"),
                        format::relative(t - now)
                    ),
                    None => "ACTIVE".into(),
                },
                styles.warn,
            ),
            (None, Some(_), false) => (
                match w.opens_at {
                    Some(t) => format!(
                        "inactive, opens {} ({})",
                        window_time(t, b.timezone, "%a %H:%M"),
                        format::relative(t - now)
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
    let health = crate::engine::repair::pool_health(&s.state)
        .get(b.nodepool.as_str())
        .copied()
        .unwrap_or_default();
    if health.unhealthy > 0 {
        let cap = crate::engine::repair::cap(health.nodes);
        let (text, style) = if health.capped() {
            (
                format!(
                    "{} of {} nodes unhealthy, over the {}% cap ({cap}): repair waits",
                    health.unhealthy,
                    health.nodes,
                    crate::engine::repair::UNHEALTHY_PERCENT
                ),
                styles.bad,
            )
        } else {
            (
                format!(
                    "{} of {} nodes unhealthy (repair stops above {cap})",
                    health.unhealthy, health.nodes
                ),
                styles.warn,
            )
        };
        lines.push(Line::from(vec![
            Span::styled("  repair: ", styles.muted),
            Span::styled(text, style),
        ]));
    }
    let mut spans = vec![Span::styled("  allowed now: ", styles.muted)];
    if let Some(evidence) = breaker_tripped(s, &b.nodepool) {
        spans.push(Span::styled(
            format!("none: circuit breaker tripped, until an operator resumes: {evidence}"),
            styles.bad,
        ));
        lines.push(Line::from(spans));
        return lines;
    }
    if let Some(scope) = paused_by(s, &b.nodepool) {
        spans.push(Span::styled(
            format!("none: disruption paused ({scope}) until resumed"),
            styles.warn,
        ));
        lines.push(Line::from(spans));
        return lines;
    }
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
                format!(" (changes {})", format::relative(t - now)),
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
    let now = app.now();
    let s = &app.snapshot;
    let lines = match selected
        .as_deref()
        .and_then(|id| s.budgets.iter().find(|b| b.nodepool == id))
    {
        Some(b) => budget_lines(s, b, &styles, now),
        None => vec![Line::styled(
            "no budgets evaluated yet (the first disruption pass runs 10 s after start)",
            styles.muted,
        )],
    };
    // Wrapped: a tripped breaker's evidence is longer than a line.
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: false })
            .block(panel("Disruption budgets", None, &styles)),
        budgets,
    );
}

pub fn details(s: &Snapshot, id: &str, now: DateTime<Utc>) -> Option<Details> {
    let p = s.state.nodepools.get(id)?;
    let mut b = Builder::default();
    let u = usage(s, id);
    b.heading("Usage");
    b.line(
        Tone::Normal,
        format!(
            "{} nodes{}, cpu {}, memory {}, {} ({})",
            u.nodes,
            if u.deleting > 0 {
                format!(" (+{} deleting)", u.deleting)
            } else {
                String::new()
            },
            format::cores(u.capacity.cpu),
            format::bytes(u.capacity.memory),
            format::per_hour(u.cost),
            format::per_month(u.cost)
        ),
    );
    if let Some(budgets) = s.budgets.iter().find(|b| b.nodepool == id) {
        b.heading("Budgets");
        let plain = Styles::plain();
        for l in budget_lines(s, budgets, &plain, now) {
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
