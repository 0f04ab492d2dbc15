//! Help: generated from the keymap, so it lists exactly the keys in force, with each
//! action's description and whether it is dangerous (changes the cluster).

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};

use crate::tui::app::App;
use crate::tui::keymap::{Action, Keymap};
use crate::tui::widgets::table::{Cell, Column, Row, Tone, col};

pub const COLUMNS: &[Column] = &[
    col("KEYS", Constraint::Length(22)),
    col("ACTION", Constraint::Length(16)),
    col("WHAT IT DOES", Constraint::Min(30)),
    col("", Constraint::Length(10)),
];

/// What the mouse does, after the keys (the mouse is not rebindable).
const MOUSE: &[(&str, &str, &str)] = &[
    ("click tab", "view", "show that view"),
    (
        "click row",
        "select",
        "select the row; click it again (or double-click) for its details",
    ),
    (
        "wheel",
        "scroll",
        "move through the table, or scroll the details popup",
    ),
    (
        "shift-drag",
        "select text",
        "the terminal selects text as usual (option-drag in iTerm2)",
    ),
];

pub fn rows(keymap: &Keymap) -> Vec<Row> {
    let mouse = MOUSE.iter().map(|(keys, name, what)| {
        Row::new(
            format!("mouse/{name}"),
            vec![
                Cell::text(*keys).tone(Tone::Warn),
                Cell::text(*name),
                Cell::text(*what),
                Cell::text("mouse").tone(Tone::Muted),
            ],
        )
    });
    Action::ALL
        .iter()
        .map(|a| {
            let keys: Vec<String> = keymap.keys(*a).iter().map(|k| k.to_string()).collect();
            Row::new(
                a.name(),
                vec![
                    Cell::text(keys.join("  ")).tone(Tone::Warn),
                    Cell::text(a.name()),
                    Cell::text(a.description()),
                    if a.dangerous() {
                        Cell::text("dangerous").tone(Tone::Bad)
                    } else {
                        Cell::text("")
                    },
                ],
            )
        })
        .chain(mouse)
        .collect()
}

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let styles = app.theme.styles.clone();
    let title = format!(
        "Keys (rebind in {}; dangerous actions are refused in read-only mode{})",
        "~/.config/karpenter-tui/keymap.toml",
        if app.settings.confirm.is_empty() {
            String::new()
        } else {
            format!(
                "; confirmation asked for: {}",
                app.settings
                    .confirm
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    app.tables
        .help
        .render(frame, area, &title, COLUMNS, &styles, true);
}
