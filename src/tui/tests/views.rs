//! What the tables show at the sizes operators use (80x24, 120x30), time that moves
//! without snapshots, and panes that agree with each other within one snapshot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::control::controller::Snapshot;
use crate::control::journal::{Action as Journal, Entry};
use crate::control::requests::{self, Request};
use crate::demo::{self, DEMO_AT};
use crate::engine::approval::Scope;
use crate::tui::app::{App, Mode};
use crate::tui::frame;
use crate::tui::theme::Theme;
use crate::tui::views::{self, View};

fn screen(app: &mut App, w: u16, h: u16) -> String {
    frame::text(&frame::draw(app, w, h))
}

/// The table's heading line (the first line under the table's top border).
fn heading(text: &str, first: &str) -> String {
    text.lines()
        .find(|l| l.trim_start_matches('│').starts_with(first))
        .unwrap_or_default()
        .to_string()
}

async fn app_at(view: View) -> App {
    let snap = demo::snapshot(demo::moment(view)).await.unwrap();
    let mut app = frame::app(snap, Theme::default(), false);
    app.show(view);
    app
}

/// Seen: at 120 columns Nodes lost ZONE, AGE and DISRUPTION and Decisions lost SAVES,
/// BUDGET and AGE; at 80 Pending kept only POD CPU MEMORY AGE, and cut text carried no
/// ellipsis. Red before: columns were dropped from the right, cells cut bare.
#[tokio::test]
async fn narrow_tables_keep_the_operators_columns_and_ellipsize() {
    for (w, h) in [(80u16, 24u16), (120, 30)] {
        let mut nodes = app_at(View::Nodes).await;
        let text = screen(&mut nodes, w, h);
        let head = heading(&text, "NODE");
        for c in ["NODE", "STATE", "AGE", "DISRUPTION"] {
            assert!(head.contains(c), "{w}x{h} Nodes lost {c}: {head}");
        }
        if w == 120 {
            assert!(head.contains("ZONE"), "{w}x{h}: {head}");
        }
        assert!(
            text.contains('…'),
            "{w}x{h} cut text is ellipsized:\n{text}"
        );
        insta::assert_snapshot!(format!("nodes_{w}x{h}"), text);

        let mut pending = app_at(View::Pending).await;
        let text = screen(&mut pending, w, h);
        let head = heading(&text, "POD");
        for c in ["POD", "AGE", "WHY PENDING"] {
            assert!(head.contains(c), "{w}x{h} Pending lost {c}: {head}");
        }
        insta::assert_snapshot!(format!("pending_{w}x{h}"), text);

        let mut decisions = app_at(View::Disruption).await;
        let text = screen(&mut decisions, w, h);
        let head = heading(&text, "ID");
        for c in ["ID", "STATE", "SAVES", "BUDGET", "AGE"] {
            assert!(head.contains(c), "{w}x{h} Decisions lost {c}: {head}");
        }
        insta::assert_snapshot!(format!("disruption_{w}x{h}"), text);
    }
    // At 80 the pending reason is there, cut with an ellipsis rather than bare.
    let mut pending = app_at(View::Pending).await;
    let text = screen(&mut pending, 80, 24);
    let reasons: Vec<&str> = text
        .lines()
        .filter(|l| l.contains('/') && l.starts_with('│'))
        .collect();
    assert!(!reasons.is_empty(), "{text}");
    let snapshot_reasons: Vec<String> = pending
        .tables
        .pending
        .visible()
        .map(|r| r.cells.last().unwrap().text.clone())
        .collect();
    let first = &snapshot_reasons[0];
    let start: String = first.chars().take(12).collect();
    assert!(
        reasons.iter().any(|l| l.contains(&start)),
        "the reason column shows the reason:\n{text}"
    );
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn plain(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// ctrl-w shows every column at full width; left/right and h/l scroll sideways (and
/// do not switch views while wide); ctrl-w again fits the window.
#[tokio::test]
async fn the_wide_toggle_shows_every_column_and_scrolls_sideways() {
    let mut app = app_at(View::Nodes).await;
    let narrow = heading(&screen(&mut app, 80, 24), "NODE");
    assert!(!narrow.contains("PRICE"), "{narrow}");
    app.on_key(ctrl('w'));
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("wide ▶"), "{text}");
    // The full node name, uncut.
    let name = app.snapshot.state.nodes[0].name.clone();
    assert!(text.contains(&name), "{text}");
    let mut seen = heading(&text, "NODE");
    for _ in 0..12 {
        app.on_key(plain(KeyCode::Right));
        assert_eq!(
            app.view,
            View::Nodes,
            "right scrolls, it does not switch views"
        );
        seen.push_str(&heading(&screen(&mut app, 80, 24), "NODE"));
    }
    for c in views::columns(View::Nodes) {
        assert!(seen.contains(c.title), "{} never shown: {seen}", c.title);
    }
    app.on_key(KeyEvent::new(KeyCode::Char('h'), KeyModifiers::NONE));
    assert!(screen(&mut app, 80, 24).contains("wide ◀"));
    app.on_key(ctrl('w'));
    assert_eq!(heading(&screen(&mut app, 80, 24), "NODE"), narrow);
    app.on_key(plain(KeyCode::Right));
    assert_eq!(app.view, View::Pending, "right switches views again");
}

/// Popups wrap rather than cut: the confirmation's whole prompt is on screen.
#[tokio::test]
async fn popups_wrap_instead_of_cutting() {
    let mut app = app_at(View::Disruption).await;
    app.on_key(KeyEvent::new(KeyCode::Char('A'), KeyModifiers::SHIFT));
    let Mode::Confirm(c) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    let prompt = c.prompt.clone();
    assert!(prompt.chars().count() > 40, "{prompt}");
    let text = screen(&mut app, 40, 20);
    let shown: String = text
        .lines()
        .map(|l| l.trim_matches(|c: char| c == '│' || c.is_whitespace()))
        .collect::<Vec<_>>()
        .join(" ");
    let last_word = prompt.split_whitespace().last().unwrap();
    assert!(shown.contains(last_word), "{prompt}\n{text}");
    // The details popup wraps its long lines too.
    app.mode = Mode::Normal;
    app.on_key(plain(KeyCode::Enter));
    let Mode::Details(d) = &app.mode else {
        panic!("{:?}", app.mode)
    };
    let long = d
        .lines
        .iter()
        .map(|(_, l)| l.clone())
        .find(|l| l.chars().count() > 60 && !l.contains("  "))
        .expect("a long line");
    let text = screen(&mut app, 60, 30);
    let tail: String = long.split_whitespace().last().unwrap().to_string();
    assert!(text.contains(&tail), "{long}\n{text}");
}

fn header(app: &mut App) -> String {
    screen(app, 160, 10).lines().next().unwrap().to_string()
}

/// Seen: the clock read 09:00:01 for 9 s at 1x and froze for good after the scenario's
/// last event. Red before: the header showed the snapshot's time, rows their age then.
#[tokio::test]
async fn the_clock_and_ages_move_every_second_without_snapshots() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut app = frame::app(Arc::clone(&snap), Theme::default(), false);
    let t0 = Instant::now();
    app.on_snapshot_at(Arc::clone(&snap), t0);
    app.show(View::Nodes);
    let clock = |at: chrono::DateTime<chrono::Utc>| at.format("%H:%M:%S").to_string();
    assert!(header(&mut app).contains(&clock(snap.at)));
    let age0 = app.tables.nodes.visible().next().unwrap().cells[10].clone();
    app.drawn();
    // Within the same second nothing is redrawn.
    assert!(!app.on_tick(t0 + Duration::from_millis(300)));
    assert!(app.on_tick(t0 + Duration::from_secs(2)));
    assert_eq!(app.now(), snap.at + TimeDelta::seconds(2));
    assert!(header(&mut app).contains(&clock(snap.at + TimeDelta::seconds(2))));
    let age2 = app.tables.nodes.visible().next().unwrap().cells[10].clone();
    assert_ne!(age0.text, age2.text, "the AGE column moved with the clock");

    // At the simulation's speed: 60 s of its clock per wall second.
    let mut fast = frame::app(Arc::clone(&snap), Theme::default(), false);
    fast.source.rate = 60.0;
    fast.on_snapshot_at(Arc::clone(&snap), t0);
    fast.on_tick(t0 + Duration::from_millis(100));
    assert_eq!(fast.now(), snap.at + TimeDelta::seconds(6));
}

/// Snapshots stop while the backend promised a round: the clock stops a few seconds
/// past that round (it does not make up time) and the header says how old the data
/// is. A heartbeat (a snapshot with nothing new) clears it without rebuilding rows.
#[tokio::test]
async fn a_silent_backend_stops_the_clock_and_shows_a_staleness_badge() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    assert!(snap.next_round > snap.at && snap.next_round <= snap.at + TimeDelta::seconds(10));
    let mut app = frame::app(Arc::clone(&snap), Theme::default(), false);
    let t0 = Instant::now();
    app.on_snapshot_at(Arc::clone(&snap), t0);
    app.on_tick(t0 + Duration::from_secs(4));
    assert_eq!(
        app.stale_for(),
        None,
        "4 s of quiet before the round is not stale"
    );
    assert!(!header(&mut app).contains("old"));
    app.on_tick(t0 + Duration::from_secs(60));
    assert_eq!(app.now(), snap.next_round + TimeDelta::seconds(3));
    assert!(
        header(&mut app).contains("data 1m0s old"),
        "{}",
        header(&mut app)
    );

    let beat = Arc::new(Snapshot {
        at: snap.next_round,
        next_round: snap.next_round + TimeDelta::seconds(10),
        ..(*snap).clone()
    });
    let t1 = t0 + Duration::from_secs(61);
    app.on_snapshot_at(beat, t1);
    app.on_tick(t1 + Duration::from_secs(1));
    assert_eq!(app.stale_for(), None);
    assert_eq!(app.now(), snap.next_round + TimeDelta::seconds(1));
    assert!(!header(&mut app).contains("old"));
}

/// The controller keeps publishing on a quiet cluster (its promised round comes, it
/// says so), and the embedded scenario says when its timeline ends. Red before: a quiet
/// cluster published nothing, so the console could not tell quiet from hung.
#[tokio::test]
async fn a_quiet_simulation_keeps_publishing_and_says_when_its_scenario_ended() {
    let (mut sim, rx) = demo::simulation(DEMO_AT).await.unwrap();
    let end = rx.borrow().scenario_end.expect("the demo's timeline ends");
    assert!(!rx.borrow().scenario_ended());
    // Long past the demo's last event (6m) and its churn.
    let until = sim.start() + TimeDelta::minutes(40);
    sim.run_until(until, |_| {}).await;
    let s = rx.borrow().clone();
    assert!(s.at > end && s.scenario_ended());
    assert!(
        s.at >= until - TimeDelta::seconds(11),
        "the last snapshot is from the last round, not from the last change: {} vs {until}",
        s.at
    );
    let mut app = frame::app(s, Theme::default(), false);
    assert!(header(&mut app).contains("scenario ended"));
}

/// Seen: nodes drifted by a NodePool template change showed `Drifted False`. Every
/// drift reason shows, the moment the pool changes (not only after the next pass).
/// Red before: the view read the pass's record (the NodeClass verdict, or "since").
#[tokio::test]
async fn every_drift_reason_shows_on_the_node() {
    let snap = demo::snapshot(Duration::from_secs(20)).await.unwrap();
    let node = snap.state.nodes[0].clone();
    assert_eq!(views::nodes::drift_of(&snap, &node), None);
    let mut state = (*snap.state).clone();
    state
        .nodepools
        .get_mut(&node.nodepool)
        .unwrap()
        .spec
        .template
        .metadata
        .labels
        .insert("team".into(), "storefront".into());
    let changed = Snapshot {
        state: Arc::new(state),
        ..(*snap).clone()
    };
    let why = views::nodes::drift_of(&changed, &node);
    assert_eq!(why.as_deref(), Some("NodePoolDrifted"));
    let d = views::nodes::details(&changed, &node.nodeclaim, changed.at).unwrap();
    assert!(
        d.lines.iter().any(|(_, l)| l.starts_with("Drifted")
            && l.contains("True")
            && l.contains("NodePoolDrifted")),
        "{:?}",
        d.lines
    );
    let rows = views::nodes::rows(&changed, changed.at);
    let row = rows.iter().find(|r| r.id == node.nodeclaim).unwrap();
    assert_eq!(row.cells[1].text, "drifted");

    // The NodeClass's verdict, and the requirements.
    let mut n = node.clone();
    n.nodeclass_drift = Some("AMIDrift".into());
    assert_eq!(
        views::nodes::drift_of(&snap, &n).as_deref(),
        Some("AMIDrift")
    );
    let mut state = (*snap.state).clone();
    let pool = state.nodepools.get_mut(&node.nodepool).unwrap();
    pool.spec.template.spec.requirements.push(
        crate::api::nodeclaim::NodeSelectorRequirementWithMinValues {
            key: crate::api::labels::INSTANCE_TYPE.into(),
            operator: crate::api::nodeclaim::Operator::In,
            values: vec!["x9.nothing".into()],
            min_values: None,
        },
    );
    let narrowed = Snapshot {
        state: Arc::new(state),
        ..(*snap).clone()
    };
    let why = views::nodes::drift_of(&narrowed, &node).unwrap_or_default();
    assert!(why.starts_with("RequirementsDrifted"), "{why}");
}

/// Seen: the Blocked pane said "waiting for approval" while the table said draining.
/// After an approval, before the next pass, both read the command in flight. Red
/// before: the pane printed the last pass's verdict.
#[tokio::test]
async fn the_blocked_pane_and_the_tables_agree_after_an_approval() {
    let (mut sim, rx) = demo::simulation(DEMO_AT).await.unwrap();
    let id = rx.borrow().pending[0].id;
    requests::apply(
        &mut sim.controller,
        Request::Approve { ids: vec![id] },
        "console:test",
    )
    .await
    .unwrap();
    let s = rx.borrow().clone();
    let e = s.running.iter().find(|e| e.id == id).expect("running");
    let claim = e.command.candidates[0].nodeclaim.clone();
    let node = e.command.candidates[0].node.clone();
    // The pass has not run since: its verdict still says the decision waits.
    assert!(
        s.outcomes[&claim]
            .to_string()
            .contains("waiting for approval"),
        "{}",
        s.outcomes[&claim]
    );
    let blocked = views::disruption::blocked(&s);
    assert!(
        !blocked
            .iter()
            .any(|(n, why)| *n == node || why.contains(&format!("#{id}"))),
        "{blocked:?}"
    );
    let mut app = frame::app(Arc::clone(&s), Theme::default(), false);
    app.show(View::Nodes);
    let row = app.tables.nodes.visible().find(|r| r.id == claim).unwrap();
    assert!(
        row.cells[1].text.contains(&format!("#{id}")),
        "{:?}",
        row.cells[1]
    );
    assert!(
        row.cells
            .last()
            .unwrap()
            .text
            .starts_with(&format!("in command #{id}")),
        "{:?}",
        row.cells.last()
    );
}

/// Seen: during a deletion the cost counted a node the node count did not. Red before:
/// "6 nodes" beside a cost that included the deleting node.
#[tokio::test]
async fn the_header_counts_the_nodes_its_cost_is_over() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut state = (*snap.state).clone();
    let total = state.nodes.len();
    state.nodes[0].deleting = true;
    let cost: f64 = state.nodes.iter().map(|n| n.price).sum();
    let s = Arc::new(Snapshot {
        state: Arc::new(state),
        ..(*snap).clone()
    });
    let mut app = frame::app(s, Theme::default(), false);
    let h = header(&mut app);
    assert!(
        h.contains(&format!("{} nodes (+1 deleting)", total - 1)),
        "{h}"
    );
    assert!(h.contains(&crate::tui::format::per_hour(cost)), "{h}");
}

/// Seen: a paused pool still showed budget headroom. Red before: "E:1 D:1 U:0".
#[tokio::test]
async fn a_paused_pool_shows_paused_not_headroom() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let pool = snap.budgets[0].nodepool.clone();
    let s = Arc::new(Snapshot {
        pauses: vec![Scope::NodePool(pool.clone())],
        ..(*snap).clone()
    });
    let mut app = frame::app(s, Theme::default(), false);
    app.show(View::NodePools);
    assert!(app.tables.nodepools.select_id(&pool));
    let row = app.tables.nodepools.selected_row().unwrap().clone();
    assert_eq!(row.cells[9].text, "paused");
    let text = screen(&mut app, 160, 45);
    assert!(
        text.contains("allowed now: none: disruption paused"),
        "{text}"
    );
}

/// Seen: SAVES had no unit, and a decision's AGE restarted when it started running.
/// Red before: "$0.0850", and the running row's age counted from its start.
#[tokio::test]
async fn saves_reads_per_hour_and_age_counts_from_the_proposal() {
    let (mut sim, rx) = demo::simulation(DEMO_AT).await.unwrap();
    let d = rx.borrow().pending[0].clone();
    let mut saving = (*rx.borrow().clone()).clone();
    saving.pending[0].command.savings_per_hour = 0.085;
    let rows = views::disruption::rows(&saving, saving.at);
    assert_eq!(rows[0].cells[6].text, "$0.085/h");
    requests::apply(
        &mut sim.controller,
        Request::Approve { ids: vec![d.id] },
        "console:test",
    )
    .await
    .unwrap();
    let s = rx.borrow().clone();
    let e = s.running.iter().find(|e| e.id == d.id).unwrap();
    assert!(e.started > d.proposed_at, "approved after its proposal");
    assert_eq!(e.proposed, d.proposed_at);
    let rows = views::disruption::rows(&s, s.at);
    let row = rows
        .iter()
        .find(|r| r.id == format!("running/{}", d.id))
        .unwrap();
    assert_eq!(
        row.cells[8].sort,
        crate::tui::widgets::table::SortKey::Num((s.at - d.proposed_at).num_seconds() as f64)
    );
}

/// Seen: History said "withdrawn by console:operator" for a system withdrawal. The
/// controller withdraws (even when an operator's approval found the decision stale),
/// and History says so.
#[test]
fn history_names_who_did_what() {
    let entry = |actor: &str, action| Entry {
        at: chrono::DateTime::UNIX_EPOCH,
        actor: actor.into(),
        action,
        decision: Some(3),
        method: Some("drift".into()),
        reason: None,
        nodes: vec!["ip-10-0-0-1".into()],
        nodeclaims: vec!["general-abc".into()],
        savings_per_hour: None,
        detail: "a pod would not fit".into(),
        note: None,
    };
    let (w, _) = views::disruption::history_line(&entry("controller", Journal::Withdrawn));
    assert_eq!(
        w,
        "00:00:00 withdrawn #3 drift [ip-10-0-0-1] by the controller: a pod would not fit"
    );
    let (a, _) = views::disruption::history_line(&entry("console:alice", Journal::Approved));
    assert!(
        a.contains("approved #3") && a.contains("by console:alice"),
        "{a}"
    );
}

/// Costs priced from a fallback table (the AWS provider before or without the Pricing
/// API) say so on the Cost panel; the region's own prices carry no mark.
#[tokio::test]
async fn costs_from_fallback_prices_are_marked_on_the_cost_panel() {
    let mut app = app_at(View::Overview).await;
    let text = screen(&mut app, 120, 30);
    assert!(!text.contains("fallback prices"), "{text}");
    let snap = demo::snapshot(demo::moment(View::Overview)).await.unwrap();
    let marked = Arc::new(Snapshot {
        prices_note: Some(
            "on-demand prices are the built-in us-east-1 table (fallback): GetProducts: denied"
                .into(),
        ),
        ..(*snap).clone()
    });
    app.on_snapshot(marked);
    let text = screen(&mut app, 120, 30);
    assert!(text.contains("fallback prices"), "{text}");
}

/// Issue 22: a pool whose budgets are read in its own zone shows each window's time in
/// that zone and in UTC.
#[tokio::test]
async fn budget_windows_show_the_pools_zone_and_utc() {
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut budgets = snap.budgets.clone();
    let batch = budgets
        .iter_mut()
        .find(|b| b.nodepool == "batch")
        .expect("the demo's batch pool");
    let closes = batch.windows[0]
        .closes_at
        .expect("the morning window is open");
    batch.timezone = Some(chrono_tz::America::New_York);
    let s = Arc::new(Snapshot {
        budgets,
        ..(*snap).clone()
    });
    let mut app = frame::app(s, Theme::default(), false);
    app.show(View::NodePools);
    assert!(app.tables.nodepools.select_id("batch"));
    let text = screen(&mut app, 160, 45);
    assert!(text.contains("schedules in America/New_York"), "{text}");
    let local = closes.with_timezone(&chrono_tz::America::New_York);
    let shown = format!(
        "ACTIVE, closes {} EST / {} UTC",
        local.format("%H:%M"),
        closes.format("%H:%M")
    );
    assert!(text.contains(&shown), "{shown}\n{text}");
}

/// Issue 22: a pool the circuit breaker paused reads "breaker" in red, and its budget
/// panel gives the evidence, from the pool's pause annotations (what every console sees).
#[tokio::test]
async fn a_tripped_breaker_shows_its_evidence_in_red() {
    use crate::api::protocol as keys;
    let snap = demo::snapshot(DEMO_AT).await.unwrap();
    let mut state = (*snap.state).clone();
    let pool = state
        .nodepools
        .get_mut("general")
        .expect("the demo's general pool");
    let evidence = "3 of the last 4 replacements failed: general-replacement-1-0 (#1): its node went NotReady 2m50s after initializing";
    pool.metadata.annotations = Some(
        [
            (keys::PAUSED.to_string(), keys::BREAKER_ACTOR.to_string()),
            (keys::PAUSED_NOTE.to_string(), evidence.to_string()),
        ]
        .into(),
    );
    let s = Arc::new(Snapshot {
        state: Arc::new(state),
        pauses: vec![Scope::NodePool("general".into())],
        ..(*snap).clone()
    });
    let mut app = frame::app(s, Theme::default(), false);
    app.show(View::NodePools);
    assert!(app.tables.nodepools.select_id("general"));
    let row = app.tables.nodepools.selected_row().unwrap().clone();
    assert_eq!(row.cells[10].text, "breaker");
    assert_eq!(row.cells[10].tone, crate::tui::widgets::table::Tone::Bad);
    assert_eq!(row.cells[9].text, "tripped");
    let text = screen(&mut app, 160, 45);
    assert!(
        text.contains("none: circuit breaker tripped, until an operator resumes: 3 of the last 4"),
        "{text}"
    );
    assert!(
        text.contains("NotReady 2m50s after initializing"),
        "the evidence wraps, not cut: {text}"
    );
}
