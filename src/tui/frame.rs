//! The console drawn off-screen: the demo world stopped at a fixed moment, rendered into
//! a ratatui buffer. Screenshots, view snapshot tests and the render benchmark all draw
//! through here, so what they show is exactly what the terminal would.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use tokio::sync::watch;

use crate::cluster::scenario;
use crate::control::controller::Snapshot;
use crate::simulation::{Options, Pace, Simulation};
use crate::tui::app::{App, Settings};
use crate::tui::console::Source;
use crate::tui::keymap::Keymap;
use crate::tui::logpane::LogPane;
use crate::tui::theme::Theme;

/// The moment of the demo that screenshots and view tests show: decisions wait for
/// approval, a budget window blocks a pool, drift has been detected.
pub const DEMO_AT: Duration = Duration::from_secs(70);

/// The moment each view is shown at: `DEMO_AT`, except Pending, which is shown during the
/// demo's spot capacity outage (3m10s), when pods wait for capacity.
pub fn moment(view: crate::tui::views::View) -> Duration {
    match view {
        crate::tui::views::View::Pending => Duration::from_secs(190),
        _ => DEMO_AT,
    }
}

/// Runs the built-in demo on a virtual clock to `at` and returns the snapshot a
/// console would be showing then.
pub async fn demo_snapshot(at: Duration) -> Result<Arc<Snapshot>, String> {
    let (_sim, snapshots) = demo_simulation(at).await?;
    let s = snapshots.borrow().clone();
    Ok(s)
}

/// The demo simulation stopped at `at`, with a snapshot receiver (so the controller
/// explains every node, as it does while a console watches).
pub async fn demo_simulation(
    at: Duration,
) -> Result<(Simulation, watch::Receiver<Arc<Snapshot>>), String> {
    let scenario = scenario::parse("demo", scenario::DEMO).map_err(|errors| {
        errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    let mut sim = Simulation::new(&scenario, &Options::default(), Pace::Virtual)?;
    // A console is watching: the controller explains every node and publishes.
    let snapshots = sim.controller.subscribe();
    let until = sim.start() + TimeDelta::from_std(at).map_err(|e| format!("time {at:?}: {e}"))?;
    sim.run_until(until, |_| {}).await;
    Ok((sim, snapshots))
}

/// The label embedded demos show in the header.
pub fn demo_source(read_only: bool) -> Source {
    Source {
        label: "embedded simulation: demo".into(),
        read_only,
        actor: "console:test".into(),
        rate: 1.0,
    }
}

/// A console over `snapshot` with default keys and settings.
pub fn app(snapshot: Arc<Snapshot>, theme: Theme, read_only: bool) -> App {
    App::new(
        snapshot,
        demo_source(read_only),
        theme,
        Keymap::default(),
        Settings::default(),
        LogPane::default(),
    )
}

/// Draws one frame of `app` at `width` x `height` and returns the buffer.
pub fn draw(app: &mut App, width: u16, height: u16) -> Buffer {
    let mut terminal = match Terminal::new(TestBackend::new(width, height)) {
        Ok(t) => t,
        Err(never) => match never {},
    };
    let _ = terminal.draw(|f| crate::tui::ui::draw(f, app));
    terminal.backend().buffer().clone()
}

/// A buffer as plain text, one line per row (trailing spaces trimmed).
pub fn text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
