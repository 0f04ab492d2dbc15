//! The disruption journal: one JSON object per line, append-only, for every proposal,
//! approval, rejection, pause, resume, execution, completion and withdrawal, with time and
//! actor. Operator actions are fsynced before the call returns, so an approval survives a
//! crash the instant the console reports it; controller entries are flushed but not synced
//! (they are re-derived from the cluster after a restart).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
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

impl Action {
    /// Actions taken by a person: synced to disk before returning.
    pub fn is_operator(self) -> bool {
        matches!(
            self,
            Action::Approved | Action::Rejected | Action::Paused | Action::Resumed
        )
    }
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
}

/// A journal error names the file.
#[derive(Debug, thiserror::Error)]
#[error("journal {path}: {source}")]
pub struct JournalError {
    pub path: String,
    #[source]
    pub source: io::Error,
}

impl Journal {
    /// Opens (creating if needed) the journal for appending.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let err = |source| JournalError {
            path: path.display().to_string(),
            source,
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one entry; syncs it when an operator took the action.
    pub fn record(&mut self, entry: &Entry) -> Result<(), JournalError> {
        let err = |source| JournalError {
            path: self.path.display().to_string(),
            source,
        };
        let mut line = serde_json::to_vec(entry).map_err(|e| err(io::Error::other(e)))?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(err)?;
        if entry.action.is_operator() {
            self.file.sync_data().map_err(err)?;
        }
        Ok(())
    }

    /// Reads every entry of a journal file; a line that does not parse is an error naming
    /// its number.
    pub fn read(path: &Path) -> Result<Vec<Entry>, JournalError> {
        let err = |source| JournalError {
            path: path.display().to_string(),
            source,
        };
        let f = File::open(path).map_err(err)?;
        let mut out = Vec::new();
        for (i, line) in BufReader::new(f).lines().enumerate() {
            let line = line.map_err(err)?;
            if line.trim().is_empty() {
                continue;
            }
            let e = serde_json::from_str(&line).map_err(|e| {
                err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("line {}: {e}", i + 1),
                ))
            })?;
            out.push(e);
        }
        Ok(out)
    }
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
        let at = "2026-01-05T09:02:00Z".parse().unwrap();
        j.record(&Entry {
            at,
            actor: "console:bob".into(),
            action: Action::Paused,
            decision: None,
            method: None,
            reason: None,
            nodes: Vec::new(),
            nodeclaims: Vec::new(),
            savings_per_hour: None,
            detail: "nodepool/general".into(),
            note: Some("db migration".into()),
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
}
