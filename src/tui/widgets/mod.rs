//! Drawing pieces the views share: the windowed table, request bars, popups.

pub mod bar;
pub mod popup;
pub mod table;
