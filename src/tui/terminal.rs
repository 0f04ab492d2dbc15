//! The event loop. One `select!` over the terminal's key stream, the controller's
//! snapshot channel, a 1 s tick, the answers to requests, the process's stop signals and
//! the backend's failure: each wake-up applies what arrived and marks the app dirty; a
//! frame is drawn only when something changed, and at most every 16 ms however fast
//! snapshots arrive. Every way out (quit, error, SIGINT/SIGTERM/SIGHUP/SIGQUIT, a panic
//! on any thread) restores the terminal.
//!
//! The loop runs on its own thread (launch.rs): a controller busy for seconds on its
//! own runtime never delays a key.
//!
//! Pastes arrive bracketed (as one `Event::Paste`, never as keys), and whatever was
//! typed before the first frame is dropped: nobody can mean a key they pressed before
//! seeing what it would act on.

use std::io;
use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures_util::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::{mpsc, oneshot};

use crate::tui::app::{App, Effect};
use crate::tui::console::{Console, Reply, Request};
use crate::tui::screen::{self, panicked};
use crate::tui::ui;

/// The shortest time between two frames.
pub const FRAME: Duration = Duration::from_millis(16);

/// A signal that stops the console. Each one restores the terminal first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
    Hangup,
    Quit,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Hangup => "SIGHUP",
            Signal::Quit => "SIGQUIT",
        }
    }

    /// The signal's number, for the shell's `128 + n` exit status.
    pub fn number(self) -> u8 {
        match self {
            Signal::Hangup => 1,
            Signal::Interrupt => 2,
            Signal::Quit => 3,
            Signal::Terminate => 15,
        }
    }
}

/// Why the console stopped.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Exit {
    /// The operator quit.
    #[default]
    Quit,
    /// A signal asked the process to stop.
    Signal(Signal),
    /// The controller (or another task) panicked: the console cannot go on showing a
    /// cluster nobody is controlling as if it were live.
    Panicked(String),
}

/// What the loop did, for the exit line and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    pub frames: u64,
    pub snapshots: u64,
    pub keys: u64,
    pub exit: Exit,
}

/// The process's stop signals, listened to while a screen owns the terminal.
pub struct Signals {
    #[cfg(unix)]
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Starts listening. Must run inside a tokio runtime.
    pub fn new() -> io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let kinds = [
                (Signal::Interrupt, SignalKind::interrupt()),
                (Signal::Terminate, SignalKind::terminate()),
                (Signal::Hangup, SignalKind::hangup()),
                (Signal::Quit, SignalKind::quit()),
            ];
            let mut streams = Vec::new();
            for (s, k) in kinds {
                streams.push((s, signal(k)?));
            }
            Ok(Signals { streams })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next stop signal.
    pub async fn recv(&mut self) -> Signal {
        #[cfg(unix)]
        {
            let waits = self.streams.iter_mut().map(|(s, st)| {
                let s = *s;
                Box::pin(async move {
                    st.recv().await;
                    s
                })
            });
            futures_util::future::select_all(waits).await.0
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Interrupt
        }
    }
}

impl Exit {
    /// What to print and the process's exit status, for every way out but quitting.
    pub fn failure(&self) -> Option<(String, u8)> {
        match self {
            Exit::Quit => None,
            Exit::Signal(s) => Some((
                format!("stopped by {}; the terminal was restored", s.name()),
                128 + s.number(),
            )),
            Exit::Panicked(why) => Some((format!("{why}; the console stopped"), 1)),
        }
    }
}

/// Runs the console in the terminal until the operator quits, a signal arrives, or
/// `failed` carries a backend's failure.
pub async fn run(
    console: Console,
    app: App,
    failed: oneshot::Receiver<String>,
) -> io::Result<LoopStats> {
    let mut terminal = screen::enter()?;
    let result = match Signals::new() {
        Ok(signals) => {
            event_loop(
                &mut terminal,
                console,
                app,
                EventStream::new(),
                Wake {
                    signals: Some(signals),
                    failed,
                    probe: None,
                    drain_typeahead: true,
                },
            )
            .await
        }
        Err(e) => Err(e),
    };
    screen::leave();
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

/// What, besides keys and snapshots, ends or observes the loop.
pub struct Wake {
    pub signals: Option<Signals>,
    /// A backend failure (a panicked controller): ends the console with it.
    pub failed: oneshot::Receiver<String>,
    /// Benchmarks: after each frame, the number of keys handled so far and the time.
    pub probe: Option<mpsc::UnboundedSender<(u64, Instant)>>,
    /// Drop what the terminal queued before the first frame (off where the events do
    /// not come from the terminal).
    pub drain_typeahead: bool,
}

/// The loop proper, over any backend and event stream (benchmarks feed both).
pub async fn event_loop<B, E>(
    terminal: &mut Terminal<B>,
    console: Console,
    mut app: App,
    mut events: E,
    mut wake: Wake,
) -> io::Result<LoopStats>
where
    B: Backend,
    B::Error: std::error::Error + Send + Sync + 'static,
    E: Stream<Item = io::Result<Event>> + Unpin,
{
    let mut stats = LoopStats::default();
    let mut snapshots = console.snapshots();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (reply_tx, mut replies) = mpsc::unbounded_channel::<(bool, Reply)>();
    let mut snapshots_open = true;
    let mut failed_open = true;
    let mut last_draw: Option<Instant> = None;
    let mut drained = !wake.drain_typeahead;

    loop {
        if let Some(message) = panicked() {
            stats.exit = Exit::Panicked(message);
            return Ok(stats);
        }
        if app.dirty() {
            let due = last_draw.map(|t| t + FRAME).unwrap_or_else(Instant::now);
            if Instant::now() >= due {
                terminal
                    .draw(|f| ui::draw(f, &mut app))
                    .map_err(io::Error::other)?;
                app.drawn();
                stats.frames += 1;
                last_draw = Some(Instant::now());
                if !drained {
                    drained = true;
                    discard_pending_input()?;
                }
                if let Some(p) = &wake.probe {
                    let _ = p.send((stats.keys, Instant::now()));
                }
            }
        }
        let draw_at = last_draw.map(|t| t + FRAME).unwrap_or_else(Instant::now);
        let dirty = app.dirty();
        let signal = async {
            match wake.signals.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    stats.keys += 1;
                    for effect in app.on_key(key) {
                        match effect {
                            Effect::Quit => return Ok(stats),
                            Effect::Request(r) => {
                                let report = matches!(r, Request::WhatIf(_));
                                let answer = console.request(r);
                                let tx = reply_tx.clone();
                                tokio::spawn(async move {
                                    let _ = tx.send((report, answer.await));
                                });
                            }
                        }
                    }
                }
                Some(Ok(Event::Mouse(m))) => app.on_mouse(m),
                Some(Ok(Event::Paste(text))) => app.on_paste(&text),
                Some(Ok(Event::Resize(_, _))) => {
                    terminal.autoresize().map_err(io::Error::other)?;
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
            failure = &mut wake.failed, if failed_open => match failure {
                Ok(message) => {
                    stats.exit = Exit::Panicked(match panicked() {
                        Some(why) => format!("{message}: {why}"),
                        None => message,
                    });
                    return Ok(stats);
                }
                // The backend is gone without failing (it ended, or there is none).
                Err(_) => failed_open = false,
            },
            Some((report, reply)) = replies.recv() => if report {
                app.on_report(reply)
            } else {
                app.on_reply(reply)
            },
            _ = tick.tick() => {
                app.on_tick(Instant::now());
            }
            _ = tokio::time::sleep_until(draw_at.into()), if dirty => {}
            s = signal => {
                stats.exit = Exit::Signal(s);
                return Ok(stats);
            }
        }
    }
}
