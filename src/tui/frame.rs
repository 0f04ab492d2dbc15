//! The console drawn off-screen: a snapshot it is given, rendered into a ratatui buffer.
//! Screenshots, view snapshot tests and the render benchmark all draw through here, so
//! what they show is exactly what the terminal would. The world they draw (the demo
//! stopped at a moment) is built by the entry layer, in `demo`.

use std::sync::Arc;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

use crate::control::controller::Snapshot;
use crate::tui::app::{App, Settings};
use crate::tui::console::Source;
use crate::tui::keymap::Keymap;
use crate::tui::logpane::LogPane;
use crate::tui::theme::Theme;

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
