//! Mistakes in the files the console reads (config, keymap, theme), said the way a person
//! fixes them: which file, which line, which key, and why, one message per mistake. The
//! readers keep every part of a file that is right and report each part that is not, so
//! one typo costs one setting, not the whole file.

use std::fmt;

/// One mistake in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// "config", "keymap" or "theme".
    pub kind: &'static str,
    pub file: String,
    /// 1-based; none when the mistake is about the file as a whole.
    pub line: Option<usize>,
    /// The dotted key ("keys.approve", "styles.selected.bg"), when there is one.
    pub key: Option<String>,
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys and reasons quote the user's file: escaped, as every echo of input is.
        use crate::api::text::escape_controls;
        write!(f, "{} {}", self.kind, escape_controls(&self.file))?;
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{}: ", escape_controls(key))?;
        }
        write!(f, "{}", escape_controls(&self.reason))
    }
}

impl Problem {
    /// A mistake at byte `at` of `text`.
    pub fn at(
        kind: &'static str,
        file: &str,
        text: &str,
        at: usize,
        key: Option<String>,
        reason: String,
    ) -> Problem {
        Problem {
            kind,
            file: file.to_string(),
            line: Some(line_of(text, at)),
            key,
            reason,
        }
    }

    /// A file that is not TOML (or not the shape expected): the line and column toml
    /// points at, then its reason, on one line. toml's own text draws the line with a
    /// caret over several lines and puts the reason last; joined into a footer it was
    /// cut before the reason.
    pub fn toml(kind: &'static str, file: &str, text: &str, e: &toml::de::Error) -> Problem {
        let reason = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        match e.span() {
            Some(span) => {
                let line = line_of(text, span.start);
                let line_start = text[..span.start.min(text.len())]
                    .rfind('\n')
                    .map_or(0, |i| i + 1);
                let column = text[line_start..span.start.min(text.len())].chars().count() + 1;
                Problem {
                    kind,
                    file: file.to_string(),
                    line: Some(line),
                    key: None,
                    reason: format!("column {column}: {reason}"),
                }
            }
            None => Problem {
                kind,
                file: file.to_string(),
                line: None,
                key: None,
                reason,
            },
        }
    }
}

/// The 1-based line holding byte `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// A TOML value's kind, as the reader would call it.
pub fn kind_of(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "a number",
        toml::Value::Float(_) => "a number",
        toml::Value::Boolean(_) => "true/false",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "a list",
        toml::Value::Table(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_syntax_error_keeps_its_reason_on_one_line() {
        let text = "theme = \"dark\"\nconfirm = [\"reject\"\n";
        let e = toml::from_str::<toml::Table>(text).unwrap_err();
        let p = Problem::toml("config", "c.toml", text, &e);
        let s = p.to_string();
        assert!(!s.contains('\n'), "{s}");
        assert!(s.starts_with("config c.toml line 2: column "), "{s}");
        // The reason toml gives, not only its position.
        assert!(
            s.len() > "config c.toml line 2: column 20: ".len() + 5,
            "{s}"
        );
        assert!(!s.contains(" | "), "{s}");
    }
}
