//! One frame: header (what is attached, read-only or not, the snapshot's time, cost,
//! pauses), the tabs, the view, the footer (the keys that apply here, or the prompt, or
//! the last message), and any popup on top.

use chrono::TimeDelta;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::tui::app::{App, LineInput, Mode, Regions};
use crate::tui::format;
use crate::tui::views::{self, View};
use crate::tui::widgets::popup::centered;

/// Draws the whole console.
pub fn draw(frame: &mut Frame, app: &mut App) {
    let area = frame.area();
    let styles = app.theme.styles.clone();
    frame.render_widget(Block::default().style(styles.base), area);
    let [header, tabs, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    app.regions = Regions {
        tabs,
        body,
        popup: None,
    };
    draw_header(frame, header, app);
    draw_tabs(frame, tabs, app);
    views::render(frame, body, app);
    draw_footer(frame, footer, app);
    match &app.mode {
        Mode::Details(d) => {
            let r = centered(
                body,
                body.width.saturating_sub(8).max(20),
                body.height.saturating_sub(2).max(5),
            );
            frame.render_widget(Clear, r);
            app.regions.popup = Some(r);
            let lines: Vec<Line> = d
                .lines
                .iter()
                .map(|(tone, text)| {
                    let st = tone.style(&styles);
                    Line::styled(text.as_str(), st)
                })
                .collect();
            let title = Line::from(vec![
                Span::styled(format!(" {} ", d.title), styles.title),
                Span::styled(
                    format!(
                        "{}/{} (j/k scroll, esc close) ",
                        d.scroll as usize + 1,
                        d.lines.len()
                    ),
                    styles.muted,
                ),
            ]);
            frame.render_widget(
                Paragraph::new(lines)
                    .wrap(Wrap { trim: false })
                    .style(styles.popup)
                    .scroll((d.scroll, 0))
                    .block(
                        Block::default()
                            .borders(Borders::ALL)
                            .border_style(styles.title)
                            .style(styles.popup)
                            .title(title),
                    ),
                r,
            );
        }
        Mode::Confirm(c) => {
            // As wide as the prompt, between 44 and 72 columns (never wider than the
            // screen), and as tall as its wrapped lines.
            let len = c.prompt.chars().count() as u16;
            let w = (len + 6).clamp(44, 72).min(body.width.max(1));
            let inner = w.saturating_sub(4).max(1);
            let mut lines = vec![Line::styled(c.prompt.as_str(), styles.danger)];
            match &c.reason {
                Some(reason) => {
                    let mut field = vec![Span::styled("reason (optional): ", styles.muted)];
                    field.extend(typed(reason, styles.footer, styles.key));
                    lines.push(Line::from(field));
                    lines.push(Line::from(vec![
                        Span::styled("enter", styles.key),
                        Span::styled(" confirm   ", styles.footer),
                        Span::styled("esc", styles.key),
                        Span::styled(" cancel", styles.footer),
                    ]));
                }
                None => lines.push(Line::from(vec![
                    Span::styled("y", styles.key),
                    Span::styled("/enter confirm   ", styles.footer),
                    Span::styled("n", styles.key),
                    Span::styled("/esc cancel", styles.footer),
                ])),
            }
            let r = centered(body, w, len.div_ceil(inner) + lines.len() as u16 + 1);
            frame.render_widget(Clear, r);
            frame.render_widget(
                Paragraph::new(lines)
                    .wrap(Wrap { trim: true })
                    .style(styles.popup)
                    .block(
                        Block::default()
                            .borders(Borders::ALL)
                            .padding(ratatui::widgets::Padding::horizontal(1))
                            .border_style(styles.danger)
                            .style(styles.popup)
                            .title(Span::styled(" Confirm ", styles.danger)),
                    ),
                r,
            );
        }
        _ => {}
    }
}

/// The header's pieces with how long each is kept on a narrow terminal (higher: longer):
/// the mode, the clock, staleness, pauses and the node count with its cost outlive the
/// product name and the source's label (which is ellipsized first).
fn draw_header(frame: &mut Frame, area: Rect, app: &App) {
    let s = &app.theme.styles;
    let snap = &app.snapshot;
    let mode = if app.source.read_only {
        " READ-ONLY "
    } else {
        " READ-WRITE "
    };
    let f = &app.figures;
    let deleting = if f.deleting > 0 {
        format!(" (+{} deleting)", f.deleting)
    } else {
        String::new()
    };
    let now = app.now();
    let wide = area.width >= 110;
    let clock = if wide {
        now.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    } else {
        now.format("%H:%M:%S").to_string()
    };
    let mut parts: Vec<(u8, String, ratatui::style::Style)> = vec![
        (2, " karpenter-tui ".into(), s.title.patch(s.header)),
        (9, mode.into(), s.mode),
        (1, format!(" {} ", app.source.label), s.header),
        (9, format!("│ {clock} "), s.header),
    ];
    if let Some(silent) = app.stale_for() {
        parts.push((
            9,
            format!(
                "│ data {} old ",
                format::age(TimeDelta::seconds(silent.as_secs() as i64))
            ),
            s.header.patch(s.bad),
        ));
    }
    parts.push((
        8,
        format!(
            "│ {} node{}{deleting} │ {} ",
            f.nodes,
            if f.nodes == 1 { "" } else { "s" },
            format::per_hour(f.cost)
        ),
        s.header,
    ));
    if snap.scenario_ended() {
        parts.push((6, "│ scenario ended ".into(), s.header.patch(s.muted)));
    }
    if !snap.pauses.is_empty() {
        let scopes: Vec<String> = snap.pauses.iter().map(|p| p.to_string()).collect();
        parts.push((
            9,
            format!("│ PAUSED: {} ", scopes.join(", ")),
            s.header.patch(s.warn),
        ));
    }
    if app.in_flight > 0 {
        parts.push((5, "│ working… ".into(), s.header));
    }
    let width = |parts: &[(u8, String, ratatui::style::Style)]| -> usize {
        parts.iter().map(|(_, t, _)| t.chars().count()).sum()
    };
    // The label gives way first, ellipsized down to a few cells; then whole pieces go,
    // lowest priority first.
    let room = area.width as usize;
    let over = width(&parts).saturating_sub(room);
    if over > 0 {
        let label = &mut parts[2].1;
        let keep = label.chars().count().saturating_sub(over).max(8);
        *label = format!(
            "{} ",
            format::clip(label.trim_end(), keep.saturating_sub(1))
        );
    }
    while width(&parts) > room && parts.len() > 1 {
        let Some(pos) = (0..parts.len()).min_by_key(|&i| (parts[i].0, usize::MAX - i)) else {
            break;
        };
        parts.remove(pos);
    }
    let spans: Vec<Span> = parts
        .into_iter()
        .map(|(_, text, style)| Span::styled(text, style))
        .collect();
    frame.render_widget(Paragraph::new(Line::from(spans)).style(s.header), area);
}

/// Each tab's view and text, in order; a space separates tabs. The mouse finds the tab
/// under a click from the same text (`App::on_mouse`).
pub fn tab_labels(app: &App) -> Vec<(View, String)> {
    let snap = &app.snapshot;
    View::ALL
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let badge = match v {
                View::Disruption if !snap.pending.is_empty() => {
                    format!(" ({})", snap.pending.len())
                }
                View::Pending if app.figures.pending_pods > 0 => {
                    format!(" ({})", app.figures.pending_pods)
                }
                _ => String::new(),
            };
            (*v, format!(" {} {}{} ", i + 1, v.title(), badge))
        })
        .collect()
}

fn draw_tabs(frame: &mut Frame, area: Rect, app: &App) {
    let s = &app.theme.styles;
    let mut spans = Vec::new();
    for (v, label) in tab_labels(app) {
        let style = if v == app.view { s.tab_active } else { s.tab };
        spans.push(Span::styled(label, style));
        spans.push(Span::styled(" ", s.tab));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)).style(s.tab), area);
}

fn draw_footer(frame: &mut Frame, area: Rect, app: &App) {
    let s = &app.theme.styles;
    let line = match &app.mode {
        Mode::Filter { input, .. } => {
            let mut v = vec![Span::styled("/", s.key)];
            v.extend(typed(input, s.footer, s.key));
            v.push(Span::styled(
                "   enter keep  esc cancel  (regex; ! inverts)",
                s.muted,
            ));
            if let Some(st) = &app.status {
                v.push(Span::styled(format!("   {}", st.text), s.bad));
            }
            Line::from(v)
        }
        Mode::Command { input } => {
            let mut v = vec![Span::styled(":", s.key)];
            v.extend(typed(input, s.footer, s.key));
            v.push(Span::styled(
                "   nodepool NAME · pause [POOL] · resume [POOL] · theme NAME · whatif [TIME] POOL FIELD=VALUE · q",
                s.muted,
            ));
            Line::from(v)
        }
        _ => match &app.status {
            Some(st) => Line::styled(format!(" {}", st.text), if st.error { s.bad } else { s.ok }),
            None => {
                let mut v = Vec::new();
                for a in app.hints() {
                    v.push(Span::styled(format!(" {}", app.keymap.hint(a)), s.key));
                    let word = short(a);
                    v.push(Span::styled(
                        format!(" {word} "),
                        if a.dangerous() {
                            s.footer.patch(s.danger)
                        } else {
                            s.footer
                        },
                    ));
                }
                Line::from(v)
            }
        },
    };
    frame.render_widget(Paragraph::new(line).style(s.footer), area);
}

/// A line being typed, with the cursor where it is.
fn typed(input: &LineInput, text: Style, cursor: Style) -> Vec<Span<'static>> {
    let (before, after) = input.split();
    vec![
        Span::styled(before, text),
        Span::styled("▏", cursor),
        Span::styled(after, text),
    ]
}

/// The footer's word for an action.
fn short(a: crate::tui::keymap::Action) -> &'static str {
    use crate::tui::keymap::Action::*;
    match a {
        Approve => "approve",
        ApproveAll => "approve all",
        Reject => "reject",
        Pause => "pause all",
        PausePool => "pause pool",
        Details => "details",
        Filter => "filter",
        Sort => "sort",
        Command => "command",
        NextView => "next view",
        Help => "help",
        Quit => "quit",
        other => other.name(),
    }
}
