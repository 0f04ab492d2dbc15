//! What a disruption pass says about each node: chosen (and what it saves), eligible but
//! waiting, or blocked and why. Upstream emits events for some of these
//! (`DisruptionBlocked`, `Unconsolidatable`); the console shows every one of them.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::api::nodepool::DisruptionReason;
use crate::engine::pod::PodKey;

/// Why a command disrupts its nodes. All but expiration are budgeted (expiration counts
/// against budgets once the node is deleting); repair by the budgets that list no
/// reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Reason {
    Empty,
    Drifted,
    Underutilized,
    Expired,
    /// Node repair: a node unhealthy past its repair policy's toleration.
    Unhealthy,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::Empty,
        Reason::Drifted,
        Reason::Underutilized,
        Reason::Expired,
        Reason::Unhealthy,
    ];

    /// The budget reason, if the reason is budgeted.
    pub fn budget_reason(self) -> Option<DisruptionReason> {
        match self {
            Reason::Empty => Some(DisruptionReason::Empty),
            Reason::Drifted => Some(DisruptionReason::Drifted),
            Reason::Underutilized => Some(DisruptionReason::Underutilized),
            Reason::Expired => None,
            Reason::Unhealthy => Some(DisruptionReason::Unhealthy),
        }
    }

    /// Upstream's spelling (metrics label values, events, the journal).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Empty => "Empty",
            Reason::Drifted => "Drifted",
            Reason::Underutilized => "Underutilized",
            Reason::Expired => "Expired",
            Reason::Unhealthy => "Unhealthy",
        }
    }

    /// Parses the spelling of [`Reason::as_str`], case-insensitively.
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The disruption methods, in the order a pass tries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Method {
    Expiration,
    /// Node repair (`engine::repair`): replace a node unhealthy past its toleration.
    Repair,
    Emptiness,
    Drift,
    MultiNodeConsolidation,
    SingleNodeConsolidation,
    /// One node replaced by several cheaper ones (`split`; ours, behind a flag).
    SplitConsolidation,
}

impl Method {
    /// Lower-case words for the console and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Expiration => "expiration",
            Method::Repair => "repair",
            Method::Emptiness => "emptiness",
            Method::Drift => "drift",
            Method::MultiNodeConsolidation => "multi-node consolidation",
            Method::SingleNodeConsolidation => "single-node consolidation",
            Method::SplitConsolidation => "split consolidation",
        }
    }

    /// The method whose [`Method::metric_label`] this is.
    pub fn from_label(label: &str) -> Option<Method> {
        [
            Method::Expiration,
            Method::Repair,
            Method::Emptiness,
            Method::Drift,
            Method::MultiNodeConsolidation,
            Method::SingleNodeConsolidation,
            Method::SplitConsolidation,
        ]
        .into_iter()
        .find(|m| m.metric_label() == label)
    }

    /// Upstream's metric label value (`consolidation_type` / `method`).
    pub fn metric_label(self) -> &'static str {
        match self {
            Method::Expiration => "expiration",
            Method::Repair => "repair",
            Method::Emptiness => "empty",
            Method::Drift => "drift",
            Method::MultiNodeConsolidation => "multi",
            Method::SingleNodeConsolidation => "single",
            Method::SplitConsolidation => "split",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a node is not being disrupted (this pass).
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    NotInitialized,
    Deleting,
    Nominated {
        until: DateTime<Utc>,
    },
    NoNodePool,
    NodeDoNotDisrupt,
    PodDoNotDisrupt {
        pod: PodKey,
        until: Option<DateTime<Utc>>,
    },
    PdbAllowsZero {
        pdb: String,
        pod: PodKey,
    },
    MultiplePdbs {
        pod: PodKey,
        pdbs: Vec<String>,
    },
    Budget {
        reason: DisruptionReason,
        nodepool: String,
        until: Option<DateTime<Utc>>,
    },
    ConsolidateAfter {
        seconds_left: i64,
    },
    ConsolidationDisabled,
    WhenEmptyPolicy {
        pods: usize,
    },
    NoCheaperReplacement,
    PodsWouldNotFit {
        pod: PodKey,
        why: String,
    },
    TooManyReplacements {
        count: usize,
    },
    SpotToSpotDisabled,
    TooFewCheaperSpotTypes {
        count: usize,
    },
    /// A candidate's pod would only fit on a node that is not initialized yet.
    WouldUseUninitialized {
        pod: PodKey,
        nodeclaim: String,
    },
    /// Held in a pending decision, being executed, or rejected by an operator.
    Held {
        why: String,
    },
    /// The controller's view of the cluster is not complete yet (upstream waits for
    /// cluster state to sync before any disruption).
    Unsynced {
        why: String,
    },
    /// Pods are nominated to a NodeClaim that is not initialized: drift and consolidation
    /// wait for the scale-up to land.
    ScalingUp {
        nodeclaim: String,
    },
    /// A fast pass stopped at its first command before reaching this node.
    NotEvaluated,
    /// The pool's consolidationPolicy is Balanced and the move's score (savings share
    /// over disruption share, in its pool) is below 1/k.
    BalancedScore {
        nodepool: String,
        score: f64,
        savings_percent: f64,
        disruption_percent: f64,
    },
    /// The pool failed validation (ValidationSucceeded=False): nothing acts on it until
    /// it is fixed.
    InvalidNodePool {
        nodepool: String,
        why: String,
    },
    /// The pool is static (spec.replicas): upstream never consolidates its nodes.
    StaticNodePool {
        nodepool: String,
    },
    /// The move saves less than its pools' `karpenter-tui.dev/min-savings-*` ask.
    BelowMinimumSavings {
        /// The pools whose threshold applies, comma-separated.
        nodepools: String,
        /// USD/h the move would save.
        savings: f64,
        /// USD/h the candidates cost now.
        price: f64,
        min_per_hour: Option<f64>,
        min_percent: Option<f64>,
    },
    /// One of the pool's karpenter-tui settings does not parse: what depends on it does
    /// not act until it is fixed.
    InvalidPoolSetting {
        nodepool: String,
        why: String,
    },
    /// Split consolidation found new nodes, but together they save less than the share it
    /// asks of the candidate's price.
    SplitSavesTooLittle {
        count: usize,
        savings: f64,
        price: f64,
        percent: f64,
    },
    /// An unhealthy node is not repaired: `karpenter-tui.dev/do-not-repair` on it or on
    /// its pool (`on` says which).
    RepairVetoed {
        on: String,
    },
    /// More of the pool is unhealthy than repair tolerates (upstream's 20%, rounded up):
    /// the fault is likely systemic, and replacing nodes would not mend it.
    RepairCapped {
        nodepool: String,
        unhealthy: usize,
        nodes: usize,
        cap: usize,
    },
}

impl Block {
    /// The Kubernetes event reason upstream would use for this block.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Block::NoCheaperReplacement
            | Block::PodsWouldNotFit { .. }
            | Block::TooManyReplacements { .. }
            | Block::SpotToSpotDisabled
            | Block::TooFewCheaperSpotTypes { .. }
            | Block::WhenEmptyPolicy { .. }
            | Block::WouldUseUninitialized { .. }
            | Block::BalancedScore { .. }
            | Block::StaticNodePool { .. }
            | Block::BelowMinimumSavings { .. }
            | Block::InvalidPoolSetting { .. }
            | Block::SplitSavesTooLittle { .. }
            | Block::ConsolidationDisabled => "Unconsolidatable",
            // Upstream's node health controller's reason.
            Block::RepairVetoed { .. } | Block::RepairCapped { .. } => "NodeRepairBlocked",
            _ => "DisruptionBlocked",
        }
    }

    /// Waits that end by themselves within moments and need no event: the node is held
    /// by the gate, leaving, not ready yet, not looked at, or the whole cluster waits.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Block::Held { .. }
                | Block::Deleting
                | Block::NotInitialized
                | Block::NotEvaluated
                | Block::Unsynced { .. }
                | Block::ScalingUp { .. }
        )
    }
}

fn until(t: &Option<DateTime<Utc>>) -> String {
    match t {
        Some(t) => format!(" until {}", t.format("%Y-%m-%d %H:%M:%S UTC")),
        None => String::new(),
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Block::NotInitialized => f.write_str("not initialized"),
            Block::Deleting => f.write_str("being deleted"),
            Block::Nominated { until: t } => write!(
                f,
                "nominated for pending pods until {}",
                t.format("%H:%M:%S UTC")
            ),
            Block::NoNodePool => f.write_str("its NodePool no longer exists"),
            Block::NodeDoNotDisrupt => {
                f.write_str("node has the karpenter.sh/do-not-disrupt annotation")
            }
            Block::PodDoNotDisrupt { pod, until: t } => {
                write!(f, "do-not-disrupt pod {pod}{}", until(t))
            }
            Block::PdbAllowsZero { pdb, pod } => {
                write!(f, "PDB {pdb} allows 0 disruptions (pod {pod})")
            }
            Block::MultiplePdbs { pod, pdbs } => {
                write!(f, "pod {pod} is selected by {} PDBs ({})", pdbs.len(), pdbs.join(", "))
            }
            Block::Budget {
                reason,
                nodepool,
                until: t,
            } => write!(
                f,
                "budget for {} in {nodepool} exhausted{}",
                reason.as_str(),
                until(t)
            ),
            Block::ConsolidateAfter { seconds_left } => {
                let (m, s) = (seconds_left / 60, seconds_left % 60);
                if m > 0 {
                    write!(f, "consolidateAfter has {m}m{s:02}s left")
                } else {
                    write!(f, "consolidateAfter has {s}s left")
                }
            }
            Block::ConsolidationDisabled => f.write_str("consolidateAfter is Never"),
            Block::WhenEmptyPolicy { pods } => write!(
                f,
                "consolidationPolicy WhenEmpty and the node runs {pods} pod{}",
                if *pods == 1 { "" } else { "s" }
            ),
            Block::NoCheaperReplacement => f.write_str("no cheaper replacement"),
            Block::PodsWouldNotFit { pod, why } => {
                write!(f, "pods would not fit: {pod} ({why})")
            }
            Block::TooManyReplacements { count } => {
                write!(f, "its pods would need {count} new nodes (at most 1)")
            }
            Block::SpotToSpotDisabled => f.write_str(
                "spot-to-spot consolidation is disabled (a spot node is only replaced by a cheaper spot node behind the flag)",
            ),
            Block::TooFewCheaperSpotTypes { count } => write!(
                f,
                "only {count} cheaper spot instance types (spot-to-spot needs at least 15)"
            ),
            Block::WouldUseUninitialized { pod, nodeclaim } => write!(
                f,
                "pod {pod} would schedule against uninitialized nodeclaim/{nodeclaim}"
            ),
            Block::Held { why } => f.write_str(why),
            Block::Unsynced { why } => write!(f, "waiting for cluster state to sync: {why}"),
            Block::ScalingUp { nodeclaim } => write!(
                f,
                "waiting for the scale-up: pods are nominated to nodeclaim/{nodeclaim}, not initialized yet"
            ),
            Block::NotEvaluated => f.write_str(
                "not evaluated this pass: another decision came first (one command per pass)",
            ),
            Block::BalancedScore {
                nodepool,
                score,
                savings_percent,
                disruption_percent,
            } => write!(
                f,
                "Balanced pool {nodepool}: saves {savings_percent:.1}% of its cost for {disruption_percent:.1}% of its disruption (score {score:.2}, needs {:.2})",
                super::balanced::Score::threshold()
            ),
            Block::InvalidNodePool { nodepool, why } => {
                write!(f, "NodePool {nodepool} failed validation: {why}")
            }
            Block::StaticNodePool { nodepool } => write!(
                f,
                "NodePool {nodepool} is static (spec.replicas): its nodes are not consolidated"
            ),
            Block::BelowMinimumSavings {
                nodepools,
                savings,
                price,
                min_per_hour,
                min_percent,
            } => {
                let share = if *price > 0.0 {
                    savings / price * 100.0
                } else {
                    0.0
                };
                let mut asks = Vec::new();
                if let Some(m) = min_per_hour {
                    asks.push(format!("${m:.4}/h"));
                }
                if let Some(m) = min_percent {
                    asks.push(format!("{m:.1}%"));
                }
                write!(
                    f,
                    "saves ${savings:.4}/h ({share:.1}% of ${price:.4}/h), below the minimum savings of NodePool {nodepools} ({})",
                    asks.join(" and ")
                )
            }
            Block::InvalidPoolSetting { nodepool, why } => {
                write!(f, "NodePool {nodepool}: {why}")
            }
            Block::SplitSavesTooLittle {
                count,
                savings,
                price,
                percent,
            } => write!(
                f,
                "no cheaper single node; a split onto {count} nodes saves ${savings:.4}/h ({:.1}% of ${price:.4}/h), under the {percent:.1}% split consolidation asks",
                if *price > 0.0 { savings / price * 100.0 } else { 0.0 }
            ),
            Block::RepairVetoed { on } => write!(
                f,
                "unhealthy, but repair is vetoed by karpenter-tui.dev/do-not-repair on {on}"
            ),
            Block::RepairCapped {
                nodepool,
                unhealthy,
                nodes,
                cap,
            } => write!(
                f,
                "unhealthy, but {unhealthy} of NodePool {nodepool}'s {nodes} nodes are: more than {}% ({cap}), so repair waits (a fault that wide is not the node's)",
                crate::engine::repair::UNHEALTHY_PERCENT
            ),
        }
    }
}

/// One node's outcome in a pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Part of the command this pass acts on.
    Chosen {
        method: Method,
        /// Dollars per hour the command saves (0 for drift and expiration).
        savings: f64,
        delete_only: bool,
    },
    /// Would be disrupted, but one command acts per pass and another came first.
    Eligible {
        method: Method,
        detail: String,
    },
    Blocked(Block),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Chosen {
                method,
                savings,
                delete_only,
            } => {
                let verb = if *delete_only { "delete" } else { "replace" };
                if *savings > 0.0 {
                    write!(f, "chosen: {method} ({verb}), saves ${savings:.4}/h")
                } else {
                    write!(f, "chosen: {method} ({verb})")
                }
            }
            Outcome::Eligible { method, detail } => {
                write!(
                    f,
                    "eligible for {method}: {detail}; waiting for the next pass"
                )
            }
            Outcome::Blocked(b) => write!(f, "blocked: {b}"),
        }
    }
}
