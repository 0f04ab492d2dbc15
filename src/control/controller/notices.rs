//! What the controller tells `kubectl describe`: upstream Karpenter's Events on the
//! objects upstream puts them on ([`upstream_events`]: `Nominated`, `FailedScheduling`,
//! `DisruptionBlocked`, `Unconsolidatable`, `DisruptionLaunching`,
//! `DisruptionWaitingReadiness`, `DisruptionTerminating`, `InsufficientCapacityError`,
//! `Evicted`, `Disrupted`, `FailedDraining`, `TerminationGracePeriodExpiring`), plus this
//! tool's own for the approval gate (`DisruptionApproved`, `DisruptionRejected`,
//! `DisruptionPaused`, ...), each naming its actor. The simulation drops them (its journal
//! has them); an observing controller never sends any.

use super::Controller;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, Notice, ObjectRef};
use crate::control::events::EventKind;
use crate::control::journal::{Action, Entry};
use crate::control::upstream_events;

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Whether notices go anywhere: not from an observing controller, and not to a cluster
    /// that drops them.
    pub(super) fn noticing(&self) -> bool {
        !self.observe && self.cluster.takes_notices()
    }

    /// Sends notices on, when they go anywhere.
    pub(super) fn post(&mut self, notices: impl IntoIterator<Item = Notice>) {
        if !self.noticing() {
            return;
        }
        for n in notices {
            self.cluster.notify(n);
        }
    }

    pub(super) fn notice(
        &mut self,
        regarding: ObjectRef,
        reason: &'static str,
        note: String,
        warning: bool,
    ) {
        self.post([upstream_events::own(regarding, reason, note, warning)]);
    }

    /// Events of the control loop that upstream Karpenter also reports.
    pub(super) fn notice_for_event(&mut self, kind: &EventKind) {
        if !self.noticing() {
            return;
        }
        match kind {
            EventKind::PodNominated { pod, node } => {
                // `node` names a NodeClaim (a new one) or a Node (an existing one).
                let (claim, node) = match self.registry.get(node) {
                    Some(r) => (Some(node.clone()), r.node.clone()),
                    None => (
                        self.registry.claim_of_node(node).map(str::to_string),
                        Some(node.clone()),
                    ),
                };
                let n = upstream_events::nominated(pod, claim.as_deref(), node.as_deref());
                self.post([n]);
            }
            EventKind::NodeClaimLaunchFailed {
                nodeclaim, message, ..
            } => {
                let n = if message.contains("insufficient capacity") {
                    upstream_events::insufficient_capacity(nodeclaim, message)
                } else {
                    upstream_events::own(
                        ObjectRef::NodeClaim(nodeclaim.clone()),
                        "LaunchFailed",
                        message.clone(),
                        true,
                    )
                };
                self.post([n]);
            }
            EventKind::PodEvicted { pod, reason, .. } => {
                let n = upstream_events::evicted(pod, upstream_events::eviction_reason(reason));
                self.post([n]);
            }
            _ => {}
        }
    }

    /// Decisions' fates and operator actions, with their actor.
    pub(super) fn notice_for_entry(&mut self, e: &Entry) {
        if !self.noticing() {
            return;
        }
        let id = e.decision.unwrap_or(0);
        let per_node: Option<(&'static str, String)> = match e.action {
            Action::Approved => Some((
                "DisruptionApproved",
                format!("{} approved disruption #{id}", e.actor),
            )),
            Action::Rejected => Some((
                "DisruptionRejected",
                format!("{} rejected disruption #{id}: {}", e.actor, e.detail),
            )),
            Action::Withdrawn => Some((
                "DisruptionWithdrawn",
                format!("disruption #{id} withdrawn: {}", e.detail),
            )),
            _ => None,
        };
        if let Some((reason, note)) = per_node {
            for claim in &e.nodeclaims {
                let r = ObjectRef::NodeClaim(claim.clone());
                self.notice(r, reason, note.clone(), false);
            }
            return;
        }
        let (reason, verb) = match e.action {
            Action::Paused => ("DisruptionPaused", "paused"),
            Action::Resumed => ("DisruptionResumed", "resumed"),
            _ => return,
        };
        let target = match e.detail.strip_prefix("nodepool/") {
            Some(pool) => ObjectRef::NodePool(pool.to_string()),
            None => ObjectRef::Settings,
        };
        let because = e
            .note
            .as_ref()
            .map(|n| format!(": {n}"))
            .unwrap_or_default();
        self.notice(
            target,
            reason,
            format!("{} {verb} disruption of {}{because}", e.actor, e.detail),
            false,
        );
    }
}
