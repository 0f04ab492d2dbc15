//! The overview's graphs of the last hour, from the controller's trends (one sample per
//! minute of cluster time, see `control::controller::trends`): cost per hour and nodes by
//! NodePool as line charts, pending pods and disruptions started as bars per minute. Each
//! panel's title carries the figure now, so a glance reads the number and the graph the
//! shape. The series are built once per snapshot ([`Graphs::of`]); a frame only draws.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, RenderDirection, Sparkline,
};

use crate::control::controller::trends::Trends;
use crate::tui::format;
use crate::tui::theme::Styles;

/// A graph spans at least this many minutes, so the first minutes of a run do not
/// stretch two samples across the whole panel.
const MIN_SPAN: usize = 10;

/// One pool's line in the nodes chart.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSeries {
    pub name: String,
    /// (minutes before the newest sample, as a negative x; nodes).
    pub points: Vec<(f64, f64)>,
    pub now: usize,
}

/// The series the graphs draw, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graphs {
    /// Minutes the samples cover (the newest minute included).
    pub minutes: usize,
    pub cost: Vec<(f64, f64)>,
    pub cost_now: f64,
    pub pools: Vec<PoolSeries>,
    pub nodes_now: usize,
    pub nodes_max: usize,
    /// Per minute, oldest first.
    pub pending: Vec<u64>,
    pub pending_now: u64,
    pub disruptions: Vec<u64>,
}

impl Graphs {
    pub fn of(t: &Trends) -> Graphs {
        let n = t.len();
        let x = |i: usize| i as f64 - (n as f64 - 1.0);
        let mut names: Vec<String> = Vec::new();
        for s in t.samples() {
            for (p, _) in &s.nodes {
                if !names.contains(p) {
                    names.push(p.clone());
                }
            }
        }
        names.sort();
        let pools: Vec<PoolSeries> = names
            .into_iter()
            .map(|name| PoolSeries {
                points: t
                    .samples()
                    .enumerate()
                    .map(|(i, s)| (x(i), s.pool_nodes(&name) as f64))
                    .collect(),
                now: t.latest().map_or(0, |s| s.pool_nodes(&name)),
                name,
            })
            .collect();
        Graphs {
            minutes: n,
            cost: t
                .samples()
                .enumerate()
                .map(|(i, s)| (x(i), s.cost_per_hour))
                .collect(),
            cost_now: t.latest().map_or(0.0, |s| s.cost_per_hour),
            nodes_now: t.latest().map_or(0, |s| s.total_nodes()),
            nodes_max: t
                .samples()
                .flat_map(|s| s.nodes.iter().map(|(_, n)| *n))
                .max()
                .unwrap_or(0),
            pools,
            pending: t.samples().map(|s| s.pending_pods as u64).collect(),
            pending_now: t.latest().map_or(0, |s| s.pending_pods as u64),
            disruptions: t.samples().map(|s| s.disruptions as u64).collect(),
        }
    }

    /// The x range every chart shows: the samples' span, at least [`MIN_SPAN`] minutes.
    fn span(&self) -> f64 {
        self.minutes.saturating_sub(1).max(MIN_SPAN) as f64
    }
}

/// Colours the pools' lines cycle through.
fn pool_style(styles: &Styles, i: usize) -> Style {
    let palette = [
        styles.accent,
        styles.ok,
        styles.warn,
        styles.bar_cpu,
        styles.bar_memory,
        styles.bad,
    ];
    let s = palette[i % palette.len()];
    // Bars' fills may be background colours: a line needs a foreground.
    match (s.fg, s.bg) {
        (None, Some(bg)) => Style::default().fg(bg),
        _ => s,
    }
}

fn graph_block<'a>(title: Vec<Span<'a>>, bottom: String, styles: &Styles) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(styles.border)
        .title(Line::from(title))
        .title_bottom(Line::styled(bottom, styles.muted).right_aligned())
}

/// Draws the four graphs side by side in `area`.
pub fn render(frame: &mut Frame, area: Rect, g: &Graphs, styles: &Styles) {
    let [cost, nodes, pending, disruptions] =
        Layout::horizontal([Constraint::Ratio(1, 4); 4]).areas(area);
    let window = format!("last {}m ", g.minutes.max(1));
    render_cost(frame, cost, g, &window, styles);
    render_nodes(frame, nodes, g, &window, styles);
    let peak = g.pending.iter().copied().max().unwrap_or(0);
    render_bars(
        frame,
        pending,
        vec![
            Span::styled(" Pending pods ", styles.title),
            Span::styled(
                format!("{} ", g.pending_now),
                if g.pending_now > 0 {
                    styles.warn
                } else {
                    styles.muted
                },
            ),
            Span::styled(format!("peak {peak} "), styles.muted),
        ],
        &g.pending,
        u64::max,
        styles.warn,
        &format!("no pods pending in the {window}"),
        &window,
        styles,
    );
    let started: u64 = g.disruptions.iter().sum();
    render_bars(
        frame,
        disruptions,
        vec![
            Span::styled(" Disruptions ", styles.title),
            Span::styled(format!("{started} started "), styles.accent),
        ],
        &g.disruptions,
        |a, b| a + b,
        styles.accent,
        &format!("none started in the {window}"),
        &window,
        styles,
    );
}

/// The x axis: "-Nm" to "now", when the panel has room for labels.
fn x_axis<'a>(g: &Graphs, labels: bool, styles: &Styles) -> Axis<'a> {
    let span = g.span();
    let axis = Axis::default().bounds([-span, 0.0]).style(styles.muted);
    if labels {
        axis.labels(vec![
            Line::from(format!("-{}m", span as usize)),
            Line::from("now"),
        ])
    } else {
        axis
    }
}

/// Whether a chart has room for axis labels (they take a row and a few columns).
fn room_for_labels(area: Rect) -> bool {
    area.height >= 7 && area.width >= 24
}

fn render_cost(frame: &mut Frame, area: Rect, g: &Graphs, window: &str, styles: &Styles) {
    let block = graph_block(
        vec![
            Span::styled(" Cost ", styles.title),
            Span::styled(format!("{} ", format::per_hour(g.cost_now)), styles.accent),
        ],
        window.to_string(),
        styles,
    );
    let lo = g.cost.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = g.cost.iter().map(|p| p.1).fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() {
        let pad = (hi * 0.05).max(0.01);
        ((lo - pad).max(0.0), hi + pad)
    } else {
        (0.0, 1.0)
    };
    let labels = room_for_labels(area);
    let mut y = Axis::default().bounds([lo, hi]).style(styles.muted);
    if labels {
        y = y.labels(vec![
            Line::from(format!("${lo:.2}")),
            Line::from(format!("${hi:.2}")),
        ]);
    }
    let data = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(styles.accent)
            .data(&g.cost),
    ];
    frame.render_widget(
        Chart::new(data)
            .block(block)
            .x_axis(x_axis(g, labels, styles))
            .y_axis(y)
            .legend_position(None),
        area,
    );
}

fn render_nodes(frame: &mut Frame, area: Rect, g: &Graphs, window: &str, styles: &Styles) {
    let mut title = vec![
        Span::styled(" Nodes ", styles.title),
        Span::styled(format!("{} ", g.nodes_now), styles.accent),
    ];
    for (i, p) in g.pools.iter().enumerate() {
        title.push(Span::styled(
            format!("{} {} ", p.name, p.now),
            pool_style(styles, i),
        ));
    }
    let block = graph_block(title, window.to_string(), styles);
    let hi = (g.nodes_max + 1) as f64;
    let labels = room_for_labels(area);
    let mut y = Axis::default().bounds([0.0, hi]).style(styles.muted);
    if labels {
        y = y.labels(vec![
            Line::from("0"),
            Line::from(format!("{}", hi as usize)),
        ]);
    }
    let data: Vec<Dataset> = g
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Dataset::default()
                .name(p.name.clone())
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(pool_style(styles, i))
                .data(&p.points)
        })
        .collect();
    frame.render_widget(
        Chart::new(data)
            .block(block)
            .x_axis(x_axis(g, labels, styles))
            .y_axis(y)
            .legend_position(None),
        area,
    );
}

/// `values` squeezed into `width` columns: consecutive minutes combined (the newest
/// column always holds the newest minute), newest last.
pub fn fit(values: &[u64], width: usize, combine: fn(u64, u64) -> u64) -> Vec<u64> {
    if width == 0 {
        return Vec::new();
    }
    if values.len() <= width {
        return values.to_vec();
    }
    let per = values.len().div_ceil(width);
    let mut out: Vec<u64> = values
        .rchunks(per)
        .map(|c| c.iter().copied().reduce(combine).unwrap_or(0))
        .collect();
    out.reverse();
    out
}

#[allow(clippy::too_many_arguments)]
fn render_bars(
    frame: &mut Frame,
    area: Rect,
    title: Vec<Span>,
    values: &[u64],
    combine: fn(u64, u64) -> u64,
    style: Style,
    none: &str,
    window: &str,
    styles: &Styles,
) {
    let block = graph_block(title, window.to_string(), styles);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if values.iter().all(|v| *v == 0) {
        let y = inner.y + inner.height.saturating_sub(1) / 2;
        let line = Rect::new(inner.x, y, inner.width, inner.height.min(1));
        frame.render_widget(
            Paragraph::new(Line::styled(
                format::clip(none, inner.width as usize),
                styles.muted,
            ))
            .alignment(Alignment::Center),
            line,
        );
        return;
    }
    // Newest at the right edge, on the same time scale as the charts: each minute as
    // wide as the span allows, drawn right to left from the newest minute.
    let minutes = values.len().max(MIN_SPAN + 1);
    let per = (inner.width as usize / minutes).max(1);
    let mut data: Vec<u64> = fit(values, inner.width as usize, combine)
        .into_iter()
        .rev()
        .flat_map(|v| std::iter::repeat_n(v, per))
        .collect();
    data.truncate(inner.width as usize);
    frame.render_widget(
        Sparkline::default()
            .data(&data)
            .style(style)
            .direction(RenderDirection::RightToLeft),
        inner,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_squeezes_into_a_narrow_panel_newest_last() {
        let v: Vec<u64> = (1..=60).collect();
        let f = fit(&v, 20, u64::max);
        assert_eq!(f.len(), 20);
        assert_eq!(*f.last().unwrap(), 60);
        assert_eq!(fit(&[0, 2, 1, 1], 2, |a, b| a + b), vec![2, 2]);
        assert_eq!(fit(&[5, 6], 10, u64::max), vec![5, 6]);
        assert!(fit(&[5], 0, u64::max).is_empty());
    }
}
