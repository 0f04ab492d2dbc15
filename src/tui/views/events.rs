//! Events / journal: what the controller did and what operators did (newest first), and
//! under it the log pane: warnings and errors that would otherwise have gone to the
//! terminal the console draws on.

use chrono::TimeDelta;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::Details;
use super::details::Builder;
use crate::control::controller::Snapshot;
use crate::control::events::{Event, EventKind};
use crate::tui::app::App;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::{Cell, Column, Row, Tone, col};

pub const COLUMNS: &[Column] = &[
    col("TIME", Constraint::Length(8)).keep(8),
    col("KIND", Constraint::Length(24)).keep(5).shrink(12),
    col("WHAT", Constraint::Min(20)).keep(9).shrink(16),
];

fn kind_name(e: &Event) -> String {
    serde_json::to_value(&e.kind)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_else(|| "Event".into())
}

fn tone(k: &EventKind) -> Tone {
    match k {
        EventKind::Error { .. }
        | EventKind::DisruptionFailed { .. }
        | EventKind::NodeClaimLaunchFailed { .. }
        | EventKind::Interrupted { .. } => Tone::Bad,
        EventKind::DisruptionProposed { .. }
        | EventKind::DisruptionBlocked { .. }
        | EventKind::DisruptionPaused { .. }
        | EventKind::DisruptionRejected { .. }
        | EventKind::InterruptionWarning { .. }
        | EventKind::PodPending { .. } => Tone::Warn,
        EventKind::DisruptionApproved { .. }
        | EventKind::DisruptionExecuted { .. }
        | EventKind::DisruptionCompleted { .. }
        | EventKind::DisruptionResumed { .. } => Tone::Accent,
        EventKind::PodBound { .. } | EventKind::PodNominated { .. } => Tone::Muted,
        _ => Tone::Normal,
    }
}

fn row_id(e: &Event, i: usize) -> String {
    format!("event/{:.3}/{i}", e.t)
}

pub fn rows(s: &Snapshot) -> Vec<Row> {
    s.events
        .iter()
        .enumerate()
        .rev()
        .map(|(i, e)| {
            let at = s.started + TimeDelta::milliseconds((e.t * 1000.0) as i64);
            Row::new(
                row_id(e, i),
                vec![
                    Cell::num(at.format("%H:%M:%S").to_string(), e.t),
                    Cell::text(kind_name(e)),
                    Cell::text(e.kind.to_string()),
                ],
            )
            .tone(tone(&e.kind))
        })
        .collect()
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let styles = app.theme.styles.clone();
    let [table, log] = Layout::vertical([Constraint::Min(5), Constraint::Length(8)]).areas(area);
    app.tables
        .events
        .render(frame, table, "Events", COLUMNS, &styles, true);
    let tail = app.log.tail(log.height.saturating_sub(2) as usize);
    let lines: Vec<Line> = if tail.is_empty() {
        vec![Line::styled("no warnings or errors logged", styles.muted)]
    } else {
        tail.into_iter()
            .map(|l| {
                let style = if l.contains("ERROR") {
                    styles.bad
                } else if l.contains("WARN") {
                    styles.warn
                } else {
                    styles.muted
                };
                Line::styled(l, style)
            })
            .collect()
    };
    frame.render_widget(
        Paragraph::new(lines).block(panel("Log", None, &styles)),
        log,
    );
}

pub fn details(s: &Snapshot, id: &str) -> Option<Details> {
    let i: usize = id.rsplit('/').next()?.parse().ok()?;
    let e = s.events.get(i)?;
    if row_id(e, i) != id {
        return None;
    }
    let mut b = Builder::default();
    b.heading("Event");
    b.line(tone(&e.kind), e.kind.to_string());
    b.heading("As simulate prints it (JSON)");
    match serde_json::to_string_pretty(e) {
        Ok(j) => {
            for l in j.lines() {
                b.line(Tone::Normal, l.to_string());
            }
        }
        Err(err) => {
            b.line(Tone::Bad, err.to_string());
        }
    }
    Some(b.finish(format!("{} at t={:.1}s", kind_name(e), e.t)))
}
