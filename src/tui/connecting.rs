//! The screen before the console has a cluster to show: what the start is doing
//! ("connecting to URL: error", listing the cluster, waiting as a standby for the Lease),
//! redrawn as it changes. `q`, Esc and Ctrl-C give up, as do SIGTERM, SIGINT, SIGHUP and SIGQUIT; every way out
//! restores the terminal, and the console proper starts only once the start succeeded.

use std::future::Future;
use std::io;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyCode, KeyEventKind, KeyModifiers};
use futures_util::StreamExt;
use ratatui::Frame;
use ratatui::layout::Alignment;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use tokio::sync::watch;

use crate::tui::widgets::popup::centered;

/// Runs `start` while the screen shows `title` and the latest `progress`. `None` when
/// the operator (or SIGTERM) gave up first; `start` is dropped then.
pub async fn run<T>(
    title: &str,
    progress: watch::Receiver<String>,
    start: impl Future<Output = T>,
) -> io::Result<Option<T>> {
    let mut terminal = crate::tui::screen::enter()?;
    let result = screen(&mut terminal, title, progress, start).await;
    crate::tui::screen::leave();
    result
}

async fn screen<T>(
    terminal: &mut ratatui::DefaultTerminal,
    title: &str,
    mut progress: watch::Receiver<String>,
    start: impl Future<Output = T>,
) -> io::Result<Option<T>> {
    let mut start = std::pin::pin!(start);
    let mut keys = EventStream::new();
    let mut signals = crate::tui::terminal::Signals::new()?;
    loop {
        let text = progress.borrow_and_update().clone();
        terminal.draw(|f| draw(f, title, &text))?;
        tokio::select! {
            done = &mut start => return Ok(Some(done)),
            _ = progress.changed() => {}
            event = keys.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    let ctrl_c = key.code == KeyCode::Char('c')
                        && key.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Esc) {
                        return Ok(None);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(None),
            },
            _ = signals.recv() => return Ok(None),
            // Redraw now and then: a resize, or a terminal that lost its contents.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// One frame: a box in the middle with the title, the progress and the way out.
pub fn draw(frame: &mut Frame, title: &str, progress: &str) {
    let area = frame.area();
    let mut lines = vec![
        Line::from(""),
        Line::from(title.to_string()),
        Line::from(""),
    ];
    lines.extend(progress.lines().map(|l| Line::from(l.to_string())));
    lines.extend([Line::from(""), Line::from("q quits")]);
    let width = area.width.saturating_sub(4).clamp(20, 100);
    let height = u16::try_from(lines.len() + 4).unwrap_or(u16::MAX);
    let r = centered(area, width, height);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" karpenter-tui ");
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .alignment(Alignment::Center)
            .wrap(Wrap { trim: true }),
        r,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    #[test]
    fn the_screen_names_the_server_the_error_and_the_way_out() {
        let mut t = Terminal::new(TestBackend::new(100, 16)).unwrap();
        t.draw(|f| {
            draw(
                f,
                "run · context prod",
                "connecting to https://10.0.0.1:6443: Connection refused\n(attempt 2; next in 4 s)",
            )
        })
        .unwrap();
        let screen: String = t
            .backend()
            .buffer()
            .content()
            .chunks(100)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        for want in [
            "run · context prod",
            "connecting to https://10.0.0.1:6443: Connection refused",
            "(attempt 2; next in 4 s)",
            "q quits",
        ] {
            assert!(screen.contains(want), "{want:?} missing:\n{screen}");
        }
    }
}
