//! Key bindings as data. Every action the console knows has a name, a description and a
//! danger mark in `Action`; which keys trigger it comes from a TOML keymap
//! (config/keymap.toml is built in; a user file overrides it per action). The help view
//! and the footer are generated from here, so they can never disagree with the keys.

use std::collections::BTreeMap;
use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;
use toml::Spanned;

use crate::tui::problems::{self, Problem};

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
    Command = "command", false, "command (:nodepool NAME, :pause [POOL], :resume [POOL], :theme NAME, :whatif [TIME] POOL FIELD=VALUE, :q)";
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
            // Keys a keymap file cannot name (Key::parse never makes them).
            other => write!(f, "{}", format!("{other:?}").to_lowercase()),
        }
    }
}

/// A keymap file as written: every key with where it is, so each mistake names its line.
#[derive(Debug, Deserialize)]
struct KeymapFile {
    #[serde(default)]
    keys: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

/// The top-level keys of a file, with where they are.
type TopLevel = BTreeMap<Spanned<String>, serde::de::IgnoredAny>;

/// Keys to actions, and actions to their keys (in file order) for help and hints.
#[derive(Clone, Debug)]
pub struct Keymap {
    keys: BTreeMap<Action, Vec<Key>>,
}

/// The key that quits from anywhere, whatever a keymap says (App::on_key).
pub const ALWAYS_QUIT: Key = Key {
    code: KeyCode::Char('c'),
    ctrl: true,
    alt: false,
};

impl Keymap {
    /// Applies a keymap file over `self`: every action it names gets the keys it lists.
    /// Each mistake is reported (file, line, key, reason) and costs only itself: an
    /// unknown action or a bad key is skipped, a key bound twice stays with the action
    /// that had it first. A file that would leave no key for quit is refused whole.
    pub fn overlay(&self, file: &str, text: &str) -> (Keymap, Vec<Problem>) {
        let parsed = toml::from_str::<TopLevel>(text)
            .and_then(|top| Ok((top, toml::from_str::<KeymapFile>(text)?)));
        let (top, parsed) = match parsed {
            Ok(p) => p,
            Err(e) => {
                let mut p = Problem::toml("keymap", file, text, &e);
                p.reason.push_str("; the file is not used");
                return (self.clone(), vec![p]);
            }
        };
        let mut problems = Vec::new();
        let at = |span: std::ops::Range<usize>, key: String, reason: String| {
            Problem::at("keymap", file, text, span.start, Some(key), reason)
        };
        for (name, _) in top.iter().filter(|(n, _)| n.get_ref() != "keys") {
            problems.push(at(
                name.span(),
                name.get_ref().clone(),
                "not a keymap setting (bindings go under [keys])".into(),
            ));
        }
        let mut keys = self.keys.clone();
        // Which line set each action, to name it when a key is bound twice.
        let mut set_at: BTreeMap<Action, std::ops::Range<usize>> = BTreeMap::new();
        let mut entries: Vec<_> = parsed.keys.iter().collect();
        entries.sort_by_key(|(name, _)| name.span().start);
        for (name, value) in entries {
            let key = format!("keys.{}", name.get_ref());
            let Some(action) = Action::from_name(name.get_ref()) else {
                problems.push(at(
                    name.span(),
                    key,
                    format!(
                        "no such action (actions: {})",
                        Action::ALL
                            .iter()
                            .map(|a| a.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
                continue;
            };
            let list: Vec<&toml::Value> = match value.get_ref() {
                toml::Value::Array(a) => a.iter().collect(),
                toml::Value::String(_) => vec![value.get_ref()],
                other => {
                    problems.push(at(
                        name.span(),
                        key,
                        format!(
                            "expected a list of keys such as [\"a\", \"ctrl-a\"], found {}",
                            problems::kind_of(other)
                        ),
                    ));
                    continue;
                }
            };
            let mut bound = Vec::new();
            for v in list {
                let parsed = match v {
                    toml::Value::String(k) => Key::parse(k),
                    other => Err(format!("{} is not a key", problems::kind_of(other))),
                };
                match parsed {
                    Ok(k) if k == ALWAYS_QUIT && action != Action::Quit => problems.push(at(
                        name.span(),
                        key.clone(),
                        format!("{k} always quits; it cannot be bound to {}", action.name()),
                    )),
                    Ok(k) if !bound.contains(&k) => bound.push(k),
                    Ok(_) => {}
                    Err(e) => problems.push(at(name.span(), key.clone(), e)),
                }
            }
            keys.insert(action, bound);
            set_at.insert(action, name.span());
        }
        // A key bound twice would make one of its actions unreachable: it stays with
        // the action that is not being set here (or was set on an earlier line).
        let order = |a: &Action| set_at.get(a).map_or(0, |s| s.start + 1);
        let mut actions: Vec<Action> = keys.keys().copied().collect();
        actions.sort_by_key(order);
        let mut owner: BTreeMap<String, Action> = BTreeMap::new();
        for action in actions {
            let list = keys.get_mut(&action).expect("listed above");
            list.retain(|k| match owner.get(&k.to_string()) {
                Some(first) if *first != action => {
                    let span = set_at.get(&action).cloned().unwrap_or(0..0);
                    problems.push(at(
                        span,
                        format!("keys.{}", action.name()),
                        format!(
                            "key \"{k}\" is bound to both {} and {}; it stays with {}",
                            first.name(),
                            action.name(),
                            first.name()
                        ),
                    ));
                    false
                }
                _ => {
                    owner.insert(k.to_string(), action);
                    true
                }
            });
        }
        if keys.get(&Action::Quit).is_none_or(Vec::is_empty) {
            let line = set_at.get(&Action::Quit).map_or(0, |s| s.start);
            problems.push(Problem::at(
                "keymap",
                file,
                text,
                line,
                Some("keys.quit".into()),
                "leaves no key to quit the console; the file is not used".into(),
            ));
            return (self.clone(), problems);
        }
        (Keymap { keys }, problems)
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
        // The built-in file is tested below; a problem here would be a build mistake.
        empty.overlay("config/keymap.toml", DEFAULT_KEYMAP).0
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
        let (km, problems) = empty.overlay("config/keymap.toml", DEFAULT_KEYMAP);
        assert!(problems.is_empty(), "{problems:?}");
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
        let (km, problems) = Keymap::default().overlay("mine.toml", "[keys]\napprove = [\"y\"]\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            km.action(&ev(KeyCode::Char('y'), KeyModifiers::NONE)),
            Some(Action::Approve)
        );
        assert_eq!(km.action(&ev(KeyCode::Char('a'), KeyModifiers::NONE)), None);
        assert_eq!(km.hint(Action::Reject), "x");
    }

    fn messages(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(Problem::to_string).collect()
    }

    /// What was seen: only the first error was reported, the whole file was dropped, and
    /// a duplicate read `key Key { code: Char('a'), ctrl: false, alt: false } is bound to
    /// both down and approve`.
    #[test]
    fn every_mistake_is_listed_with_its_line_and_only_it_is_dropped() {
        let text = "[keys]\n\
                    apprvoe = [\"y\"]\n\
                    top = [\"ctrl-\", \"t\"]\n\
                    down = [\"j\", \"a\"]\n\
                    sort = [\"o\"]\n";
        let (km, problems) = Keymap::default().overlay("mine.toml", text);
        let m = messages(&problems);
        assert_eq!(m.len(), 3, "{m:#?}");
        assert!(
            m[0].starts_with("keymap mine.toml line 2: keys.apprvoe: no such action"),
            "{}",
            m[0]
        );
        assert!(
            m[1].starts_with("keymap mine.toml line 3: keys.top: \"ctrl-\" is not a key"),
            "{}",
            m[1]
        );
        assert_eq!(
            m[2],
            "keymap mine.toml line 4: keys.down: key \"a\" is bound to both approve and down; it stays with approve"
        );
        assert!(
            m.iter()
                .all(|l| !l.contains("Key {") && !l.contains("Char("))
        );
        // The good parts are used: t is top, o sorts, j still goes down, a still approves.
        let k = |c| km.action(&ev(KeyCode::Char(c), KeyModifiers::NONE));
        assert_eq!(k('t'), Some(Action::Top));
        assert_eq!(k('o'), Some(Action::Sort));
        assert_eq!(k('j'), Some(Action::Down));
        assert_eq!(k('a'), Some(Action::Approve));
    }

    #[test]
    fn a_toml_error_says_where_and_why_on_one_line() {
        let (km, problems) = Keymap::default().overlay("mine.toml", "[keys]\napprove = [\"y\"\n");
        let m = messages(&problems);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].starts_with("keymap mine.toml line "), "{}", m[0]);
        assert!(m[0].ends_with("; the file is not used"), "{}", m[0]);
        assert!(!m[0].contains('\n') && !m[0].contains(" | "), "{}", m[0]);
        assert_eq!(km.hint(Action::Approve), "a");
    }

    /// What was seen: a keymap binding every action to `[]` left no way to quit.
    #[test]
    fn a_file_leaving_no_quit_key_is_refused_with_its_line() {
        let text = "# mine\n[keys]\napprove = [\"y\"]\nquit = []\n";
        let (km, problems) = Keymap::default().overlay("mine.toml", text);
        let m = messages(&problems);
        assert_eq!(
            m,
            [
                "keymap mine.toml line 4: keys.quit: leaves no key to quit the console; the file is not used"
            ]
        );
        assert_eq!(km.hint(Action::Quit), "q");
        assert_eq!(km.hint(Action::Approve), "a", "the whole file is refused");
        // ctrl-c cannot be given to something else: it always quits.
        let (km, problems) =
            Keymap::default().overlay("mine.toml", "[keys]\napprove = [\"ctrl-c\", \"y\"]\n");
        assert_eq!(
            messages(&problems),
            [
                "keymap mine.toml line 2: keys.approve: ctrl-c always quits; it cannot be bound to approve"
            ]
        );
        assert_eq!(km.hint(Action::Approve), "y");
    }
}
