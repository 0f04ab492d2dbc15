//! Where the control loop feeds the metrics that count or time things as they happen
//! (the gauges read the state at scrape time, see [`crate::control::metrics::cluster`]):
//! NodeClaims and nodes created and terminated, termination durations, pod startup
//! durations and controller-runtime's reconcile counts per controller. Upstream's
//! counterparts: `nodeclaim/lifecycle/registration.go` (nodes created),
//! `node/termination/controller.go` (nodes terminated and the time it took),
//! `nodeclaim/lifecycle/controller.go` (NodeClaims terminated), `provisioning/provisioner.go`
//! (NodeClaims created) and `metrics/pod/controller.go` (pod startup).

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};

use super::Controller;
use crate::api::labels;
use crate::cloud::CloudProvider;
use crate::cluster::{Cluster, NodeClaimObject};
use crate::control::events::EventKind;
use crate::engine::pod::{Phase, Pod};

/// How often the scrape-time gauges get a fresh state (upstream's node metrics controller
/// refreshes every 5 s).
pub const STATE_REFRESH: TimeDelta = TimeDelta::seconds(5);

/// The start of a timed reconcile: when, and how many errors had been reported.
pub(super) struct Began(Instant, usize);

impl<C: Cluster, P: CloudProvider> Controller<C, P> {
    /// A NodeClaim this controller created (for pending pods or as a replacement).
    pub(super) fn measure_created(&self, claim: &NodeClaimObject, reason: &str) {
        let relaxed = claim
            .annotations
            .get(labels::NODECLAIM_MIN_VALUES_RELAXED)
            .map_or("false", String::as_str);
        self.disruption
            .metrics
            .nodeclaim_created(reason, &claim.nodepool, relaxed);
    }

    /// Counters that follow events: a Node registering for a NodeClaim. Nodes already
    /// registered when this controller first lists the cluster were counted by whoever
    /// saw them register.
    pub(super) fn measure_event(&self, kind: &EventKind) {
        if let EventKind::NodeRegistered { nodeclaim, .. } = kind
            && self.recovered
            && let Some(r) = self.registry.get(nodeclaim)
        {
            self.disruption
                .metrics
                .node_created(&r.claim.nodepool, &zone(&r.claim));
        }
    }

    /// A NodeClaim's termination finished (its instance is gone and the finalizer off):
    /// the NodeClaim, and its Node if it had one, count as terminated, and the Node's
    /// termination took from the deletion request until now.
    pub(super) fn measure_terminated(&self, claim: &NodeClaimObject, now: DateTime<Utc>) {
        let m = &self.disruption.metrics;
        let zone = zone(claim);
        let capacity_type = claim.launched.as_ref().map_or_else(
            || {
                claim
                    .labels
                    .get(labels::CAPACITY_TYPE)
                    .cloned()
                    .unwrap_or_default()
            },
            |l| l.capacity_type.as_str().to_string(),
        );
        m.nodeclaim_terminated(&claim.nodepool, &capacity_type, &zone);
        if self.registry.node_of(&claim.name).is_some() {
            let since = claim.deleting.unwrap_or(now);
            let seconds = (now - since).num_milliseconds().max(0) as f64 / 1000.0;
            m.node_terminated(&claim.nodepool, &zone, seconds, now);
        }
    }

    /// A pod the controller saw pending is now running: its startup took from its
    /// creation until now.
    pub(super) fn measure_pod(&self, pod: &Pod, now: DateTime<Utc>) {
        let was = self
            .places
            .position(&pod.key)
            .map(|i| self.state.pods[i].phase);
        if was == Some(Phase::Pending) && pod.phase == Phase::Running {
            let seconds = (now - pod.created).num_milliseconds().max(0) as f64 / 1000.0;
            self.disruption.metrics.pod_started(seconds, now);
        }
    }

    /// Starts timing one of the loop's reconcilers.
    pub(super) fn began(&self) -> Began {
        Began(Instant::now(), self.stats.errors)
    }

    /// One reconcile of `controller` (upstream's name for the same loop) ended: counted
    /// as an error when it reported one.
    pub(super) fn reconciled(&self, controller: &str, began: Began) {
        self.disruption.metrics.reconciled(
            controller,
            began.0.elapsed().as_secs_f64(),
            self.stats.errors > began.1,
        );
    }

    /// Hands the state to the scrape-time gauges, every [`STATE_REFRESH`] while anything
    /// serves the metrics (sharing it makes the next change copy it, so not more often).
    pub(super) fn share_state(&mut self, now: DateTime<Utc>) {
        if !self.disruption.metrics.is_served()
            || self.state_shared.is_some_and(|t| now - t < STATE_REFRESH)
        {
            return;
        }
        self.state_shared = Some(now);
        self.disruption
            .metrics
            .observe_state(Arc::clone(&self.state));
    }
}

/// The zone a NodeClaim launched in (its label before launch).
fn zone(claim: &NodeClaimObject) -> String {
    claim.launched.as_ref().map_or_else(
        || claim.labels.get(labels::ZONE).cloned().unwrap_or_default(),
        |l| l.zone.clone(),
    )
}
