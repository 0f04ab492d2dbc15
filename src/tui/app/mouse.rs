//! The mouse: a click on a tab shows its view, a click on a table row selects it (and a
//! click on the selected row, so also a double click, opens its details), the wheel
//! moves through a table or scrolls the details popup, and a click outside the popup
//! closes it. Hit-testing uses where the last frame drew things (`Regions`, and each
//! table's rows), so it agrees with what the operator sees. Confirmations and prompts
//! ignore the mouse: a stray click never answers "y/n" or edits a filter. Pointer
//! motion changes nothing and draws nothing.
//!
//! With mouse capture on, the terminal leaves plain drags to the console; shift-drag
//! (option-drag in iTerm2) still selects text in most terminals.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};

use super::{App, Mode};
use crate::tui::keymap::Action;
use crate::tui::ui;

/// Rows one wheel notch moves.
pub const WHEEL_ROWS: i64 = 3;

/// Where the last frame drew the tabs, the view and the details popup.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Regions {
    pub tabs: Rect,
    pub body: Rect,
    pub popup: Option<Rect>,
}

fn inside(r: Rect, x: u16, y: u16) -> bool {
    r.contains(Position { x, y })
}

impl App {
    /// Handles one mouse event from the terminal.
    pub fn on_mouse(&mut self, m: MouseEvent) {
        let (x, y) = (m.column, m.row);
        match &mut self.mode {
            Mode::Details(d) => {
                let last = d.lines.len().saturating_sub(1) as u16;
                match m.kind {
                    MouseEventKind::ScrollDown => {
                        d.scroll = d.scroll.saturating_add(WHEEL_ROWS as u16).min(last);
                        self.mark_dirty();
                    }
                    MouseEventKind::ScrollUp => {
                        d.scroll = d.scroll.saturating_sub(WHEEL_ROWS as u16);
                        self.mark_dirty();
                    }
                    MouseEventKind::Down(MouseButton::Left)
                        if !self.regions.popup.is_some_and(|r| inside(r, x, y)) =>
                    {
                        self.mode = Mode::Normal;
                        self.mark_dirty();
                    }
                    _ => {}
                }
                return;
            }
            Mode::Normal => {}
            // Prompts and confirmations take keys only.
            _ => return,
        }
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if inside(self.regions.tabs, x, y) {
                    if let Some(view) = self.tab_at(x) {
                        self.show(view);
                    }
                    return;
                }
                let view = self.view;
                let Some(t) = self.tables.get_mut(view) else {
                    return;
                };
                let Some(i) = t.row_at(x, y) else {
                    return;
                };
                if t.selected_index() == i {
                    let _ = self.act(Action::Details);
                } else {
                    t.select_index(i);
                }
                self.mark_dirty();
            }
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let step = if m.kind == MouseEventKind::ScrollDown {
                    WHEEL_ROWS
                } else {
                    -WHEEL_ROWS
                };
                if let Some(t) = self.tables.get_mut(self.view) {
                    t.move_by(step);
                    self.mark_dirty();
                }
            }
            _ => {}
        }
    }

    /// The view whose tab is drawn at column `x`.
    fn tab_at(&self, x: u16) -> Option<crate::tui::views::View> {
        let mut left = self.regions.tabs.x;
        for (view, label) in ui::tab_labels(self) {
            let w = label.chars().count() as u16;
            if x >= left && x < left + w {
                return Some(view);
            }
            left += w + 1;
        }
        None
    }
}
