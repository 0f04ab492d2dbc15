//! Operator requests to a controller: approve, reject, pause, resume. A console sends
//! them (over a channel, or in attach mode as API writes); the in-process controller's
//! owner carries them out here, between rounds, and answers with a line for the status
//! bar or the reason it refused.

use tokio::sync::oneshot;

use crate::cloud::CloudProvider;
use crate::cluster::Cluster;
use crate::control::controller::Controller;
use crate::control::whatif::Query;
use crate::engine::approval::Scope;

/// What an operator asks of the controller.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Approve these decisions (one, or every visible one), in order.
    Approve {
        ids: Vec<u64>,
    },
    /// `reason` is the operator's (or a default naming the console).
    Reject {
        id: u64,
        reason: String,
    },
    /// `reason`: why, in the operator's words, when they gave one; it goes into the
    /// journal entry and the Event.
    Pause {
        scope: Scope,
        reason: Option<String>,
    },
    Resume(Scope),
    /// Play the next hours twice, as they are and with a NodePool edit, and compare
    /// (`:whatif`). Changes nothing: the answer is a report, not a status line.
    WhatIf(Query),
}

/// What a controller answers a what-if it is handed: only the process that owns the
/// world (the embedded simulation, or a live loop that can export its cluster) can fork
/// it, and those answer before the request reaches a controller.
pub const WHATIF_NEEDS_A_SIMULATION: &str = "what-if plays a copy of the world, which this \
     backend cannot make; export the cluster (karpenter-tui export > scenario.yaml) and run \
     karpenter-tui whatif scenario.yaml ...";

impl Request {
    /// A request whose confirmation asks for a reason: reject and pause.
    pub fn takes_reason(&self) -> bool {
        matches!(self, Request::Reject { .. } | Request::Pause { .. })
    }

    /// The request with the reason the operator typed (none keeps what it had).
    pub fn with_reason(self, typed: Option<String>) -> Request {
        match (self, typed) {
            (Request::Reject { id, .. }, Some(reason)) => Request::Reject { id, reason },
            (Request::Pause { scope, .. }, Some(reason)) => Request::Pause {
                scope,
                reason: Some(reason),
            },
            (r, _) => r,
        }
    }
}

/// The controller's answer: a line for the status bar, or why it refused.
pub type Reply = Result<String, String>;

/// A request with the channel its answer goes back on.
pub type Envelope = (Request, oneshot::Sender<Reply>);

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
        Request::Pause { scope, reason } => controller
            .pause(scope.clone(), reason.as_deref(), actor)
            .await
            .map(|()| format!("paused disruption: {scope}"))
            .map_err(|e| format!("pause {scope}: {e}")),
        Request::Resume(scope) => match controller.resume(&scope, actor).await {
            Ok(true) => Ok(format!("resumed disruption: {scope}")),
            Ok(false) => Err(format!("{scope} was not paused")),
            Err(e) => Err(format!("resume {scope}: {e}")),
        },
        Request::WhatIf(_) => Err(WHATIF_NEEDS_A_SIMULATION.into()),
    }
}
