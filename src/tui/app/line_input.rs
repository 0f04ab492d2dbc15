//! One line of text being typed: the filter box, the `:` command line and the reason
//! field of a confirmation all edit through it, so every prompt takes the same keys
//! (readline / k9s habits: ←/→, home/end, backspace/delete at the cursor, ctrl-u clears,
//! ctrl-w deletes the word before the cursor, ctrl-a/ctrl-e jump to the ends) and a paste
//! is text, never keys.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The text and where the cursor is (a char index, 0..=len).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineInput {
    chars: Vec<char>,
    cursor: usize,
}

/// What a key did to the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// The text changed.
    Changed,
    /// Only the cursor moved (or nothing happened).
    Moved,
    /// Not an editing key: the prompt decides (enter, esc, tab...).
    Ignored,
}

impl LineInput {
    /// A line holding `text`, the cursor at its end.
    pub fn new(text: &str) -> LineInput {
        let chars: Vec<char> = text.chars().collect();
        let cursor = chars.len();
        LineInput { chars, cursor }
    }

    pub fn text(&self) -> String {
        self.chars.iter().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The cursor's position in chars.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// The text before and after the cursor, for drawing it.
    pub fn split(&self) -> (String, String) {
        (
            self.chars[..self.cursor].iter().collect(),
            self.chars[self.cursor..].iter().collect(),
        )
    }

    /// Inserts text at the cursor. Line breaks, tabs and other control characters
    /// become spaces (runs of them one space; at either end of the text, nothing): a
    /// pasted newline never submits anything.
    pub fn insert(&mut self, text: &str) {
        let text = text.trim_matches(|c: char| c.is_control());
        let mut last_was_space = self.cursor > 0 && self.chars[self.cursor - 1] == ' ';
        for c in text.chars() {
            let c = if c.is_control() { ' ' } else { c };
            if c == ' ' && last_was_space && text.contains(|x: char| x.is_control()) {
                // Collapse "a\r\nb" to "a b", but keep spaces the user typed on purpose
                // when nothing was converted.
                continue;
            }
            last_was_space = c == ' ';
            self.chars.insert(self.cursor, c);
            self.cursor += 1;
        }
    }

    /// Applies one key. Characters (without ctrl/alt) are typed; editing keys edit;
    /// anything else is `Ignored` for the prompt to handle.
    pub fn key(&mut self, key: &KeyEvent) -> Edit {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        match key.code {
            KeyCode::Char('u') if ctrl => {
                self.chars.drain(..self.cursor);
                self.cursor = 0;
                Edit::Changed
            }
            KeyCode::Char('w') if ctrl => {
                let end = self.cursor;
                let mut start = end;
                while start > 0 && self.chars[start - 1].is_whitespace() {
                    start -= 1;
                }
                while start > 0 && !self.chars[start - 1].is_whitespace() {
                    start -= 1;
                }
                self.chars.drain(start..end);
                self.cursor = start;
                Edit::Changed
            }
            KeyCode::Char('a') if ctrl => self.move_to(0),
            KeyCode::Char('e') if ctrl => self.move_to(self.chars.len()),
            KeyCode::Char(c) if !ctrl && !alt => {
                self.chars.insert(self.cursor, c);
                self.cursor += 1;
                Edit::Changed
            }
            KeyCode::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                self.chars.remove(self.cursor);
                Edit::Changed
            }
            KeyCode::Delete if self.cursor < self.chars.len() => {
                self.chars.remove(self.cursor);
                Edit::Changed
            }
            KeyCode::Backspace | KeyCode::Delete => Edit::Moved,
            KeyCode::Left => self.move_to(self.cursor.saturating_sub(1)),
            KeyCode::Right => self.move_to((self.cursor + 1).min(self.chars.len())),
            KeyCode::Home => self.move_to(0),
            KeyCode::End => self.move_to(self.chars.len()),
            _ => Edit::Ignored,
        }
    }

    fn move_to(&mut self, at: usize) -> Edit {
        self.cursor = at;
        Edit::Moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(line: &mut LineInput, code: KeyCode, m: KeyModifiers) -> Edit {
        line.key(&KeyEvent::new(code, m))
    }

    fn typed(text: &str) -> LineInput {
        let mut l = LineInput::default();
        for c in text.chars() {
            press(&mut l, KeyCode::Char(c), KeyModifiers::NONE);
        }
        l
    }

    #[test]
    fn arrows_home_and_end_move_and_typing_inserts_at_the_cursor() {
        let mut l = typed("ip10");
        press(&mut l, KeyCode::Left, KeyModifiers::NONE);
        press(&mut l, KeyCode::Left, KeyModifiers::NONE);
        press(&mut l, KeyCode::Char('-'), KeyModifiers::NONE);
        assert_eq!(l.text(), "ip-10");
        press(&mut l, KeyCode::Home, KeyModifiers::NONE);
        press(&mut l, KeyCode::Char('^'), KeyModifiers::NONE);
        press(&mut l, KeyCode::End, KeyModifiers::NONE);
        press(&mut l, KeyCode::Char('$'), KeyModifiers::NONE);
        assert_eq!(l.text(), "^ip-10$");
        press(&mut l, KeyCode::Right, KeyModifiers::NONE);
        assert_eq!(l.cursor(), 7, "right stops at the end");
    }

    #[test]
    fn backspace_and_delete_work_at_the_cursor() {
        let mut l = typed("abcd");
        press(&mut l, KeyCode::Left, KeyModifiers::NONE);
        press(&mut l, KeyCode::Left, KeyModifiers::NONE);
        press(&mut l, KeyCode::Backspace, KeyModifiers::NONE);
        assert_eq!((l.text().as_str(), l.cursor()), ("acd", 1));
        press(&mut l, KeyCode::Delete, KeyModifiers::NONE);
        assert_eq!((l.text().as_str(), l.cursor()), ("ad", 1));
        press(&mut l, KeyCode::Home, KeyModifiers::NONE);
        assert_eq!(
            press(&mut l, KeyCode::Backspace, KeyModifiers::NONE),
            Edit::Moved
        );
        assert_eq!(l.text(), "ad");
    }

    #[test]
    fn ctrl_u_clears_and_ctrl_w_deletes_one_word() {
        let mut l = typed("pause  general now");
        press(&mut l, KeyCode::Char('w'), KeyModifiers::CONTROL);
        assert_eq!(l.text(), "pause  general ");
        press(&mut l, KeyCode::Char('w'), KeyModifiers::CONTROL);
        assert_eq!(l.text(), "pause  ");
        press(&mut l, KeyCode::Char('u'), KeyModifiers::CONTROL);
        assert_eq!((l.text().as_str(), l.cursor()), ("", 0));
    }

    #[test]
    fn a_paste_is_text_and_its_line_breaks_become_spaces() {
        let mut l = LineInput::new("node ");
        l.insert("ip-10\r\nAy\t!");
        assert_eq!(l.text(), "node ip-10 Ay !");
        let mut l = LineInput::default();
        l.insert("db migration\n");
        assert_eq!(l.text(), "db migration", "a trailing line break is dropped");
        let mut l = LineInput::default();
        l.insert("two  spaces");
        assert_eq!(l.text(), "two  spaces", "typed spaces are kept");
    }

    #[test]
    fn enter_and_esc_are_left_to_the_prompt() {
        let mut l = typed("x");
        assert_eq!(
            press(&mut l, KeyCode::Enter, KeyModifiers::NONE),
            Edit::Ignored
        );
        assert_eq!(
            press(&mut l, KeyCode::Esc, KeyModifiers::NONE),
            Edit::Ignored
        );
        assert_eq!(l.text(), "x");
    }
}
