//! Popups: a centred box drawn over the view (details, confirmations).

use ratatui::layout::{Constraint, Flex, Layout, Rect};

/// A rectangle of at most `w` x `h` cells centred in `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [cell] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(row);
    cell
}
