//! Starting the console: reads the config, keymap and theme (reporting, never failing
//! on, a bad file), runs the event loop over whatever backend it is handed, and renders
//! screenshots of the snapshot it is given. The entry layer builds the world (main.rs,
//! `live`, `demo`) and only picks which of these to call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ratatui::style::Color;

use crate::control::controller::Snapshot;
use crate::tui::app::{App, Settings};
use crate::tui::config;
use crate::tui::console::{Console, Source};
use crate::tui::frame;
use crate::tui::keymap::Keymap;
use crate::tui::logpane::LogPane;
use crate::tui::screenshot;
use crate::tui::terminal::{self, LoopStats};
use crate::tui::theme::{self, Theme};
use crate::tui::views::View;

/// What the command line says about the console.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub theme: Option<String>,
    pub config: Option<PathBuf>,
    pub keymap: Option<PathBuf>,
    pub read_only: bool,
    /// The backend's clock rate (see [`Source::rate`]); None: 1.0, a real clock.
    pub rate: Option<f64>,
}

/// Theme, keys and settings, plus every problem found on the way.
pub struct Prepared {
    pub theme: Theme,
    pub keymap: Keymap,
    pub settings: Settings,
    pub actor: String,
    pub warnings: Vec<String>,
}

/// Reads what the console needs from disk. Bad files become warnings and defaults.
pub fn prepare(opts: &Options) -> Prepared {
    let loaded = config::load(opts.config.as_deref(), opts.keymap.as_deref());
    let mut warnings = loaded.warnings;
    let wanted = opts
        .theme
        .clone()
        .or_else(|| loaded.file.theme.clone())
        .unwrap_or_else(|| theme::DEFAULT.to_string());
    let theme = match Theme::load(&wanted, loaded.themes_dir.as_deref()) {
        Ok((t, problems)) => {
            warnings.extend(problems.iter().map(|p| p.to_string()));
            t
        }
        Err(e) => {
            warnings.push(format!("{e}; using the {} theme", theme::DEFAULT));
            Theme::default()
        }
    };
    let actor = loaded.file.actor.clone().unwrap_or_else(|| {
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("USERNAME"))
            .unwrap_or_else(|_| "operator".into());
        format!("console:{user}")
    });
    Prepared {
        theme,
        keymap: loaded.keymap,
        settings: Settings {
            confirm: loaded.confirm,
            themes_dir: loaded.themes_dir,
            no_color: theme::no_color_requested(),
            truecolor: theme::truecolor_supported(),
        },
        actor,
        warnings,
    }
}

/// Runs the console over any backend: `serve` gets the request channel and the actor
/// and returns the task that answers (the simulation, a live controller's loop, or
/// attach mode's). The console quitting closes the channel, which ends that task; what
/// it returns within 5 s comes back.
pub async fn run_backend<F, T>(
    snapshots: tokio::sync::watch::Receiver<Arc<Snapshot>>,
    label: String,
    actor: Option<String>,
    opts: &Options,
    log: LogPane,
    serve: F,
) -> std::io::Result<(Option<T>, LoopStats)>
where
    F: FnOnce(
        tokio::sync::mpsc::UnboundedReceiver<crate::tui::console::Envelope>,
        String,
    ) -> tokio::task::JoinHandle<T>,
{
    let p = prepare(opts);
    let actor = actor.unwrap_or(p.actor.clone());
    let (console, requests) = Console::new(
        snapshots,
        Source {
            label,
            read_only: opts.read_only,
            actor: actor.clone(),
            rate: opts.rate.unwrap_or(1.0),
        },
    );
    let driver = serve(requests, actor);
    let snapshot = console.snapshots().borrow().clone();
    let mut app = App::new(
        snapshot,
        console.source.clone(),
        p.theme,
        p.keymap,
        p.settings,
        log,
    );
    app.warn_all(&p.warnings);
    // The console draws on a thread of its own, so a controller busy for seconds on this
    // runtime never delays a key or the clock.
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<String>();
    let (ui_tx, ui_rx) = tokio::sync::oneshot::channel::<std::io::Result<LoopStats>>();
    std::thread::Builder::new()
        .name("console".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .and_then(|rt| rt.block_on(terminal::run(console, app, failed_rx)));
            let _ = ui_tx.send(result);
        })?;
    let mut driver = driver;
    let mut ui_rx = ui_rx;
    let mut failed_tx = Some(failed_tx);
    let mut finished = None;
    let stats = loop {
        tokio::select! {
            ui = &mut ui_rx => break match ui {
                Ok(r) => r?,
                // The console's thread panicked (the hook restored the terminal and
                // printed why).
                Err(_) => LoopStats {
                    exit: terminal::Exit::Panicked("the console panicked".into()),
                    ..Default::default()
                },
            },
            done = &mut driver, if finished.is_none() => {
                match done {
                    Ok(v) => finished = Some(Some(v)),
                    Err(e) => {
                        finished = Some(None);
                        let why = if e.is_panic() { "panicked" } else { "was cancelled" };
                        if let Some(tx) = failed_tx.take() {
                            let _ = tx.send(format!("the controller {why}"));
                        }
                    }
                }
                // A backend that ended cleanly leaves the console on its last snapshot.
                failed_tx.take();
            }
        }
    };
    let done = match finished {
        Some(v) => v,
        None => match tokio::time::timeout(Duration::from_secs(5), driver).await {
            Ok(Ok(v)) => Some(v),
            _ => None,
        },
    };
    Ok((done, stats))
}

/// Parses "160x45".
pub fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("--size {s:?}: expected COLSxROWS, e.g. 160x45"))?;
    let w: u16 = w
        .trim()
        .parse()
        .map_err(|_| format!("--size {s:?}: columns must be a number"))?;
    let h: u16 = h
        .trim()
        .parse()
        .map_err(|_| format!("--size {s:?}: rows must be a number"))?;
    if !(40..=500).contains(&w) || !(12..=200).contains(&h) {
        return Err(format!("--size {s:?}: between 40x12 and 500x200"));
    }
    Ok((w, h))
}

/// The colours an SVG uses where the theme says "the terminal's": a neutral dark
/// terminal.
fn defaults(theme: &Theme) -> (Color, Color) {
    let pick = |c: Option<Color>, fallback| match c {
        None | Some(Color::Reset) => fallback,
        Some(c) => c,
    };
    (
        pick(theme.styles.base.fg, Color::Rgb(0xd4, 0xd4, 0xd4)),
        pick(theme.styles.base.bg, Color::Rgb(0x1e, 0x1e, 0x1e)),
    )
}

/// The `--view` a screenshot names, or what the views are called.
pub fn screenshot_view(name: &str) -> Result<View, String> {
    View::parse(name).ok_or_else(|| {
        format!(
            "--view {name:?}: one of {}",
            View::ALL.map(|v| v.slug()).join(", ")
        )
    })
}

/// The console a screenshot draws: `snapshot` shown on `view`, with the theme, keymap
/// and settings `opts` and the config directory give.
pub fn screenshot_app(snapshot: Arc<Snapshot>, view: View, opts: &Options) -> Result<App, String> {
    let p = prepare(opts);
    if !p.warnings.is_empty() {
        return Err(p.warnings.join("\n"));
    }
    let mut app = frame::app(snapshot, p.theme, opts.read_only);
    app.keymap = p.keymap;
    app.settings = p.settings;
    app.source.actor = "console:screenshot".into();
    app.show(view);
    Ok(app)
}

/// Renders `snapshot` on `view` into `out` (.svg or .png) at `(columns, rows)`, with the
/// theme, keymap (for the footer and help) and settings the console would use under
/// `opts`. A screenshot is a record, so it is strict: any mistake in those files fails
/// it, listed.
pub fn screenshot(
    snapshot: Arc<Snapshot>,
    label: &str,
    view: View,
    opts: &Options,
    (w, h): (u16, u16),
    out: &Path,
    report: Option<String>,
) -> Result<(), String> {
    let mut app = screenshot_app(snapshot, view, opts)?;
    app.source.label = label.to_string();
    if let Some(text) = report {
        app.on_report(Ok(text));
    }
    let buffer = frame::draw(&mut app, w, h);
    let (fg, bg) = defaults(&app.theme);
    let svg = screenshot::to_svg(&buffer, fg, bg);
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let bytes = match ext.as_deref() {
        Some("svg") => svg.into_bytes(),
        Some("png") => screenshot::to_png(&svg, 1.0).map_err(|e| e.to_string())?,
        _ => {
            return Err(format!(
                "--out {}: the file must end in .svg or .png",
                out.display()
            ));
        }
    };
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(out, bytes).map_err(|e| format!("{}: {e}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_theme_colour_is_named_and_only_that_colour_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("mine.toml");
        std::fs::write(
            &bad,
            "[styles]\nheader = { fg = \"red\" }\nselected = { bg = \"#12345\", bold = true }\n",
        )
        .unwrap();
        let p = prepare(&Options {
            theme: Some(bad.display().to_string()),
            config: Some(dir.path().join("none.toml")),
            ..Default::default()
        });
        let dark = Theme::default();
        assert_eq!(
            p.theme.styles.header.fg,
            Some(Color::Red),
            "the good slot is kept"
        );
        assert_eq!(p.theme.styles.selected.bg, dark.styles.selected.bg);
        assert!(
            p.theme
                .styles
                .selected
                .add_modifier
                .contains(ratatui::style::Modifier::BOLD),
            "the rest of the bad slot is kept"
        );
        let w = p.warnings.join("\n");
        assert!(
            w.contains(&format!(
                "theme {} line 3: styles.selected.bg: \"#12345\" is not a colour",
                bad.display()
            )),
            "{w}"
        );
    }

    #[test]
    fn sizes_parse_and_bad_ones_say_why() {
        assert_eq!(parse_size("160x45"), Ok((160, 45)));
        assert!(parse_size("160").unwrap_err().contains("COLSxROWS"));
        assert!(parse_size("10x5").unwrap_err().contains("between"));
    }
}
