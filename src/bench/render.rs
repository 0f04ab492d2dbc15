//! `bench render`: what drawing the console costs at scale. The cluster is the
//! disruption benchmark's (N nodes, M pods, every node explained by a full pass); each
//! view is drawn repeatedly into an off-screen 160x45 terminal. Also measured: the rows
//! rebuild a new snapshot costs, key-press-to-frame latency, and redraws while nothing
//! changes (the tick alone).

use std::sync::Arc;
use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde::Serialize;

use crate::control::controller::Snapshot;
use crate::tui::app::App;
use crate::tui::frame;
use crate::tui::theme::Theme;
use crate::tui::ui;
use crate::tui::views::View;

/// One view's figures.
#[derive(Clone, Debug, Serialize)]
pub struct ViewFigure {
    pub view: &'static str,
    /// Drawing one frame (rows already built), mean over the frames.
    pub ms_per_frame: f64,
    /// Building the view's rows from a new snapshot (once per snapshot, not per frame),
    /// mean over five snapshots.
    pub ms_rows: f64,
    /// A new snapshot on this view until its frame is drawn (rows rebuilt and the
    /// first frame, which formats the rows on screen), mean over a few snapshots.
    pub ms_snapshot_to_frame: f64,
}

/// The whole run's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Figures {
    pub nodes: usize,
    pub pods: usize,
    pub width: u16,
    pub height: u16,
    pub views: Vec<ViewFigure>,
    /// Frames drawn in one simulated minute of ticks with no snapshot and no key.
    pub idle_redraws_per_minute: u64,
    /// A `j` press on the Nodes view until its frame is drawn (mean).
    pub key_to_frame_ms: f64,
    /// A new snapshot on the Nodes view until its frame is drawn (rows rebuilt).
    pub snapshot_to_frame_ms: f64,
    /// Key to frame through the real event loop while a controller runs flat out beside
    /// it.
    pub busy: Busy,
}

/// Key press to frame through the console's own event loop (on its thread, as in the
/// binary) while the 1,000-node day (examples/diurnal-1000.yaml) runs as fast as it can
/// on another thread, publishing snapshots all the while.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Busy {
    pub presses: usize,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Snapshots the console took meanwhile, and the cluster's size at the end.
    pub snapshots: u64,
    pub nodes: usize,
    /// Simulated time the controller covered during the measurement.
    pub simulated_minutes: f64,
}

/// The benchmark cluster as a snapshot with its disruption pass.
pub fn snapshot(nodes: usize, pods: usize) -> Arc<Snapshot> {
    let state = Arc::new(super::disruption::cluster(nodes, pods, 42));
    let now = super::disruption::bench_now();
    let pass = crate::engine::disruption::plan(&state, now, &Default::default());
    Arc::new(Snapshot {
        generation: 1,
        state,
        budgets: pass.budgets,
        outcomes: pass.outcomes,
        ..Snapshot::empty(now)
    })
}

fn ms(since: Instant, n: usize) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0 / n.max(1) as f64
}

/// Runs the benchmark.
pub fn run(nodes: usize, pods: usize, frames: usize, width: u16, height: u16) -> Figures {
    let snap = snapshot(nodes, pods);
    let waiting = with_pending(&snap);
    let mut app = frame::app(Arc::clone(&snap), Theme::default(), false);
    let mut terminal = match Terminal::new(TestBackend::new(width, height)) {
        Ok(t) => t,
        Err(never) => match never {},
    };
    let mut round = 0;
    let mut views = Vec::new();
    for view in View::ALL {
        // The Pending view over a cluster where pods wait (the benchmark's are all bound).
        let base = if view == View::Pending {
            &waiting
        } else {
            &snap
        };
        // Rows: a fresh snapshot makes the shown view rebuild.
        app.show(view);
        let rounds = 5;
        let nexts: Vec<_> = (0..rounds)
            .map(|_| {
                round += 1;
                fresh(base, round)
            })
            .collect();
        let t = Instant::now();
        for next in nexts {
            app.on_snapshot(next);
        }
        let ms_rows = ms(t, rounds);
        let _ = terminal.draw(|f| ui::draw(f, &mut app));
        let t = Instant::now();
        for _ in 0..frames {
            app.mark_dirty();
            let _ = terminal.draw(|f| ui::draw(f, &mut app));
        }
        let ms_per_frame = ms(t, frames);
        let ms_snapshot_to_frame = snapshots_to_frames(&mut app, &mut terminal, base, &mut round);
        views.push(ViewFigure {
            view: view.slug(),
            ms_per_frame,
            ms_rows,
            ms_snapshot_to_frame,
        });
    }

    // Idle: sixty one-second ticks, drawing whenever the app says it is dirty.
    app.show(View::Nodes);
    let _ = terminal.draw(|f| ui::draw(f, &mut app));
    app.drawn();
    let mut idle = 0;
    let start = Instant::now();
    for i in 0..60 {
        app.on_tick(start + std::time::Duration::from_secs(i));
        if app.dirty() {
            let _ = terminal.draw(|f| ui::draw(f, &mut app));
            app.drawn();
            idle += 1;
        }
    }

    let presses = frames.max(1);
    let t = Instant::now();
    for _ in 0..presses {
        app.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE));
        let _ = terminal.draw(|f| ui::draw(f, &mut app));
        app.drawn();
    }
    let key_to_frame_ms = ms(t, presses);

    let snapshot_to_frame_ms = snapshots_to_frames(&mut app, &mut terminal, &snap, &mut round);

    let busy = busy(presses.min(200), width, height);
    Figures {
        busy,
        nodes: snap.state.nodes.len(),
        pods: snap.state.pods.len(),
        width,
        height,
        views,
        idle_redraws_per_minute: idle,
        key_to_frame_ms,
        snapshot_to_frame_ms,
    }
}

/// Mean ms from a new snapshot (each a fresh revision of `base`, so none reads as a
/// heartbeat) until the shown view's frame is drawn, over five snapshots.
fn snapshots_to_frames(
    app: &mut App,
    terminal: &mut Terminal<TestBackend>,
    base: &Arc<Snapshot>,
    round: &mut u64,
) -> f64 {
    let rounds = 5;
    let nexts: Vec<_> = (0..rounds)
        .map(|_| {
            *round += 1;
            fresh(base, *round)
        })
        .collect();
    let t = Instant::now();
    for next in nexts {
        app.on_snapshot(next);
        let _ = terminal.draw(|f| ui::draw(f, app));
        app.drawn();
    }
    ms(t, rounds)
}

/// The saturated-controller measurement (see `Busy`).
pub fn busy(presses: usize, width: u16, height: u16) -> Busy {
    use crate::cluster::scenario;
    use crate::simulation::{Options, Pace, Simulation};
    use crate::tui::console::{Console, Source};
    use crate::tui::terminal::{Wake, event_loop};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    let Ok(scenario) = scenario::parse("diurnal-1000", scenario::DIURNAL_1000) else {
        return Busy::default();
    };
    let Ok(mut sim) = Simulation::new(&scenario, &Options::default(), Pace::Virtual) else {
        return Busy::default();
    };
    let snapshots = sim.controller.subscribe();
    let start = sim.start();
    let stop = Arc::new(AtomicBool::new(false));
    let controller = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return 0.0;
            };
            rt.block_on(async {
                while !stop.load(Ordering::Relaxed) {
                    sim.step().await;
                    let next = sim.next_time();
                    sim.wait_until(next).await;
                }
            });
            (sim.now() - start).num_seconds() as f64 / 60.0
        })
    };

    let (console, _requests) = Console::new(
        snapshots.clone(),
        Source {
            label: "bench".into(),
            read_only: true,
            actor: "console:bench".into(),
            rate: 1.0,
        },
    );
    let mut app = frame::app(snapshots.borrow().clone(), Theme::default(), true);
    app.show(View::Nodes);
    let (key_tx, mut key_rx) = tokio::sync::mpsc::unbounded_channel();
    let (probe_tx, mut probe_rx) = tokio::sync::mpsc::unbounded_channel();
    let (_failed_tx, failed) = tokio::sync::oneshot::channel();
    let ui = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        let mut terminal = match Terminal::new(TestBackend::new(width, height)) {
            Ok(t) => t,
            Err(never) => match never {},
        };
        let events = futures_util::stream::poll_fn(move |cx| key_rx.poll_recv(cx));
        rt.block_on(event_loop(
            &mut terminal,
            console,
            app,
            events,
            Wake {
                signals: None,
                failed,
                probe: Some(probe_tx),
                drain_typeahead: false,
            },
        ))
        .ok()
    });

    // One key every 40 ms; each one's latency is until the first frame drawn after the
    // loop handled it.
    let mut latencies = Vec::with_capacity(presses);
    let mut handled = 0u64;
    for i in 1..=presses as u64 {
        std::thread::sleep(Duration::from_millis(40));
        let sent = Instant::now();
        let key = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
        if key_tx.send(Ok(crossterm::event::Event::Key(key))).is_err() {
            break;
        }
        while handled < i {
            match probe_rx.blocking_recv() {
                Some((keys, at)) => {
                    handled = keys;
                    if keys >= i {
                        latencies.push(at.saturating_duration_since(sent).as_secs_f64() * 1e3);
                    }
                }
                None => break,
            }
        }
    }
    let quit = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    let _ = key_tx.send(Ok(crossterm::event::Event::Key(quit)));
    let stats = ui.join().ok().flatten().unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    let simulated_minutes = controller.join().unwrap_or(0.0);
    let nodes = snapshots.borrow().state.nodes.len();
    latencies.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    Busy {
        presses: latencies.len(),
        mean_ms: latencies.iter().sum::<f64>() / latencies.len().max(1) as f64,
        p99_ms: pick(0.99),
        max_ms: latencies.last().copied().unwrap_or(0.0),
        snapshots: stats.snapshots,
        nodes,
        simulated_minutes,
    }
}

/// The same cluster as the `round`th new snapshot (a new generation and change count),
/// as the controller publishes after a change: the console rebuilds rows for it, where
/// the very same snapshot again would be a heartbeat that only moves the clock. (Every
/// round must count differently: two with the same count are a heartbeat.)
fn fresh(snap: &Arc<Snapshot>, round: u64) -> Arc<Snapshot> {
    let mut s = Snapshot::clone(snap);
    s.generation += round;
    s.changes += round;
    Arc::new(s)
}

/// The benchmark cluster with every tenth pod unbound and waiting (unschedulable), so
/// the Pending view has thousands of rows to show.
pub fn with_pending(snap: &Arc<Snapshot>) -> Arc<Snapshot> {
    let mut state = crate::engine::state::ClusterState::clone(&snap.state);
    for p in state.pods.iter_mut().step_by(10) {
        p.node_name = None;
        p.unschedulable = true;
    }
    let mut s = Snapshot::clone(snap);
    s.state = Arc::new(state);
    Arc::new(s)
}
