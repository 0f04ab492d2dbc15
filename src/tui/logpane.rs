//! Where logs go while the console owns the terminal: a file (for later) and a ring of
//! recent lines shown in the Events view. Nothing is ever written to the screen the UI
//! draws on.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Lines kept for the pane.
const KEPT: usize = 500;

#[derive(Debug, Default)]
struct Inner {
    lines: Mutex<VecDeque<String>>,
    written: AtomicU64,
    file: Mutex<Option<File>>,
}

/// The in-app log: cheap to clone, shared with the tracing writer.
#[derive(Clone, Debug, Default)]
pub struct LogPane {
    inner: Arc<Inner>,
    seen: u64,
}

impl LogPane {
    /// A pane that also appends to `path` (created if missing).
    pub fn with_file(path: &Path) -> io::Result<LogPane> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let pane = LogPane::default();
        if let Ok(mut f) = pane.inner.file.lock() {
            *f = Some(file);
        }
        Ok(pane)
    }

    /// Adds one line (without its newline).
    pub fn push(&self, line: &str) {
        if let Ok(mut lines) = self.inner.lines.lock() {
            lines.push_back(line.to_string());
            while lines.len() > KEPT {
                lines.pop_front();
            }
        }
        self.inner.written.fetch_add(1, Ordering::Relaxed);
    }

    /// The newest `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<String> {
        match self.inner.lines.lock() {
            Ok(lines) => lines
                .iter()
                .skip(lines.len().saturating_sub(n))
                .cloned()
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// True once per batch of new lines.
    pub fn changed(&mut self) -> bool {
        let w = self.inner.written.load(Ordering::Relaxed);
        let c = w != self.seen;
        self.seen = w;
        c
    }

    /// A writer for `tracing_subscriber::fmt().with_writer(...)`.
    pub fn writer(&self) -> LogWriter {
        LogWriter {
            pane: self.clone(),
            buf: Vec::new(),
        }
    }
}

/// One log record on its way to the pane and the file.
pub struct LogWriter {
    pane: LogPane,
    buf: Vec<u8>,
}

impl Write for LogWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Ok(mut f) = self.pane.inner.file.lock()
            && let Some(file) = f.as_mut()
        {
            let _ = file.write_all(&self.buf);
        }
        let text = String::from_utf8_lossy(&self.buf);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            self.pane.push(line);
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogPane {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        self.writer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_reach_the_pane_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/console.log");
        let mut pane = LogPane::with_file(&path).unwrap();
        assert!(!pane.changed());
        {
            let mut w = pane.writer();
            w.write_all(b"WARN one\nWARN two\n").unwrap();
        }
        assert!(pane.changed());
        assert!(!pane.changed());
        assert_eq!(pane.tail(1), ["WARN two"]);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "WARN one\nWARN two\n"
        );
    }
}
