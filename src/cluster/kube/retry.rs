//! How a write survives a busy or contended API server, the way client-go's callers do:
//! a 409 Conflict re-reads and tries again at once (someone wrote between our read and
//! our write), 429 TooManyRequests and 5xx back off exponentially with jitter (honouring
//! the server's Retry-After), and a broken connection is retried like a 503. Anything
//! else is the caller's to report.

use std::future::Future;
use std::time::Duration;

/// Attempts per write before the error goes back to the controller (which tries the
/// write again on a later round).
pub const MAX_TRIES: u32 = 6;
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// What to do about an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// 409 Conflict on an update: read again and retry now.
    Reread,
    /// Throttled or the server is unwell: wait, then retry.
    Backoff,
    /// Not worth retrying.
    Fail,
}

/// Classifies a kube-rs error.
pub fn verdict(e: &kube::Error) -> Verdict {
    match e {
        // AlreadyExists is also a 409, but retrying a create cannot help.
        kube::Error::Api(s) if s.code == 409 && s.reason != "AlreadyExists" => Verdict::Reread,
        kube::Error::Api(s) if s.code == 429 || s.code >= 500 => Verdict::Backoff,
        kube::Error::Api(_) => Verdict::Fail,
        kube::Error::HyperError(_) | kube::Error::Service(_) => Verdict::Backoff,
        _ => Verdict::Fail,
    }
}

/// The server's Retry-After hint, which kube-rs keeps in the Status details.
fn retry_after(e: &kube::Error) -> Option<Duration> {
    match e {
        kube::Error::Api(s) => s
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
            .map(|s| Duration::from_secs(u64::from(s).min(30))),
        _ => None,
    }
}

/// Runs `attempt` until it succeeds, fails for good, or [`MAX_TRIES`] are spent. Each
/// attempt re-reads whatever it needs, so a conflict is resolved against fresh data.
pub async fn retrying<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = FIRST_DELAY;
    let mut tries = 0;
    loop {
        tries += 1;
        let e = match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if tries >= MAX_TRIES {
            return Err(e);
        }
        match verdict(&e) {
            Verdict::Fail => return Err(e),
            Verdict::Reread => tracing::debug!("{what}: conflict, reading again ({e})"),
            Verdict::Backoff => {
                let jitter = Duration::from_millis(fastrand::u64(0..=delay.as_millis() as u64 / 2));
                let wait = retry_after(&e).unwrap_or(delay) + jitter;
                tracing::info!("{what}: {e}; retrying in {} ms", wait.as_millis());
                tokio::time::sleep(wait).await;
                delay = (delay * 2).min(MAX_DELAY);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: reason.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn conflicts_reread_throttling_backs_off_the_rest_fails() {
        assert_eq!(verdict(&api(409, "Conflict")), Verdict::Reread);
        assert_eq!(verdict(&api(409, "AlreadyExists")), Verdict::Fail);
        assert_eq!(verdict(&api(429, "TooManyRequests")), Verdict::Backoff);
        assert_eq!(verdict(&api(503, "ServiceUnavailable")), Verdict::Backoff);
        assert_eq!(verdict(&api(404, "NotFound")), Verdict::Fail);
        assert_eq!(verdict(&api(422, "Invalid")), Verdict::Fail);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_until_success_and_gives_up_after_max_tries() {
        let mut calls = 0;
        let r = retrying("test", || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(api(429, "TooManyRequests"))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 3);

        let mut calls = 0;
        let r: Result<(), _> = retrying("test", || {
            calls += 1;
            async { Err(api(500, "InternalError")) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, MAX_TRIES);

        let mut calls = 0;
        let r: Result<(), _> = retrying("test", || {
            calls += 1;
            async { Err(api(404, "NotFound")) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 1, "a 404 is not retried");
    }
}
