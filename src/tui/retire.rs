//! Freeing large values off the UI thread.
//!
//! A new snapshot replaces the previous one, and the previous one is often the last
//! reference to a whole cluster state (5,000 nodes and 50,000 pods at the benchmark's
//! scale). Freeing it took most of the time between a snapshot's arrival and its frame,
//! so the console hands such values to a thread that only drops them.

use std::sync::OnceLock;
use std::sync::mpsc::{self, Sender};

type Garbage = Box<dyn Send>;

/// The dropping thread's inbox; `None` when the thread could not be started (values are
/// then dropped where they are retired).
static BIN: OnceLock<Option<Sender<Garbage>>> = OnceLock::new();

/// Drops `value` on the retiring thread (or here, when there is none).
pub fn retire<T: Send + 'static>(value: T) {
    let bin = BIN.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Garbage>();
        std::thread::Builder::new()
            .name("retire".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()
            .map(|_| tx)
    });
    if let Some(tx) = bin {
        // The thread never ends first, but if it did the value comes back: drop it here.
        let _ = tx.send(Box::new(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A retired value is really freed (its last reference goes), not kept forever.
    #[test]
    fn a_retired_value_is_dropped() {
        let value = Arc::new(vec![0u8; 1024]);
        let watch = Arc::downgrade(&value);
        retire(value);
        let start = Instant::now();
        while watch.upgrade().is_some() {
            assert!(start.elapsed() < Duration::from_secs(10), "never dropped");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
