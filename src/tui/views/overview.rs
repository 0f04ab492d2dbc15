//! Overview: the cluster at a glance. Cost per hour and month, nodes by NodePool and
//! capacity type, CPU and memory requested against allocatable, pending pods, whether
//! disruption is paused (and where), decisions awaiting approval, and each pool's budget
//! headroom. The figures are computed once per snapshot (`Data::build`), not per frame.

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::control::approvals::{Policy, Scope};
use crate::control::controller::Snapshot;
use crate::engine::catalog::CapacityType;
use crate::engine::resources::Resources;
use crate::tui::app::App;
use crate::tui::format;
use crate::tui::theme::Styles;
use crate::tui::views::{disruption, nodepools, pending};
use crate::tui::widgets::bar::bar;
use crate::tui::widgets::panel;

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
    /// The oldest decisions waiting (id, summary).
    pub decisions: Vec<String>,
    pub savings_waiting: f64,
}

impl Data {
    pub fn build(s: &Snapshot) -> Data {
        let mut d = Data::default();
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
        for dec in &s.pending {
            match dec.policy {
                Policy::Manual => d.awaiting += 1,
                Policy::Auto => d.auto_queued += 1,
            }
            d.savings_waiting += dec.command.savings_per_hour;
        }
        d.decisions = s
            .pending
            .iter()
            .take(6)
            .map(|dec| {
                let (state, _) = disruption::decision_state(s, dec);
                format!(
                    "#{} {} {} ({} node{}) {}",
                    dec.id,
                    dec.command.method.as_str(),
                    dec.command.reason.as_str(),
                    dec.command.candidates.len(),
                    if dec.command.candidates.len() == 1 {
                        ""
                    } else {
                        "s"
                    },
                    state
                )
            })
            .collect();
        d.running = s.running.len();
        d
    }
}

fn label(text: &str, styles: &Styles) -> Span<'static> {
    Span::styled(format!("{text:<12}"), styles.muted)
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let styles = app.theme.styles.clone();
    let Some(d) = app.overview.as_ref() else {
        return;
    };
    let [top, middle] = Layout::vertical([Constraint::Length(7), Constraint::Min(8)]).areas(area);
    let [cost, nodes, capacity] = Layout::horizontal([
        Constraint::Percentage(25),
        Constraint::Percentage(25),
        Constraint::Percentage(50),
    ])
    .areas(top);

    let cost_lines = vec![
        Line::from(vec![
            label("per hour", &styles),
            Span::styled(format::per_hour(d.cost), styles.accent),
        ]),
        Line::from(vec![
            label("per month", &styles),
            Span::styled(format::per_month(d.cost), styles.accent),
        ]),
        Line::from(vec![
            label("to save", &styles),
            Span::styled(
                if d.savings_waiting > 0.0 {
                    format!("{} waiting", format::per_hour(d.savings_waiting))
                } else {
                    "-".into()
                },
                styles.ok,
            ),
        ]),
    ];
    frame.render_widget(
        Paragraph::new(cost_lines).block(panel("Cost", None, &styles)),
        cost,
    );

    let count =
        |n: usize, style| Span::styled(n.to_string(), if n > 0 { style } else { styles.muted });
    let node_lines = vec![
        Line::from(vec![
            label("nodes", &styles),
            Span::styled(d.nodes.to_string(), styles.title),
        ]),
        Line::from(vec![
            label("launching", &styles),
            count(d.launching, styles.accent),
            Span::styled("  not ready ", styles.muted),
            count(d.not_ready, styles.bad),
        ]),
        Line::from(vec![
            label("deleting", &styles),
            count(d.deleting, styles.warn),
        ]),
        Line::from(vec![
            label("pods", &styles),
            Span::raw(d.pods_running.to_string()),
            Span::styled("  pending ", styles.muted),
            count(d.pods_pending, styles.warn),
        ]),
    ];
    frame.render_widget(
        Paragraph::new(node_lines).block(panel("Nodes", None, &styles)),
        nodes,
    );

    let w = capacity.width.saturating_sub(2 + 12 + 22);
    let gauge = |name: &str, used: i64, total: i64, fill, figures: String| {
        let mut v = vec![label(name, &styles)];
        v.extend(bar(used as f64 / total.max(1) as f64, w, fill, styles.bar_empty).spans);
        v.push(Span::styled(figures, styles.muted));
        Line::from(v)
    };
    let (req, alloc) = (&d.requested, &d.allocatable);
    let cap_lines = vec![
        gauge(
            "CPU",
            req.cpu,
            alloc.cpu,
            styles.bar_cpu,
            format!(
                "  {} / {} cores",
                format::cores(req.cpu),
                format::cores(alloc.cpu)
            ),
        ),
        gauge(
            "memory",
            req.memory,
            alloc.memory,
            styles.bar_memory,
            format!(
                "  {} / {}",
                format::bytes(req.memory),
                format::bytes(alloc.memory)
            ),
        ),
        Line::styled(
            "requested by running pods / allocatable on registered nodes",
            styles.muted,
        ),
    ];
    frame.render_widget(
        Paragraph::new(cap_lines).block(panel("Requested vs allocatable", None, &styles)),
        capacity,
    );

    let [left, right] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(middle);
    let mut pool_lines = vec![Line::styled(
        format!(
            "{:<18} {:>5} {:>5} {:>5} {:>10}  {:<16} {}",
            "NODEPOOL", "SPOT", "OD", "RSV", "COST", "BUDGET HEADROOM", "DISRUPTION"
        ),
        styles.table_header,
    )];
    for p in &d.pools {
        pool_lines.push(Line::from(vec![
            Span::raw(format!(
                "{:<18} {:>5} {:>5} {:>5} {:>10}  ",
                format::clip(&p.name, 18),
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
    }
    pool_lines.push(Line::raw(""));
    pool_lines.push(Line::styled(
        "budget headroom: nodes each reason may still disrupt (E=Empty D=Drifted U=Underutilized)",
        styles.muted,
    ));
    frame.render_widget(
        Paragraph::new(pool_lines).block(panel(
            "Nodes by NodePool and capacity type",
            None,
            &styles,
        )),
        left,
    );

    let [dis, pend] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(right);
    let mut dl = vec![Line::from(vec![
        label("paused", &styles),
        if d.pauses.is_empty() {
            Span::styled("no", styles.ok)
        } else {
            Span::styled(d.pauses.join(", "), styles.warn)
        },
    ])];
    dl.push(Line::from(vec![
        label("awaiting", &styles),
        Span::styled(
            format!(
                "{} decision{}",
                d.awaiting,
                if d.awaiting == 1 { "" } else { "s" }
            ),
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
    ]));
    for line in &d.decisions {
        dl.push(Line::raw(format!("  {line}")));
    }
    frame.render_widget(
        Paragraph::new(dl).block(panel("Disruption", None, &styles)),
        dis,
    );

    let mut pl = vec![Line::from(vec![
        label("pending", &styles),
        Span::styled(
            d.pods_pending.to_string(),
            if d.pods_pending > 0 {
                styles.warn
            } else {
                styles.muted
            },
        ),
    ])];
    for (why, n) in d.pending_reasons.iter().take(4) {
        pl.push(Line::raw(format!("  {n:>4}  {why}")));
    }
    frame.render_widget(
        Paragraph::new(pl).block(panel("Pending pods", None, &styles)),
        pend,
    );
}
