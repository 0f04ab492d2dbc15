//! Notifications: what an operator must hear about without watching a console, posted to
//! webhooks (`--notify URL`, repeatable; `KARPENTER_TUI_NOTIFY`).
//!
//! Each decision that waits for approval, each execution, failure, pause (the circuit
//! breaker's trip among them) and resume is posted as one JSON document carrying a `text`
//! field, so a Slack incoming webhook shows it as it is, beside the event itself for
//! anything that reads JSON. Upstream has no such thing.
//!
//! The control loop never waits for a webhook: [`Notifier::offer`] queues the document
//! (a full queue drops it, counted and logged), and one task per URL posts its queue in
//! order, retrying a connection error, a 429 or a 5xx with exponential backoff.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::events::{Event, EventKind};

/// Documents waiting per URL before new ones are dropped.
pub const QUEUE: usize = 256;
/// Tries per document: the first and four retries.
pub const ATTEMPTS: u32 = 5;
/// The first retry's wait; each next one doubles it, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long one POST may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Posts notifications to webhooks without holding up the caller.
pub struct Notifier {
    queues: Vec<mpsc::Sender<Value>>,
    posters: Vec<JoinHandle<()>>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("urls", &self.queues.len())
            .finish()
    }
}

/// Checks a webhook URL: http or https, with a host.
pub fn check_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("--notify {url:?}: not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(uri),
        _ => Err(format!(
            "--notify {url:?}: expected an http:// or https:// URL with a host"
        )),
    }
}

impl Notifier {
    /// A notifier posting to every URL; must be called inside a Tokio runtime. The
    /// error names a URL that does not parse, or a TLS set-up that failed.
    pub fn start(urls: &[String]) -> Result<Notifier, String> {
        let uris = urls
            .iter()
            .map(|u| check_url(u))
            .collect::<Result<Vec<_>, _>>()?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| format!("--notify: no TLS root certificates: {e}"))?
            .https_or_http()
            .enable_http1()
            .build();
        let client: HttpsClient = Client::builder(TokioExecutor::new()).build(connector);
        let dropped = Arc::new(AtomicU64::new(0));
        let mut queues = Vec::new();
        let mut posters = Vec::new();
        for uri in uris {
            let (tx, rx) = mpsc::channel(QUEUE);
            queues.push(tx);
            posters.push(tokio::spawn(post_all(client.clone(), uri, rx)));
        }
        Ok(Notifier {
            queues,
            posters,
            dropped,
        })
    }

    /// Queues the event's notification, if it is one an operator is told about. Never
    /// waits.
    pub fn offer(&self, event: &Event, at: DateTime<Utc>) {
        let Some(doc) = document(event, at) else {
            return;
        };
        for q in &self.queues {
            if q.try_send(doc.clone()).is_err() {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!("notify: queue full, dropped a notification ({n} so far)");
            }
        }
    }

    /// Notifications dropped because a webhook's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Stops taking notifications and waits up to `patience` for the queued ones to be
    /// posted (or given up on).
    pub async fn close(self, patience: Duration) {
        drop(self.queues);
        let all = futures_util::future::join_all(self.posters);
        if tokio::time::timeout(patience, all).await.is_err() {
            tracing::warn!("notify: gave up on notifications still queued after {patience:?}");
        }
    }
}

/// Posts each queued document to `uri`, in order.
async fn post_all(client: HttpsClient, uri: http::Uri, mut rx: mpsc::Receiver<Value>) {
    while let Some(doc) = rx.recv().await {
        let body = Bytes::from(doc.to_string());
        let mut wait = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            match post(&client, &uri, body.clone()).await {
                Ok(()) => break,
                Err((why, retry)) => {
                    if !retry || attempt == ATTEMPTS {
                        tracing::warn!(
                            "notify {uri}: {why}; gave up after {attempt} attempt{}",
                            if attempt == 1 { "" } else { "s" }
                        );
                        break;
                    }
                    tracing::info!("notify {uri}: {why}; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

/// One POST; the error says what went wrong and whether trying again may help.
async fn post(client: &HttpsClient, uri: &http::Uri, body: Bytes) -> Result<(), (String, bool)> {
    let request = http::Request::post(uri.clone())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, "karpenter-tui")
        .body(Full::new(body))
        .map_err(|e| (e.to_string(), false))?;
    let response = tokio::time::timeout(TIMEOUT, client.request(request))
        .await
        .map_err(|_| (format!("no answer within {TIMEOUT:?}"), true))?
        .map_err(|e| (format!("{e}"), true))?;
    let status = response.status();
    // Read the body so the connection can be reused.
    let _ = response.into_body().collect().await;
    if status.is_success() {
        Ok(())
    } else {
        let retry = status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS;
        Err((format!("answered {status}"), retry))
    }
}

/// The notification for an event, if an operator is told about it: a JSON document with
/// Slack's `text`, the event's kind and time, and the event itself.
pub fn document(event: &Event, at: DateTime<Utc>) -> Option<Value> {
    let text = text(&event.kind)?;
    let mut body = serde_json::to_value(event).ok()?;
    let kind = body.get("kind").cloned().unwrap_or(Value::Null);
    if let Some(o) = body.as_object_mut() {
        o.remove("kind");
        o.remove("t");
    }
    Some(json!({
        "text": text,
        "source": "karpenter-tui",
        "kind": kind,
        "at": at.to_rfc3339_opts(SecondsFormat::Secs, true),
        "event": body,
    }))
}

/// One line an operator reads in a chat channel.
fn text(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::DisruptionProposed {
            id,
            method,
            reason,
            policy,
            candidates,
            replacement,
            savings,
        } if policy == "manual" => {
            let nodes: Vec<&str> = candidates.iter().map(|c| c.node.as_str()).collect();
            let mut t = format!(
                "karpenter-tui: decision #{id} awaits approval: {method} ({reason}) of {}",
                nodes.join(", ")
            );
            if !replacement.is_empty() {
                t.push_str(&format!(", {} replacement(s)", replacement.len()));
            }
            if *savings > 0.0 {
                t.push_str(&format!(", saves ${savings:.4}/h"));
            }
            t
        }
        EventKind::DisruptionExecuted {
            id,
            method,
            reason,
            nodes,
            ..
        } => format!(
            "karpenter-tui: decision #{id} runs: {method} ({reason}) of {}",
            nodes.join(", ")
        ),
        EventKind::DisruptionFailed { id, reason } => {
            format!("karpenter-tui: decision #{id} failed: {reason}")
        }
        EventKind::DisruptionPaused {
            scope,
            actor,
            reason,
        } if actor == crate::api::protocol::BREAKER_ACTOR => format!(
            "karpenter-tui: circuit breaker tripped, {scope} paused until an operator resumes it: {}",
            reason.as_deref().unwrap_or("no evidence recorded")
        ),
        EventKind::DisruptionPaused {
            scope,
            actor,
            reason,
        } => match reason {
            Some(r) => format!("karpenter-tui: {actor} paused disruption of {scope}: {r}"),
            None => format!("karpenter-tui: {actor} paused disruption of {scope}"),
        },
        EventKind::DisruptionResumed { scope, actor } => {
            format!("karpenter-tui: {actor} resumed disruption of {scope}")
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-05T12:00:00Z")
            .unwrap()
            .to_utc()
    }

    #[test]
    fn only_what_an_operator_must_hear_about_is_posted_with_slacks_text() {
        let trip = Event {
            t: 571.0,
            kind: EventKind::DisruptionPaused {
                scope: "nodepool/web".into(),
                actor: "circuit-breaker".into(),
                reason: Some("3 of the last 4 replacements failed".into()),
            },
        };
        let doc = document(&trip, at()).unwrap();
        assert_eq!(
            doc["text"],
            "karpenter-tui: circuit breaker tripped, nodepool/web paused until an operator resumes it: 3 of the last 4 replacements failed"
        );
        assert_eq!(doc["kind"], "DisruptionPaused");
        assert_eq!(doc["at"], "2026-12-05T12:00:00Z");
        assert_eq!(doc["event"]["scope"], "nodepool/web");
        let auto = Event {
            t: 1.0,
            kind: EventKind::DisruptionProposed {
                id: 1,
                method: "emptiness".into(),
                reason: "Empty".into(),
                policy: "auto".into(),
                candidates: vec![],
                replacement: vec![],
                savings: 0.1,
            },
        };
        assert_eq!(document(&auto, at()), None, "an auto decision needs nobody");
        let blocked = Event {
            t: 1.0,
            kind: EventKind::DisruptionCompleted { id: 1 },
        };
        assert_eq!(document(&blocked, at()), None);
    }

    #[test]
    fn a_webhook_url_is_http_or_https_with_a_host() {
        assert!(check_url("https://hooks.slack.com/services/T/B/X").is_ok());
        assert!(check_url("http://127.0.0.1:8080/hook").is_ok());
        for bad in ["hooks.slack.com/x", "ftp://host/x", "https://", "::"] {
            let e = check_url(bad).unwrap_err();
            assert!(e.starts_with("--notify "), "{e}");
        }
    }
}
