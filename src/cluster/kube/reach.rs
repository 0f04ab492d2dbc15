//! Reaching the API server: before anything else talks to it, one probe (`GET /version`)
//! per attempt, backing off while it does not answer, each failure reported once, naming
//! the server's URL and the cause (kube-rs's own text, "client error (Connect)", names
//! neither). The console shows the report on its connecting screen; headless, it is one
//! log line per attempt.

use std::time::Duration;

use tokio::sync::watch;

/// The first pause between attempts; it doubles up to [`MAX_PAUSE`].
pub const FIRST_PAUSE: Duration = Duration::from_secs(2);
/// The longest pause between attempts (kube-runtime's watcher backs off to the same).
pub const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Exponential backoff that only progress resets: kube-runtime's `default_backoff` resets
/// on every `Ok` item, and its watcher yields one (`Event::Init`) before each failing
/// list, so an unreachable server was retried, and reported, about once a second.
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: FIRST_PAUSE }
    }
}

impl Backoff {
    /// The pause before the next attempt (up to a quarter more, at random, so clients
    /// that failed together do not retry together), and doubles the one after it.
    pub fn pause(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(MAX_PAUSE);
        base.mul_f64(1.0 + 0.25 * fastrand::f64())
    }

    /// Something worked: the next failure starts over from [`FIRST_PAUSE`].
    pub fn reset(&mut self) {
        self.next = FIRST_PAUSE;
    }
}

/// An error and its causes, "a: b: c", without repeating a cause that its parent's text
/// already contains (hyper and kube nest the same message).
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// Probes `server` until it answers, publishing what is going on in `progress` and
/// logging each failed attempt once. Returns the number of failed attempts. Race it with
/// a shutdown signal: it never gives up on its own.
pub async fn reach(client: &kube::Client, server: &str, progress: &watch::Sender<String>) -> u32 {
    let mut backoff = Backoff::default();
    let mut failures = 0;
    loop {
        progress.send_replace(format!("connecting to {server}"));
        match client.apiserver_version().await {
            Ok(_) => {
                if failures > 0 {
                    tracing::info!("connected to {server} after {failures} failed attempts");
                }
                return failures;
            }
            Err(e) => {
                failures += 1;
                let pause = backoff.pause();
                let why = causes(&e);
                tracing::warn!(
                    "connecting to {server}: {why} (attempt {failures}; next in {} s)",
                    pause.as_secs_f64().round()
                );
                progress.send_replace(format!(
                    "connecting to {server}: {why}\n(attempt {failures}; next in {} s)",
                    pause.as_secs_f64().round()
                ));
                tokio::time::sleep(pause).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_to_the_limit_and_progress_starts_them_over() {
        let mut b = Backoff::default();
        let pauses: Vec<Duration> = (0..7).map(|_| b.pause()).collect();
        let bases = [2, 4, 8, 16, 30, 30, 30].map(Duration::from_secs);
        for (p, base) in pauses.iter().zip(bases) {
            assert!(*p >= base && *p <= base.mul_f64(1.25), "{pauses:?}");
        }
        b.reset();
        assert!(b.pause() <= FIRST_PAUSE.mul_f64(1.25));
    }

    #[test]
    fn causes_are_joined_once_each() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let e = E(
            "client error (Connect)",
            Some(Box::new(E(
                "Connect",
                Some(Box::new(E("Connection refused (os error 111)", None))),
            ))),
        );
        assert_eq!(
            causes(&e),
            "client error (Connect): Connection refused (os error 111)"
        );
    }
}
