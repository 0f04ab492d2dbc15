//! The limits every YAML input is held to before it is deserialized, so that no input,
//! however hostile, costs more than linear time or memory out of proportion to its size,
//! and so that text a reader would take two ways (a key written twice) is refused instead
//! of silently resolved. Checked on the same event walk that records field lines
//! ([`super::source_lines`]); the YAML deserializer only ever sees text that passed.
//!
//! Kubernetes' own reader (sigs.k8s.io/yaml in strict mode, as `kubectl apply` uses)
//! refuses duplicate keys the same way: "mapping key "x" already defined at line N".

use std::fmt;

/// Deeper nesting than any Kubernetes object needs (a Pod template is about 12 levels);
/// the YAML scanner's cost grows with the square of the depth beyond this.
pub const MAX_DEPTH: usize = 100;

/// Aliases may add at most this many values to a document beyond twice its own: enough
/// for any anchor reuse in real manifests, far below what an alias bomb expands to.
pub const MAX_ALIAS_EXPANSION: usize = 10_000;

/// A problem at a place in the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// Stream position of the document it is in (1-based, empty documents counted), 0
    /// before the first document.
    pub document: usize,
    /// Field path when the problem is a field's (`spec.weight`), else empty.
    pub path: String,
    pub message: String,
    /// True when the rest of the stream cannot be read safely (nesting, aliases, bytes);
    /// false when only this document is refused (a duplicate key).
    pub fatal: bool,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

/// The first character YAML forbids in a stream (YAML 1.2 §5.1 `c-printable`: C0 controls
/// other than tab, LF and CR, DEL, C1 controls other than NEL, and U+FFFE/U+FFFF), with
/// its line and column. Line breaks are LF, CRLF or a bare CR, as YAML counts them.
pub fn forbidden_character(text: &str) -> Option<Located> {
    let (at, c) = text.char_indices().find(|&(_, c)| match c {
        '\t' | '\n' | '\r' | '\u{85}' => false,
        c if (c as u32) < 0x20 => true,
        '\u{7f}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}' => true,
        _ => false,
    })?;
    let (line, column) = super::input::line_and_column(&text[..at]);
    Some(Located {
        line,
        column,
        document: 0,
        path: String::new(),
        message: format!(
            "the control character U+{:04X} is not allowed in YAML",
            c as u32
        ),
        fatal: true,
    })
}

/// Counts what aliases expand to, per document: each anchored node's size (itself and
/// everything under it, aliases expanded) is remembered, and every alias adds its anchor's
/// size to every open container.
#[derive(Debug, Default)]
pub struct AliasBudget {
    /// Expanded size of each anchor, by the parser's anchor id.
    sizes: Vec<usize>,
    /// Open containers: (anchor id, expanded size so far).
    open: Vec<(usize, usize)>,
    /// Values written in the text.
    literal: usize,
    /// Values aliases add.
    expanded: usize,
}

impl AliasBudget {
    /// A new document starts with a fresh budget (anchors do not cross documents).
    pub fn reset(&mut self) {
        *self = AliasBudget::default();
    }

    /// A scalar was read, with its anchor id (0 for none).
    pub fn scalar(&mut self, anchor: usize) {
        self.literal += 1;
        self.add(1);
        self.remember(anchor, 1);
    }

    /// A mapping or sequence opened.
    pub fn open(&mut self, anchor: usize) {
        self.literal += 1;
        self.open.push((anchor, 1));
    }

    /// The innermost container closed.
    pub fn close(&mut self) {
        if let Some((anchor, size)) = self.open.pop() {
            self.add(size);
            self.remember(anchor, size);
        }
    }

    /// An alias to anchor `id` was read; the message when it takes the document past the
    /// budget.
    pub fn alias(&mut self, id: usize) -> Result<(), String> {
        let size = self.sizes.get(id).copied().unwrap_or(1);
        self.expanded = self.expanded.saturating_add(size);
        self.add(size);
        let allowed = self
            .literal
            .saturating_mul(2)
            .saturating_add(MAX_ALIAS_EXPANSION);
        if self.expanded > allowed {
            return Err(format!(
                "aliases expand this document to more than {} values (from {} written); \
                 a YAML alias bomb is refused",
                allowed.saturating_add(self.literal),
                self.literal
            ));
        }
        Ok(())
    }

    fn add(&mut self, size: usize) {
        if let Some((_, s)) = self.open.last_mut() {
            *s = s.saturating_add(size);
        }
    }

    fn remember(&mut self, anchor: usize, size: usize) {
        if anchor == 0 {
            return;
        }
        if self.sizes.len() <= anchor {
            self.sizes.resize(anchor + 1, 1);
        }
        self.sizes[anchor] = size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_character_is_found_at_its_line_and_column() {
        let p = forbidden_character("a: 1\nb: 2\r\nc: 3\rd: x\0y\n").unwrap();
        assert_eq!((p.line, p.column), (4, 5));
        assert_eq!(
            p.to_string(),
            "line 4, column 5: the control character U+0000 is not allowed in YAML"
        );
        assert_eq!(forbidden_character("a: \"tab\there\"\u{85}\n"), None);
        assert_eq!(
            forbidden_character("x: \u{1b}[31m").map(|p| p.column),
            Some(4)
        );
    }

    #[test]
    fn nested_aliases_count_what_they_expand_to() {
        let mut b = AliasBudget::default();
        // &a1 [x x10], &a2 [*a1 x10], &a3 [*a2 x10], ...: each level is ten times the last.
        b.open(1);
        for _ in 0..10 {
            b.scalar(0);
        }
        b.close();
        for level in 2..=3 {
            b.open(level);
            for _ in 0..10 {
                b.alias(level - 1).unwrap();
            }
            b.close();
        }
        assert_eq!(b.sizes[3], 1_111);
        // A fourth level (ten times 1,111) passes twice the 14 values written + 10,000.
        b.open(4);
        let accepted = (0..10).take_while(|_| b.alias(3).is_ok()).count();
        assert_eq!(accepted, 7);
        assert!(b.alias(3).unwrap_err().contains("alias bomb"));
    }
}
