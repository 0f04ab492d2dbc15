//! The one handle the console talks through: snapshots come out of it, operator requests
//! go into it. Views never see the controller, the cluster or the cloud, so the same
//! views serve the in-process controller and (issue 7) attach mode, where requests turn
//! into API-server writes.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use crate::cloud::CloudProvider;
use crate::cluster::Cluster;
use crate::control::approvals::Scope;
use crate::control::controller::{Controller, Snapshot};
use crate::simulation::Simulation;

/// What an operator asks of the controller.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Approve these decisions (one, or every visible one), in order.
    Approve {
        ids: Vec<u64>,
    },
    Reject {
        id: u64,
        reason: String,
    },
    Pause(Scope),
    Resume(Scope),
}

/// The controller's answer: a line for the status bar, or why it refused.
pub type Reply = Result<String, String>;

/// Who the console is talking to, for the header.
#[derive(Clone, Debug)]
pub struct Source {
    /// "embedded simulation: demo", "cluster prod-eu (our controller)", ...
    pub label: String,
    /// Operator actions are refused before they leave the console.
    pub read_only: bool,
    /// The name operator actions are journaled under ("console:alice").
    pub actor: String,
}

type Envelope = (Request, oneshot::Sender<Reply>);

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

/// Carries out one request on an in-process controller.
pub async fn apply<C: Cluster, P: CloudProvider>(
    controller: &mut Controller<C, P>,
    request: Request,
    actor: &str,
) -> Reply {
    match request {
        Request::Approve { ids } => {
            let mut done = Vec::new();
            let mut failed = Vec::new();
            for id in ids {
                match controller.approve(id, actor).await {
                    Ok(()) => done.push(format!("#{id}")),
                    Err(e) => failed.push(format!("#{id}: {e}")),
                }
            }
            match (done.is_empty(), failed.is_empty()) {
                (_, true) => Ok(format!("approved {}", done.join(", "))),
                (true, false) => Err(failed.join("; ")),
                (false, false) => Err(format!(
                    "approved {}; refused {}",
                    done.join(", "),
                    failed.join("; ")
                )),
            }
        }
        Request::Reject { id, reason } => controller
            .reject(id, &reason, actor)
            .await
            .map(|()| format!("rejected #{id}"))
            .map_err(|e| format!("reject #{id}: {e}")),
        Request::Pause(scope) => controller
            .pause(scope.clone(), actor)
            .await
            .map(|()| format!("paused disruption: {scope}"))
            .map_err(|e| format!("pause {scope}: {e}")),
        Request::Resume(scope) => match controller.resume(&scope, actor).await {
            Ok(true) => Ok(format!("resumed disruption: {scope}")),
            Ok(false) => Err(format!("{scope} was not paused")),
            Err(e) => Err(format!("resume {scope}: {e}")),
        },
    }
}

/// The embedded world as a console backend: a task that runs the simulation in real
/// time (scaled) and answers requests between rounds. Returns the console and the task
/// to spawn; the task ends when every console handle is gone.
pub fn embedded(
    mut sim: Simulation,
    label: String,
    read_only: bool,
    actor: String,
) -> (Console, impl Future<Output = Simulation> + Send) {
    let snapshots = sim.controller.subscribe();
    let (console, mut requests) = Console::new(
        snapshots,
        Source {
            label,
            read_only,
            actor: actor.clone(),
        },
    );
    let driver = async move {
        loop {
            sim.step().await;
            let next = sim.next_time();
            let wait = sim.waiter(next);
            tokio::select! {
                _ = wait => {}
                envelope = requests.recv() => match envelope {
                    None => break,
                    Some((request, reply)) => {
                        let answer = apply(&mut sim.controller, request, &actor).await;
                        let _ = reply.send(answer);
                    }
                }
            }
        }
        sim
    };
    (console, driver)
}
