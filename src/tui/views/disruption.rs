//! Disruption: the decisions waiting for an operator (method, reason, candidates,
//! replacement, savings, budget consumed, age) and the commands in flight; under them,
//! the nodes a pass blocked and why, and the history of what happened to decisions.
//! `a` / `x` / `A` act on the rows of the table.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Details;
use super::details::Builder;
use crate::control::approvals::{Decision, Policy};
use crate::control::controller::Snapshot;
use crate::control::journal::{Action as JournalAction, Entry};
use crate::control::orchestration::{Execution, Phase};
use crate::engine::disruption::{Command, Outcome};
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::theme::Styles;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::{Cell, Column, Row, Tone, col};

pub const COLUMNS: &[Column] = &[
    col("ID", Constraint::Length(5)),
    col("STATE", Constraint::Length(20)),
    col("METHOD", Constraint::Length(17)),
    col("REASON", Constraint::Length(13)),
    col("CANDIDATES", Constraint::Min(30)),
    col("REPLACEMENT", Constraint::Length(20)),
    col("SAVES", Constraint::Length(9)),
    col("BUDGET", Constraint::Length(14)),
    col("AGE", Constraint::Length(6)),
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
                format!("${:.4}", c.savings_per_hour)
            } else {
                "-".into()
            },
            c.savings_per_hour,
        )
        .tone(Tone::Accent),
        Cell::text(budget(c)),
    ]
}

/// What holds a pending decision.
pub fn decision_state(s: &Snapshot, d: &Decision) -> (String, Tone) {
    if let Some(scope) = s.pauses.iter().find(|sc| sc.covers(&d.command)) {
        return (format!("paused ({scope})"), Tone::Warn);
    }
    match d.policy {
        Policy::Manual => ("awaiting approval".into(), Tone::Warn),
        Policy::Auto => ("auto: runs next poll".into(), Tone::Muted),
    }
}

fn phase(e: &Execution) -> String {
    match &e.phase {
        Phase::WaitingForReplacements { claims } => format!("launching {}", claims.join(",")),
        Phase::Draining { .. } => "draining".into(),
        Phase::Deleted => "done".into(),
        Phase::Failed { reason } => format!("failed: {reason}"),
    }
}

pub fn rows(s: &Snapshot) -> Vec<Row> {
    let mut rows = Vec::new();
    for d in &s.pending {
        let (state, tone) = decision_state(s, d);
        let age = s.at - d.proposed_at;
        let mut cells = vec![
            Cell::num(format!("#{}", d.id), d.id as f64),
            Cell::text(state).tone(tone),
        ];
        cells.extend(command_cells(&d.command));
        cells.push(Cell::num(format::age(age), age.num_seconds() as f64));
        rows.push(Row::new(format!("decision/{}", d.id), cells));
    }
    for e in &s.running {
        let age = s.at - e.started;
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

/// One history line: "09:02:00 approved #3 by scenario: 2 nodes".
pub fn history_line(e: &Entry) -> (String, Tone) {
    let (verb, tone) = match e.action {
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
    };
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
    if e.actor != "controller" {
        text.push_str(&format!(" by {}", e.actor));
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
    let s = &app.snapshot;
    let rows = blocked_area.height.saturating_sub(2) as usize;
    let blocked: Vec<(&String, &Outcome)> = s
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Blocked(_)))
        .collect();
    let lines: Vec<Line> = blocked
        .iter()
        .take(rows)
        .map(|(claim, o)| {
            let node = s
                .state
                .node(claim)
                .map_or(claim.as_str(), |n| n.name.as_str());
            let why = match o {
                Outcome::Blocked(b) => b.to_string(),
                other => other.to_string(),
            };
            Line::from(vec![
                Span::styled(format!("{node} "), styles.accent),
                Span::raw(why),
            ])
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
    let lines: Vec<Line> = s
        .history
        .iter()
        .take(rows)
        .map(|e| {
            let (text, tone) = history_line(e);
            Line::styled(text, tone.style(&styles))
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

pub fn details(s: &Snapshot, id: &str) -> Option<Details> {
    let mut b = Builder::default();
    if let Some(n) = decision_id(id) {
        let d = s.pending.iter().find(|d| d.id == n)?;
        let (state, tone) = decision_state(s, d);
        b.heading("Decision");
        b.line(
            tone,
            format!(
                "#{n}: {state}, proposed {} ago",
                format::age(s.at - d.proposed_at)
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
            "#{n}: {} (started {} ago)",
            phase(e),
            format::age(s.at - e.started)
        ),
    );
    explain_command(&mut b, s, &e.command);
    b.heading("Command");
    b.yaml(&e.command);
    Some(b.finish(format!("Command #{n}")))
}

fn explain_command(b: &mut Builder, s: &Snapshot, c: &Command) {
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
        if let Some(o) = s.outcomes.get(&cand.nodeclaim) {
            b.line(Tone::Muted, format!("  {o}"));
        }
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
            "saves ${:.4}/h ({}), takes {} from the budget",
            c.savings_per_hour,
            format::per_month(c.savings_per_hour),
            budget(c)
        ),
    );
}
