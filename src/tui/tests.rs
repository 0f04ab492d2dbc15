//! The console against the demo world: every view as the operator sees it (insta
//! snapshots of the off-screen terminal), and the keys doing what they say to the real
//! controller.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::control::approvals::Scope;
use crate::control::journal::Action as Journal;
use crate::control::requests::{self, Request};
use crate::tui::app::{App, Effect, Mode};
use crate::tui::frame::{self, DEMO_AT};
use crate::tui::theme::Theme;
use crate::tui::views::View;

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
        let snap = frame::demo_snapshot(frame::moment(view)).await.unwrap();
        let mut app = frame::app(snap, Theme::default(), false);
        app.show(view);
        insta::assert_snapshot!(view.slug(), screen(&mut app));
    }
}

#[tokio::test]
async fn the_demo_moment_has_what_the_views_are_for() {
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
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
    let pending = frame::demo_snapshot(frame::moment(View::Pending))
        .await
        .unwrap();
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
    let (mut sim, rx) = frame::demo_simulation(DEMO_AT).await.unwrap();
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

    // x: reject the next one.
    if let Some(second) = second {
        app.tables.decisions.top();
        let effects = press(&mut app, "x");
        let [Effect::Request(r @ Request::Reject { id, .. })] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        assert_eq!(*id, second);
        let reply = requests::apply(&mut sim.controller, r.clone(), "console:test").await;
        assert!(reply.is_ok(), "{reply:?}");
        app.on_snapshot(rx.borrow().clone());
        assert!(app.snapshot.pending.iter().all(|d| d.id != second));
        assert!(
            app.snapshot
                .history
                .iter()
                .any(|e| e.action == Journal::Rejected)
        );
    }

    // p: pause everything, then p again resumes.
    let effects = press(&mut app, "p");
    assert_eq!(effects, [Effect::Request(Request::Pause(Scope::All))]);
    let reply = requests::apply(
        &mut sim.controller,
        Request::Pause(Scope::All),
        "console:test",
    )
    .await;
    assert_eq!(reply, Ok("paused disruption: all".into()));
    app.on_snapshot(rx.borrow().clone());
    assert_eq!(app.snapshot.pauses, [Scope::All]);
    assert!(screen(&mut app).contains("PAUSED: all"));
    let effects = press(&mut app, "p");
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
    assert_eq!(
        effects,
        [Effect::Request(Request::Pause(Scope::NodePool(
            pool.clone()
        )))]
    );
    requests::apply(
        &mut sim.controller,
        Request::Pause(Scope::NodePool(pool.clone())),
        "console:test",
    )
    .await
    .unwrap();
    app.on_snapshot(rx.borrow().clone());
    assert_eq!(app.snapshot.pauses, [Scope::NodePool(pool)]);
}

#[tokio::test]
async fn read_only_refuses_dangerous_keys_visibly() {
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
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
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
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
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
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
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
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
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    app.keymap = app
        .keymap
        .overlay("mine.toml", "[keys]\napprove = [\"y\"]\n")
        .unwrap();
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
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
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
    let (mut sim, rx) = frame::demo_simulation(DEMO_AT).await.unwrap();
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
    let snap = frame::demo_snapshot(DEMO_AT).await.unwrap();
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
