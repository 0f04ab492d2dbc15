//! Owning the terminal: raw mode, the alternate screen, mouse capture and bracketed paste
//! on the way in, and exactly one
//! way back out, whichever comes first — the screen closing, a signal, or a panic on any
//! thread. Leaving twice would be harmful, not just redundant: leaving the alternate
//! screen restores the cursor saved on entry, so a second leave moves the cursor back
//! over whatever was printed since (a panic's message, the exit line).

use std::io::{self, stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::DefaultTerminal;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The terminal is in raw mode on the alternate screen, and someone must put it back.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set by the panic hook: some thread panicked, so screens must stop drawing.
static PANICKED: AtomicBool = AtomicBool::new(false);
/// The first panic's message and location.
static PANIC_MESSAGE: Mutex<Option<String>> = Mutex::new(None);
static HOOK: Once = Once::new();

/// Raw mode and the alternate screen, with the panic hook in place first.
pub fn enter() -> io::Result<DefaultTerminal> {
    install_panic_hook();
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    // Clicks and the wheel come to the console; shift-drag still selects text.
    // Pastes arrive as one event, never as keys (a terminal without bracketed paste
    // ignores the request).
    execute!(
        stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste
    )?;
    Terminal::new(CrosstermBackend::new(stdout()))
}

/// Back to the shell's terminal. Only the first call after `enter` acts.
pub fn leave() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    // Raw mode first: it has more side effects than the alternate screen.
    let raw = disable_raw_mode();
    let screen = execute!(
        stdout(),
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen
    );
    if let Err(e) = raw.and(screen) {
        eprintln!("karpenter-tui: could not restore the terminal: {e}");
    }
}

/// Installed once, in front of the default hook: put the terminal back before the panic
/// message prints (so it is readable), and remember the panic so the console ends with
/// it instead of carrying on half-alive.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let what = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            let thread = std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_string();
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            if let Ok(mut m) = PANIC_MESSAGE.lock()
                && m.is_none()
            {
                *m = Some(format!("the {thread} thread panicked{at}: {what}"));
            }
            PANICKED.store(true, Ordering::SeqCst);
            leave();
            previous(info);
        }));
    });
}

/// The first panic since the hook was installed, if any.
pub fn panicked() -> Option<String> {
    if !PANICKED.load(Ordering::SeqCst) {
        return None;
    }
    Some(
        PANIC_MESSAGE
            .lock()
            .ok()
            .and_then(|m| m.clone())
            .unwrap_or_else(|| "a thread panicked".into()),
    )
}
