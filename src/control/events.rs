//! What the controller tells the world happened, one event at a time. `simulate` prints
//! these as JSON lines (the public contract in docs/simulate.md), the console shows the
//! recent ones, and tests read them. Kinds are upstream's words where upstream has one.

use serde::Serialize;

use crate::engine::catalog::CapacityType;
use crate::engine::disruption::{CandidateSummary, Replacement};
use crate::engine::pod::PodKey;

/// One event: when (seconds since the controller started) and what.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// Seconds since the start of the run.
    pub t: f64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Every kind of event, serialized with a `kind` tag and camelCase fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all_fields = "camelCase")]
pub enum EventKind {
    /// A pod the kube-scheduler could not place: Karpenter will provision for it.
    PodPending {
        pod: PodKey,
    },
    /// A NodeClaim launched.
    NodeClaimCreated {
        nodeclaim: String,
        nodepool: String,
        /// Instance types the NodeClaim allowed, cheapest first (at most 60).
        instance_types: Vec<String>,
        instance_type: String,
        zone: String,
        capacity_type: CapacityType,
        /// USD per hour.
        price: f64,
        /// What created it: "provisioning" or "disruption #<id>".
        cause: String,
    },
    /// A NodeClaim could not launch (every offering out of capacity, or a cloud error);
    /// the NodeClaim is deleted and its pods provisioned again.
    NodeClaimLaunchFailed {
        nodeclaim: String,
        nodepool: String,
        message: String,
    },
    NodeRegistered {
        nodeclaim: String,
        node: String,
    },
    NodeInitialized {
        nodeclaim: String,
        node: String,
    },
    /// Pods a provisioning round placed on an existing or in-flight node.
    PodNominated {
        pod: PodKey,
        node: String,
    },
    PodBound {
        pod: PodKey,
        node: String,
    },
    DisruptionProposed {
        id: u64,
        method: String,
        reason: String,
        /// "auto" or "manual".
        policy: String,
        candidates: Vec<CandidateSummary>,
        replacement: Vec<Replacement>,
        /// USD per hour.
        savings: f64,
    },
    DisruptionApproved {
        id: u64,
        actor: String,
    },
    DisruptionRejected {
        id: u64,
        actor: String,
        reason: String,
    },
    DisruptionWithdrawn {
        id: u64,
        reason: String,
    },
    DisruptionExecuted {
        id: u64,
        method: String,
        reason: String,
        /// The candidates' Node names.
        nodes: Vec<String>,
        /// The candidates' NodeClaims.
        nodeclaims: Vec<String>,
    },
    DisruptionCompleted {
        id: u64,
    },
    DisruptionFailed {
        id: u64,
        reason: String,
    },
    DisruptionPaused {
        scope: String,
        actor: String,
        /// The operator's reason, when they gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    DisruptionResumed {
        scope: String,
        actor: String,
    },
    /// A node that cannot be disrupted now, and why (emitted when the reason changes).
    DisruptionBlocked {
        nodeclaim: String,
        node: String,
        reason: String,
    },
    /// The NodeClaim is being deleted: termination starts draining its node.
    NodeClaimDeleting {
        nodeclaim: String,
        reason: String,
    },
    /// The NodeClaim, its Node and its instance are gone.
    NodeClaimDeleted {
        nodeclaim: String,
        reason: String,
    },
    PodEvicted {
        pod: PodKey,
        node: String,
        /// Why its node is going: the disruption reason (lower case) or what deleted it.
        reason: String,
    },
    /// Termination cannot evict pods of a draining node (a PodDisruptionBudget allows no
    /// more disruptions, a do-not-disrupt pod): reported when it starts and every 2
    /// minutes while it lasts, as upstream's `FailedDraining`.
    DrainBlocked {
        nodeclaim: String,
        node: String,
        /// Pods that wait, and why each.
        message: String,
    },
    /// A cloud event nobody chose: spot interruption, instance gone.
    Interrupted {
        nodeclaim: String,
        reason: String,
    },
    /// A cloud notice that leaves the node in place (a spot rebalance recommendation:
    /// the instance is at higher risk of interruption), reported only, as upstream does.
    InterruptionWarning {
        nodeclaim: String,
        reason: String,
    },
    /// An instance with no NodeClaim was terminated by garbage collection.
    InstanceGarbageCollected {
        provider_id: String,
    },
    /// Something went wrong talking to the cluster or the cloud; the controller retries.
    Error {
        message: String,
    },
    /// The end of a `simulate` run: where it ended and the churn it took to get there.
    Summary {
        nodes: usize,
        pods: usize,
        pods_pending: usize,
        /// USD per hour of every running node.
        cost_per_hour: f64,
        /// USD the run's instances cost, price × time, from the start to the end.
        cost: f64,
        /// Executed disruptions per method.
        disruptions: std::collections::BTreeMap<String, usize>,
        nodeclaims_created: usize,
        /// NodeClaims whose termination finished.
        nodeclaims_deleted: usize,
        /// Pods evicted (or deleted at a grace period's end) by termination.
        evictions: usize,
        /// Of those, per reason their node went.
        evictions_by_reason: std::collections::BTreeMap<String, usize>,
    },
}

impl EventKind {
    /// The `kind` string.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::PodPending { .. } => "PodPending",
            EventKind::NodeClaimCreated { .. } => "NodeClaimCreated",
            EventKind::NodeClaimLaunchFailed { .. } => "NodeClaimLaunchFailed",
            EventKind::NodeRegistered { .. } => "NodeRegistered",
            EventKind::NodeInitialized { .. } => "NodeInitialized",
            EventKind::PodNominated { .. } => "PodNominated",
            EventKind::PodBound { .. } => "PodBound",
            EventKind::DisruptionProposed { .. } => "DisruptionProposed",
            EventKind::DisruptionApproved { .. } => "DisruptionApproved",
            EventKind::DisruptionRejected { .. } => "DisruptionRejected",
            EventKind::DisruptionWithdrawn { .. } => "DisruptionWithdrawn",
            EventKind::DisruptionExecuted { .. } => "DisruptionExecuted",
            EventKind::DisruptionCompleted { .. } => "DisruptionCompleted",
            EventKind::DisruptionFailed { .. } => "DisruptionFailed",
            EventKind::DisruptionPaused { .. } => "DisruptionPaused",
            EventKind::DisruptionResumed { .. } => "DisruptionResumed",
            EventKind::DisruptionBlocked { .. } => "DisruptionBlocked",
            EventKind::NodeClaimDeleting { .. } => "NodeClaimDeleting",
            EventKind::NodeClaimDeleted { .. } => "NodeClaimDeleted",
            EventKind::PodEvicted { .. } => "PodEvicted",
            EventKind::DrainBlocked { .. } => "DrainBlocked",
            EventKind::Interrupted { .. } => "Interrupted",
            EventKind::InterruptionWarning { .. } => "InterruptionWarning",
            EventKind::InstanceGarbageCollected { .. } => "InstanceGarbageCollected",
            EventKind::Error { .. } => "Error",
            EventKind::Summary { .. } => "Summary",
        }
    }
}

/// One line for people: the console's event pane and the demo's log.
impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use EventKind::*;
        match self {
            PodPending { pod } => write!(f, "pod {pod} is pending: no node has room"),
            NodeClaimCreated {
                nodeclaim,
                nodepool,
                instance_types,
                instance_type,
                zone,
                capacity_type,
                price,
                cause,
            } => write!(
                f,
                "launched {nodeclaim} ({nodepool}): {instance_type} {capacity_type} in {zone} at ${price:.4}/h, chosen from {} type(s), for {cause}",
                instance_types.len()
            ),
            NodeClaimLaunchFailed {
                nodeclaim, message, ..
            } => write!(f, "launch of {nodeclaim} failed: {message}"),
            NodeRegistered { nodeclaim, node } => {
                write!(f, "{nodeclaim} registered as node {node}")
            }
            NodeInitialized { node, .. } => {
                write!(f, "node {node} is initialized and ready for pods")
            }
            PodNominated { pod, node } => write!(f, "pod {pod} nominated to {node}"),
            PodBound { pod, node } => write!(f, "pod {pod} bound to {node}"),
            DisruptionProposed {
                id,
                method,
                reason,
                policy,
                candidates,
                replacement,
                savings,
            } => {
                let nodes: Vec<&str> = candidates.iter().map(|c| c.node.as_str()).collect();
                write!(
                    f,
                    "decision #{id} proposed ({policy}): {method} [{reason}] of {}",
                    nodes.join(", ")
                )?;
                if let Some(r) = replacement.first().and_then(|r| r.options.first()) {
                    write!(f, " -> {} {}", r.instance_type, r.capacity_type)?;
                }
                write!(f, ", saves ${savings:.4}/h")
            }
            DisruptionApproved { id, actor } => write!(f, "decision #{id} approved by {actor}"),
            DisruptionRejected { id, actor, reason } => {
                write!(f, "decision #{id} rejected by {actor}: {reason}")
            }
            DisruptionWithdrawn { id, reason } => write!(f, "decision #{id} withdrawn: {reason}"),
            DisruptionExecuted {
                id, method, nodes, ..
            } => {
                write!(
                    f,
                    "decision #{id} executing: {method} of {}",
                    nodes.join(", ")
                )
            }
            DisruptionCompleted { id } => write!(f, "decision #{id} completed"),
            DisruptionFailed { id, reason } => write!(f, "decision #{id} failed: {reason}"),
            DisruptionPaused {
                scope,
                actor,
                reason,
            } => {
                write!(f, "disruption paused ({scope}) by {actor}")?;
                match reason {
                    Some(r) => write!(f, ": {r}"),
                    None => Ok(()),
                }
            }
            DisruptionResumed { scope, actor } => {
                write!(f, "disruption resumed ({scope}) by {actor}")
            }
            DisruptionBlocked { node, reason, .. } => {
                write!(f, "node {node} not disrupted: {reason}")
            }
            NodeClaimDeleting { nodeclaim, reason } => {
                write!(f, "deleting {nodeclaim} ({reason}): draining")
            }
            NodeClaimDeleted { nodeclaim, reason } => write!(f, "{nodeclaim} is gone ({reason})"),
            PodEvicted { pod, node, reason } => {
                write!(f, "pod {pod} evicted from {node} ({reason})")
            }
            DrainBlocked { node, message, .. } => {
                write!(f, "draining {node} is blocked: {message}")
            }
            Interrupted { nodeclaim, reason } => write!(f, "{nodeclaim} interrupted: {reason}"),
            InterruptionWarning { nodeclaim, reason } => {
                write!(f, "{nodeclaim} warned: {reason} (no action)")
            }
            InstanceGarbageCollected { provider_id } => {
                write!(f, "terminated {provider_id}: no NodeClaim owns it")
            }
            Error { message } => write!(f, "error: {message}"),
            Summary {
                nodes,
                pods,
                pods_pending,
                cost_per_hour,
                ..
            } => write!(
                f,
                "{nodes} nodes, {pods} pods ({pods_pending} pending), ${cost_per_hour:.4}/h"
            ),
        }
    }
}
