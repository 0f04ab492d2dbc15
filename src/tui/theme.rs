//! Themes: every colour the console draws comes from one named style slot, and a theme is
//! a TOML file that sets those slots (themes/*.toml are built in; a user's themes
//! directory is searched first). A bad file never stops the console: each mistake is
//! reported with its file, line, key and value, and only that colour (or slot) falls
//! back to the default theme's. `NO_COLOR` (any
//! non-empty value, per no-color.org) strips every colour and keeps bold/reverse, so the
//! selection stays visible on a monochrome terminal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use toml::Spanned;

use crate::tui::problems::{self, Problem};

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

/// What a theme file may say about one slot (only the parts that are right).
#[derive(Clone, Debug, Default)]
struct StyleSpec {
    fg: Option<String>,
    bg: Option<String>,
    bold: bool,
    italic: bool,
    underline: bool,
    dim: bool,
    reversed: bool,
    /// The file's fg / bg was not a colour: keep the base theme's.
    bad_fg: bool,
    bad_bg: bool,
}

macro_rules! slots {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// The resolved styles of every slot.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Styles { $($(#[$doc])* pub $name: Style,)* }

        #[derive(Debug, Default)]
        struct StylesFile { $($name: Option<StyleSpec>,)* }

        impl StylesFile {
            /// Sets a slot by its file name; false when there is no such slot.
            fn set(&mut self, name: &str, spec: StyleSpec) -> bool {
                match name {
                    $(stringify!($name) => { self.$name = Some(spec); true })*
                    _ => false,
                }
            }

            fn resolve(&self, base: &Styles) -> Styles {
                Styles { $($name: match &self.$name {
                    Some(spec) => spec.style(base.$name),
                    None => base.$name,
                },)* }
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

/// A theme file as written, every key with where it is.
#[derive(Debug, Deserialize)]
struct ThemeFile {
    name: Option<toml::Value>,
    #[serde(default)]
    styles: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

/// The colour forms a theme may use, for messages.
const COLOUR_FORMS: &str = "use \"#rrggbb\", a name such as \"red\" or \"reset\", or 0-255";

/// Why a theme could not be used at all (a strict parse lists every problem).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ThemeError {
    #[error("{}", .0.iter().map(Problem::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
    #[error("theme {name:?} not found (built in: {builtin}; also searched {searched})")]
    NotFound {
        name: String,
        builtin: String,
        searched: String,
    },
    /// `message` names the file already (see [`crate::api::input::read_text`]).
    #[error("theme {message}")]
    Io { file: String, message: String },
}

impl StyleSpec {
    /// Reads one slot's table, keeping every field that is right.
    fn read(
        file: &str,
        text: &str,
        slot: &Spanned<String>,
        value: &toml::Value,
        problems: &mut Vec<Problem>,
    ) -> Option<StyleSpec> {
        let at = |key: String, reason: String| {
            Problem::at("theme", file, text, slot.span().start, Some(key), reason)
        };
        let slot_name = slot.get_ref();
        let toml::Value::Table(fields) = value else {
            problems.push(at(
                format!("styles.{slot_name}"),
                format!(
                    "expected a table such as {{ fg = \"red\", bold = true }}, found {}",
                    problems::kind_of(value)
                ),
            ));
            return None;
        };
        let mut spec = StyleSpec::default();
        for (field, v) in fields {
            let key = format!("styles.{slot_name}.{field}");
            match (field.as_str(), v) {
                ("fg" | "bg", toml::Value::String(c)) if parse_colour(c).is_some() => {
                    if field == "fg" {
                        spec.fg = Some(c.clone());
                    } else {
                        spec.bg = Some(c.clone());
                    }
                }
                ("fg" | "bg", toml::Value::Integer(i)) if (0..=255).contains(i) => {
                    let c = Some(i.to_string());
                    if field == "fg" {
                        spec.fg = c;
                    } else {
                        spec.bg = c;
                    }
                }
                ("fg" | "bg", bad) => {
                    if field == "fg" {
                        spec.bad_fg = true;
                    } else {
                        spec.bad_bg = true;
                    }
                    let what = match bad {
                        toml::Value::String(c) => format!("\"{c}\" is not a colour"),
                        other => format!("expected a colour, found {}", problems::kind_of(other)),
                    };
                    problems.push(at(key, format!("{what} ({COLOUR_FORMS})")));
                }
                (
                    "bold" | "italic" | "underline" | "dim" | "reversed",
                    toml::Value::Boolean(on),
                ) => match field.as_str() {
                    "bold" => spec.bold = *on,
                    "italic" => spec.italic = *on,
                    "underline" => spec.underline = *on,
                    "dim" => spec.dim = *on,
                    _ => spec.reversed = *on,
                },
                ("bold" | "italic" | "underline" | "dim" | "reversed", other) => problems.push(at(
                    key,
                    format!("expected true or false, found {}", problems::kind_of(other)),
                )),
                _ => problems.push(at(
                    key,
                    "not a style field (fg, bg, bold, italic, underline, dim, reversed)".into(),
                )),
            }
        }
        Some(spec)
    }

    /// The slot's style: as the file says, except that a colour whose value was wrong
    /// keeps `base`'s (so one bad colour changes nothing else).
    fn style(&self, base: Style) -> Style {
        let mut style = Style::default();
        match self.fg.as_deref().and_then(parse_colour) {
            Some(c) => style = style.fg(c),
            None if self.bad_fg => style.fg = base.fg,
            None => {}
        }
        match self.bg.as_deref().and_then(parse_colour) {
            Some(c) => style = style.bg(c),
            None if self.bad_bg => style.bg = base.bg,
            None => {}
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
        style.add_modifier(m)
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
    /// Parses a theme file strictly (every problem is an error): slots it leaves out
    /// come from the default theme. For the built-in themes and tests.
    pub fn parse(file: &str, text: &str) -> Result<Theme, ThemeError> {
        let (theme, problems) = Theme::read(file, text);
        if problems.is_empty() {
            Ok(theme)
        } else {
            Err(ThemeError::Invalid(problems))
        }
    }

    /// Reads a theme file as a user wrote it: every slot and colour that is right is
    /// used, each mistake is listed, and what it got wrong stays as the default theme
    /// has it. A file that is not TOML is the default theme and one problem.
    pub fn read(file: &str, text: &str) -> (Theme, Vec<Problem>) {
        let base = Theme::default();
        Theme::read_over(file, text, &base.styles)
    }

    fn read_over(file: &str, text: &str, base: &Styles) -> (Theme, Vec<Problem>) {
        let stem = || {
            Path::new(file)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| file.to_string())
        };
        let parsed = toml::from_str::<BTreeMap<Spanned<String>, serde::de::IgnoredAny>>(text)
            .and_then(|top| Ok((top, toml::from_str::<ThemeFile>(text)?)));
        let (top, parsed) = match parsed {
            Ok(p) => p,
            Err(e) => {
                let mut p = Problem::toml("theme", file, text, &e);
                p.reason.push_str("; the file is not used");
                let theme = Theme {
                    name: stem(),
                    styles: base.clone(),
                };
                return (theme, vec![p]);
            }
        };
        let mut problems = Vec::new();
        for key in top.keys() {
            if !matches!(key.get_ref().as_str(), "name" | "styles") {
                problems.push(Problem::at(
                    "theme",
                    file,
                    text,
                    key.span().start,
                    Some(key.get_ref().clone()),
                    "not a theme setting (settings: name, styles)".into(),
                ));
            }
        }
        let name = match parsed.name {
            Some(toml::Value::String(n)) => n,
            Some(other) => {
                let at = top
                    .keys()
                    .find(|k| k.get_ref() == "name")
                    .map_or(0, |k| k.span().start);
                problems.push(Problem::at(
                    "theme",
                    file,
                    text,
                    at,
                    Some("name".into()),
                    format!("expected a string, found {}", problems::kind_of(&other)),
                ));
                stem()
            }
            None => stem(),
        };
        let mut styles = StylesFile::default();
        let mut slots: Vec<_> = parsed.styles.iter().collect();
        slots.sort_by_key(|(k, _)| k.span().start);
        for (slot, value) in slots {
            let Some(spec) = StyleSpec::read(file, text, slot, value.get_ref(), &mut problems)
            else {
                continue;
            };
            if !styles.set(slot.get_ref(), spec) {
                problems.push(Problem::at(
                    "theme",
                    file,
                    text,
                    slot.span().start,
                    Some(format!("styles.{}", slot.get_ref())),
                    format!("no such style slot (slots: {})", SLOTS.join(", ")),
                ));
            }
        }
        let theme = Theme {
            name,
            styles: styles.resolve(base),
        };
        (theme, problems)
    }

    /// Finds a theme by name (user directory first, then built in) or by path, with the
    /// problems of its file. Fails only when there is no such theme or it cannot be read.
    pub fn load(
        name_or_path: &str,
        user_dir: Option<&Path>,
    ) -> Result<(Theme, Vec<Problem>), ThemeError> {
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
                let text =
                    crate::api::input::read_text(&path).map_err(|message| ThemeError::Io {
                        file: file.clone(),
                        message,
                    })?;
                return Ok(Theme::read(&file, &text));
            }
        }
        match BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            Some((n, text)) => Ok(Theme::read(&format!("themes/{n}.toml"), text)),
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

impl Theme {
    /// The theme with every RGB colour replaced by its nearest colour of the xterm
    /// 256-colour palette: a terminal without truecolor shows RGB as whatever it guesses
    /// (often a wrong, unreadable colour), while the 256-colour palette is universal.
    pub fn in_256_colours(&self) -> Theme {
        let map = |c: Option<Color>| c.map(nearest_256);
        Theme {
            name: format!("{} (256 colours)", self.name),
            styles: self.styles.map(|s| Style {
                fg: map(s.fg),
                bg: map(s.bg),
                underline_color: map(s.underline_color),
                ..s
            }),
        }
    }
}

/// The xterm-256 colour nearest to an RGB colour: the closer of the 6x6x6 cube's entry
/// and the 24-step grey ramp's (by squared distance). Named and indexed colours stay.
pub fn nearest_256(c: Color) -> Color {
    let Color::Rgb(r, g, b) = c else {
        return c;
    };
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let level = |v: u8| {
        (0..6)
            .min_by_key(|&i| (LEVELS[i] as i32 - v as i32).abs())
            .unwrap_or(0)
    };
    let (ri, gi, bi) = (level(r), level(g), level(b));
    let cube = (LEVELS[ri], LEVELS[gi], LEVELS[bi]);
    let avg = (r as u32 + g as u32 + b as u32) / 3;
    // Greys 232..=255 are 8, 18, ..., 238.
    let step = ((avg.saturating_sub(3)) / 10).min(23) as u8;
    let grey = 8 + 10 * step;
    let dist = |(x, y, z): (u8, u8, u8)| {
        let d = |a: u8, b: u8| (a as i32 - b as i32).pow(2);
        d(x, r) + d(y, g) + d(z, b)
    };
    if dist((grey, grey, grey)) < dist(cube) {
        Color::Indexed(232 + step)
    } else {
        Color::Indexed(16 + 36 * ri as u8 + 6 * gi as u8 + bi as u8)
    }
}

/// Whether the terminal says it shows 24-bit colour (COLORTERM=truecolor or 24bit, or a
/// `*-direct` TERM). Terminals that do not say so get the 256-colour palette.
pub fn truecolor_supported() -> bool {
    let colorterm = std::env::var("COLORTERM").unwrap_or_default();
    let term = std::env::var("TERM").unwrap_or_default();
    matches!(colorterm.as_str(), "truecolor" | "24bit") || term.ends_with("-direct")
}

impl Default for Theme {
    /// The built-in dark theme. Its file is part of the binary and tested, so this cannot
    /// fail; a minimal fallback keeps even a broken build drawable.
    fn default() -> Theme {
        let fallback = Styles::plain();
        Theme::read_over("themes/dark.toml", BUILTIN[0].1, &fallback).0
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

    /// Seen: RGB colours on a terminal without truecolor. Every colour of every built-in
    /// theme becomes a palette colour, and the mapping lands where it should.
    #[test]
    fn without_truecolor_every_colour_is_a_palette_colour() {
        assert_eq!(nearest_256(Color::Rgb(0, 0, 0)), Color::Indexed(16));
        assert_eq!(nearest_256(Color::Rgb(255, 255, 255)), Color::Indexed(231));
        assert_eq!(nearest_256(Color::Rgb(255, 0, 0)), Color::Indexed(196));
        assert_eq!(
            nearest_256(Color::Rgb(0x1e, 0x1e, 0x1e)),
            Color::Indexed(234)
        );
        assert_eq!(nearest_256(Color::Red), Color::Red);
        for name in Theme::available(None) {
            let (t, _) = Theme::load(&name, None).unwrap();
            let t = t.in_256_colours();
            let seen = std::cell::Cell::new(0);
            t.styles.map(|s| {
                for c in [s.fg, s.bg, s.underline_color].into_iter().flatten() {
                    assert!(!matches!(c, Color::Rgb(..)), "{name}: {c:?}");
                    seen.set(seen.get() + 1);
                }
                s
            });
            assert!(seen.get() > 0, "{name} has colours");
        }
    }

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
        let (t, problems) = Theme::load("transparent", None).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
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
    fn a_bad_colour_names_the_line_key_and_value() {
        let e = Theme::parse("mine.toml", "[styles]\nheader = { fg = \"#zzzzzz\" }\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "theme mine.toml line 2: styles.header.fg: \"#zzzzzz\" is not a colour (use \"#rrggbb\", a name such as \"red\" or \"reset\", or 0-255)"
        );
    }

    /// What was seen: the first mistake dropped the whole theme.
    #[test]
    fn every_mistake_is_listed_and_only_the_bad_colour_falls_back() {
        let text = "[styles]\n\
                    header = { fg = \"red\", bg = \"nope\" }\n\
                    hedaer = { fg = \"red\" }\n\
                    key = { fg = \"blue\", blink = true }\n\
                    ok = \"green\"\n";
        let (t, problems) = Theme::read("mine.toml", text);
        let m: Vec<String> = problems.iter().map(Problem::to_string).collect();
        assert_eq!(m.len(), 4, "{m:#?}");
        assert!(
            m[0].starts_with("theme mine.toml line 2: styles.header.bg: \"nope\" is not a colour"),
            "{}",
            m[0]
        );
        assert!(
            m[1].starts_with("theme mine.toml line 3: styles.hedaer: no such style slot"),
            "{}",
            m[1]
        );
        assert!(
            m[2].starts_with("theme mine.toml line 4: styles.key.blink: not a style field"),
            "{}",
            m[2]
        );
        assert!(
            m[3].starts_with("theme mine.toml line 5: styles.ok: expected a table"),
            "{}",
            m[3]
        );
        let dark = Theme::default();
        assert_eq!(t.styles.header.fg, Some(Color::Red));
        assert_eq!(t.styles.header.bg, dark.styles.header.bg);
        assert_eq!(t.styles.key.fg, Some(Color::Blue));
        assert_eq!(t.styles.ok, dark.styles.ok);
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
            Theme::load("dark", Some(dir.path())).unwrap().0.name,
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
