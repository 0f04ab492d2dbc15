//! What the controller tells `kubectl describe`: its events and operator actions as
//! Kubernetes Events with upstream Karpenter's reasons (`Nominated`, `DisruptionBlocked`,
//! `DisruptionTerminating`, `InsufficientCapacityError`, `Evicted`), plus this tool's own
//! for the approval gate (`DisruptionApproved`, `DisruptionRejected`, `DisruptionPaused`,
//! ...), each naming its actor. The simulation drops them (its journal has them); an
//! observing controller never sends any.

use super::Controller;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, Notice, ObjectRef};
use crate::control::events::EventKind;
use crate::control::journal::{Action, Entry};

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// Whether notices go anywhere: not from an observing controller, and not to a cluster
    /// that drops them.
    pub(super) fn noticing(&self) -> bool {
        !self.observe && self.cluster.takes_notices()
    }

    pub(super) fn notice(
        &mut self,
        regarding: ObjectRef,
        reason: &'static str,
        note: String,
        warning: bool,
    ) {
        self.cluster.notify(Notice {
            regarding,
            reason,
            note,
            warning,
        });
    }

    /// Events of the control loop that upstream Karpenter also reports.
    pub(super) fn notice_for_event(&mut self, kind: &EventKind) {
        if !self.noticing() {
            return;
        }
        match kind {
            EventKind::PodNominated { pod, node } => {
                let target = if self.registry.contains(node) {
                    format!("nodeclaim/{node}")
                } else {
                    format!("node/{node}")
                };
                self.notice(
                    ObjectRef::Pod(pod.clone()),
                    "Nominated",
                    format!("Pod should schedule on: {target}"),
                    false,
                );
            }
            EventKind::DisruptionBlocked {
                nodeclaim, reason, ..
            } => {
                let r = ObjectRef::NodeClaim(nodeclaim.clone());
                self.notice(r, "DisruptionBlocked", reason.clone(), false);
            }
            EventKind::NodeClaimLaunchFailed {
                nodeclaim, message, ..
            } => {
                let reason = if message.contains("insufficient capacity") {
                    "InsufficientCapacityError"
                } else {
                    "LaunchFailed"
                };
                self.notice(
                    ObjectRef::NodeClaim(nodeclaim.clone()),
                    reason,
                    message.clone(),
                    true,
                );
            }
            EventKind::PodEvicted { pod, node, .. } => {
                self.notice(
                    ObjectRef::Pod(pod.clone()),
                    "Evicted",
                    format!("Evicted pod: draining node {node}"),
                    false,
                );
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
            Action::Executed => Some((
                "DisruptionTerminating",
                format!(
                    "Disrupting Node: {}/{} (#{id}, approved by {})",
                    e.reason.clone().unwrap_or_default(),
                    e.method.clone().unwrap_or_default(),
                    e.actor
                ),
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
        self.notice(
            target,
            reason,
            format!("{} {verb} disruption of {}", e.actor, e.detail),
            false,
        );
    }
}
