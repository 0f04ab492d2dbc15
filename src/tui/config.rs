//! The console's configuration: `config.toml` in the user's config directory
//! (~/.config/karpenter-tui on Linux) or `--config FILE`, plus the keymap file and the
//! themes directory next to it. Each mistake in a file is reported (file, line, key,
//! reason) and only that setting falls back to its default: a typo never keeps an
//! operator out of the console, nor throws away the rest of their settings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::tui::app::DEFAULT_CONFIRM;
use crate::tui::keymap::{Action, Keymap};
use crate::tui::problems::{self, Problem};

/// `config.toml`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Theme name or path.
    pub theme: Option<String>,
    /// Dangerous actions that ask for confirmation (approve-all always does).
    pub confirm: Option<Vec<String>>,
    /// The name operator actions are journaled under (default: console:$USER).
    pub actor: Option<String>,
}

/// Everything the console reads from disk at start.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub file: ConfigFile,
    pub confirm: BTreeSet<Action>,
    pub keymap: Keymap,
    pub themes_dir: Option<PathBuf>,
    /// Problems found, to show in the log pane and the footer.
    pub warnings: Vec<String>,
}

/// The user's karpenter-tui config directory.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KARPENTER_TUI_CONFIG_DIR") {
        return Some(PathBuf::from(dir));
    }
    dirs::config_dir().map(|d| d.join("karpenter-tui"))
}

/// Where the console's log file goes.
pub fn log_path() -> PathBuf {
    dirs::state_dir()
        .or_else(dirs::cache_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("karpenter-tui")
        .join("console.log")
}

/// Parses a config file. Every key that is right is kept; each one that is not is
/// reported (file, line, key, reason) and left at its default. `confirm`, when given, is
/// the whole list of actions that ask first (approve-all always does); without it,
/// reject, pause-all and approve-all ask.
pub fn parse(file: &str, text: &str) -> (ConfigFile, BTreeSet<Action>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut parsed = ConfigFile::default();
    let mut confirm: BTreeSet<Action> = DEFAULT_CONFIRM.iter().copied().collect();
    let top: BTreeMap<Spanned<String>, Spanned<toml::Value>> = match toml::from_str(text) {
        Ok(t) => t,
        Err(e) => {
            let mut p = Problem::toml("config", file, text, &e);
            p.reason.push_str("; using the defaults");
            return (parsed, confirm, vec![p]);
        }
    };
    for (name, value) in &top {
        let key = name.get_ref().clone();
        let problem = |reason: String| {
            Problem::at(
                "config",
                file,
                text,
                name.span().start,
                Some(key.clone()),
                reason,
            )
        };
        let string = |v: &toml::Value| match v {
            toml::Value::String(s) => Ok(s.clone()),
            other => Err(format!(
                "expected a string, found {}",
                problems::kind_of(other)
            )),
        };
        match key.as_str() {
            "theme" => match string(value.get_ref()) {
                Ok(s) => parsed.theme = Some(s),
                Err(e) => problems.push(problem(e)),
            },
            "actor" => match string(value.get_ref()) {
                Ok(s) => parsed.actor = Some(s),
                Err(e) => problems.push(problem(e)),
            },
            "confirm" => {
                let toml::Value::Array(list) = value.get_ref() else {
                    problems.push(problem(format!(
                        "expected a list of actions such as [\"approve\", \"reject\"], found {}",
                        problems::kind_of(value.get_ref())
                    )));
                    continue;
                };
                let mut names = Vec::new();
                confirm = [Action::ApproveAll].into_iter().collect();
                for v in list {
                    let name = match string(v) {
                        Ok(n) => n,
                        Err(e) => {
                            problems.push(problem(e));
                            continue;
                        }
                    };
                    match Action::from_name(&name) {
                        Some(a) if a.dangerous() => {
                            confirm.insert(a);
                            names.push(name);
                        }
                        Some(_) => problems.push(problem(format!(
                            "\"{name}\" is not a dangerous action ({DANGEROUS})"
                        ))),
                        None => problems.push(problem(format!(
                            "\"{name}\" is not an action ({DANGEROUS})"
                        ))),
                    }
                }
                parsed.confirm = Some(names);
            }
            _ => problems.push(problem(
                "not a setting (settings: theme, confirm, actor)".into(),
            )),
        }
    }
    (parsed, confirm, problems)
}

/// The actions `confirm` may list, for messages.
const DANGEROUS: &str = "approve, approve-all, reject, pause, pause-pool";

/// Reads the config file, the keymap and finds the themes directory.
pub fn load(config: Option<&Path>, keymap: Option<&Path>) -> Loaded {
    let dir = config_dir();
    let mut warnings = Vec::new();
    let config_path = config
        .map(Path::to_path_buf)
        .or_else(|| dir.as_ref().map(|d| d.join("config.toml")));
    let default_confirm = || DEFAULT_CONFIRM.iter().copied().collect::<BTreeSet<_>>();
    let (file, confirm) = match config_path {
        Some(p) if config.is_some() || p.exists() => match crate::api::input::read_text(&p) {
            Ok(text) => {
                let (file, confirm, problems) = parse(&p.display().to_string(), &text);
                warnings.extend(problems.iter().map(Problem::to_string));
                (file, confirm)
            }
            Err(e) => {
                warnings.push(format!("config {e}; using the defaults"));
                (ConfigFile::default(), default_confirm())
            }
        },
        _ => (ConfigFile::default(), default_confirm()),
    };
    let keymap_path = keymap
        .map(Path::to_path_buf)
        .or_else(|| dir.as_ref().map(|d| d.join("keymap.toml")));
    let mut km = Keymap::default();
    if let Some(p) = keymap_path
        && (keymap.is_some() || p.exists())
    {
        match crate::api::input::read_text(&p) {
            Ok(text) => {
                let (k, problems) = km.overlay(&p.display().to_string(), &text);
                km = k;
                warnings.extend(problems.iter().map(Problem::to_string));
            }
            Err(e) => warnings.push(format!("keymap {e}; using the built-in keys")),
        }
    }
    Loaded {
        file,
        confirm,
        keymap: km,
        themes_dir: dir.map(|d| d.join("themes")),
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(Problem::to_string).collect()
    }

    #[test]
    fn confirm_lists_dangerous_actions_only() {
        let (f, c, problems) = parse(
            "c.toml",
            "theme = \"light\"\nconfirm = [\"approve\", \"pause\"]\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(f.theme.as_deref(), Some("light"));
        assert!(c.contains(&Action::Approve) && c.contains(&Action::Pause));
        assert!(c.contains(&Action::ApproveAll));
        assert!(!c.contains(&Action::Reject), "the list is the whole list");
    }

    #[test]
    fn reject_and_pause_all_ask_by_default() {
        let (_, c, problems) = parse("c.toml", "theme = \"light\"\n");
        assert!(problems.is_empty());
        for a in [Action::Reject, Action::Pause, Action::ApproveAll] {
            assert!(c.contains(&a), "{}", a.name());
        }
        assert_eq!(c, crate::tui::app::Settings::default().confirm);
    }

    /// What was seen: only the first mistake was reported and the whole file dropped.
    #[test]
    fn every_mistake_is_listed_and_the_good_keys_are_kept() {
        let text = "theme = \"light\"\n\
                    colour = \"red\"\n\
                    confirm = [\"approve\", \"quit\", \"rejcet\"]\n\
                    actor = 3\n";
        let (f, c, problems) = parse("c.toml", text);
        assert_eq!(
            messages(&problems),
            [
                "config c.toml line 4: actor: expected a string, found a number",
                "config c.toml line 2: colour: not a setting (settings: theme, confirm, actor)",
                "config c.toml line 3: confirm: \"quit\" is not a dangerous action (approve, approve-all, reject, pause, pause-pool)",
                "config c.toml line 3: confirm: \"rejcet\" is not an action (approve, approve-all, reject, pause, pause-pool)",
            ]
        );
        assert_eq!(f.theme.as_deref(), Some("light"));
        assert!(c.contains(&Action::Approve));
        assert_eq!(f.actor, None);
    }

    #[test]
    fn a_toml_error_keeps_its_reason() {
        let (_, c, problems) = parse("c.toml", "theme = \"light\nconfirm = 3\n");
        let m = messages(&problems);
        assert_eq!(m.len(), 1);
        assert!(
            m[0].starts_with("config c.toml line 1: column "),
            "{}",
            m[0]
        );
        assert!(m[0].ends_with("; using the defaults"), "{}", m[0]);
        assert!(!m[0].contains(" | ") && !m[0].contains('\n'), "{}", m[0]);
        assert_eq!(c, crate::tui::app::Settings::default().confirm);
    }

    #[test]
    fn a_broken_file_falls_back_with_a_warning_per_mistake() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config.toml");
        std::fs::write(&cfg, "confirm = 3\ntheme = \"light\"\n").unwrap();
        let km = dir.path().join("keymap.toml");
        std::fs::write(&km, "[keys]\nnope = [\"z\"]\napprove = [\"y\"]\n").unwrap();
        let l = load(Some(&cfg), Some(&km));
        assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
        assert!(
            l.warnings[0].contains("line 1: confirm: expected a list"),
            "{}",
            l.warnings[0]
        );
        assert!(
            l.warnings[1].contains("line 2: keys.nope"),
            "{}",
            l.warnings[1]
        );
        assert_eq!(l.file.theme.as_deref(), Some("light"));
        assert_eq!(l.keymap.hint(Action::Approve), "y");
    }
}
