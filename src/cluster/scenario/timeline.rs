//! The scenario timeline: things that happen at offsets from the start, to the cluster
//! (scale a Deployment, edit a NodePool, annotate pods, a node goes NotReady), to the cloud
//! (capacity runs out or comes back, a spot interruption) or from an operator (approve,
//! reject, pause, resume).

use std::collections::BTreeMap;

use chrono::TimeDelta;
use serde::Deserialize;
use serde_json::Value;

use super::spec::duration;
use crate::api::nodepool::NodePool;
use crate::cloud::sim::CapacityOutage;
use crate::cluster::sim::workloads::Deployment;
use crate::engine::approval::Scope;
use crate::engine::catalog::CapacityType;

/// One timeline entry as written: `at` and exactly one action.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TimelineEntry {
    pub at: String,
    pub scale: Option<Scale>,
    pub patch_node_pool: Option<PatchNodePool>,
    pub annotate_pods: Option<AnnotatePods>,
    pub capacity: Option<Capacity>,
    pub interrupt_spot: Option<NodeChoice>,
    pub node_not_ready: Option<NodeChoice>,
    pub node_condition: Option<NodeConditionEntry>,
    pub kubelet: Option<Kubelet>,
    pub operator: Option<Operator>,
}

/// The kubelets of new nodes (of a pool, or every pool): `healthy: false` is a broken
/// image whose nodes stop reporting `failAfter` after registering (default 0s: they
/// never report Ready); `healthy: true` mends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kubelet {
    pub nodepool: Option<String>,
    pub healthy: bool,
    pub fail_after: Option<String>,
}

/// A node monitoring agent reports a fault on the oldest node (of the pool) that does
/// not have it yet: a condition a repair policy names (`engine::repair`), other than
/// Ready (`nodeNotReady` is the kubelet going silent). The node stays Ready and keeps
/// its pods.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeConditionEntry {
    pub nodepool: Option<String>,
    pub condition: String,
    #[serde(default = "default_false")]
    pub status: String,
}

fn default_false() -> String {
    "False".into()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scale {
    pub deployment: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub replicas: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PatchNodePool {
    pub name: String,
    /// A JSON merge patch (RFC 7386), as `kubectl patch --type merge` takes.
    pub patch: Value,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AnnotatePods {
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// matchLabels of the pods to annotate.
    pub selector: BTreeMap<String, String>,
    /// Annotations to set; null removes one.
    pub annotations: BTreeMap<String, Option<String>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Capacity {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
    /// false starts an InsufficientInstanceCapacity outage; true ends it.
    pub available: bool,
}

/// Which node an entry acts on: the oldest matching one.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeChoice {
    pub nodepool: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Operator {
    /// approve, reject, pause or resume.
    pub action: String,
    /// For approve/reject: the decision id (default: the oldest pending decision).
    pub decision: Option<u64>,
    /// For pause/resume: `all`, a reason, or `nodepool/NAME` (default all).
    pub scope: Option<String>,
    /// For reject: why.
    pub reason: Option<String>,
}

fn default_namespace() -> String {
    "default".into()
}

/// What an operator does.
#[derive(Clone, Debug, PartialEq)]
pub enum OperatorAction {
    Approve {
        decision: Option<u64>,
    },
    Reject {
        decision: Option<u64>,
        reason: String,
    },
    Pause {
        scope: Scope,
    },
    Resume {
        scope: Scope,
    },
}

/// A resolved timeline action.
#[derive(Clone, Debug)]
pub enum Action {
    Scale {
        namespace: String,
        deployment: String,
        replicas: u32,
    },
    PatchNodePool {
        name: String,
        patch: Value,
    },
    AnnotatePods {
        namespace: String,
        selector: BTreeMap<String, String>,
        annotations: BTreeMap<String, Option<String>>,
    },
    Capacity {
        outage: CapacityOutage,
        available: bool,
    },
    InterruptSpot {
        nodepool: Option<String>,
    },
    NodeNotReady {
        nodepool: Option<String>,
    },
    NodeCondition {
        nodepool: Option<String>,
        condition: String,
        status: String,
    },
    Kubelet {
        nodepool: Option<String>,
        /// `None`: healthy.
        fail_after: Option<TimeDelta>,
    },
    Operator(OperatorAction),
}

/// An action at an offset from the start.
#[derive(Clone, Debug)]
pub struct TimedAction {
    pub at: TimeDelta,
    /// Position in the file's timeline (ties keep file order).
    pub index: usize,
    pub action: Action,
}

impl TimelineEntry {
    /// The entry's action, or the field (relative to the entry) and what is wrong.
    pub fn resolve(&self, index: usize) -> Result<TimedAction, (String, String)> {
        let at = duration(Some(&self.at))
            .map_err(|m| ("at".to_string(), m))?
            .unwrap_or_default();
        let mut actions = Vec::new();
        if let Some(s) = &self.scale {
            actions.push(Action::Scale {
                namespace: s.namespace.clone(),
                deployment: s.deployment.clone(),
                replicas: s.replicas,
            });
        }
        if let Some(p) = &self.patch_node_pool {
            if !p.patch.is_object() {
                return Err((
                    "patchNodePool.patch".into(),
                    "expected a mapping (a JSON merge patch)".into(),
                ));
            }
            actions.push(Action::PatchNodePool {
                name: p.name.clone(),
                patch: p.patch.clone(),
            });
        }
        if let Some(a) = &self.annotate_pods {
            actions.push(Action::AnnotatePods {
                namespace: a.namespace.clone(),
                selector: a.selector.clone(),
                annotations: a.annotations.clone(),
            });
        }
        if let Some(c) = &self.capacity {
            let capacity_type = match c.capacity_type.as_deref() {
                None => None,
                Some(v) => Some(CapacityType::parse(v).ok_or_else(|| {
                    (
                        "capacity.capacityType".to_string(),
                        format!("expected spot, on-demand or reserved, found {v:?}"),
                    )
                })?),
            };
            actions.push(Action::Capacity {
                outage: CapacityOutage {
                    instance_type: c.instance_type.clone(),
                    zone: c.zone.clone(),
                    capacity_type,
                },
                available: c.available,
            });
        }
        if let Some(n) = &self.interrupt_spot {
            actions.push(Action::InterruptSpot {
                nodepool: n.nodepool.clone(),
            });
        }
        if let Some(n) = &self.node_not_ready {
            actions.push(Action::NodeNotReady {
                nodepool: n.nodepool.clone(),
            });
        }
        if let Some(c) = &self.node_condition {
            let policy = crate::engine::repair::POLICIES
                .iter()
                .any(|p| p.condition == c.condition && p.status == c.status);
            if !policy || c.condition == "Ready" {
                let known: Vec<String> = crate::engine::repair::POLICIES
                    .iter()
                    .filter(|p| p.condition != "Ready")
                    .map(|p| format!("{}={}", p.condition, p.status))
                    .collect();
                return Err((
                    "nodeCondition".into(),
                    format!(
                        "{}={} is not a fault a repair policy names (one of {}; for Ready use nodeNotReady)",
                        c.condition,
                        c.status,
                        known.join(", ")
                    ),
                ));
            }
            actions.push(Action::NodeCondition {
                nodepool: c.nodepool.clone(),
                condition: c.condition.clone(),
                status: c.status.clone(),
            });
        }
        if let Some(k) = &self.kubelet {
            let after = duration(k.fail_after.as_deref())
                .map_err(|m| ("kubelet.failAfter".to_string(), m))?
                .unwrap_or_default();
            actions.push(Action::Kubelet {
                nodepool: k.nodepool.clone(),
                fail_after: (!k.healthy).then_some(after),
            });
        }
        if let Some(o) = &self.operator {
            let scope = || {
                Scope::parse(o.scope.as_deref().unwrap_or("all"))
                    .map_err(|m| ("operator.scope".to_string(), m))
            };
            actions.push(Action::Operator(match o.action.as_str() {
                "approve" => OperatorAction::Approve {
                    decision: o.decision,
                },
                "reject" => OperatorAction::Reject {
                    decision: o.decision,
                    reason: o
                        .reason
                        .clone()
                        .unwrap_or_else(|| "rejected in the scenario".into()),
                },
                "pause" => OperatorAction::Pause { scope: scope()? },
                "resume" => OperatorAction::Resume { scope: scope()? },
                other => {
                    return Err((
                        "operator.action".into(),
                        format!("expected approve, reject, pause or resume, found {other:?}"),
                    ));
                }
            }));
        }
        match actions.len() {
            1 => Ok(TimedAction {
                at,
                index,
                action: actions.remove(0),
            }),
            0 => Err((
                String::new(),
                "no action: give one of scale, patchNodePool, annotatePods, capacity, interruptSpot, nodeNotReady, nodeCondition, kubelet, operator".into(),
            )),
            _ => Err((String::new(), "more than one action in one entry; split it into two entries".into())),
        }
    }
}

impl TimedAction {
    /// Checks references against the scenario's objects; `report(field, message)` gets
    /// fields relative to the entry (".scale.deployment").
    pub fn check(
        &self,
        nodepools: &[NodePool],
        deployments: &[Deployment],
        mut report: impl FnMut(&str, String),
    ) {
        let pool_known = |name: &str| {
            nodepools
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(name))
        };
        match &self.action {
            Action::Scale {
                namespace,
                deployment,
                ..
            } if !deployments
                .iter()
                .any(|d| &d.name == deployment && &d.namespace == namespace) =>
            {
                report(
                    ".scale.deployment",
                    format!("no Deployment {namespace}/{deployment} in this scenario"),
                );
            }
            Action::PatchNodePool { name, patch } => {
                match nodepools
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(name))
                {
                    None => report(
                        ".patchNodePool.name",
                        format!("no NodePool {name:?} in this scenario"),
                    ),
                    Some(pool) => match patch_nodepool(pool, patch) {
                        Ok(_) => {}
                        Err(m) => report(".patchNodePool.patch", m),
                    },
                }
            }
            Action::InterruptSpot { nodepool: Some(p) }
            | Action::NodeNotReady { nodepool: Some(p) }
            | Action::NodeCondition {
                nodepool: Some(p), ..
            }
            | Action::Kubelet {
                nodepool: Some(p), ..
            } if !pool_known(p) => {
                let field = match self.action {
                    Action::InterruptSpot { .. } => ".interruptSpot.nodepool",
                    Action::Kubelet { .. } => ".kubelet.nodepool",
                    Action::NodeCondition { .. } => ".nodeCondition.nodepool",
                    _ => ".nodeNotReady.nodepool",
                };
                report(field, format!("no NodePool {p:?} in this scenario"));
            }
            _ => {}
        }
    }
}

/// Applies a JSON merge patch to a NodePool and validates the result, as the API server
/// would before accepting `kubectl patch --type merge`.
pub fn patch_nodepool(pool: &NodePool, patch: &Value) -> Result<NodePool, String> {
    let mut value = serde_json::to_value(pool).map_err(|e| e.to_string())?;
    merge(&mut value, patch);
    let (patched, _) = crate::api::manifest::typed::<NodePool>(value)
        .map_err(|(p, m)| if p.is_empty() { m } else { format!("{p}: {m}") })?;
    let violations = crate::api::validation::validate_nodepool(&patched);
    if let Some(v) = violations.first() {
        return Err(format!(
            "the patched NodePool is invalid: {}: {}",
            v.path, v.message
        ));
    }
    if patched.metadata.name != pool.metadata.name {
        return Err("a patch cannot rename the NodePool".into());
    }
    Ok(patched)
}

/// RFC 7386: objects merge key by key, null deletes, anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(t) = target else { return };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}
