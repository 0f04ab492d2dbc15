//! Drawing pieces the views share: the windowed table, request bars, popups.

pub mod bar;
pub mod columns;
pub mod popup;
pub mod table;

use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};

use crate::tui::theme::Styles;

/// A bordered panel titled " Title " (and a count, when given), in the theme's border
/// and title styles: every view's boxes look alike.
pub fn panel<'a>(title: &str, count: Option<usize>, styles: &Styles) -> Block<'a> {
    let mut spans = vec![Span::styled(format!(" {title} "), styles.title)];
    if let Some(n) = count {
        spans.push(Span::styled(format!("{n} "), styles.muted));
    }
    Block::default()
        .borders(Borders::ALL)
        .border_style(styles.border)
        .title(Line::from(spans))
}
