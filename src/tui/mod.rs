//! The console: live views over the controller's snapshots, operator actions from the
//! keyboard. `App` holds the state, `ui` draws it, `terminal` runs the event loop, and
//! everything reaches the controller through one `Console` handle.

pub mod app;
pub mod config;
pub mod connecting;
pub mod console;
pub mod format;
pub mod frame;
pub mod keymap;
pub mod launch;
pub mod logpane;
pub mod problems;
pub mod retire;
pub mod screen;
pub mod screenshot;
pub mod terminal;
pub mod theme;
pub mod ui;
pub mod views;
pub mod widgets;

#[cfg(test)]
mod tests;
