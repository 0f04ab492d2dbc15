//! Overview: the cluster at a glance. Cost per hour and month, nodes by NodePool and
//! capacity type, CPU and memory requested against allocatable, pending pods, whether
//! disruption is paused (and where), graphs of the last hour (cost, nodes by pool,
//! pending pods, disruptions), each pool's budget queue ("allowed N · in flight M ·
//! waiting K"), what is about to be disrupted in each pool and why, and the decisions
//! waiting, marked when they would not fit in the budget. The figures are computed once
//! per snapshot (`Data::build`), not per frame.

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::control::controller::Snapshot;
use crate::engine::approval::{Policy, Scope};
use crate::engine::catalog::CapacityType;
use crate::engine::resources::Resources;
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::theme::Styles;
use crate::tui::views::queue::{Queue, Verdict};
use crate::tui::views::trends::{self, Graphs};
use crate::tui::views::{nodepools, pending};
use crate::tui::widgets::bar::bar;
use crate::tui::widgets::panel;
use crate::tui::widgets::table::Tone;

/// One pool's line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolLine {
    pub name: String,
    /// Spot, on-demand, reserved.
    pub nodes: [usize; 3],
    pub cost: f64,
    pub allowed: String,
    pub paused: bool,
}

/// The overview's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Data {
    pub cost: f64,
    /// Why the prices behind `cost` are a fallback (not the region's own), if they are.
    pub prices_note: Option<String>,
    pub nodes: usize,
    pub launching: usize,
    pub not_ready: usize,
    pub deleting: usize,
    pub requested: Resources,
    pub allocatable: Resources,
    pub pods_running: usize,
    pub pods_pending: usize,
    /// Pending pods by reason, most common first.
    pub pending_reasons: Vec<(String, usize)>,
    pub pools: Vec<PoolLine>,
    pub pauses: Vec<String>,
    pub awaiting: usize,
    pub auto_queued: usize,
    pub running: usize,
    /// The oldest decisions waiting, with what holds each (at most `DECISIONS_KEPT`).
    pub decisions: Vec<DecisionLine>,
    /// Every decision waiting (the list says "+N more" for those it does not show).
    pub decisions_total: usize,
    /// USD per hour every waiting decision would save.
    pub savings_waiting: f64,
    /// Of that, what the decisions that fit in their budgets now would save.
    pub savings_runnable: f64,
    /// Waiting decisions that would not fit in their budget now.
    pub over_budget: usize,
    /// Budgets against what is in flight and waiting, per pool and reason.
    pub queue: Queue,
    /// Per pool, the nodes in a decision waiting or a command in flight.
    pub strips: Vec<PoolStrip>,
    /// The last hour.
    pub graphs: Graphs,
}

/// How many waiting decisions the overview keeps lines for; the rest it counts.
const DECISIONS_KEPT: usize = 40;

/// One waiting decision in the overview's list.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionLine {
    pub id: u64,
    /// "Underutilized single-node consolidation (1 node)".
    pub text: String,
    /// What holds it, in short: "awaiting approval", "over budget", "paused", "auto".
    pub state: String,
    pub tone: Tone,
}

/// One node about to be disrupted, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Doomed {
    pub node: String,
    /// "Drifted #1 awaiting approval", "Underutilized #4 draining".
    pub why: String,
    pub tone: Tone,
}

/// A pool's nodes about to be disrupted, out of all its nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolStrip {
    pub pool: String,
    pub nodes: usize,
    /// In flight first (they are going now), then waiting in queue order.
    pub doomed: Vec<Doomed>,
}

impl Data {
    pub fn build(s: &Snapshot) -> Data {
        let mut d = Data {
            prices_note: s.prices_note.clone(),
            ..Data::default()
        };
        let mut pools: BTreeMap<&str, PoolLine> = s
            .state
            .nodepools
            .keys()
            .map(|n| {
                (
                    n.as_str(),
                    PoolLine {
                        name: n.clone(),
                        ..Default::default()
                    },
                )
            })
            .collect();
        for n in &s.state.nodes {
            d.cost += n.price;
            if n.deleting {
                d.deleting += 1;
            } else if !n.registered {
                d.launching += 1;
            } else if !n.ready {
                d.not_ready += 1;
            }
            if !n.deleting {
                d.nodes += 1;
                if n.registered {
                    d.allocatable.add(&n.allocatable);
                }
            }
            let line = pools
                .entry(n.nodepool.as_str())
                .or_insert_with(|| PoolLine {
                    name: n.nodepool.clone(),
                    ..Default::default()
                });
            line.cost += n.price;
            if !n.deleting {
                let i = match n.capacity_type {
                    CapacityType::Spot => 0,
                    CapacityType::OnDemand => 1,
                    CapacityType::Reserved => 2,
                };
                line.nodes[i] += 1;
            }
        }
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let nominees = pending::Nominees::of(s);
        for p in &s.state.pods {
            if p.is_terminal() {
                continue;
            }
            if p.node_name.is_some() {
                d.pods_running += 1;
                d.requested.add(&p.requests);
            } else if pending::is_pending(p) {
                d.pods_pending += 1;
                let (why, _) = pending::reason(s, &nominees, p);
                *reasons.entry(why).or_default() += 1;
            }
        }
        let mut reasons: Vec<(String, usize)> = reasons.into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        d.pending_reasons = reasons;
        for line in pools.values_mut() {
            line.allowed =
                nodepools::allowed_summary(s.budgets.iter().find(|b| b.nodepool == line.name));
            line.paused = s.pauses.contains(&Scope::NodePool(line.name.clone()))
                || s.pauses.contains(&Scope::All);
        }
        d.pools = pools.into_values().collect();
        d.pauses = s.pauses.iter().map(|p| p.to_string()).collect();
        let queue = Queue::build(s);
        for dec in &s.pending {
            match dec.policy {
                Policy::Manual => d.awaiting += 1,
                Policy::Auto => d.auto_queued += 1,
            }
        }
        d.savings_waiting = queue.waiting_savings;
        d.savings_runnable = queue.runnable_savings;
        d.over_budget = queue.over_budget();
        d.decisions_total = s.pending.len();
        d.decisions = s
            .pending
            .iter()
            .take(DECISIONS_KEPT)
            .map(|dec| {
                let (_, tone) = queue.state(dec);
                let state = match queue.verdict(dec.id) {
                    Some(Verdict::OverBudget { .. }) => "over budget",
                    Some(Verdict::Paused(_)) => "paused",
                    _ => match dec.policy {
                        Policy::Manual => "awaiting approval",
                        Policy::Auto => "auto",
                    },
                };
                let n = dec.command.candidates.len();
                DecisionLine {
                    id: dec.id,
                    text: format!(
                        "{} {} ({n} node{})",
                        dec.command.reason.as_str(),
                        dec.command.method.as_str(),
                        if n == 1 { "" } else { "s" },
                    ),
                    state: state.to_string(),
                    tone,
                }
            })
            .collect();
        d.strips = strips(s, &queue);
        d.queue = queue;
        d.running = s.running.len();
        // The graphs' titles read the figures above them, from this snapshot.
        d.graphs = Graphs::of(&s.trends);
        d.graphs.cost_now = d.cost;
        d.graphs.nodes_now = d.nodes;
        d.graphs.pending_now = d.pods_pending as u64;
        for p in &mut d.graphs.pools {
            p.now = d
                .pools
                .iter()
                .find(|l| l.name == p.name)
                .map_or(0, |l| l.nodes.iter().sum());
        }
        d
    }
}

/// What each pool is about to lose: the candidates of commands in flight, then of the
/// decisions waiting, each with its reason and what holds it.
fn strips(s: &Snapshot, queue: &Queue) -> Vec<PoolStrip> {
    let mut pools: BTreeMap<String, PoolStrip> = BTreeMap::new();
    fn strip<'a>(
        pools: &'a mut BTreeMap<String, PoolStrip>,
        s: &Snapshot,
        pool: &str,
    ) -> &'a mut PoolStrip {
        pools.entry(pool.to_string()).or_insert_with(|| PoolStrip {
            pool: pool.to_string(),
            nodes: s
                .state
                .nodes
                .iter()
                .filter(|n| n.nodepool == pool && !n.deleting)
                .count(),
            doomed: Vec::new(),
        })
    }
    for e in &s.running {
        let phase = match &e.phase {
            crate::control::orchestration::Phase::WaitingForReplacements { .. } => {
                "launching replacement"
            }
            crate::control::orchestration::Phase::Draining { .. } => "draining",
            crate::control::orchestration::Phase::Deleted => "deleted",
            crate::control::orchestration::Phase::Failed { .. } => "failed",
        };
        for c in &e.command.candidates {
            strip(&mut pools, s, &c.nodepool).doomed.push(Doomed {
                node: c.node.clone(),
                why: format!("{} #{} {phase}", e.command.reason.as_str(), e.id),
                tone: Tone::Accent,
            });
        }
    }
    for dec in &s.pending {
        let (state, tone) = queue.state(dec);
        let state = match queue.verdict(dec.id) {
            Some(Verdict::OverBudget { .. }) => "over budget".to_string(),
            _ => state,
        };
        for c in &dec.command.candidates {
            strip(&mut pools, s, &c.nodepool).doomed.push(Doomed {
                node: c.node.clone(),
                why: format!("{} #{} {state}", dec.command.reason.as_str(), dec.id),
                tone,
            });
        }
    }
    pools.into_values().collect()
}

fn label(text: &str, styles: &Styles) -> Span<'static> {
    Span::styled(format!("{text:<12}"), styles.muted)
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// How tall the graphs are for a body of `height` rows: most of the room the figures and
/// lists leave on a tall terminal, four rows of bars on a short one.
fn graphs_height(height: u16) -> u16 {
    match height {
        40.. => 16,
        26.. => 9,
        _ => 6,
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let styles = app.theme.styles.clone();
    let Some(d) = app.overview.as_ref() else {
        return;
    };
    let [top, graphs, bottom] = Layout::vertical([
        Constraint::Length(6),
        Constraint::Length(graphs_height(area.height)),
        Constraint::Min(6),
    ])
    .areas(area);
    render_figures(frame, top, d, &styles);
    trends::render(frame, graphs, &d.graphs, &styles);

    let [left, right] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(bottom);
    // The strip lists a node a line when there is room, else a pool a line.
    let doomed: usize = d.strips.iter().map(|p| 1 + p.doomed.len()).sum();
    let strip_rows = (doomed.max(1) as u16 + 2).min(left.height / 2).max(3);
    let [pools, strips] =
        Layout::vertical([Constraint::Min(4), Constraint::Length(strip_rows)]).areas(left);
    render_pools(frame, pools, d, &styles);
    render_strips(frame, strips, d, &styles);
    let [dis, pend] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(right);
    render_decisions(frame, dis, d, &styles);
    render_pending(frame, pend, d, &styles);
}

/// The top row: cost, nodes, requested against allocatable.
fn render_figures(frame: &mut Frame, top: Rect, d: &Data, styles: &Styles) {
    // Narrow terminals: the figures keep their width and the bars take what is left.
    let narrow = top.width < 100;
    let [cost, nodes, capacity] = Layout::horizontal(if narrow {
        [
            Constraint::Length(23),
            Constraint::Length(29),
            Constraint::Min(20),
        ]
    } else {
        [
            Constraint::Percentage(25),
            Constraint::Percentage(25),
            Constraint::Percentage(50),
        ]
    })
    .areas(top);

    let mut cost_lines = vec![
        Line::from(vec![
            label("per hour", styles),
            Span::styled(format::per_hour(d.cost), styles.accent),
        ]),
        Line::from(vec![
            label("per month", styles),
            Span::styled(format::per_month(d.cost), styles.accent),
        ]),
        Line::from(vec![
            label("to save", styles),
            if d.savings_runnable > 0.0 {
                Span::styled(
                    format!("{} can run", format::per_hour(d.savings_runnable)),
                    styles.ok,
                )
            } else {
                Span::styled("-", styles.muted)
            },
        ]),
    ];
    if d.savings_waiting - d.savings_runnable > 0.0005 {
        cost_lines.push(Line::from(vec![
            label("", styles),
            Span::styled(
                format!("of {} waiting", format::per_hour(d.savings_waiting)),
                styles.muted,
            ),
        ]));
    }
    // Prices that are not the region's own say so on the panel (the log has why).
    let mut block = panel("Cost", None, styles);
    if d.prices_note.is_some() {
        block = block.title_bottom(Line::from(Span::styled(" fallback prices ", styles.warn)));
    }
    frame.render_widget(Paragraph::new(cost_lines).block(block), cost);

    let count =
        |n: usize, style| Span::styled(n.to_string(), if n > 0 { style } else { styles.muted });
    let node_lines = vec![
        Line::from(vec![
            label("nodes", styles),
            Span::styled(d.nodes.to_string(), styles.title),
        ]),
        Line::from(vec![
            label("launching", styles),
            count(d.launching, styles.accent),
            Span::styled("  not ready ", styles.muted),
            count(d.not_ready, styles.bad),
        ]),
        Line::from(vec![
            label("deleting", styles),
            count(d.deleting, styles.warn),
        ]),
        Line::from(vec![
            label("pods", styles),
            Span::raw(d.pods_running.to_string()),
            Span::styled("  pending ", styles.muted),
            count(d.pods_pending, styles.warn),
        ]),
    ];
    frame.render_widget(
        Paragraph::new(node_lines).block(panel("Nodes", None, styles)),
        nodes,
    );

    let label_w = if narrow { 7 } else { 12 };
    let gauge = |name: &str, used: i64, total: i64, fill, figures: String| {
        let w = capacity
            .width
            .saturating_sub(2 + label_w + figures.chars().count() as u16);
        let mut v = vec![Span::styled(
            format!("{name:<width$}", width = label_w as usize),
            styles.muted,
        )];
        v.extend(bar(used as f64 / total.max(1) as f64, w, fill, styles.bar_empty).spans);
        v.push(Span::styled(figures, styles.muted));
        Line::from(v)
    };
    let (req, alloc) = (&d.requested, &d.allocatable);
    let (cpu, memory) = if narrow {
        (
            format!(" {}/{}", format::cores(req.cpu), format::cores(alloc.cpu)),
            format!(
                " {}/{}",
                format::bytes(req.memory),
                format::bytes(alloc.memory)
            ),
        )
    } else {
        (
            format!(
                "  {} / {} cores",
                format::cores(req.cpu),
                format::cores(alloc.cpu)
            ),
            format!(
                "  {} / {}",
                format::bytes(req.memory),
                format::bytes(alloc.memory)
            ),
        )
    };
    let cap_lines = vec![
        gauge("CPU", req.cpu, alloc.cpu, styles.bar_cpu, cpu),
        gauge(
            "memory",
            req.memory,
            alloc.memory,
            styles.bar_memory,
            memory,
        ),
        Line::styled(
            if narrow {
                "requested by pods / allocatable"
            } else {
                "requested by running pods / allocatable on registered nodes"
            },
            styles.muted,
        ),
    ];
    frame.render_widget(
        Paragraph::new(cap_lines).block(panel("Requested vs allocatable", None, styles)),
        capacity,
    );
}

/// Pools: nodes by capacity type, cost, budget headroom, and under each pool its budget
/// queue per reason with something in flight or waiting.
fn render_pools(frame: &mut Frame, area: Rect, d: &Data, styles: &Styles) {
    let inner = area.width.saturating_sub(2) as usize;
    // The name takes what the figures leave, between 8 and 18 columns.
    let name_w = inner.saturating_sub(5 * 3 + 11 + 18 + 7).clamp(8, 18);
    let mut lines = vec![Line::styled(
        format!(
            "{:<name_w$} {:>4} {:>4} {:>4} {:>10}  {:<16} {}",
            "NODEPOOL", "SPOT", "OD", "RSV", "COST", "BUDGET HEADROOM", "DISRUPTION"
        ),
        styles.table_header,
    )];
    for p in &d.pools {
        lines.push(Line::from(vec![
            Span::raw(format!(
                "{:<name_w$} {:>4} {:>4} {:>4} {:>10}  ",
                format::clip(&p.name, name_w),
                p.nodes[0],
                p.nodes[1],
                p.nodes[2],
                format::per_hour(p.cost)
            )),
            Span::styled(
                format!("{:<16} ", p.allowed),
                if p.allowed.contains(":0") {
                    styles.warn
                } else {
                    styles.ok
                },
            ),
            if p.paused {
                Span::styled("paused", styles.warn)
            } else {
                Span::styled("active", styles.ok)
            },
        ]));
        for lane in d.queue.lanes_of(&p.name) {
            let mut spans = vec![
                Span::styled(format!("  {:<14}", lane.reason.as_str()), styles.muted),
                Span::raw(lane.figures()),
            ];
            if lane.over > 0 {
                spans.push(Span::styled(
                    format!(" · {} over budget", lane.over),
                    styles.bad,
                ));
            }
            lines.push(Line::from(spans));
        }
    }
    let room = area.height.saturating_sub(2) as usize;
    if lines.len() + 2 <= room {
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            "budget headroom: nodes each reason may still disrupt (E=Empty D=Drifted U=Underutilized)",
            styles.muted,
        ));
    }
    frame.render_widget(
        Paragraph::new(lines).block(panel(
            "NodePools: capacity type, budgets, queue",
            None,
            styles,
        )),
        area,
    );
}

/// Per pool, a strip with a cell per node (in flight, waiting, untouched) and the nodes
/// about to be disrupted with why.
fn render_strips(frame: &mut Frame, area: Rect, d: &Data, styles: &Styles) {
    let width = area.width.saturating_sub(2) as usize;
    let mut lines = Vec::new();
    let busy: Vec<&PoolStrip> = d.strips.iter().filter(|p| !p.doomed.is_empty()).collect();
    if busy.is_empty() {
        lines.push(Line::styled(
            "nothing: no decision waits and no command is in flight",
            styles.muted,
        ));
    }
    let name_w = busy
        .iter()
        .map(|p| p.pool.chars().count())
        .max()
        .unwrap_or(0)
        .min(14);
    let room = area.height.saturating_sub(2) as usize;
    let expanded = busy.iter().map(|p| 1 + p.doomed.len()).sum::<usize>() <= room;
    for p in busy {
        let mut spans = vec![Span::styled(
            format!("{:<name_w$} ", format::clip(&p.pool, name_w)),
            styles.title,
        )];
        // One cell per node, up to 12: what goes first, then the rest of the pool.
        let cells = p.nodes.max(p.doomed.len()).min(12);
        for doomed in p.doomed.iter().take(cells) {
            spans.push(Span::styled("■", doomed.tone.style(styles)));
        }
        let rest = cells.saturating_sub(p.doomed.len());
        spans.push(Span::styled("□".repeat(rest), styles.muted));
        spans.push(Span::styled(
            format!(" {}/{} ", p.doomed.len(), p.nodes),
            styles.muted,
        ));
        if expanded {
            lines.push(Line::from(spans));
            for doomed in &p.doomed {
                let node = format::clip(&doomed.node, width.saturating_sub(4) / 2);
                lines.push(Line::from(vec![
                    Span::raw(format!("  {node} ")),
                    Span::styled(
                        format::clip(&doomed.why, width.saturating_sub(node.chars().count() + 3)),
                        doomed.tone.style(styles),
                    ),
                ]));
            }
            continue;
        }
        let mut used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
        for (i, doomed) in p.doomed.iter().enumerate() {
            let text = format!(
                "{}{} ({})",
                if i == 0 { "" } else { ", " },
                doomed.node,
                doomed.why
            );
            let left = p.doomed.len() - i;
            let more = format!(", +{left} more");
            if used + text.chars().count() > width {
                if i > 0 && used + more.chars().count() <= width {
                    spans.push(Span::styled(more, styles.muted));
                } else {
                    spans.push(Span::styled(
                        format::clip(&text, width.saturating_sub(used)),
                        doomed.tone.style(styles),
                    ));
                }
                break;
            }
            used += text.chars().count();
            spans.push(Span::styled(text, doomed.tone.style(styles)));
        }
        lines.push(Line::from(spans));
    }
    frame.render_widget(
        Paragraph::new(lines).block(panel("About to be disrupted", None, styles)),
        area,
    );
}

/// Pauses, counts, and the decisions waiting with what holds each; "+N more" for the
/// ones there is no room for.
fn render_decisions(frame: &mut Frame, area: Rect, d: &Data, styles: &Styles) {
    // Pauses show only when there are some (the header says so too): the room is the
    // decisions'.
    let mut dl = Vec::new();
    if !d.pauses.is_empty() {
        dl.push(Line::from(vec![
            label("paused", styles),
            Span::styled(d.pauses.join(", "), styles.warn),
        ]));
    }
    let mut counts = vec![
        label("awaiting", styles),
        Span::styled(
            plural(d.awaiting, "decision"),
            if d.awaiting > 0 {
                styles.warn
            } else {
                styles.muted
            },
        ),
        Span::styled(
            format!("  queued (auto) {}  running {}", d.auto_queued, d.running),
            styles.muted,
        ),
    ];
    if d.over_budget > 0 {
        counts.push(Span::styled(
            format!("  over budget {}", d.over_budget),
            styles.bad,
        ));
    }
    dl.push(Line::from(counts));
    let room = (area.height.saturating_sub(2) as usize).saturating_sub(dl.len());
    let total = d.decisions_total;
    let shown = if total <= room {
        total
    } else {
        room.saturating_sub(1)
    }
    .min(d.decisions.len());
    let width = area.width.saturating_sub(2) as usize;
    for line in d.decisions.iter().take(shown) {
        let head = format!("  #{} ", line.id);
        let used = head.chars().count() + line.state.chars().count() + 1;
        dl.push(Line::from(vec![
            Span::raw(head),
            Span::styled(line.state.clone(), line.tone.style(styles)),
            Span::raw(format!(
                " {}",
                format::clip(&line.text, width.saturating_sub(used))
            )),
        ]));
    }
    if shown < total {
        dl.push(Line::styled(
            format!("  +{} more (5 Disruption)", total - shown),
            styles.muted,
        ));
    }
    frame.render_widget(
        Paragraph::new(dl).block(panel("Disruption", None, styles)),
        area,
    );
}

fn render_pending(frame: &mut Frame, area: Rect, d: &Data, styles: &Styles) {
    let mut pl = vec![Line::from(vec![
        label("pending", styles),
        Span::styled(
            d.pods_pending.to_string(),
            if d.pods_pending > 0 {
                styles.warn
            } else {
                styles.muted
            },
        ),
    ])];
    let room = (area.height.saturating_sub(3) as usize).max(1);
    for (why, n) in d.pending_reasons.iter().take(room) {
        pl.push(Line::raw(format!("  {n:>4}  {why}")));
    }
    frame.render_widget(
        Paragraph::new(pl).block(panel("Pending pods", None, styles)),
        area,
    );
}
