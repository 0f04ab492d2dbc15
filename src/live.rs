//! The controller against a live cluster, and attach mode: the loops that drive a
//! [`Controller`] over [`KubeCluster`] in wall-clock time, shared by `run --kubeconfig`
//! (with the console), `controller` (headless, in-cluster) and `attach` (the console
//! beside someone else's controller). main.rs picks one; the simulation has its own
//! driver in `simulation.rs`.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Notify, mpsc, watch};

use crate::cloud::CloudProvider;
use crate::cluster::kube::KubeCluster;
use crate::cluster::kube::protocol::{Flavour, Remote};
use crate::control::controller::Controller;
use crate::control::requests::{self, Envelope, Request};
use crate::engine::approval::Scope;

/// Waits until every watch has listed its kind (the controller must not act on half a
/// cluster: it would garbage collect what it has not seen yet). Gives up after `limit`.
pub async fn wait_synced<P: CloudProvider>(
    controller: &mut Controller<KubeCluster, P>,
    wake: &Notify,
    limit: Duration,
) -> Result<(), String> {
    let began = std::time::Instant::now();
    let deadline = tokio::time::Instant::now() + limit;
    while !controller.parts_mut().0.watches_synced() {
        if tokio::time::timeout_at(deadline, wake.notified())
            .await
            .is_err()
        {
            return Err(format!(
                "the cluster's objects were not listed within {} s (see the log for the \
                 watch errors)",
                limit.as_secs()
            ));
        }
    }
    tracing::info!(
        "listed the cluster in {:.2} s",
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What ends a drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every console went away (or a stop was asked for).
    Requested,
    /// Leadership was lost: this replica must stop acting at once.
    LostLeadership,
}

/// Runs the loop until `stop` turns true, the requests channel closes (when given), or
/// `leader` turns false. Reconciles when the watches deliver something, when the
/// controller's own timers come due, and after each operator request.
pub async fn drive<P: CloudProvider>(
    controller: &mut Controller<KubeCluster, P>,
    wake: Arc<Notify>,
    mut requests: Option<mpsc::UnboundedReceiver<Envelope>>,
    actor: &str,
    mut stop: watch::Receiver<bool>,
    mut leader: Option<watch::Receiver<bool>>,
    mut after_round: impl FnMut(&mut Controller<KubeCluster, P>),
) -> Stop {
    loop {
        if leader.as_ref().is_some_and(|l| !*l.borrow()) {
            return Stop::LostLeadership;
        }
        if *stop.borrow() {
            return Stop::Requested;
        }
        controller.reconcile().await;
        after_round(controller);
        let wait = (controller.next_wake() - Utc::now())
            .to_std()
            .unwrap_or_default()
            .clamp(Duration::from_millis(50), Duration::from_secs(10));
        tokio::select! {
            _ = wake.notified() => {
                // Let a burst of watch events land before the next round.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => {}
            _ = async {
                match leader.as_mut() {
                    Some(l) => { let _ = l.changed().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {}
            envelope = async {
                match requests.as_mut() {
                    Some(r) => r.recv().await,
                    None => std::future::pending().await,
                }
            } => match envelope {
                None => return Stop::Requested,
                Some((Request::WhatIf(query), reply)) => {
                    what_if(controller.parts().0.client(), query, reply);
                }
                Some((request, reply)) => {
                    let answer = requests::apply(controller, request, actor).await;
                    let _ = reply.send(answer);
                }
            },
        }
    }
}

/// Attach mode's loop: an observing controller keeps the console's picture current, and
/// operator requests become protocol writes through `remote`. Ends when the console goes.
pub async fn attach<P: CloudProvider>(
    mut controller: Controller<KubeCluster, P>,
    wake: Arc<Notify>,
    mut requests: mpsc::UnboundedReceiver<Envelope>,
    remote: Remote,
) {
    loop {
        controller.reconcile().await;
        // Replaces approved against upstream, wherever the cluster records one.
        let replacing = controller.state().nodes.iter().any(|n| {
            n.annotations
                .contains_key(crate::api::protocol::REPLACED_BY)
        });
        if remote.write && remote.flavour == Flavour::Upstream && replacing {
            for r in remote.advance_replacements(Utc::now()).await {
                match r {
                    Ok(done) => tracing::info!("{done}"),
                    Err(e) => controller.record_error(e),
                }
            }
        }
        let wait = (controller.next_wake() - Utc::now())
            .to_std()
            .unwrap_or_default()
            .clamp(Duration::from_millis(200), Duration::from_secs(10));
        tokio::select! {
            _ = wake.notified() => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ = tokio::time::sleep(wait) => {}
            envelope = requests.recv() => match envelope {
                None => return,
                Some((Request::WhatIf(query), reply)) => {
                    what_if(remote.client.clone(), query, reply);
                }
                Some((request, reply)) => {
                    let answer = remote_request(&controller, &remote, request).await;
                    let _ = reply.send(answer);
                }
            },
        }
    }
}

/// A what-if on a live cluster: the cluster exported as a scenario now (`export`), and
/// its future played twice off the loop's thread, so the loop and the console go on.
fn what_if(
    client: kube::Client,
    query: crate::control::whatif::Query,
    reply: tokio::sync::oneshot::Sender<requests::Reply>,
) {
    use crate::simulation::{Options, Pace, Simulation};
    tokio::spawn(async move {
        let answer = async {
            let export = crate::export::export(client, "the cluster", Utc::now()).await?;
            let scenario = crate::cluster::scenario::parse("the cluster's export", &export.yaml)
                .map_err(|errors| {
                    let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    format!(
                        "the cluster does not export as a scenario: {}",
                        all.join("; ")
                    )
                })?;
            tokio::task::spawn_blocking(move || {
                let sim = Simulation::new(&scenario, &Options::default(), Pace::Virtual)?;
                Ok(crate::whatif::Forks::prepare(&sim, &query)?.run().text())
            })
            .await
            .map_err(|e| format!("the what-if stopped: {e}"))?
        }
        .await;
        let _ = reply.send(answer.map_err(|e: String| format!("what-if: {e}")));
    });
}

/// One operator request in attach mode.
async fn remote_request<P: CloudProvider>(
    controller: &Controller<KubeCluster, P>,
    remote: &Remote,
    request: Request,
) -> Result<String, String> {
    let snapshot = controller.snapshot();
    let decision = |id: u64| {
        snapshot
            .pending
            .iter()
            .find(|d| d.id == id)
            .ok_or_else(|| format!("no pending decision #{id}"))
    };
    let claims_of = |id: u64| -> Result<Vec<String>, String> {
        Ok(decision(id)?
            .command
            .nodeclaims()
            .map(str::to_string)
            .collect())
    };
    let pools: Vec<String> = snapshot.state.nodepools.keys().cloned().collect();
    match request {
        Request::Approve { ids } => {
            let mut done = Vec::new();
            let mut failed = Vec::new();
            for id in ids {
                match decision(id) {
                    Ok(d) => match remote
                        .approve(id, &d.command, &snapshot.state.nodepools, Utc::now())
                        .await
                    {
                        Ok(msg) => done.push(msg),
                        Err(e) => failed.push(format!("#{id}: {e}")),
                    },
                    Err(e) => failed.push(e),
                }
            }
            if failed.is_empty() {
                Ok(done.join("; "))
            } else {
                Err(failed.join("; "))
            }
        }
        Request::Reject { id, reason } => remote.reject(id, &claims_of(id)?, &reason).await,
        // The pause protocol (the NodePools' budgets) has no place for the operator's
        // reason: the acting controller journals the pause it sees.
        Request::Pause { scope, reason: _ } => match scope {
            Scope::All => remote.pause(&pools, true).await,
            Scope::NodePool(p) => remote.pause(&[p], false).await,
            Scope::Reason(r) => Err(format!(
                "attach mode pauses pools (or all), not a reason ({}): pause it from the \
                 controller's own console",
                r.as_str()
            )),
        },
        Request::Resume(scope) => match scope {
            Scope::All => remote.resume(&pools, true).await,
            Scope::NodePool(p) => remote.resume(&[p], false).await,
            Scope::Reason(r) => Err(format!("no pause of reason {} here", r.as_str())),
        },
        // Answered by `what_if` before it comes here.
        Request::WhatIf(_) => Err(crate::control::requests::WHATIF_NEEDS_A_SIMULATION.into()),
    }
}

/// The header's words for an attached console.
pub fn attach_label(flavour: Flavour, context: &str, write: bool) -> String {
    format!(
        "attached to {} · context {context} · {}",
        flavour.label(),
        if write { "write" } else { "read-only" }
    )
}
