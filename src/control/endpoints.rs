//! The headless controller's HTTP endpoints, all on one port (by default 0.0.0.0:8080,
//! upstream Karpenter's metrics port):
//!
//! - `/metrics`: the [`Metrics`] registry in the OpenMetrics 1.0 text format, which
//!   Prometheus negotiates and parses like its own text format;
//! - `/healthz` (liveness): 200 while the control loop's heartbeat is fresh, 500 naming how
//!   long it has been silent, so the kubelet restarts a process whose loop hangs (a
//!   deadlock, an await that never returns) even though this server, on its own task,
//!   still answers;
//! - `/readyz` (readiness): 503 until the initial sync with the API server is done, 200
//!   after, so a rollout waits for a replica that can actually take over.
//!
//! One port, because the probes and the scrape are cheap and read-only: one containerPort,
//! one Service port, one NetworkPolicy rule.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use super::metrics::Metrics;

/// Where the endpoints listen unless told otherwise.
pub const DEFAULT_ADDR: &str = "0.0.0.0:8080";

/// How long the control loop may go without a heartbeat before `/healthz` fails. The loop
/// wakes at least every disruption poll (10 s), so a minute of silence is a hang, not load.
pub const DEFAULT_STALL_AFTER: Duration = Duration::from_secs(60);

/// How long a graceful shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(5);

/// A client that has not sent its request headers by then is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

const TEXT: &str = "text/plain; charset=utf-8";

/// What the probes read. The control loop writes it: [`Health::beat`] on every iteration,
/// [`Health::set_ready`] once its first sync is done. Clones share the same state.
#[derive(Clone, Debug)]
pub struct Health {
    inner: Arc<HealthState>,
}

#[derive(Debug)]
struct HealthState {
    origin: Instant,
    stall_after: Duration,
    /// Milliseconds after `origin` of the last heartbeat.
    last_beat: AtomicU64,
    ready: AtomicBool,
}

impl Health {
    /// Live (its creation counts as the first heartbeat) and not ready. A loop silent for
    /// `stall_after` fails liveness.
    pub fn new(stall_after: Duration) -> Health {
        Health {
            inner: Arc::new(HealthState {
                origin: Instant::now(),
                stall_after,
                last_beat: AtomicU64::new(0),
                ready: AtomicBool::new(false),
            }),
        }
    }

    /// The control loop is alive. Call it every iteration, including a standby replica's
    /// wait for the lease: a healthy standby must not be restarted.
    pub fn beat(&self) {
        let ms = u64::try_from(self.inner.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.inner.last_beat.fetch_max(ms, Ordering::Relaxed);
    }

    /// Ready once the initial sync is done; false again if the view of the cluster is lost.
    /// A standby replica should be ready too once synced (or at once if it does not
    /// watch), or a rolling update waits forever for a pod that cannot lead.
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Relaxed);
    }

    /// Liveness: `Err` names how long the loop has been silent.
    pub fn liveness(&self) -> Result<(), String> {
        self.liveness_at(Instant::now())
    }

    fn liveness_at(&self, now: Instant) -> Result<(), String> {
        let last = Duration::from_millis(self.inner.last_beat.load(Ordering::Relaxed));
        let silent = now
            .saturating_duration_since(self.inner.origin)
            .saturating_sub(last);
        if silent >= self.inner.stall_after {
            Err(format!(
                "the control loop has not run for {:.0} s (limit {} s)",
                silent.as_secs_f64(),
                self.inner.stall_after.as_secs()
            ))
        } else {
            Ok(())
        }
    }

    /// Readiness: `Err` says what is still missing.
    pub fn readiness(&self) -> Result<(), String> {
        if self.inner.ready.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("the initial sync with the API server is not done yet".into())
        }
    }
}

/// The endpoints, bound and ready to serve.
pub struct Endpoints {
    listener: TcpListener,
    metrics: Metrics,
    health: Health,
}

impl Endpoints {
    /// Binds `addr` now, so a taken port fails at startup rather than inside a task.
    pub async fn bind(addr: SocketAddr, metrics: Metrics, health: Health) -> io::Result<Endpoints> {
        let listener = TcpListener::bind(addr).await?;
        metrics.set_served();
        Ok(Endpoints {
            listener,
            metrics,
            health,
        })
    }

    /// The bound address (the actual port when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then stops accepting and gives requests in flight
    /// up to 5 s to finish. A failed accept (out of file descriptors) is logged and retried:
    /// the probes must not take the controller down.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let graceful = GracefulShutdown::new();
        let shared = Arc::new((self.metrics, self.health));
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => break,
                a = self.listener.accept() => a,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "endpoints: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let shared = shared.clone();
            let service = service_fn(move |req: Request<Incoming>| {
                let (metrics, health) = &*shared;
                let response = respond(req.method(), req.uri().path(), metrics, health);
                async move { Ok::<_, Infallible>(response) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let conn = graceful.watch(conn);
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "endpoints: connection ended with an error");
                }
            });
        }
        drop(self.listener);
        if tokio::time::timeout(DRAIN, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("endpoints: requests still open after {DRAIN:?}; dropped");
        }
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.into())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
    r
}

fn respond(
    method: &Method,
    path: &str,
    metrics: &Metrics,
    health: &Health,
) -> Response<Full<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let probe = |result: Result<(), String>, failed: StatusCode| match result {
        Ok(()) => text(StatusCode::OK, "ok\n"),
        Err(why) => text(failed, format!("{why}\n")),
    };
    match path {
        "/metrics" => {
            let mut r = text(StatusCode::OK, metrics.encode());
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(Metrics::CONTENT_TYPE),
            );
            r
        }
        "/healthz" | "/livez" => probe(health.liveness(), StatusCode::INTERNAL_SERVER_ERROR),
        "/readyz" => probe(health.readiness(), StatusCode::SERVICE_UNAVAILABLE),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: this server has /metrics, /healthz and /readyz\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_loop_is_live_and_not_ready() {
        let h = Health::new(Duration::from_secs(60));
        assert_eq!(h.liveness(), Ok(()));
        assert!(h.readiness().is_err());
        h.set_ready(true);
        assert_eq!(h.readiness(), Ok(()));
        h.set_ready(false);
        assert!(h.readiness().is_err());
    }

    #[test]
    fn a_silent_loop_fails_liveness_until_it_beats_again() {
        let h = Health::new(Duration::from_secs(60));
        let origin = h.inner.origin;
        assert_eq!(h.liveness_at(origin + Duration::from_secs(59)), Ok(()));
        let err = h.liveness_at(origin + Duration::from_secs(61)).unwrap_err();
        assert!(err.contains("61 s"), "{err}");
        h.inner.last_beat.store(30_000, Ordering::Relaxed);
        assert_eq!(h.liveness_at(origin + Duration::from_secs(61)), Ok(()));
        assert!(h.liveness_at(origin + Duration::from_secs(91)).is_err());
    }

    #[test]
    fn beats_move_the_heartbeat_forward() {
        let h = Health::new(Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(60));
        assert!(h.liveness().is_err());
        h.beat();
        assert_eq!(h.liveness(), Ok(()));
    }

    #[test]
    fn routes_methods_and_content_types() {
        let (m, h) = (Metrics::new(), Health::new(DEFAULT_STALL_AFTER));
        let r = respond(&Method::GET, "/metrics", &m, &h);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_TYPE], Metrics::CONTENT_TYPE);
        assert_eq!(
            respond(&Method::GET, "/readyz", &m, &h).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            respond(&Method::HEAD, "/healthz", &m, &h).status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&Method::POST, "/metrics", &m, &h).status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            respond(&Method::GET, "/", &m, &h).status(),
            StatusCode::NOT_FOUND
        );
    }
}
