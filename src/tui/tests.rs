//! The console against the demo world: every view as the operator sees it (insta
//! snapshots of the off-screen terminal), and the keys doing what they say to the real
//! controller.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::control::journal::Action as Journal;
use crate::control::requests::{self, Request};
use crate::demo::{self, DEMO_AT};
use crate::engine::approval::Scope;
use crate::tui::app::{App, Effect, Mode};
use crate::tui::frame;
use crate::tui::theme::Theme;
use crate::tui::views::View;
use crate::tui::widgets::table::Tone;

mod rows;
mod views;

const W: u16 = 160;
const H: u16 = 45;

fn key(c: char) -> KeyEvent {
    let m = if c.is_ascii_uppercase() {
        KeyModifiers::SHIFT
    } else {
        KeyModifiers::NONE
    };
    KeyEvent::new(KeyCode::Char(c), m)
}

fn press(app: &mut App, keys: &str) -> Vec<Effect> {
    let mut out = Vec::new();
    for c in keys.chars() {
        out.extend(app.on_key(key(c)));
    }
    out
}

fn enter(app: &mut App) -> Vec<Effect> {
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE))
}

fn screen(app: &mut App) -> String {
    frame::text(&frame::draw(app, W, H))
}

#[tokio::test]
async fn every_view_at_the_demo_moment() {
    for view in View::ALL {
        let snap = demo::snapshot(demo::moment(view)).await.unwrap();
        let mut app = frame::app(snap, Theme::default(), false);
        app.show(view);
        insta::assert_snapshot!(view.slug(), screen(&mut app));
    }
}

#[tokio::test]
async fn the_demo_moment_has_what_the_views_are_for() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    assert!(!snap.pending.is_empty(), "decisions wait for approval");
    let mut app = frame::app(Arc::clone(&snap), Theme::default(), false);
    app.show(View::Nodes);
    let text = screen(&mut app);
    assert!(text.contains("awaiting #"), "{text}");
    assert!(
        app.tables.nodes.visible().any(|r| r
            .cells
            .last()
            .unwrap()
            .text
            .contains("do-not-disrupt pod default/ledger-0")),
        "{text}"
    );
    let pending = demo::snapshot(demo::moment(View::Pending)).await.unwrap();
    assert!(
        !pending.unschedulable.is_empty(),
        "pods wait during the spot outage"
    );
    app.show(View::NodePools);
    let text = screen(&mut app);
    assert!(
        text.contains("budget[1]") || text.contains("budget[0]"),
        "{text}"
    );
}

#[tokio::test]
async fn approve_reject_and_pause_reach_the_controller() {
    let (mut sim, rx) = demo::simulation(DEMO_AT).await.unwrap();
    let mut app = frame::app(rx.borrow().clone(), Theme::default(), false);
    app.show(View::Disruption);
    let first = app.snapshot.pending[0].id;
    let second = app.snapshot.pending.get(1).map(|d| d.id);

    // a: approve the selected (first) decision.
    let effects = press(&mut app, "a");
    assert_eq!(
        effects,
        [Effect::Request(Request::Approve { ids: vec![first] })]
    );
    let Effect::Request(r) = effects[0].clone() else {
        unreachable!()
    };
    let reply = requests::apply(&mut sim.controller, r, "console:test").await;
    assert!(reply.is_ok(), "{reply:?}");
    app.on_reply(reply);
    app.on_snapshot(rx.borrow().clone());
    assert!(app.snapshot.pending.iter().all(|d| d.id != first));
    assert!(
        app.snapshot
            .history
            .iter()
            .any(|e| e.action == Journal::Approved
                && e.decision == Some(first)
                && e.actor == "console:test")
    );
    assert!(screen(&mut app).contains(&format!("approved #{first}")));

    // x: reject the next one; it asks first, and takes a reason typed in the popup.
    if let Some(second) = second {
        app.tables.decisions.top();
        assert!(press(&mut app, "x").is_empty(), "x asks before rejecting");
        let Mode::Confirm(c) = &app.mode else {
            panic!("{:?}", app.mode)
        };
        assert!(c.prompt.starts_with(&format!("Reject decision #{second}")));
        assert!(screen(&mut app).contains("reason (optional)"));
        // A reason may start with n or y: while it is typed they are text.
        assert!(press(&mut app, "not now").is_empty());
        let effects = enter(&mut app);
        let [Effect::Request(r @ Request::Reject { id, reason })] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        assert_eq!((*id, reason.as_str()), (second, "not now"));
        let reply = requests::apply(&mut sim.controller, r.clone(), "console:test").await;
        assert!(reply.is_ok(), "{reply:?}");
        app.on_snapshot(rx.borrow().clone());
        assert!(app.snapshot.pending.iter().all(|d| d.id != second));
        assert!(
            app.snapshot
                .history
                .iter()
                .any(|e| e.action == Journal::Rejected && e.detail == "not now")
        );
    }

    // p: pause everything (after a confirmation; no reason given), then p again resumes.
    assert!(press(&mut app, "p").is_empty(), "p asks before pausing");
    let effects = enter(&mut app);
    let pause_all = Request::Pause {
        scope: Scope::All,
        reason: None,
    };
    assert_eq!(effects, [Effect::Request(pause_all.clone())]);
    let reply = requests::apply(&mut sim.controller, pause_all, "console:test").await;
    assert_eq!(reply, Ok("paused disruption: all".into()));
    app.on_snapshot(rx.borrow().clone());
    assert_eq!(app.snapshot.pauses, [Scope::All]);
    assert!(screen(&mut app).contains("PAUSED: all"));
    assert!(press(&mut app, "p").is_empty());
    let effects = press(&mut app, "y");
    assert_eq!(effects, [Effect::Request(Request::Resume(Scope::All))]);
    requests::apply(
        &mut sim.controller,
        Request::Resume(Scope::All),
        "console:test",
    )
    .await
    .unwrap();
    app.on_snapshot(rx.borrow().clone());
    assert!(app.snapshot.pauses.is_empty());

    // P on a NodePool row pauses that pool only.
    app.show(View::NodePools);
    app.tables.nodepools.top();
    let pool = app.tables.nodepools.selected_row().unwrap().id.clone();
    let effects = press(&mut app, "P");
    let pause_pool = Request::Pause {
        scope: Scope::NodePool(pool.clone()),
        reason: None,
    };
    assert_eq!(effects, [Effect::Request(pause_pool.clone())]);
    requests::apply(&mut sim.controller, pause_pool, "console:test")
        .await
        .unwrap();
    app.on_snapshot(rx.borrow().clone());
    assert_eq!(app.snapshot.pauses, [Scope::NodePool(pool)]);
}

#[tokio::test]
async fn read_only_refuses_dangerous_keys_visibly() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), true);
    app.show(View::Disruption);
    for k in ["a", "x", "p", "P", "A"] {
        let effects = press(&mut app, k);
        assert!(effects.is_empty(), "{k}: {effects:?}");
        assert_eq!(app.mode, Mode::Normal, "{k}");
        let text = screen(&mut app);
        assert!(
            text.contains("read-only:") && text.contains("refused"),
            "{k}: {text}"
        );
    }
    assert!(screen(&mut app).contains("READ-ONLY"));
    // :pause goes through the same gate.
    app.mode = Mode::Normal;
    assert!(app.run_command("pause").is_empty());
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .starts_with("read-only: pause refused")
    );
}

#[tokio::test]
async fn approve_all_asks_first_and_names_how_many_nodes() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let ids: Vec<u64> = snap.pending.iter().map(|d| d.id).collect();
    let nodes: usize = snap
        .pending
        .iter()
        .map(|d| d.command.candidates.len())
        .sum();
    let mut app = frame::app(snap, Theme::default(), false);
    app.show(View::Disruption);
    assert!(press(&mut app, "A").is_empty());
    let Mode::Confirm(c) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert!(
        c.prompt.contains(&format!("disrupting {nodes} node")),
        "{}",
        c.prompt
    );
    assert!(screen(&mut app).contains("Confirm"));
    // n cancels, A then y sends every visible decision.
    assert!(press(&mut app, "n").is_empty());
    assert_eq!(app.mode, Mode::Normal);
    press(&mut app, "A");
    assert_eq!(
        press(&mut app, "y"),
        [Effect::Request(Request::Approve { ids })]
    );
}

#[tokio::test]
async fn filter_and_sort_change_the_rows() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    app.show(View::Nodes);
    let all = app.tables.nodes.len();
    assert!(all >= 3, "{all}");
    let pool = app.tables.nodes.visible().next().unwrap().cells[2]
        .text
        .clone();
    press(&mut app, "/");
    press(&mut app, &pool);
    enter(&mut app);
    let kept = app.tables.nodes.len();
    assert!(kept >= 1 && kept <= all);
    assert!(
        app.tables
            .nodes
            .visible()
            .all(|r| r.cells[2].text.contains(&pool)
                || r.cells.iter().any(|c| c.text.contains(&pool)))
    );
    assert!(screen(&mut app).contains(&format!("/{pool}")));
    // Invert: "!" in front of the same expression keeps the others.
    let mut app2 = frame::app(app.snapshot.clone(), Theme::default(), false);
    app2.show(View::Nodes);
    press(&mut app2, "/");
    press(&mut app2, &format!("!{pool}"));
    enter(&mut app2);
    assert!(
        app2.tables
            .nodes
            .visible()
            .all(|r| !r.cells.iter().any(|c| c.text.contains(&pool)))
    );
    // esc in normal mode clears the filter.
    app2.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert_eq!(app2.tables.nodes.len(), all);

    // s sorts by NODE, s again by POOL; S reverses.
    press(&mut app2, "s");
    let node_cells = |a: &crate::tui::app::App| -> Vec<String> {
        a.tables
            .nodes
            .visible()
            .map(|r| r.cells[0].text.clone())
            .collect()
    };
    let names = node_cells(&app2);
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| n.to_lowercase());
    assert_eq!(names, sorted);
    press(&mut app2, "S");
    let reversed = node_cells(&app2);
    sorted.reverse();
    assert_eq!(reversed, sorted);
    assert!(screen(&mut app2).contains("sort:NODE↓"));
}

#[tokio::test]
async fn commands_themes_and_details() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    press(&mut app, ":");
    press(&mut app, "theme light");
    enter(&mut app);
    assert_eq!(app.theme.name, "light");
    app.run_command("theme nope");
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("theme \"nope\" not found")
    );
    assert_eq!(app.theme.name, "light");
    let pool = app.snapshot.state.nodepools.keys().next().unwrap().clone();
    app.run_command(&format!("nodepool {pool}"));
    assert_eq!(app.view, View::NodePools);
    assert_eq!(app.tables.nodepools.selected_row().unwrap().id, pool);
    enter(&mut app);
    let Mode::Details(d) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert!(d.lines.iter().any(|(_, l)| l.contains("kind: NodePool")));
    app.show(View::Nodes);
    app.mode = Mode::Normal;
    enter(&mut app);
    let Mode::Details(d) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert!(d.lines.iter().any(|(_, l)| l.contains("kind: NodeClaim")));
    assert!(d.lines.iter().any(|(_, l)| l.starts_with("Initialized")));
    assert!(screen(&mut app).contains("esc close"));
    app.run_command("bogus");
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("unknown command")
    );
    assert_eq!(app.run_command("q"), [Effect::Quit]);
}

#[tokio::test]
async fn help_lists_every_binding_and_the_footer_follows_the_keymap() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    let (keymap, problems) = app
        .keymap
        .overlay("mine.toml", "[keys]\napprove = [\"y\"]\n");
    assert!(problems.is_empty(), "{problems:?}");
    app.keymap = keymap;
    app.show(View::Help);
    let mut text = String::new();
    app.tables.help.move_by(0);
    for _ in 0..3 {
        text.push_str(&screen(&mut app));
        press(&mut app, "G");
    }
    for a in crate::tui::keymap::Action::ALL {
        assert!(text.contains(a.description()), "{}", a.name());
    }
    app.show(View::Disruption);
    let footer = screen(&mut app).lines().last().unwrap().to_string();
    assert!(footer.contains("y approve"), "{footer}");
}

#[tokio::test]
async fn idle_means_one_redraw_a_second_for_the_clock_and_no_other() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(Arc::clone(&snap), Theme::default(), false);
    let start = std::time::Instant::now();
    app.on_snapshot_at(snap, start);
    screen(&mut app);
    app.drawn();
    for i in 0..120u64 {
        // Ticks within one second of the clock ask for nothing; the next second, one frame.
        let t = start + std::time::Duration::from_millis(1000 * i + 400);
        app.on_tick(t);
        app.drawn();
        app.on_tick(t + std::time::Duration::from_millis(100));
        assert!(
            !app.dirty(),
            "tick {i} asked for a second redraw within one second"
        );
    }
    // The clock stopped (no snapshot for two minutes) and the badge counts: still one a
    // second at most, and a status message below expires on its own tick.
    // A status message expires on a tick: one redraw, then quiet again.
    press(&mut app, "x");
    app.drawn();
    let t0 = app.status.as_ref().unwrap().since;
    assert!(app.on_tick(t0 + std::time::Duration::from_secs(9)));
    app.drawn();
    assert!(!app.on_tick(t0 + std::time::Duration::from_secs(10)));
}

#[tokio::test]
async fn an_open_details_popup_follows_its_object() {
    let (mut sim, rx) = demo::simulation(DEMO_AT).await.unwrap();
    let mut app = frame::app(rx.borrow().clone(), Theme::default(), false);
    app.show(View::Disruption);
    let id = app.snapshot.pending[0].id;
    enter(&mut app);
    let Mode::Details(d) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert!(
        d.title.contains(&format!("#{id}"))
            && d.lines.iter().any(|(_, l)| l.contains("awaiting approval"))
    );
    // Another console (here: the controller directly) approves it while the popup is open.
    requests::apply(
        &mut sim.controller,
        Request::Approve { ids: vec![id] },
        "console:other",
    )
    .await
    .unwrap();
    app.on_snapshot(rx.borrow().clone());
    let Mode::Details(d) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert!(d.title.ends_with("(gone)"), "{}", d.title);
    // A node's popup refreshes in place: its lifecycle line now says the command runs.
    app.mode = Mode::Normal;
    app.show(View::Nodes);
    let node = app.snapshot.running[0].command.candidates[0]
        .nodeclaim
        .clone();
    assert!(app.tables.nodes.select_id(&node));
    enter(&mut app);
    sim.step().await;
    app.on_snapshot(rx.borrow().clone());
    let Mode::Details(d) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert!(!d.title.ends_with("(gone)"));
    assert!(
        d.lines
            .iter()
            .any(|(_, l)| l.starts_with("lifecycle: ") && !l.contains("awaiting")),
        "{:?}",
        d.lines
    );
}

#[tokio::test]
async fn tiny_and_odd_terminal_sizes_draw_without_panicking() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    for view in View::ALL {
        app.show(view);
        for (w, h) in [(1, 1), (10, 3), (20, 5), (40, 12), (80, 24), (300, 80)] {
            let text = frame::text(&frame::draw(&mut app, w, h));
            assert_eq!(text.lines().count(), h as usize, "{view:?} at {w}x{h}");
        }
        // A popup over a small terminal.
        app.mode = Mode::Normal;
        enter(&mut app);
        frame::draw(&mut app, 30, 8);
        press(&mut app, "A");
        frame::draw(&mut app, 25, 6);
        app.mode = Mode::Normal;
    }
}

// ---- The overview's graphs and budget-aware queue, and the mouse (issue 18) ----

mod overview_queue_mouse {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use chrono::{TimeDelta, TimeZone, Utc};
    use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

    use super::screen;
    use crate::api::nodepool::{Budget, NodePool};
    use crate::control::approvals::Decision;
    use crate::control::controller::Snapshot;
    use crate::control::controller::trends::minute_of;
    use crate::demo;
    use crate::engine::approval::Policy;
    use crate::engine::catalog::CapacityType;
    use crate::engine::disruption::fixture::{Fixture, instance_type};
    use crate::engine::disruption::{CandidateSummary, Command, Method, Reason, evaluate_budgets};
    use crate::tui::app::{Mode, WHEEL_ROWS};
    use crate::tui::frame;
    use crate::tui::theme::Theme;
    use crate::tui::views::View;
    use crate::tui::views::overview::Data;
    use crate::tui::views::queue::Queue;

    /// A pool "general" with one budget of `budget` nodes and `decisions` nodes, each
    /// in its own waiting consolidation decision saving $0.40/h, as the controller
    /// publishes them (budgets evaluated with the waiting nodes reserved).
    fn queued(budget: &str, decisions: usize) -> Arc<Snapshot> {
        let now = Utc.with_ymd_and_hms(2026, 1, 5, 9, 0, 0).unwrap();
        let mut f = Fixture::new(vec![instance_type("m", 4, 16, 0.40, None)], now);
        let mut pool = NodePool::unconstrained("general");
        pool.spec.disruption.budgets = vec![Budget {
            nodes: budget.into(),
            schedule: None,
            duration: None,
            reasons: vec![],
        }];
        f.pool(pool);
        for i in 0..decisions {
            f.node(
                &format!("node-{i}"),
                "general",
                "m",
                CapacityType::OnDemand,
                TimeDelta::hours(2),
            );
        }
        let state = f.state;
        let mut s = Snapshot::empty(now);
        s.pending = state
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| Decision {
                id: i as u64 + 1,
                command: Command {
                    method: Method::SingleNodeConsolidation,
                    reason: Reason::Underutilized,
                    candidates: vec![CandidateSummary::of(n, vec![])],
                    replacements: vec![],
                    savings_per_hour: 0.4,
                    budget: BTreeMap::from([("general".to_string(), 1)]),
                },
                proposed_at: now,
                policy: Policy::Manual,
            })
            .collect();
        let reserved: crate::engine::fast_hash::FastSet<String> =
            state.nodes.iter().map(|n| n.nodeclaim.clone()).collect();
        s.budgets = evaluate_budgets(&state, now, &reserved);
        s.state = Arc::new(state);
        Arc::new(s)
    }

    fn lines_with<'a>(text: &'a str, needles: &[&str]) -> Vec<&'a str> {
        text.lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .collect()
    }

    #[test]
    fn a_budget_of_one_lets_one_of_three_decisions_run() {
        let s = queued("1", 3);
        let q = Queue::build(&s);
        let lanes: Vec<_> = q.lanes_of("general").collect();
        assert_eq!(lanes.len(), 1, "{lanes:?}");
        assert_eq!(lanes[0].figures(), "allowed 1 · in flight 0 · waiting 3");
        assert_eq!(lanes[0].over, 2);
        assert_eq!(
            [q.fits(1), q.fits(2), q.fits(3)],
            [true, false, false],
            "the oldest runs, the two behind it do not fit"
        );
        assert_eq!(
            q.state(&s.pending[2]).0,
            "over budget (general allows 1 Underutilized)"
        );
        // "To save" counts only the decision that can run.
        let d = Data::build(&s);
        assert!(
            (d.savings_runnable - 0.4).abs() < 1e-9,
            "{}",
            d.savings_runnable
        );
        assert!((d.savings_waiting - 1.2).abs() < 1e-9);
        assert_eq!(d.over_budget, 2);

        let mut app = frame::app(s, Theme::default(), false);
        let text = frame::text(&frame::draw(&mut app, 160, 45));
        assert_eq!(
            lines_with(
                &text,
                &[
                    "Underutilized",
                    "allowed 1 · in flight 0 · waiting 3 · 2 over budget"
                ]
            )
            .len(),
            1,
            "{text}"
        );
        assert!(text.contains("to save     $0.400/h can run"), "{text}");
        assert!(text.contains("of $1.200/h waiting"), "{text}");
        assert_eq!(
            lines_with(&text, &["│  #1 awaiting approval"]).len(),
            1,
            "{text}"
        );
        for id in ["│  #2 over budget", "│  #3 over budget"] {
            assert_eq!(lines_with(&text, &[id]).len(), 1, "{text}");
        }
        // The strip names every node about to go, and why.
        assert_eq!(
            lines_with(&text, &["general", "■■■ 3/3"]).len(),
            1,
            "{text}"
        );
        assert_eq!(
            lines_with(&text, &["node-1", "Underutilized #2 over budget"]).len(),
            1,
            "{text}"
        );
        insta::assert_snapshot!(
            "overview_queue_120x30",
            frame::text(&frame::draw(&mut app, 120, 30))
        );
    }

    /// The Disruption view's table says the same as the overview: the two decisions the
    /// budget has no room for read "over budget", not "awaiting approval".
    #[test]
    fn the_disruption_view_marks_decisions_the_budget_cannot_take() {
        let mut app = frame::app(queued("1", 3), Theme::default(), false);
        app.show(View::Disruption);
        let text = frame::text(&frame::draw(&mut app, 160, 45));
        assert_eq!(
            lines_with(&text, &["#1", "awaiting approval"]).len(),
            1,
            "{text}"
        );
        for id in ["│#2 ", "│#3 "] {
            assert_eq!(lines_with(&text, &[id, "over budget"]).len(), 1, "{text}");
        }
    }

    #[test]
    fn the_waiting_list_says_how_many_it_does_not_show() {
        let s = queued("100%", 15);
        let mut app = frame::app(s, Theme::default(), false);
        for (w, h) in [(80, 24), (120, 30), (160, 45)] {
            let text = frame::text(&frame::draw(&mut app, w, h));
            let shown = lines_with(&text, &["│  #"]).len();
            let more = text
                .lines()
                .find_map(|l| {
                    let rest = l.split("+").nth(1)?;
                    rest.split(" more").next()?.parse::<usize>().ok()
                })
                .unwrap_or_else(|| panic!("no \"+N more\" at {w}x{h}:\n{text}"));
            assert!(shown >= 1, "{w}x{h}:\n{text}");
            assert_eq!(shown + more, 15, "{w}x{h}:\n{text}");
        }
    }

    #[tokio::test]
    async fn the_controller_keeps_the_last_hour_a_minute_a_sample() {
        let snap = demo::snapshot(std::time::Duration::from_secs(8 * 60))
            .await
            .unwrap();
        let t = &snap.trends;
        let minutes: Vec<_> = t.samples().map(|s| s.minute).collect();
        assert!(minutes.len() >= 8 && minutes.len() <= 60, "{minutes:?}");
        for w in minutes.windows(2) {
            assert_eq!(w[1] - w[0], TimeDelta::minutes(1), "{minutes:?}");
        }
        assert_eq!(minutes.last(), Some(&minute_of(snap.at)));
        assert!(
            t.samples().any(|s| s.pending_pods > 0),
            "pods waited in the demo"
        );
        assert!(
            t.samples().map(|s| s.disruptions).sum::<usize>() >= 1,
            "the demo approves a decision"
        );
        assert!(t.samples().all(|s| s.cost_per_hour > 0.0));
        assert!(t.latest().unwrap().pool_nodes("general") >= 1);
    }

    #[tokio::test]
    async fn the_overview_draws_the_last_hour() {
        let snap = demo::snapshot(std::time::Duration::from_secs(8 * 60))
            .await
            .unwrap();
        let mut app = frame::app(snap, Theme::default(), false);
        for (w, h) in [(160, 45), (120, 30), (80, 24)] {
            let text = frame::text(&frame::draw(&mut app, w, h));
            for title in ["Cost $", "Nodes ", "Pending pods ", "Disruptions "] {
                assert!(text.contains(title), "{title} at {w}x{h}:\n{text}");
            }
            // Lines of the charts are Braille, bars are blocks.
            assert!(text.contains(|c: char| ('\u{2801}'..='\u{28ff}').contains(&c)));
            assert!(text.contains(['█', '▇', '▆', '▅', '▄', '▃', '▂', '▁']));
            insta::assert_snapshot!(format!("overview_graphs_{w}x{h}"), text);
        }
    }

    fn mouse(kind: MouseEventKind, column: u16, row: u16) -> MouseEvent {
        MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        }
    }

    fn click(column: u16, row: u16) -> MouseEvent {
        mouse(MouseEventKind::Down(MouseButton::Left), column, row)
    }

    #[tokio::test]
    async fn the_mouse_clicks_tabs_and_rows_and_the_wheel_scrolls() {
        let snap = demo::snapshot(demo::DEMO_AT).await.unwrap();
        let mut app = frame::app(snap, Theme::default(), false);
        let text = screen(&mut app);
        let tabs = text.lines().nth(1).unwrap();
        let x = tabs.find("3 Nodes").expect("the tab is drawn") as u16;
        app.on_mouse(click(x + 3, 1));
        assert_eq!(app.view, View::Nodes);
        // Clicking between tabs or on the header does nothing.
        app.on_mouse(click(0, 0));
        assert_eq!(app.view, View::Nodes);

        let text = screen(&mut app);
        let fourth = app.tables.nodes.visible().nth(3).unwrap().clone();
        let y = text
            .lines()
            .position(|l| l.contains(&fourth.cells[0].text))
            .expect("the fourth row is drawn") as u16;
        app.on_mouse(click(10, y));
        assert_eq!(app.tables.nodes.selected_row().unwrap().id, fourth.id);
        assert_eq!(app.mode, Mode::Normal, "a first click only selects");

        let rows = app.tables.nodes.len();
        app.on_mouse(mouse(MouseEventKind::ScrollDown, 10, y));
        let down = (3 + WHEEL_ROWS as usize).min(rows - 1);
        assert!(down > 3, "{rows} rows");
        assert_eq!(app.tables.nodes.selected_index(), down);
        app.on_mouse(mouse(MouseEventKind::ScrollUp, 10, y));
        assert_eq!(
            app.tables.nodes.selected_index(),
            down - WHEEL_ROWS as usize
        );
        // Back on the fourth row (a click selects it, unless the wheel left it there).
        app.on_mouse(click(10, y));

        // A click on the selected row (the second click of a double click) opens it.
        screen(&mut app);
        app.on_mouse(click(10, y));
        let Mode::Details(d) = &app.mode else {
            panic!("details expected, got {:?}", app.mode)
        };
        assert!(d.title.contains(&fourth.cells[0].text), "{}", d.title);
        let last = d.lines.len().saturating_sub(1) as u16;
        screen(&mut app);
        app.on_mouse(mouse(MouseEventKind::ScrollDown, 10, y));
        let Mode::Details(d) = &app.mode else {
            panic!()
        };
        assert_eq!(
            d.scroll,
            (WHEEL_ROWS as u16).min(last),
            "the wheel scrolls the popup"
        );
        // Pointer motion changes nothing and asks for no frame.
        app.drawn();
        app.on_mouse(mouse(MouseEventKind::Moved, 20, 20));
        assert!(!app.dirty());
        // A click outside the popup closes it.
        app.on_mouse(click(0, 3));
        assert_eq!(app.mode, Mode::Normal);
    }

    #[tokio::test]
    async fn approve_all_names_the_pools_and_nodes_it_touches() {
        let snap = demo::snapshot(demo::DEMO_AT).await.unwrap();
        let names: Vec<String> = snap
            .pending
            .iter()
            .flat_map(|d| d.command.node_names().map(str::to_string))
            .collect();
        let mut pools: Vec<String> = snap
            .pending
            .iter()
            .flat_map(|d| d.command.candidates.iter().map(|c| c.nodepool.clone()))
            .collect();
        pools.dedup();
        let mut app = frame::app(snap, Theme::default(), false);
        app.show(View::Disruption);
        super::press(&mut app, "A");
        let Mode::Confirm(c) = &app.mode else {
            panic!("{:?}", app.mode)
        };
        for n in names.iter().chain(&pools) {
            assert!(c.prompt.contains(n.as_str()), "{n} missing in {}", c.prompt);
        }
    }
}
fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn special(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// What was seen: pasting `ip-10⏎Ay` into the filter approved decisions, because the
/// newline submitted the prompt and the rest ran as keys. A paste is now text.
#[tokio::test]
async fn a_paste_into_the_filter_is_text_and_approves_nothing() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    app.show(View::Disruption);
    press(&mut app, "/");
    app.on_paste("ip-10\nAy");
    let Mode::Filter { input, .. } = &app.mode else {
        panic!("the paste left the filter prompt: {:?}", app.mode)
    };
    assert_eq!(input.text(), "ip-10 Ay");
    assert!(
        screen(&mut app)
            .lines()
            .last()
            .unwrap()
            .contains("/ip-10 Ay")
    );
    // Esc leaves the prompt; nothing was sent and nothing asks for confirmation.
    assert!(app.on_key(special(KeyCode::Esc)).is_empty());
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.in_flight, 0);

    // Outside a prompt a paste does nothing but say so.
    app.on_paste("Ay");
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.in_flight, 0);
    let status = app.status.as_ref().unwrap();
    assert!(status.text.starts_with("paste ignored"), "{}", status.text);

    // The `:` prompt and a reason field take pastes as text too.
    press(&mut app, ":");
    app.on_paste("theme\r\nlight");
    let Mode::Command { input } = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert_eq!(input.text(), "theme light");
}

#[tokio::test]
async fn prompts_edit_at_the_cursor_with_readline_keys() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    press(&mut app, ":");
    press(&mut app, "theme drak");
    app.on_key(ctrl('w'));
    press(&mut app, "dark");
    app.on_key(special(KeyCode::Home));
    app.on_key(special(KeyCode::Delete));
    press(&mut app, "T");
    app.on_key(special(KeyCode::Left));
    app.on_key(special(KeyCode::Delete));
    press(&mut app, "t");
    let Mode::Command { input } = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert_eq!(input.text(), "theme dark");
    app.on_key(special(KeyCode::End));
    app.on_key(ctrl('u'));
    press(&mut app, "theme light");
    enter(&mut app);
    assert_eq!(app.theme.name, "light");
}

#[tokio::test]
async fn ctrl_c_quits_from_anywhere_even_when_the_keymap_unbinds_it() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    let (keymap, problems) = app.keymap.overlay("mine.toml", "[keys]\nquit = [\"Q\"]\n");
    assert!(problems.is_empty(), "{problems:?}");
    app.keymap = keymap;
    assert_eq!(app.keymap.hint(crate::tui::keymap::Action::Quit), "Q");
    for open in ["", "/", ":", "x"] {
        app.show(View::Disruption);
        app.mode = Mode::Normal;
        app.quit = false;
        press(&mut app, open);
        assert_eq!(app.on_key(ctrl('c')), [Effect::Quit], "after {open:?}");
        assert!(app.quit);
    }
}

#[tokio::test]
async fn help_closes_with_question_mark_or_esc_back_to_where_it_was_opened() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    app.show(View::Nodes);
    press(&mut app, "?");
    assert_eq!(app.view, View::Help);
    press(&mut app, "?");
    assert_eq!(app.view, View::Nodes);
    app.show(View::Disruption);
    press(&mut app, "?");
    app.on_key(special(KeyCode::Esc));
    assert_eq!(app.view, View::Disruption);
}

/// Reject and pause-all ask by default, and the reason typed in the popup reaches the
/// journal and the controller's Event.
#[tokio::test]
async fn a_pause_reason_typed_in_the_popup_reaches_the_journal_and_the_event() {
    let (mut sim, rx) = demo::simulation(DEMO_AT).await.unwrap();
    let mut app = frame::app(rx.borrow().clone(), Theme::default(), false);
    assert!(press(&mut app, "p").is_empty(), "p asks before pausing");
    app.on_paste("db migration\n");
    press(&mut app, " tonight");
    let effects = enter(&mut app);
    let [Effect::Request(r)] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert_eq!(
        *r,
        Request::Pause {
            scope: Scope::All,
            reason: Some("db migration tonight".into())
        }
    );
    requests::apply(&mut sim.controller, r.clone(), "console:test")
        .await
        .unwrap();
    let snap = rx.borrow().clone();
    assert!(
        snap.history.iter().any(|e| e.action == Journal::Paused
            && e.actor == "console:test"
            && e.note.as_deref() == Some("db migration tonight")),
        "{:?}",
        snap.history.first()
    );
    assert!(
        snap.events.iter().any(|e| e.kind.to_string()
            == "disruption paused (all) by console:test: db migration tonight"),
        "{:?}",
        snap.events
            .iter()
            .rev()
            .take(3)
            .map(|e| e.kind.to_string())
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn several_problems_at_start_show_the_first_and_count_the_rest() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    app.warn_all(&[
        "keymap k.toml line 2: keys.apprvoe: no such action".into(),
        "config c.toml line 3: colour: not a setting".into(),
    ]);
    let footer = screen(&mut app).lines().last().unwrap().to_string();
    assert!(
        footer.contains("keymap k.toml line 2: keys.apprvoe: no such action (+1 more"),
        "{footer}"
    );
}

/// `:whatif` asks the backend even read-only (it changes nothing), refuses an unknown
/// NodePool before asking, and its answer opens as a popup headed by its first line.
#[tokio::test]
async fn whatif_asks_even_read_only_and_its_answer_opens_as_a_popup() {
    use crate::control::whatif::Query;
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    app.source.read_only = true;
    assert!(app.run_command("whatif 2h nosuch weight=5").is_empty());
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("no NodePool \"nosuch\"")
    );
    assert!(app.run_command("whatif 2h general").is_empty());
    assert!(app.status.as_ref().unwrap().error);
    let effects = app.run_command("whatif 2h general disruption.consolidateAfter=10m");
    let query = Query::parse("2h general disruption.consolidateAfter=10m").unwrap();
    assert_eq!(effects, [Effect::Request(Request::WhatIf(query))]);
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .text
            .contains("the next 2h twice")
    );
    assert_eq!(app.in_flight, 1);
    app.on_report(Ok(
        "what-if: NodePool general, the next 2h\n── the answer\ncost".into(),
    ));
    assert_eq!(app.in_flight, 0);
    let Mode::Details(d) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    assert_eq!(d.title, "what-if: NodePool general, the next 2h");
    assert_eq!(d.lines[0], (Tone::Accent, "── the answer".to_string()));
    assert!(screen(&mut app).contains("cost"));
    app.mode = Mode::Normal;
    app.send(Request::WhatIf(
        Query::parse("1h general weight=1").unwrap(),
    ));
    app.on_report(Err("what-if plays a copy of the embedded simulation".into()));
    assert!(matches!(app.mode, Mode::Normal));
    assert!(app.status.as_ref().unwrap().error);
}
