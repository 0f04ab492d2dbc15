//! The console's configuration: `config.toml` in the user's config directory
//! (~/.config/karpenter-tui on Linux) or `--config FILE`, plus the keymap file and the
//! themes directory next to it. A file with a mistake is reported (file, key, value) and
//! the built-in defaults are used: a typo never keeps an operator out of the console.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::tui::keymap::{Action, Keymap};

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

/// Parses a config file.
pub fn parse(file: &str, text: &str) -> Result<(ConfigFile, BTreeSet<Action>), String> {
    let parsed: ConfigFile = toml::from_str(text).map_err(|e| {
        format!(
            "config {file}: {}",
            e.to_string().trim_end().replace('\n', " | ")
        )
    })?;
    let mut confirm: BTreeSet<Action> = [Action::ApproveAll].into_iter().collect();
    if let Some(list) = &parsed.confirm {
        for name in list {
            match Action::from_name(name) {
                Some(a) if a.dangerous() => {
                    confirm.insert(a);
                }
                Some(_) => {
                    return Err(format!(
                        "config {file}: confirm: {name:?} is not a dangerous action (approve, approve-all, reject, pause, pause-pool)"
                    ));
                }
                None => {
                    return Err(format!(
                        "config {file}: confirm: {name:?} is not an action (approve, approve-all, reject, pause, pause-pool)"
                    ));
                }
            }
        }
    }
    Ok((parsed, confirm))
}

/// Reads the config file, the keymap and finds the themes directory.
pub fn load(config: Option<&Path>, keymap: Option<&Path>) -> Loaded {
    let dir = config_dir();
    let mut warnings = Vec::new();
    let config_path = config
        .map(Path::to_path_buf)
        .or_else(|| dir.as_ref().map(|d| d.join("config.toml")));
    let (file, confirm) = match config_path {
        Some(p) if config.is_some() || p.exists() => match std::fs::read_to_string(&p) {
            Ok(text) => match parse(&p.display().to_string(), &text) {
                Ok(v) => v,
                Err(e) => {
                    warnings.push(format!("{e}; using the defaults"));
                    (
                        ConfigFile::default(),
                        [Action::ApproveAll].into_iter().collect(),
                    )
                }
            },
            Err(e) => {
                warnings.push(format!("config {}: {e}; using the defaults", p.display()));
                (
                    ConfigFile::default(),
                    [Action::ApproveAll].into_iter().collect(),
                )
            }
        },
        _ => (
            ConfigFile::default(),
            [Action::ApproveAll].into_iter().collect(),
        ),
    };
    let keymap_path = keymap
        .map(Path::to_path_buf)
        .or_else(|| dir.as_ref().map(|d| d.join("keymap.toml")));
    let mut km = Keymap::default();
    if let Some(p) = keymap_path
        && (keymap.is_some() || p.exists())
    {
        match std::fs::read_to_string(&p) {
            Ok(text) => match km.overlay(&p.display().to_string(), &text) {
                Ok(k) => km = k,
                Err(e) => warnings.push(format!("{e}; using the built-in keys")),
            },
            Err(e) => warnings.push(format!(
                "keymap {}: {e}; using the built-in keys",
                p.display()
            )),
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

    #[test]
    fn confirm_lists_dangerous_actions_only() {
        let (f, c) = parse(
            "c.toml",
            "theme = \"light\"\nconfirm = [\"approve\", \"pause\"]\n",
        )
        .unwrap();
        assert_eq!(f.theme.as_deref(), Some("light"));
        assert!(c.contains(&Action::Approve) && c.contains(&Action::Pause));
        assert!(c.contains(&Action::ApproveAll));
        let e = parse("c.toml", "confirm = [\"quit\"]\n").unwrap_err();
        assert!(e.contains("\"quit\" is not a dangerous action"), "{e}");
        let e = parse("c.toml", "colour = \"red\"\n").unwrap_err();
        assert!(
            e.starts_with("config c.toml:") && e.contains("colour"),
            "{e}"
        );
    }

    #[test]
    fn a_broken_file_falls_back_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config.toml");
        std::fs::write(&cfg, "confirm = 3\n").unwrap();
        let km = dir.path().join("keymap.toml");
        std::fs::write(&km, "[keys]\nnope = [\"z\"]\n").unwrap();
        let l = load(Some(&cfg), Some(&km));
        assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
        assert!(l.warnings[0].contains("using the defaults"));
        assert!(l.warnings[1].contains("keys.nope"));
        assert_eq!(l.keymap.hint(Action::Approve), "a");
    }
}
