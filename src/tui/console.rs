//! The one handle the console talks through: snapshots come out of it, operator requests
//! go into it. Views never see the controller, the cluster or the cloud, so the same
//! views serve the in-process controller and (issue 7) attach mode, where requests turn
//! into API-server writes.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use crate::control::controller::Snapshot;
pub use crate::control::requests::{Envelope, Reply, Request};

/// Who the console is talking to, for the header.
#[derive(Clone, Debug)]
pub struct Source {
    /// "embedded simulation: demo", "cluster prod-eu (our controller)", ...
    pub label: String,
    /// Operator actions are refused before they leave the console.
    pub read_only: bool,
    /// The name operator actions are journaled under ("console:alice").
    pub actor: String,
    /// Seconds of the backend's clock per second of wall time: the simulation's speed
    /// for an embedded run, 1.0 for a live or attached cluster. The console moves its
    /// clock, ages and countdowns between snapshots at this rate.
    pub rate: f64,
}

/// Snapshots out, requests in.
#[derive(Clone, Debug)]
pub struct Console {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    requests: mpsc::UnboundedSender<Envelope>,
    pub source: Source,
}

impl Console {
    /// A console over any backend that feeds `snapshots` and answers `requests`.
    pub fn new(
        snapshots: watch::Receiver<Arc<Snapshot>>,
        source: Source,
    ) -> (Console, mpsc::UnboundedReceiver<Envelope>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Console {
                snapshots,
                requests: tx,
                source,
            },
            rx,
        )
    }

    /// A new receiver of the latest snapshot.
    pub fn snapshots(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }

    /// Sends a request and waits for the answer. A backend that has stopped answers
    /// with an error, never hangs.
    pub fn request(&self, request: Request) -> impl Future<Output = Reply> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let sent = self.requests.send((request, tx));
        async move {
            if sent.is_err() {
                return Err("the controller has stopped".into());
            }
            rx.await
                .unwrap_or_else(|_| Err("the controller stopped before answering".into()))
        }
    }
}
