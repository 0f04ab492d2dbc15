//! Echoing input back safely. Names, kinds and keys from a file end up in diagnostics and
//! on the console; a control character among them would drive the terminal (an ESC
//! sequence recolours or clears it) and a newline would forge a second diagnostic line.

use std::borrow::Cow;

/// `text` with every control character (C0, DEL, C1), line or paragraph separator and
/// bidirectional override written as a visible `\u{..}` escape (`\n`, `\r`, `\t` as
/// themselves escaped); unchanged, and not copied, when there is none.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_and_line_breaks_become_visible() {
        assert_eq!(
            escape_controls("Node\u{1b}[2J\nerror: forged"),
            "Node\\u{1b}[2J\\nerror: forged"
        );
        assert_eq!(escape_controls("a\u{202e}b\u{9b}"), "a\\u{202e}b\\u{9b}");
        assert!(matches!(escape_controls("plain «text»"), Cow::Borrowed(_)));
    }
}
