//! What the details popup shows: the object as YAML (in its Kubernetes shape), its
//! conditions, and the disruption explanation, as sections of text.

use serde::Serialize;

use super::Details;
use crate::tui::widgets::table::Tone;

/// Builds a popup's text section by section.
#[derive(Default)]
pub struct Builder {
    lines: Vec<(Tone, String)>,
}

impl Builder {
    pub fn heading(&mut self, text: &str) -> &mut Self {
        if !self.lines.is_empty() {
            self.lines.push((Tone::Normal, String::new()));
        }
        self.lines.push((Tone::Accent, format!("── {text}")));
        self
    }

    pub fn line(&mut self, tone: Tone, text: impl Into<String>) -> &mut Self {
        self.lines.push((tone, text.into()));
        self
    }

    /// A value as YAML, one line per line; a value that cannot be serialized says so.
    pub fn yaml<T: Serialize>(&mut self, value: &T) -> &mut Self {
        match serde_norway::to_string(value) {
            Ok(text) => {
                for l in text.lines() {
                    self.lines.push((Tone::Normal, l.to_string()));
                }
            }
            Err(e) => self
                .lines
                .push((Tone::Bad, format!("(cannot show as YAML: {e})"))),
        }
        self
    }

    pub fn finish(&mut self, title: impl Into<String>) -> Details {
        Details {
            title: title.into(),
            lines: std::mem::take(&mut self.lines),
            scroll: 0,
            row: None,
        }
    }
}

/// A Kubernetes condition line: "Ready  True" with the status coloured.
pub fn condition(b: &mut Builder, kind: &str, status: bool, detail: &str) {
    let (tone, word) = if status {
        (Tone::Ok, "True ")
    } else {
        (Tone::Warn, "False")
    };
    let text = if detail.is_empty() {
        format!("{kind:<14} {word}")
    } else {
        format!("{kind:<14} {word}  {detail}")
    };
    b.line(tone, text);
}
