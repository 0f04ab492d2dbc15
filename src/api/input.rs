//! Reading a user's file (a manifest, a scenario, a theme, a keymap, the config) with a
//! size cap and a located UTF-8 error. Without the cap, `validate -f /dev/urandom` grew to
//! 5 GB in 20 s; without a position, a stray Latin-1 byte on stdin was "stream did not
//! contain valid UTF-8" with nothing to search for.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The default cap: far above any real manifest or scenario (the largest example is
/// under 100 KiB), far below what would exhaust memory once parsed (a parsed YAML
/// document takes 20-40x its text).
pub const DEFAULT_MAX_INPUT: u64 = 64 * 1024 * 1024;

/// The cap in force, set once from `--max-input-size` at start-up. Process-wide because
/// every reader of user files (deep in the console's theme and keymap loading too) must
/// honour the same limit, and threading it through each would repeat one fact everywhere.
static MAX_INPUT: AtomicU64 = AtomicU64::new(DEFAULT_MAX_INPUT);

/// Sets the cap for every later read.
pub fn set_max_input(bytes: u64) {
    MAX_INPUT.store(bytes, Ordering::Relaxed);
}

/// The cap in force.
pub fn max_input() -> u64 {
    MAX_INPUT.load(Ordering::Relaxed)
}

/// Reads `path` ("-" is standard input) as UTF-8 text within the cap. The error names
/// the file and, for bad UTF-8, the line and column of the first bad byte.
pub fn read_text(path: &Path) -> Result<String, String> {
    let name = path.display().to_string();
    if name == "-" {
        return read_from(&name, std::io::stdin().lock());
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(format!("{name}: cannot read: it is a directory"));
    }
    read_from(&name, file)
}

/// Reads `reader` within the cap in force.
pub fn read_from(name: &str, reader: impl Read) -> Result<String, String> {
    read_capped(name, reader, max_input())
}

/// Reads at most `cap` bytes (plus one, to tell "exactly at the cap" from "over it").
fn read_capped(name: &str, reader: impl Read, cap: u64) -> Result<String, String> {
    let mut bytes = Vec::new();
    reader
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: cannot read: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!(
            "{name}: larger than the input limit of {}; raise it with --max-input-size if the file is meant to be this big",
            show_size(cap)
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // The prefix is valid UTF-8 by definition of `valid_up_to`.
        let before = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
        let (line, column) = line_and_column(before);
        format!(
            "{name}:{line}:{column}: not UTF-8 text (byte 0x{:02X} at offset {valid}); save the file as UTF-8",
            bytes[valid]
        )
    })
}

/// The 1-based line and column just after `before`, counting line breaks as YAML does
/// (LF, CRLF, or a bare CR) and columns in characters.
pub fn line_and_column(before: &str) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    let mut after_cr = false;
    for c in before.chars() {
        match c {
            '\n' if after_cr => {}
            '\n' | '\r' => {
                line += 1;
                column = 1;
            }
            _ => column += 1,
        }
        after_cr = c == '\r';
    }
    (line, column)
}

/// A parser's position moved inside `text`: a YAML parser that runs out of input on a
/// last line without a newline reports the line after it, which no editor can show; that
/// is the end of the last line.
///
/// `end` is the text's [`line_and_column`], computed once by a caller placing several
/// positions (each computation walks the whole text).
pub fn clamp_to_end(end: (usize, usize), line: usize, column: usize) -> (usize, usize) {
    let (last_line, end_column) = end;
    if line > last_line {
        (last_line, end_column)
    } else {
        (line.max(1), column.max(1))
    }
}

/// Parses `--max-input-size`: bytes, or a number with a binary or decimal suffix
/// (`64MiB`, `1GiB`, `500KB`, `1g`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().map_err(|_| {
        format!("{text:?} is not a size: write bytes or a number with KiB, MiB or GiB")
    })?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => {
            return Err(format!(
                "{text:?}: unknown size unit {other:?} (use KiB, MiB or GiB)"
            ));
        }
    };
    let bytes = n
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too large a size"))?;
    if bytes == 0 {
        return Err("the input limit must be at least 1 byte".to_string());
    }
    Ok(bytes)
}

/// A size the way the flag takes it.
fn show_size(bytes: u64) -> String {
    for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{} {unit}", bytes / scale);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_utf8_is_located_by_line_and_column() {
        let text = b"a: 1\r\nb: 2\rc: caf\xe9\n";
        let e = read_from("in.yaml", &text[..]).unwrap_err();
        assert_eq!(
            e,
            "in.yaml:3:7: not UTF-8 text (byte 0xE9 at offset 17); save the file as UTF-8"
        );
    }

    #[test]
    fn input_over_the_cap_is_refused_by_name_and_limit() {
        assert_eq!(read_capped("x", &b"abcd"[..], 4), Ok("abcd".to_string()));
        assert_eq!(
            read_capped("/dev/urandom", &b"abcde"[..], 4),
            Err("/dev/urandom: larger than the input limit of 4 bytes; raise it with --max-input-size if the file is meant to be this big".to_string())
        );
    }

    #[test]
    fn positions_past_the_end_are_the_end_of_the_last_line() {
        let clamp = |text, line, column| clamp_to_end(line_and_column(text), line, column);
        assert_eq!(clamp("a: 1\nkin", 3, 1), (2, 4));
        assert_eq!(clamp("a: 1\nkin\n", 3, 1), (3, 1));
        assert_eq!(clamp("a: 1\r\nb", 2, 2), (2, 2));
    }

    #[test]
    fn sizes_read_as_written() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("500KB"), Ok(500_000));
        assert_eq!(parse_size("12"), Ok(12));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999GiB").is_err());
        assert_eq!(show_size(DEFAULT_MAX_INPUT), "64 MiB");
        assert_eq!(show_size(1000), "1000 bytes");
    }
}
