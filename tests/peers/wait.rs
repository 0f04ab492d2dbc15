//! Waiting for the cluster to get somewhere: every wait is bounded, and a test that runs
//! out of patience names what it waited for. Nothing asserts on elapsed time.

use std::time::{Duration, Instant};

/// Polls `probe` every 250 ms until it gives a value; panics naming `what` after
/// `patience`.
#[allow(dead_code)]
pub fn eventually<T>(what: &str, patience: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(start.elapsed() < patience, "waited {patience:?} for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
