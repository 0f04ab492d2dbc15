//! Themes: every colour the console draws comes from one named style slot, and a theme is
//! a TOML file that sets those slots (themes/*.toml are built in; a user's themes
//! directory is searched first). A bad file never stops the console: the error names the
//! file, the key and the value, and the default theme is used instead. `NO_COLOR` (any
//! non-empty value, per no-color.org) strips every colour and keeps bold/reverse, so the
//! selection stays visible on a monochrome terminal.

use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// The built-in themes, in the order `:theme` lists them.
pub const BUILTIN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("transparent", include_str!("../../themes/transparent.toml")),
];

/// The default theme's name.
pub const DEFAULT: &str = "dark";

/// What a theme file may say about one slot.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleSpec {
    fg: Option<String>,
    bg: Option<String>,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    italic: bool,
    #[serde(default)]
    underline: bool,
    #[serde(default)]
    dim: bool,
    #[serde(default)]
    reversed: bool,
}

macro_rules! slots {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// The resolved styles of every slot.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Styles { $($(#[$doc])* pub $name: Style,)* }

        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct StylesFile { $($name: Option<StyleSpec>,)* }

        impl StylesFile {
            fn resolve(&self, file: &str, base: &Styles) -> Result<Styles, ThemeError> {
                Ok(Styles { $($name: match &self.$name {
                    Some(spec) => spec.style(file, stringify!($name))?,
                    None => base.$name,
                },)* })
            }
        }

        impl Styles {
            fn map(&self, f: impl Fn(Style) -> Style) -> Styles {
                Styles { $($name: f(self.$name),)* }
            }
        }

        /// Slot names, for error messages and docs.
        pub const SLOTS: &[&str] = &[$(stringify!($name)),*];
    };
}

slots! {
    /// The screen: text and background everywhere nothing else applies.
    base,
    /// The top line (source, mode, clock).
    header,
    /// Read-only / write mode badge.
    mode,
    /// Tabs of the views not shown.
    tab,
    /// The tab of the view shown.
    tab_active,
    /// Panel borders.
    border,
    /// Panel titles.
    title,
    /// Table column headings.
    table_header,
    /// The selected row.
    selected,
    /// Secondary text (units, hints, timestamps).
    muted,
    /// Healthy / done.
    ok,
    /// Needs attention (waiting, paused, blocked).
    warn,
    /// Failing or destructive.
    bad,
    /// Highlights (savings, counts).
    accent,
    /// Filled part of CPU bars.
    bar_cpu,
    /// Filled part of memory bars.
    bar_memory,
    /// Empty part of bars.
    bar_empty,
    /// Key names in the footer and help.
    key,
    /// Key descriptions in the footer.
    footer,
    /// Dangerous actions in help and confirmations.
    danger,
    /// Popups (details, confirmations).
    popup,
}

/// A theme, ready to draw with.
#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    pub name: String,
    pub styles: Styles,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Option<String>,
    #[serde(default)]
    styles: StylesFile,
}

/// Why a theme could not be used: names the file, and the key and value when one is bad.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ThemeError {
    #[error("theme {file}: {message}")]
    Syntax { file: String, message: String },
    #[error(
        "theme {file}: styles.{slot}.{field} = {value:?}: not a colour (use \"#rrggbb\", a name such as \"red\" or \"reset\", or 0-255)"
    )]
    Colour {
        file: String,
        slot: String,
        field: &'static str,
        value: String,
    },
    #[error("theme {name:?} not found (built in: {builtin}; also searched {searched})")]
    NotFound {
        name: String,
        builtin: String,
        searched: String,
    },
    #[error("theme {file}: {message}")]
    Io { file: String, message: String },
}

impl StyleSpec {
    fn style(&self, file: &str, slot: &str) -> Result<Style, ThemeError> {
        let colour =
            |field: &'static str, v: &Option<String>| -> Result<Option<Color>, ThemeError> {
                match v {
                    None => Ok(None),
                    Some(text) => parse_colour(text)
                        .map(Some)
                        .ok_or_else(|| ThemeError::Colour {
                            file: file.to_string(),
                            slot: slot.to_string(),
                            field,
                            value: text.clone(),
                        }),
                }
            };
        let mut style = Style::default();
        if let Some(c) = colour("fg", &self.fg)? {
            style = style.fg(c);
        }
        if let Some(c) = colour("bg", &self.bg)? {
            style = style.bg(c);
        }
        let mut m = Modifier::empty();
        for (on, bit) in [
            (self.bold, Modifier::BOLD),
            (self.italic, Modifier::ITALIC),
            (self.underline, Modifier::UNDERLINED),
            (self.dim, Modifier::DIM),
            (self.reversed, Modifier::REVERSED),
        ] {
            if on {
                m |= bit;
            }
        }
        Ok(style.add_modifier(m))
    }
}

/// "#rrggbb", a colour name ("red", "light-blue", "dark-gray", "reset"), or an xterm index.
pub fn parse_colour(text: &str) -> Option<Color> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix('#') {
        if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let v = u32::from_str_radix(hex, 16).ok()?;
        return Some(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
    }
    if let Ok(i) = t.parse::<u8>() {
        return Some(Color::Indexed(i));
    }
    let name = t.to_ascii_lowercase().replace(['-', '_', ' '], "");
    Some(match name.as_str() {
        "reset" | "default" | "none" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" | "grey" => Color::Gray,
        "darkgray" | "darkgrey" => Color::DarkGray,
        "lightred" => Color::LightRed,
        "lightgreen" => Color::LightGreen,
        "lightyellow" => Color::LightYellow,
        "lightblue" => Color::LightBlue,
        "lightmagenta" => Color::LightMagenta,
        "lightcyan" => Color::LightCyan,
        "white" => Color::White,
        _ => return None,
    })
}

impl Theme {
    /// Parses a theme file; slots it leaves out come from the default theme.
    pub fn parse(file: &str, text: &str) -> Result<Theme, ThemeError> {
        let base = Theme::default();
        Theme::parse_over(file, text, &base.styles)
    }

    fn parse_over(file: &str, text: &str, base: &Styles) -> Result<Theme, ThemeError> {
        let parsed: ThemeFile = toml::from_str(text).map_err(|e| ThemeError::Syntax {
            file: file.to_string(),
            message: e.to_string().trim_end().replace('\n', " | "),
        })?;
        let name = parsed.name.unwrap_or_else(|| {
            Path::new(file)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| file.to_string())
        });
        Ok(Theme {
            name,
            styles: parsed.styles.resolve(file, base)?,
        })
    }

    /// Finds a theme by name (user directory first, then built in) or by path.
    pub fn load(name_or_path: &str, user_dir: Option<&Path>) -> Result<Theme, ThemeError> {
        let looks_like_path = name_or_path.contains('/') || name_or_path.ends_with(".toml");
        let mut searched = Vec::new();
        let candidate: Option<PathBuf> = if looks_like_path {
            Some(PathBuf::from(name_or_path))
        } else {
            user_dir.map(|d| d.join(format!("{name_or_path}.toml")))
        };
        if let Some(path) = candidate {
            searched.push(path.display().to_string());
            if looks_like_path || path.exists() {
                let file = path.display().to_string();
                let text = std::fs::read_to_string(&path).map_err(|e| ThemeError::Io {
                    file: file.clone(),
                    message: e.to_string(),
                })?;
                return Theme::parse(&file, &text);
            }
        }
        match BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            Some((n, text)) => Theme::parse(&format!("themes/{n}.toml"), text),
            None => Err(ThemeError::NotFound {
                name: name_or_path.to_string(),
                builtin: BUILTIN.map(|(n, _)| n).join(", "),
                searched: if searched.is_empty() {
                    "no user directory".into()
                } else {
                    searched.join(", ")
                },
            }),
        }
    }

    /// Every theme name available: built in, then the user directory's.
    pub fn available(user_dir: Option<&Path>) -> Vec<String> {
        let mut names: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
        if let Some(dir) = user_dir
            && let Ok(entries) = std::fs::read_dir(dir)
        {
            let mut user: Vec<String> = entries
                .flatten()
                .filter_map(|e| {
                    let p = e.path();
                    if p.extension()? != "toml" {
                        return None;
                    }
                    Some(p.file_stem()?.to_string_lossy().into_owned())
                })
                .filter(|n: &String| !names.contains(n))
                .collect();
            user.sort();
            names.extend(user);
        }
        names
    }

    /// The same theme without colours: what `NO_COLOR` asks for. Modifiers stay, and the
    /// selection and tabs are drawn reversed so they remain visible.
    pub fn without_colour(&self) -> Theme {
        let mut styles = self.styles.map(|s| Style {
            fg: None,
            bg: None,
            underline_color: None,
            ..s
        });
        styles.selected = styles.selected.add_modifier(Modifier::REVERSED);
        styles.tab_active = styles.tab_active.add_modifier(Modifier::REVERSED);
        styles.bar_cpu = styles.bar_cpu.add_modifier(Modifier::BOLD);
        Theme {
            name: format!("{} (NO_COLOR)", self.name),
            styles,
        }
    }
}

impl Default for Theme {
    /// The built-in dark theme. Its file is part of the binary and tested, so this cannot
    /// fail; a minimal fallback keeps even a broken build drawable.
    fn default() -> Theme {
        let fallback = Styles::plain();
        Theme::parse_over("themes/dark.toml", BUILTIN[0].1, &fallback).unwrap_or(Theme {
            name: DEFAULT.into(),
            styles: fallback,
        })
    }
}

impl Styles {
    /// Styles without colours: for text that is flattened (popups, tests).
    pub fn plain() -> Styles {
        let d = Style::default();
        let b = d.add_modifier(Modifier::BOLD);
        Styles {
            base: d,
            header: b,
            mode: b,
            tab: d,
            tab_active: d.add_modifier(Modifier::REVERSED),
            border: d,
            title: b,
            table_header: b,
            selected: d.add_modifier(Modifier::REVERSED),
            muted: d.add_modifier(Modifier::DIM),
            ok: d,
            warn: b,
            bad: b,
            accent: b,
            bar_cpu: d,
            bar_memory: d,
            bar_empty: d.add_modifier(Modifier::DIM),
            key: b,
            footer: d,
            danger: b,
            popup: d,
        }
    }
}

/// True when the environment asks for no colour (`NO_COLOR` set and not empty).
pub fn no_color_requested() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_theme_parses_and_sets_every_slot_it_names() {
        for (name, text) in BUILTIN {
            let t = Theme::parse(&format!("themes/{name}.toml"), text)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(t.name, name);
        }
        let dark = Theme::default();
        assert_eq!(dark.name, "dark");
        assert_ne!(dark.styles.selected, Styles::plain().selected);
    }

    #[test]
    fn transparent_theme_keeps_the_terminal_background() {
        let t = Theme::load("transparent", None).unwrap();
        for s in [t.styles.base, t.styles.header, t.styles.popup] {
            assert!(matches!(s.bg, None | Some(Color::Reset)), "{s:?}");
        }
    }

    #[test]
    fn an_unknown_key_is_named() {
        let e = Theme::parse("mine.toml", "[styles]\nhedaer = { fg = \"red\" }\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("mine.toml") && msg.contains("hedaer"), "{msg}");
    }

    #[test]
    fn a_bad_colour_names_the_key_and_value() {
        let e = Theme::parse("mine.toml", "[styles]\nheader = { fg = \"#zzzzzz\" }\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "theme mine.toml: styles.header.fg = \"#zzzzzz\": not a colour (use \"#rrggbb\", a name such as \"red\" or \"reset\", or 0-255)"
        );
    }

    #[test]
    fn partial_themes_inherit_the_default() {
        let t = Theme::parse("mine.toml", "[styles]\nheader = { fg = \"red\" }\n").unwrap();
        assert_eq!(t.styles.header.fg, Some(Color::Red));
        assert_eq!(t.styles.selected, Theme::default().styles.selected);
    }

    #[test]
    fn user_directory_wins_and_unknown_names_list_the_choices() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("dark.toml"),
            "name = \"my dark\"\n[styles]\nbase = { fg = \"white\" }\n",
        )
        .unwrap();
        assert_eq!(
            Theme::load("dark", Some(dir.path())).unwrap().name,
            "my dark"
        );
        let e = Theme::load("solarized", Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("dark, light, high-contrast, transparent"), "{e}");
        assert!(Theme::available(Some(dir.path())).contains(&"dark".to_string()));
    }

    #[test]
    fn no_color_drops_colours_but_keeps_the_selection_visible() {
        let t = Theme::default().without_colour();
        assert_eq!(t.styles.base.fg, None);
        assert!(t.styles.selected.add_modifier.contains(Modifier::REVERSED));
    }
}
