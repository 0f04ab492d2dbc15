//! Key bindings as data. Every action the console knows has a name, a description and a
//! danger mark in `Action`; which keys trigger it comes from a TOML keymap
//! (config/keymap.toml is built in; a user file overrides it per action). The help view
//! and the footer are generated from here, so they can never disagree with the keys.

use std::collections::BTreeMap;
use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

/// The built-in keymap.
pub const DEFAULT_KEYMAP: &str = include_str!("../../config/keymap.toml");

macro_rules! actions {
    ($($variant:ident = $name:literal, $danger:literal, $desc:literal;)*) => {
        /// Everything a key can do.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Action { $($variant),* }

        impl Action {
            /// Every action, in help order.
            pub const ALL: &[Action] = &[$(Action::$variant),*];

            /// The keymap file's name for it.
            pub fn name(self) -> &'static str {
                match self { $(Action::$variant => $name),* }
            }

            /// What it does, for help and the footer.
            pub fn description(self) -> &'static str {
                match self { $(Action::$variant => $desc),* }
            }

            /// Changes the cluster: gated by read-only mode and confirmation.
            pub fn dangerous(self) -> bool {
                match self { $(Action::$variant => $danger),* }
            }

            pub fn from_name(name: &str) -> Option<Action> {
                match name { $($name => Some(Action::$variant),)* _ => None }
            }
        }
    };
}

actions! {
    NextView = "next-view", false, "next view";
    PrevView = "prev-view", false, "previous view";
    ViewOverview = "view-overview", false, "overview: cost, capacity, disruption state";
    ViewNodePools = "view-nodepools", false, "NodePools: limits, policy, budgets";
    ViewNodes = "view-nodes", false, "nodes: one row per NodeClaim";
    ViewPending = "view-pending", false, "pending pods and why";
    ViewDisruption = "view-disruption", false, "disruption: decisions, blocked, history";
    ViewEvents = "view-events", false, "events and the log";
    ViewHelp = "view-help", false, "this help";
    Down = "down", false, "move down";
    Up = "up", false, "move up";
    PageDown = "page-down", false, "page down";
    PageUp = "page-up", false, "page up";
    Top = "top", false, "first row";
    Bottom = "bottom", false, "last row";
    Filter = "filter", false, "filter rows (regex; start with ! to invert)";
    Command = "command", false, "command (:nodepool NAME, :pause [POOL], :resume [POOL], :theme NAME, :q)";
    Sort = "sort", false, "sort by the next column";
    SortReverse = "sort-reverse", false, "reverse the sort order";
    Wide = "wide", false, "wide: every column at full width (left/right or h/l scroll sideways)";
    Details = "details", false, "details of the selected row (YAML, conditions, explanation)";
    Back = "back", false, "close popup / clear filter";
    Approve = "approve", true, "approve the selected decision";
    ApproveAll = "approve-all", true, "approve every visible decision";
    Reject = "reject", true, "reject the selected decision";
    Pause = "pause", true, "pause / resume all disruption";
    PausePool = "pause-pool", true, "pause / resume disruption of the selected NodePool";
    Help = "help", false, "help";
    Quit = "quit", false, "quit";
}

/// One key, as written in keymap files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
    pub alt: bool,
}

impl Key {
    /// The key of a terminal event. Shift is part of the character ("A"), so it is dropped
    /// for characters; shift-tab arrives as BackTab.
    pub fn from_event(e: &KeyEvent) -> Key {
        Key {
            code: e.code,
            ctrl: e.modifiers.contains(KeyModifiers::CONTROL),
            alt: e.modifiers.contains(KeyModifiers::ALT),
        }
    }

    /// Parses "a", "A", "ctrl-c", "pgdn", "backtab", "f5".
    pub fn parse(text: &str) -> Result<Key, String> {
        let mut rest = text;
        let (mut ctrl, mut alt) = (false, false);
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-") {
                ctrl = true;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-") {
                alt = true;
                rest = r;
            } else {
                break;
            }
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(c),
            _ => match rest.to_ascii_lowercase().as_str() {
                "enter" | "return" => KeyCode::Enter,
                "esc" | "escape" => KeyCode::Esc,
                "tab" => KeyCode::Tab,
                "backtab" | "shift-tab" => KeyCode::BackTab,
                "up" => KeyCode::Up,
                "down" => KeyCode::Down,
                "left" => KeyCode::Left,
                "right" => KeyCode::Right,
                "pgup" | "pageup" => KeyCode::PageUp,
                "pgdn" | "pagedown" => KeyCode::PageDown,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                "space" => KeyCode::Char(' '),
                "backspace" => KeyCode::Backspace,
                "delete" | "del" => KeyCode::Delete,
                f if f.starts_with('f')
                    && f[1..].parse::<u8>().is_ok_and(|n| (1..=12).contains(&n)) =>
                {
                    KeyCode::F(f[1..].parse().unwrap_or(1))
                }
                _ => {
                    return Err(format!(
                        "{text:?} is not a key (a character, or enter, esc, tab, backtab, up, down, left, right, pgup, pgdn, home, end, space, backspace, f1-f12, with ctrl-/alt-)"
                    ));
                }
            },
        };
        Ok(Key { code, ctrl, alt })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            write!(f, "ctrl-")?;
        }
        if self.alt {
            write!(f, "alt-")?;
        }
        match self.code {
            KeyCode::Char(' ') => write!(f, "space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => write!(f, "enter"),
            KeyCode::Esc => write!(f, "esc"),
            KeyCode::Tab => write!(f, "tab"),
            KeyCode::BackTab => write!(f, "shift-tab"),
            KeyCode::Up => write!(f, "↑"),
            KeyCode::Down => write!(f, "↓"),
            KeyCode::Left => write!(f, "←"),
            KeyCode::Right => write!(f, "→"),
            KeyCode::PageUp => write!(f, "pgup"),
            KeyCode::PageDown => write!(f, "pgdn"),
            KeyCode::Home => write!(f, "home"),
            KeyCode::End => write!(f, "end"),
            KeyCode::Backspace => write!(f, "backspace"),
            KeyCode::Delete => write!(f, "del"),
            KeyCode::F(n) => write!(f, "f{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeymapFile {
    #[serde(default)]
    keys: BTreeMap<String, Vec<String>>,
}

/// Keys to actions, and actions to their keys (in file order) for help and hints.
#[derive(Clone, Debug)]
pub struct Keymap {
    keys: BTreeMap<Action, Vec<Key>>,
}

/// A keymap file that cannot be used, naming the file, the action and the key.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("keymap {file}: {message}")]
pub struct KeymapError {
    pub file: String,
    pub message: String,
}

impl Keymap {
    /// Applies a keymap file over `self`: every action it names gets exactly the keys it
    /// lists.
    pub fn overlay(&self, file: &str, text: &str) -> Result<Keymap, KeymapError> {
        let err = |message: String| KeymapError {
            file: file.to_string(),
            message,
        };
        let parsed: KeymapFile =
            toml::from_str(text).map_err(|e| err(e.to_string().trim_end().replace('\n', " | ")))?;
        let mut keys = self.keys.clone();
        for (name, list) in parsed.keys {
            let action = Action::from_name(&name).ok_or_else(|| {
                err(format!(
                    "keys.{name}: no such action (actions: {})",
                    Action::ALL
                        .iter()
                        .map(|a| a.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            let parsed = list
                .iter()
                .map(|k| Key::parse(k).map_err(|e| err(format!("keys.{name}: {e}"))))
                .collect::<Result<Vec<_>, _>>()?;
            keys.insert(action, parsed);
        }
        // A key bound twice would make one of its actions unreachable.
        let mut seen: BTreeMap<String, Action> = BTreeMap::new();
        for (action, list) in &keys {
            for k in list {
                if let Some(other) = seen.insert(k.to_string(), *action)
                    && other != *action
                {
                    return Err(err(format!(
                        "key {k:?} is bound to both {} and {}",
                        other.name(),
                        action.name()
                    )));
                }
            }
        }
        Ok(Keymap { keys })
    }

    /// The action a key triggers.
    pub fn action(&self, key: &KeyEvent) -> Option<Action> {
        let k = Key::from_event(key);
        self.keys
            .iter()
            .find(|(_, list)| list.contains(&k))
            .map(|(a, _)| *a)
    }

    /// The keys of an action, as the user should press them.
    pub fn keys(&self, action: Action) -> &[Key] {
        self.keys.get(&action).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The first key of an action, for hints ("?" when unbound).
    pub fn hint(&self, action: Action) -> String {
        self.keys(action)
            .first()
            .map(|k| k.to_string())
            .unwrap_or_else(|| "unbound".into())
    }
}

impl Default for Keymap {
    fn default() -> Keymap {
        let empty = Keymap {
            keys: BTreeMap::new(),
        };
        // The built-in file is tested below; failing here would be a build mistake.
        empty
            .overlay("config/keymap.toml", DEFAULT_KEYMAP)
            .unwrap_or(empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    #[test]
    fn the_builtin_keymap_binds_every_action() {
        let empty = Keymap {
            keys: BTreeMap::new(),
        };
        let km = empty.overlay("config/keymap.toml", DEFAULT_KEYMAP).unwrap();
        for a in Action::ALL {
            assert!(!km.keys(*a).is_empty(), "{} has no key", a.name());
        }
    }

    #[test]
    fn k9s_habits_by_default() {
        let km = Keymap::default();
        let k = |c| km.action(&ev(KeyCode::Char(c), KeyModifiers::NONE));
        assert_eq!(k('j'), Some(Action::Down));
        assert_eq!(k('/'), Some(Action::Filter));
        assert_eq!(k(':'), Some(Action::Command));
        assert_eq!(k('q'), Some(Action::Quit));
        assert_eq!(
            km.action(&ev(KeyCode::Char('A'), KeyModifiers::SHIFT)),
            Some(Action::ApproveAll)
        );
        assert_eq!(
            km.action(&ev(KeyCode::BackTab, KeyModifiers::SHIFT)),
            Some(Action::PrevView)
        );
        assert_eq!(
            km.action(&ev(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
    }

    #[test]
    fn a_user_file_rebinds_one_action_and_keeps_the_rest() {
        let km = Keymap::default()
            .overlay("mine.toml", "[keys]\napprove = [\"y\"]\n")
            .unwrap();
        assert_eq!(
            km.action(&ev(KeyCode::Char('y'), KeyModifiers::NONE)),
            Some(Action::Approve)
        );
        assert_eq!(km.action(&ev(KeyCode::Char('a'), KeyModifiers::NONE)), None);
        assert_eq!(km.hint(Action::Reject), "x");
    }

    #[test]
    fn bad_files_name_the_action_and_the_key() {
        let km = Keymap::default();
        let e = km
            .overlay("mine.toml", "[keys]\napprvoe = [\"y\"]\n")
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("keymap mine.toml: keys.apprvoe: no such action")
        );
        let e = km
            .overlay("mine.toml", "[keys]\napprove = [\"ctrl-\"]\n")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("keys.approve: \"ctrl-\" is not a key"),
            "{e}"
        );
        let e = km
            .overlay("mine.toml", "[keys]\napprove = [\"x\"]\n")
            .unwrap_err();
        assert!(e.to_string().contains("bound to both"), "{e}");
    }
}
