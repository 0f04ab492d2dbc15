//! The event loop. One `select!` over the terminal's key stream, the controller's
//! snapshot channel, a 1 s tick and the answers to requests: each wake-up applies what
//! arrived and marks the app dirty; a frame is drawn only when something changed, and at
//! most every 16 ms however fast snapshots arrive. Every way out (quit, error, SIGTERM,
//! panic) restores the terminal. Pastes arrive bracketed (as one `Event::Paste`, never
//! as keys), and whatever was typed before the first frame is dropped: nobody can mean
//! a key they pressed before seeing what it would act on.

use std::io;
use std::time::{Duration, Instant};

use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, Event, EventStream, KeyEventKind,
};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::mpsc;

use crate::tui::app::{App, Effect};
use crate::tui::console::{Console, Reply};
use crate::tui::ui;

/// The shortest time between two frames.
pub const FRAME: Duration = Duration::from_millis(16);

/// What the loop did, for the exit line and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    pub frames: u64,
    pub snapshots: u64,
    pub keys: u64,
}

/// Runs the console in the terminal until the operator quits.
pub async fn run(console: Console, app: App) -> io::Result<LoopStats> {
    // ratatui::init enables raw mode and the alternate screen and installs a panic hook
    // that restores the terminal before the panic message prints.
    let mut terminal = ratatui::init();
    // Best effort: a terminal without bracketed paste sends pastes as keys, as before.
    let _ = crossterm::execute!(io::stdout(), EnableBracketedPaste);
    let result = event_loop(&mut terminal, console, app).await;
    let _ = crossterm::execute!(io::stdout(), DisableBracketedPaste);
    ratatui::restore();
    result
}

/// Drops every terminal event already queued (keys typed, or pasted, while the console
/// was starting). Called once, right after the first frame, before the key stream is
/// first polled, so nothing else reads the terminal at the same time.
fn discard_pending_input() -> io::Result<()> {
    let mut dropped = 0usize;
    while crossterm::event::poll(Duration::ZERO)? {
        let _ = crossterm::event::read()?;
        dropped += 1;
    }
    if dropped > 0 {
        tracing::info!("dropped {dropped} key(s) typed before the console was on screen");
    }
    Ok(())
}

async fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    console: Console,
    mut app: App,
) -> io::Result<LoopStats>
where
    B::Error: Into<io::Error>,
{
    let mut stats = LoopStats::default();
    let mut keys = EventStream::new();
    let mut snapshots = console.snapshots();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (reply_tx, mut replies) = mpsc::unbounded_channel::<Reply>();
    let mut snapshots_open = true;
    let mut last_draw: Option<Instant> = None;
    let mut drained = false;
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;

    loop {
        if app.dirty() {
            let due = last_draw.map(|t| t + FRAME).unwrap_or_else(Instant::now);
            if Instant::now() >= due {
                terminal
                    .draw(|f| ui::draw(f, &mut app))
                    .map_err(Into::into)?;
                app.drawn();
                stats.frames += 1;
                last_draw = Some(Instant::now());
                if !drained {
                    drained = true;
                    discard_pending_input()?;
                }
            }
        }
        let draw_at = last_draw.map(|t| t + FRAME).unwrap_or_else(Instant::now);
        let dirty = app.dirty();
        #[cfg(unix)]
        let sigterm = term.recv();
        #[cfg(not(unix))]
        let sigterm = std::future::pending::<Option<()>>();
        tokio::select! {
            event = keys.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    stats.keys += 1;
                    for effect in app.on_key(key) {
                        match effect {
                            Effect::Quit => return Ok(stats),
                            Effect::Request(r) => {
                                let answer = console.request(r);
                                let tx = reply_tx.clone();
                                tokio::spawn(async move {
                                    let _ = tx.send(answer.await);
                                });
                            }
                        }
                    }
                }
                Some(Ok(Event::Paste(text))) => app.on_paste(&text),
                Some(Ok(Event::Resize(_, _))) => {
                    terminal.autoresize().map_err(Into::into)?;
                    app.mark_dirty();
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(stats),
            },
            changed = snapshots.changed(), if snapshots_open => match changed {
                Ok(()) => {
                    stats.snapshots += 1;
                    let s = snapshots.borrow_and_update().clone();
                    app.on_snapshot(s);
                }
                Err(_) => {
                    snapshots_open = false;
                    app.warn("the controller stopped: the view is frozen at its last snapshot".into());
                }
            },
            Some(reply) = replies.recv() => app.on_reply(reply),
            _ = tick.tick() => {
                app.on_tick(Instant::now());
            }
            _ = tokio::time::sleep_until(draw_at.into()), if dirty => {}
            _ = sigterm => return Ok(stats),
        }
    }
}
