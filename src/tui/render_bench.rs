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
    /// Building the view's rows from a new snapshot (once per snapshot, not per frame).
    pub ms_rows: f64,
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
}

/// The benchmark cluster as a snapshot with its disruption pass.
pub fn snapshot(nodes: usize, pods: usize) -> Arc<Snapshot> {
    let state = Arc::new(crate::bench::disruption::cluster(nodes, pods, 42));
    let now = crate::bench::disruption::bench_now();
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
    let mut app = frame::app(Arc::clone(&snap), Theme::default(), false);
    let mut terminal = match Terminal::new(TestBackend::new(width, height)) {
        Ok(t) => t,
        Err(never) => match never {},
    };
    let mut views = Vec::new();
    for view in View::ALL {
        // Rows: a fresh snapshot makes the shown view rebuild.
        app.show(view);
        let t = Instant::now();
        app.on_snapshot(Arc::clone(&snap));
        let ms_rows = ms(t, 1);
        let _ = terminal.draw(|f| ui::draw(f, &mut app));
        let t = Instant::now();
        for _ in 0..frames {
            app.mark_dirty();
            let _ = terminal.draw(|f| ui::draw(f, &mut app));
        }
        views.push(ViewFigure {
            view: view.slug(),
            ms_per_frame: ms(t, frames),
            ms_rows,
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

    let rounds = 5;
    let t = Instant::now();
    for _ in 0..rounds {
        app.on_snapshot(Arc::clone(&snap));
        let _ = terminal.draw(|f| ui::draw(f, &mut app));
        app.drawn();
    }
    let snapshot_to_frame_ms = ms(t, rounds);

    Figures {
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
