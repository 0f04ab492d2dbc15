//! The built-in demo stopped at a moment: the world that screenshots, view tests and the
//! README's pictures show. Building it wires the embedded simulation (sim cluster, sim
//! cloud, controller), which is the entry layer's job; the console is only handed the
//! snapshot (see `tui::frame` for drawing it off-screen).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use tokio::sync::watch;

use crate::cluster::scenario;
use crate::control::controller::Snapshot;
use crate::control::whatif::Query;
use crate::simulation::{Options, Pace, Simulation};
use crate::tui::launch;
use crate::tui::views::View;
use crate::whatif::Forks;

/// The moment of the demo that screenshots and view tests show: decisions wait for
/// approval, a budget window blocks a pool, drift has been detected.
pub const DEMO_AT: Duration = Duration::from_secs(70);

/// The moment each view is shown at: `DEMO_AT`, except Pending, which is shown during the
/// demo's spot capacity outage (3m10s), when pods wait for capacity.
pub fn moment(view: View) -> Duration {
    match view {
        View::Pending => Duration::from_secs(190),
        _ => DEMO_AT,
    }
}

/// Runs the built-in demo on a virtual clock to `at` and returns the snapshot a
/// console would be showing then.
pub async fn snapshot(at: Duration) -> Result<Arc<Snapshot>, String> {
    let (_sim, snapshots) = simulation(at).await?;
    let s = snapshots.borrow().clone();
    Ok(s)
}

/// The demo simulation stopped at `at`, with a snapshot receiver (so the controller
/// explains every node, as it does while a console watches).
pub async fn simulation(
    at: Duration,
) -> Result<(Simulation, watch::Receiver<Arc<Snapshot>>), String> {
    let scenario = scenario::parse("demo", scenario::DEMO).map_err(|errors| {
        errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    simulation_of(&scenario, at).await
}

/// Any scenario stopped at `at`, as [`simulation`] stops the demo.
pub async fn simulation_of(
    scenario: &scenario::Scenario,
    at: Duration,
) -> Result<(Simulation, watch::Receiver<Arc<Snapshot>>), String> {
    let mut sim = Simulation::new(scenario, &Options::default(), Pace::Virtual)?;
    // A console is watching: the controller explains every node and publishes.
    let snapshots = sim.controller.subscribe();
    let until = sim.start() + TimeDelta::from_std(at).map_err(|e| format!("time {at:?}: {e}"))?;
    sim.run_until(until, |_| {}).await;
    Ok((sim, snapshots))
}

/// Renders one view of `scenario` (the demo when `None`) at `at` (the view's demo moment
/// by default) to `out`, with the answer to a `:whatif` question over it when one is
/// asked.
pub async fn screenshot(
    scenario: Option<&scenario::Scenario>,
    view: &str,
    opts: &launch::Options,
    size: &str,
    at: Option<Duration>,
    out: &Path,
    whatif: Option<&str>,
) -> Result<(), String> {
    let view = launch::screenshot_view(view)?;
    let size = launch::parse_size(size)?;
    let query = whatif
        .map(|q| Query::parse(q).map_err(|e| format!("--whatif: {e}")))
        .transpose()?;
    let at = at.unwrap_or_else(|| moment(view));
    let (sim, snapshots) = match scenario {
        None => simulation(at).await?,
        Some(s) => simulation_of(s, at).await?,
    };
    let name = scenario.map_or("demo", |s| s.name.as_str());
    let report = match &query {
        Some(q) => Some(
            Forks::prepare(&sim, q)
                .map_err(|e| format!("--whatif: {e}"))?
                .run()
                .text(),
        ),
        None => None,
    };
    let label = format!("embedded simulation: {name}");
    let snapshot = snapshots.borrow().clone();
    launch::screenshot(snapshot, &label, view, opts, size, out, report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::frame;

    /// What was seen: `screenshot` ignored --config and --keymap.
    #[tokio::test]
    async fn a_screenshot_uses_the_config_and_keymap_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("mine.toml");
        std::fs::write(&config, "theme = \"light\"\nconfirm = [\"approve\"]\n").unwrap();
        let keymap = dir.path().join("keys.toml");
        std::fs::write(&keymap, "[keys]\napprove = [\"y\"]\n").unwrap();
        let opts = launch::Options {
            config: Some(config),
            keymap: Some(keymap),
            ..Default::default()
        };
        let demo = snapshot(moment(View::Disruption)).await.unwrap();
        let mut app = launch::screenshot_app(Arc::clone(&demo), View::Disruption, &opts).unwrap();
        assert_eq!(app.theme.name, "light");
        assert!(
            app.settings
                .confirm
                .contains(&crate::tui::keymap::Action::Approve)
        );
        let text = frame::text(&frame::draw(&mut app, 160, 45));
        let footer = text.lines().last().unwrap();
        assert!(footer.contains("y approve"), "{footer}");
        // A mistake in a file it is told to use fails the screenshot, named.
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[keys]\napprove = [\"ctrl-\"]\n").unwrap();
        let opts = launch::Options {
            keymap: Some(bad),
            ..opts
        };
        let e = launch::screenshot_app(demo, View::Disruption, &opts)
            .err()
            .unwrap();
        assert!(e.contains("bad.toml line 2: keys.approve"), "{e}");
    }

    #[tokio::test]
    async fn a_bad_screenshot_flag_is_named_before_the_demo_runs() {
        let out = Path::new("never-written.svg");
        let opts = launch::Options::default();
        let e = screenshot(None, "nodez", &opts, "160x45", None, out, None)
            .await
            .unwrap_err();
        assert!(e.contains("--view \"nodez\""), "{e}");
        let e = screenshot(None, "nodes", &opts, "10x5", None, out, None)
            .await
            .unwrap_err();
        assert!(e.contains("between"), "{e}");
        assert!(!out.exists());
    }

    /// What was seen: the built-in demo printed an Error by itself at 08:30 ("approve: no
    /// pending decision"): its scripted operator found nothing waiting. Under every approval
    /// mode the console offers, the demo's timeline runs without an error.
    #[tokio::test]
    async fn the_builtin_demo_never_errors_by_itself() {
        use crate::control::events::EventKind;
        let demo = scenario::parse("demo", scenario::DEMO).unwrap();
        for approval in [None, Some("manual"), Some("auto")] {
            let opts = Options {
                approval: approval.map(|a| vec![a.to_string()]),
                ..Options::default()
            };
            let mut sim = Simulation::new(&demo, &opts, Pace::Virtual).unwrap();
            let until = sim.start() + chrono::TimeDelta::minutes(10);
            let mut errors = Vec::new();
            sim.run_until(until, |e| {
                if let EventKind::Error { message } = &e.kind {
                    errors.push(format!("{:.0}s: {message}", e.t));
                }
            })
            .await;
            assert!(errors.is_empty(), "approval {approval:?}: {errors:#?}");
        }
    }
}
