//! Disruption: the decisions waiting for an operator (method, reason, candidates,
//! replacement, savings, budget consumed, age) and the commands in flight; under them,
//! the nodes a pass blocked and why, and the history of what happened to decisions.
//! `a` / `x` / `A` act on the rows of the table.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Details;
use super::details::Builder;
use super::queue::Queue;
pub use super::standing::phase;
use super::standing::{self, Involvement, Kind};
use crate::control::controller::Snapshot;
use crate::control::disruption::CONTROLLER;
use crate::control::journal::{Action as JournalAction, Entry};
use crate::engine::disruption::Command;
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::theme::Styles;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::{Cell, Column, Row, Tone, col};

/// Kept longest: which decision, its state, what it saves, what it takes from the
/// budget and how long it has waited (what approving weighs); the method and the
/// replacement give way first (the details popup has them in full).
pub const COLUMNS: &[Column] = &[
    col("ID", Constraint::Length(5)).keep(10).shrink(4),
    col("STATE", Constraint::Length(20)).keep(9).shrink(17),
    col("METHOD", Constraint::Length(17)).keep(3).shrink(10),
    col("REASON", Constraint::Length(13)).keep(5).shrink(8),
    col("CANDIDATES", Constraint::Min(30)).keep(7).shrink(16),
    col("REPLACEMENT", Constraint::Length(20))
        .keep(2)
        .shrink(12),
    col("SAVES", Constraint::Length(9)).keep(9),
    col("BUDGET", Constraint::Length(14)).keep(8).shrink(10),
    col("AGE", Constraint::Length(6)).keep(8).shrink(5),
];

/// The decision id of a row id ("decision/7" -> 7); in-flight rows have none.
pub fn decision_id(row: &str) -> Option<u64> {
    row.strip_prefix("decision/")?.parse().ok()
}

fn candidates(c: &Command) -> String {
    let names: Vec<&str> = c.node_names().collect();
    match names.len() {
        0 => "-".into(),
        1 => names[0].to_string(),
        n => format!("{n}: {}", names.join(", ")),
    }
}

fn replacement(c: &Command) -> String {
    match c.replacements.first() {
        None => "none (delete)".into(),
        Some(r) => {
            let first = r
                .options
                .first()
                .map(|o| o.instance_type.as_str())
                .unwrap_or("?");
            let more = r.options.len().saturating_sub(1);
            if more > 0 {
                format!("{first} (+{more} types)")
            } else {
                first.to_string()
            }
        }
    }
}

fn budget(c: &Command) -> String {
    c.budget
        .iter()
        .map(|(pool, n)| format!("{pool}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn command_cells(c: &Command) -> Vec<Cell> {
    vec![
        Cell::text(c.method.as_str()),
        Cell::text(c.reason.as_str()),
        Cell::text(candidates(c)),
        Cell::text(replacement(c)),
        Cell::num(
            if c.savings_per_hour > 0.0 {
                format::per_hour(c.savings_per_hour)
            } else {
                "-".into()
            },
            c.savings_per_hour,
        )
        .tone(Tone::Accent),
        Cell::text(budget(c)),
    ]
}

pub fn rows(s: &Snapshot, now: DateTime<Utc>) -> Vec<Row> {
    let mut rows = Vec::new();
    let queue = Queue::build(s);
    for d in &s.pending {
        let (state, tone) = queue.state(d);
        let age = now - d.proposed_at;
        let mut cells = vec![
            Cell::num(format!("#{}", d.id), d.id as f64),
            Cell::text(state).tone(tone),
        ];
        cells.extend(command_cells(&d.command));
        cells.push(Cell::num(format::age(age), age.num_seconds() as f64));
        rows.push(Row::new(format!("decision/{}", d.id), cells));
    }
    for e in &s.running {
        // A decision's age counts from its proposal, through approval and execution.
        let age = now - e.proposed;
        let mut cells = vec![
            Cell::num(format!("#{}", e.id), e.id as f64),
            Cell::text(phase(e)).tone(Tone::Accent),
        ];
        cells.extend(command_cells(&e.command));
        cells.push(Cell::num(format::age(age), age.num_seconds() as f64));
        rows.push(Row::new(format!("running/{}", e.id), cells).tone(Tone::Muted));
    }
    rows
}

/// The verb of a history entry, and its colour.
pub fn verb(e: &Entry) -> (&'static str, Tone) {
    match e.action {
        JournalAction::Proposed => ("proposed", Tone::Normal),
        JournalAction::Approved => ("approved", Tone::Ok),
        JournalAction::Rejected => ("rejected", Tone::Warn),
        JournalAction::Paused => ("paused", Tone::Warn),
        JournalAction::Resumed => ("resumed", Tone::Ok),
        JournalAction::Executed => ("executing", Tone::Accent),
        JournalAction::Completed => ("completed", Tone::Ok),
        JournalAction::Failed => ("failed", Tone::Bad),
        JournalAction::Withdrawn => ("withdrawn", Tone::Muted),
        JournalAction::Involuntary => ("involuntary", Tone::Bad),
    }
}

/// One history line: "09:02:00 approved #3 by scenario: 2 nodes". Who acted is named
/// when it is a person or a script, and when the controller took a decision on its own
/// (it ran an auto-approved one, or withdrew one the cluster outgrew).
pub fn history_line(e: &Entry) -> (String, Tone) {
    let (verb, tone) = verb(e);
    let mut text = format!("{} {verb}", e.at.format("%H:%M:%S"));
    if let Some(id) = e.decision {
        text.push_str(&format!(" #{id}"));
    }
    if let Some(m) = &e.method {
        text.push_str(&format!(" {m}"));
    }
    if !e.nodes.is_empty() {
        text.push_str(&format!(" [{}]", e.nodes.join(", ")));
    }
    if e.actor != CONTROLLER {
        text.push_str(&format!(" by {}", e.actor));
    } else if matches!(e.action, JournalAction::Withdrawn | JournalAction::Executed) {
        text.push_str(" by the controller");
    }
    if !e.detail.is_empty() {
        text.push_str(&format!(": {}", e.detail));
    }
    (text, tone)
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let styles = app.theme.styles.clone();
    let [table, bottom] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(area);
    app.tables
        .decisions
        .render(frame, table, "Decisions", COLUMNS, &styles, true);
    let [blocked_area, history_area] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(bottom);
    let rows = blocked_area.height.saturating_sub(2) as usize;
    // Lines cut at the pane's edge end in an ellipsis, as table cells do.
    let room = blocked_area.width.saturating_sub(2) as usize;
    let blocked = Arc::clone(
        app.blocked
            .get_or_insert_with(|| Arc::new(blocked(&app.snapshot))),
    );
    let s = &app.snapshot;
    let lines: Vec<Line> = blocked
        .iter()
        .take(rows)
        .map(|(node, why)| {
            let node = format::clip(&format!("{node} "), room);
            let why = format::clip(why, room.saturating_sub(node.chars().count()));
            Line::from(vec![Span::styled(node, styles.accent), Span::raw(why)])
        })
        .collect();
    list_panel(
        frame,
        blocked_area,
        "Blocked",
        blocked.len(),
        lines,
        &styles,
    );
    let rows = history_area.height.saturating_sub(2) as usize;
    let room = history_area.width.saturating_sub(2) as usize;
    let lines: Vec<Line> = s
        .history
        .iter()
        .take(rows)
        .map(|e| {
            let (text, tone) = history_line(e);
            Line::styled(format::clip(&text, room), tone.style(&styles))
        })
        .collect();
    list_panel(
        frame,
        history_area,
        "History",
        s.history.len(),
        lines,
        &styles,
    );
}

/// The Blocked pane: every node the disruption pass blocked or a decision holds, by Node
/// name, in the words of [`standing`] (so it agrees with the tables: a node whose
/// command runs is not blocked, it is being disrupted, and is not listed).
pub fn blocked(s: &Snapshot) -> Vec<(String, String)> {
    let inv = Involvement::of(s);
    // One lookup per outcome: a scan per outcome made the pane quadratic (14 ms at 5,000
    // nodes, on every snapshot the Disruption view showed).
    let index = s.state.node_index();
    s.outcomes
        .keys()
        .filter_map(|claim| {
            let (why, _, kind) = standing::standing(s, &inv, claim);
            if !matches!(kind, Kind::Blocked | Kind::Waiting) {
                return None;
            }
            let node = index
                .get(claim.as_str())
                .map_or(claim.clone(), |&i| s.state.nodes[i].name.clone());
            let why = why
                .strip_prefix("blocked: ")
                .map(str::to_string)
                .unwrap_or(why);
            Some((node, why))
        })
        .collect()
}

/// A bordered list titled with its name and count.
fn list_panel(
    frame: &mut Frame,
    area: Rect,
    name: &str,
    count: usize,
    lines: Vec<Line>,
    styles: &Styles,
) {
    frame.render_widget(
        Paragraph::new(lines).block(panel(name, Some(count), styles)),
        area,
    );
}

pub fn details(s: &Snapshot, id: &str, now: DateTime<Utc>) -> Option<Details> {
    let mut b = Builder::default();
    if let Some(n) = decision_id(id) {
        let d = s.pending.iter().find(|d| d.id == n)?;
        let (state, tone) = Queue::build(s).state(d);
        b.heading("Decision");
        b.line(
            tone,
            format!(
                "#{n}: {state}, proposed {} ago",
                format::age(now - d.proposed_at)
            ),
        );
        explain_command(&mut b, s, &d.command);
        b.heading("Command");
        b.yaml(&d.command);
        return Some(b.finish(format!("Decision #{n}")));
    }
    let n: u64 = id.strip_prefix("running/")?.parse().ok()?;
    let e = s.running.iter().find(|e| e.id == n)?;
    b.heading("In flight");
    b.line(
        Tone::Accent,
        format!(
            "#{n}: {} (proposed {} ago, started {} ago)",
            phase(e),
            format::age(now - e.proposed),
            format::age(now - e.started)
        ),
    );
    explain_command(&mut b, s, &e.command);
    b.heading("Command");
    b.yaml(&e.command);
    Some(b.finish(format!("Command #{n}")))
}

fn explain_command(b: &mut Builder, s: &Snapshot, c: &Command) {
    let inv = Involvement::of(s);
    b.heading("Candidates");
    for cand in &c.candidates {
        b.line(
            Tone::Normal,
            format!(
                "{} ({}, {} {} {}, ${:.4}/h, {} pods)",
                cand.node,
                cand.nodepool,
                cand.instance_type,
                cand.zone,
                cand.capacity_type.as_str(),
                cand.price,
                cand.pods.len()
            ),
        );
        let (why, _, _) = standing::standing(s, &inv, &cand.nodeclaim);
        b.line(Tone::Muted, format!("  {why}"));
    }
    b.heading("Replacement");
    if c.replacements.is_empty() {
        b.line(
            Tone::Normal,
            "none: the candidates' pods fit on other nodes",
        );
    }
    for r in &c.replacements {
        let opts: Vec<String> = r
            .options
            .iter()
            .take(5)
            .map(|o| {
                format!(
                    "{} {} {} ${:.4}/h",
                    o.instance_type,
                    o.zone,
                    o.capacity_type.as_str(),
                    o.price
                )
            })
            .collect();
        b.line(
            Tone::Normal,
            format!("{} in {}: {}", r.options.len(), r.nodepool, opts.join("; ")),
        );
    }
    b.line(
        Tone::Accent,
        format!(
            "saves {} ({}), takes {} from the budget",
            format::per_hour(c.savings_per_hour),
            format::per_month(c.savings_per_hour),
            budget(c)
        ),
    );
}
