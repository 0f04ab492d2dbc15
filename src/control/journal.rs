//! The disruption journal: one JSON object per line, append-only, for every proposal,
//! approval, rejection, pause, resume, execution, completion and withdrawal, with time and
//! actor. Every entry is fsynced before the call returns: an approval survives a crash
//! the instant the console reports it, and a post-incident review reads every step the
//! controller took up to the crash, not what the page cache happened to flush.
//!
//! A crash mid-write leaves a torn last line. Opening the journal cuts it back to the
//! last complete entry (with a warning saying how much was dropped), so the next entry
//! starts on a line of its own instead of being glued to the fragment.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Proposed,
    Approved,
    Rejected,
    Paused,
    Resumed,
    Executed,
    Completed,
    Failed,
    Withdrawn,
    Involuntary,
}

/// One line of the journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub at: DateTime<Utc>,
    /// "controller", or the operator ("console:alice").
    pub actor: String,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The candidates' Node names, for people.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The candidates' NodeClaims: their identities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodeclaims: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub savings_per_hour: Option<f64>,
    /// Free text: why withdrawn or rejected, the pause scope, the failure.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Why an operator paused, in their own words (typed in the console's confirmation).
    /// Absent from older journals and from actions taken without a reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// An append-only journal file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    repaired: Option<String>,
}

/// A journal error names the file.
#[derive(Debug, thiserror::Error)]
#[error("journal {path}: {source}")]
pub struct JournalError {
    pub path: String,
    #[source]
    pub source: io::Error,
}

/// Every complete entry of a journal file, and what was wrong with its end.
#[derive(Debug, Default)]
pub struct Contents {
    pub entries: Vec<Entry>,
    /// The last line when it was cut short (no newline, not a whole entry): a crash while
    /// writing. Reported, not fatal: everything before it is intact.
    pub torn: Option<String>,
}

impl Journal {
    /// Opens (creating if needed) the journal for appending, cutting a torn last line
    /// back to the last complete entry (see [`Journal::repaired`]).
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let err = |source| JournalError {
            path: path.display().to_string(),
            source,
        };
        if path.is_dir() {
            return Err(err(io::Error::other(
                "is a directory; give a file path such as journal.jsonl",
            )));
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        let repaired = cut_torn_tail(&file).map_err(err)?.map(|dropped| {
            format!(
                "journal {}: the last line was cut short ({dropped} bytes without an end, \
                     likely a crash while writing); removed it, keeping every complete entry",
                path.display()
            )
        });
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            repaired,
        })
    }

    /// The warning when [`Journal::open`] cut a torn last line.
    pub fn repaired(&self) -> Option<&str> {
        self.repaired.as_deref()
    }

    /// The journal's file, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry and syncs it to disk before returning.
    pub fn record(&mut self, entry: &Entry) -> Result<(), JournalError> {
        let err = |source| JournalError {
            path: self.path.display().to_string(),
            source,
        };
        let mut line = serde_json::to_vec(entry).map_err(|e| err(io::Error::other(e)))?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(err)?;
        self.file.sync_data().map_err(err)
    }

    /// Reads every entry of a journal file; a line that does not parse is an error naming
    /// its number, except a torn last line, which is skipped.
    pub fn read(path: &Path) -> Result<Vec<Entry>, JournalError> {
        Journal::read_all(path).map(|c| c.entries)
    }

    /// Reads a journal for review: every complete entry, and a torn last line set aside.
    pub fn read_all(path: &Path) -> Result<Contents, JournalError> {
        let err = |source| JournalError {
            path: path.display().to_string(),
            source,
        };
        if path.is_dir() {
            return Err(err(io::Error::other("is a directory, not a journal file")));
        }
        // Not held to the input limit: the journal is ours, and a long incident's is big.
        let text = std::fs::read_to_string(path).map_err(err)?;
        let ends_cleanly = text.is_empty() || text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Contents::default();
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(line) {
                Ok(e) => out.entries.push(e),
                Err(_) if i + 1 == lines.len() && !ends_cleanly => {
                    out.torn = Some(line.to_string());
                }
                Err(e) => {
                    return Err(err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("line {}: not a journal entry: {e}", i + 1),
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// Truncates `file` after its last newline when the bytes after it are not a whole line;
/// returns how many bytes were dropped.
fn cut_torn_tail(mut file: &File) -> io::Result<Option<u64>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    // Walk back from the end in blocks to the last newline.
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    let mut keep = 0;
    let mut buf = vec![0u8; BLOCK as usize];
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            keep = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if keep == len {
        return Ok(None);
    }
    file.set_len(keep)?;
    file.sync_data()?;
    Ok(Some(len - keep))
}

/// The journal as a table for people: one line per entry, oldest first.
pub fn table(entries: &[Entry]) -> String {
    use crate::api::text::escape_controls;
    let mut out = String::from(
        "TIME                  ACTOR              ACTION       DECISION  NODES / DETAIL\n",
    );
    for e in entries {
        let decision = e.decision.map(|d| format!("#{d}")).unwrap_or_default();
        let mut what = e.nodes.join(",");
        if let Some(m) = &e.method {
            what = format!("{m} {what}");
        }
        if let Some(r) = &e.reason {
            what = format!("{r}: {what}");
        }
        if !e.detail.is_empty() {
            what = if what.is_empty() {
                e.detail.clone()
            } else {
                format!("{what} ({})", e.detail)
            };
        }
        if let Some(n) = &e.note {
            what = format!("{what} \u{2014} {n:?}");
        }
        if let Some(s) = e.savings_per_hour.filter(|s| *s > 0.0) {
            what = format!("{what} saves ${s:.4}/h");
        }
        let action = serde_json::to_value(e.action)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<21} {:<18} {:<12} {:<9} {}\n",
            e.at.format("%Y-%m-%dT%H:%M:%SZ"),
            escape_controls(&e.actor),
            action,
            decision,
            escape_controls(what.trim())
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_reason_is_written_and_old_lines_without_one_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        // A line as journals wrote it before reasons existed.
        std::fs::write(
            &path,
            "{\"at\":\"2026-01-05T09:01:00Z\",\"actor\":\"console:alice\",\"action\":\"paused\",\"detail\":\"all\"}\n",
        )
        .unwrap();
        let mut j = Journal::open(&path).unwrap();
        j.record(&Entry {
            detail: "nodepool/general".into(),
            note: Some("db migration".into()),
            ..pause("console:bob")
        })
        .unwrap();
        let entries = Journal::read(&path).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            (entries[0].note.as_deref(), entries[0].detail.as_str()),
            (None, "all")
        );
        assert_eq!(entries[1].note.as_deref(), Some("db migration"));
    }

    fn pause(actor: &str) -> Entry {
        Entry {
            at: "2026-01-05T09:02:00Z".parse().unwrap(),
            actor: actor.into(),
            action: Action::Paused,
            decision: None,
            method: None,
            reason: None,
            nodes: Vec::new(),
            nodeclaims: Vec::new(),
            savings_per_hour: None,
            detail: "all".into(),
            note: None,
        }
    }

    #[test]
    fn a_torn_last_line_is_cut_with_a_warning_and_the_next_entry_starts_clean() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let whole = serde_json::to_string(&pause("console:a")).unwrap();
        std::fs::write(&path, format!("{whole}\n{{\"at\":\"2026-01-05T09:0")).unwrap();
        // A reviewer reads every complete entry and sees the fragment set aside.
        let c = Journal::read_all(&path).unwrap();
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.torn.as_deref(), Some("{\"at\":\"2026-01-05T09:0"));

        let mut j = Journal::open(&path).unwrap();
        assert_eq!(
            j.repaired().unwrap(),
            format!(
                "journal {}: the last line was cut short (22 bytes without an end, likely a crash while writing); removed it, keeping every complete entry",
                path.display()
            )
        );
        j.record(&pause("console:b")).unwrap();
        let c = Journal::read_all(&path).unwrap();
        assert_eq!(c.torn, None);
        let actors: Vec<_> = c.entries.iter().map(|e| e.actor.as_str()).collect();
        assert_eq!(actors, ["console:a", "console:b"]);
        // A clean journal is left alone.
        assert_eq!(Journal::open(&path).unwrap().repaired(), None);
    }

    #[test]
    fn a_journal_with_no_complete_line_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        std::fs::write(&path, "{\"at\"").unwrap();
        assert!(Journal::open(&path).unwrap().repaired().is_some());
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn errors_name_the_journal_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = Journal::open(dir.path()).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "journal {}: is a directory; give a file path such as journal.jsonl",
                dir.path().display()
            )
        );
        if Path::new("/dev/full").exists() {
            let mut j = Journal::open(Path::new("/dev/full")).unwrap();
            let e = j.record(&pause("console:a")).unwrap_err().to_string();
            assert!(e.starts_with("journal /dev/full: "), "{e}");
        }
        let path = dir.path().join("bad.jsonl");
        std::fs::write(&path, "{}\n").unwrap();
        let e = Journal::read(&path).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "journal {}: line 1: not a journal entry: ",
                path.display()
            )),
            "{e}"
        );
    }

    #[test]
    fn the_table_reads_one_entry_per_line() {
        let mut e = pause("console:alice");
        e.note = Some("db migration".into());
        let t = table(&[e]);
        assert_eq!(
            t.lines().nth(1).unwrap(),
            "2026-01-05T09:02:00Z  console:alice      paused                 all \u{2014} \"db migration\""
        );
    }
}
