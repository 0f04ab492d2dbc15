//! The approval protocol's vocabulary: annotations under `karpenter-tui.dev/` through
//! which a controller and any number of consoles share decisions, approvals and pauses
//! in the API server (docs/attach.md). Kept here, at the bottom of the crate, because
//! both sides speak it: the controller (`control`) and the attaching console
//! (`cluster::kube::protocol`).

/// On each candidate NodeClaim of a decision awaiting approval: the decision's id.
pub const DECISION: &str = "karpenter-tui.dev/decision";
/// Beside [`DECISION`]: what the decision would do, for `kubectl describe`.
pub const DECISION_SUMMARY: &str = "karpenter-tui.dev/decision-summary";
/// Written by a console on a candidate NodeClaim: approve the decision with this id.
pub const APPROVE: &str = "karpenter-tui.dev/approve";
/// Written by a console on a candidate NodeClaim: reject the decision with this id.
pub const REJECT: &str = "karpenter-tui.dev/reject";
/// Beside [`REJECT`]: why.
pub const REJECT_REASON: &str = "karpenter-tui.dev/reject-reason";
/// Beside [`APPROVE`] or [`REJECT`]: who asked (the console's kubeconfig user).
pub const ACTOR: &str = "karpenter-tui.dev/actor";
/// On a NodePool (or, for every pool, on the settings ConfigMap): disruption is paused;
/// the value names who paused it.
pub const PAUSED: &str = "karpenter-tui.dev/paused";
/// On a NodePool beside [`PAUSED`]: why it was paused (the operator's words, or the
/// circuit breaker's evidence), so every console shows it.
pub const PAUSED_NOTE: &str = "karpenter-tui.dev/paused-note";
/// The actor of a pause the circuit breaker made (control::breaker): only an operator
/// lifts it.
pub const BREAKER_ACTOR: &str = "circuit-breaker";
/// On the settings ConfigMap: a pause of one disruption reason, `<prefix><Reason>`.
pub const PAUSED_REASON_PREFIX: &str = "karpenter-tui.dev/paused-reason.";
/// On a NodePool paused in attach mode against upstream Karpenter: the JSON of
/// `spec.disruption.budgets` as it was before the pause set them to `nodes: "0"`.
pub const SAVED_BUDGETS: &str = "karpenter-tui.dev/saved-budgets";
/// Beside [`SAVED_BUDGETS`]: who paused.
pub const PAUSED_BY: &str = "karpenter-tui.dev/paused-by";
/// The Lease our controller's replicas elect a leader on: its presence (with a holder)
/// tells a console that our controller runs in the cluster.
pub const LEASE: &str = "karpenter-tui-leader-election";
/// On each candidate NodeClaim of a command being carried out: its decision id. With
/// [`COMMAND_SPEC`] it lets a restarted controller or a new leader take the command
/// over where the old one stopped, instead of untainting and proposing it anew.
pub const COMMAND: &str = "karpenter-tui.dev/command";
/// Beside [`COMMAND`]: the command as JSON (method, reason, how many replacements it
/// creates, who approved it, when it started).
pub const COMMAND_SPEC: &str = "karpenter-tui.dev/command-spec";
/// On a replacement NodeClaim a command created: that command's decision id.
pub const REPLACEMENT_OF: &str = "karpenter-tui.dev/replacement-of";
/// On each NodeClaim of a rejected decision: until when (RFC 3339) it is not proposed
/// again.
pub const REJECTED_UNTIL: &str = "karpenter-tui.dev/rejected-until";
/// Beside [`REJECTED_UNTIL`]: the operator's reason.
pub const REJECTED_REASON: &str = "karpenter-tui.dev/rejected-reason";
/// On each candidate NodeClaim of a replace a console approved against upstream
/// Karpenter: JSON naming the decision, who approved, when, the candidates and the
/// replacement NodeClaims created for them. The candidates are deleted once every
/// replacement is Initialized (make-before-break); any console attached with `--write`
/// carries it on after a restart.
pub const REPLACED_BY: &str = "karpenter-tui.dev/replaced-by";
/// On a replacement NodeClaim a console created against upstream Karpenter: the
/// candidates it replaces, comma-separated (for `kubectl describe`).
pub const REPLACES: &str = "karpenter-tui.dev/replaces";
