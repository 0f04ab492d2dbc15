//! The edge between Kubernetes API objects and the Karpenter-relevant slices in
//! [`crate::cluster`]: what a watcher hands the controller, and what the controller's writes
//! send back (a NodeClaim to create, the launch's status and labels).
//!
//! Everything here is pure, so the rules are unit-tested without an API server. An object
//! that cannot be read is a [`Malformed`] naming its kind, name and field path; the
//! backend reports it and carries on, because one bad object in a cluster must not stop
//! the controller (and must never panic it).
//!
//! Upstream references are to `sigs.k8s.io/karpenter` v1 (`pkg/apis/v1`,
//! `pkg/controllers/nodeclaim/lifecycle`) and to the Kubernetes API server's own rules.

mod nodeclaim;
mod pod;
mod registration;
mod status;
mod trim;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::api::nodepool::NodePool;
use crate::api::quantity::Quantity;
use crate::api::time::to_chrono;
use crate::cluster::NodeObject;
use crate::engine::resources::{self, Resources};

pub use nodeclaim::{launched_labels, launched_status, nodeclaim, nodeclaim_manifest};
pub use pod::{daemonset, pdb, pod};
pub use registration::registration_patch;
pub use status::nodepool_status_patch;
pub use trim::{trim_node, trim_pod};

/// Why an object in the cluster could not be read: names kind, namespace/name and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind} {name}: {message}")]
pub struct Malformed {
    pub kind: &'static str,
    /// `namespace/name` for namespaced kinds, `name` for cluster-scoped ones.
    pub name: String,
    /// `field.path: what is wrong`, e.g. `spec.requirements[1].operator: unknown operator Foo`.
    pub message: String,
}

/// A problem at a field path, before the object's kind and name are attached.
struct At {
    path: String,
    message: String,
}

fn at(path: impl Into<String>, message: impl Into<String>) -> At {
    At {
        path: path.into(),
        message: message.into(),
    }
}

impl At {
    fn of(self, kind: &'static str, name: &str) -> Malformed {
        Malformed {
            kind,
            name: name.to_string(),
            message: format!("{}: {}", self.path, self.message),
        }
    }
}

/// Stands in for a missing metadata.name in messages.
const UNNAMED: &str = "<unnamed>";

/// How a message names an object: `namespace/name` when namespaced.
fn display_name(meta: &ObjectMeta, namespaced: bool) -> String {
    let name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(UNNAMED);
    match (namespaced, meta.namespace.as_deref()) {
        (true, Some(ns)) if !ns.is_empty() => format!("{ns}/{name}"),
        (true, _) => format!("default/{name}"),
        (false, _) => name.to_string(),
    }
}

/// metadata.name: every object the controller tracks is keyed by it, so one without a
/// name (possible only from a broken API server or emulator) cannot be used.
fn required_name(
    kind: &'static str,
    meta: &ObjectMeta,
    namespaced: bool,
) -> Result<String, Malformed> {
    match meta.name.as_deref() {
        Some(n) if !n.is_empty() => Ok(n.to_string()),
        _ => Err(at("metadata.name", "required").of(kind, &display_name(meta, namespaced))),
    }
}

/// Deserializes a watched object from JSON, naming the field that does not fit the type
/// (`spec.requirements[1].operator: unknown operator Foo (expected one of In, ...)`).
///
/// A typed kube-runtime watcher fails its whole list when one object does not
/// deserialize; a backend that watches raw objects (`DynamicObject`) and decodes each one
/// here reports the bad object and keeps the rest.
pub fn decode<K: serde::de::DeserializeOwned>(
    kind: &'static str,
    value: Value,
) -> Result<K, Malformed> {
    let meta = value.get("metadata");
    let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str);
    let name = field("name").filter(|n| !n.is_empty()).unwrap_or(UNNAMED);
    let name = match field("namespace") {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    };
    crate::api::manifest::typed::<K>(value)
        .map(|(object, _unknown_fields)| object)
        .map_err(|(path, message)| at(path.clone(), readable(&path, &message)).of(kind, &name))
}

/// A bad enum value in the words of the field: `typed` says `unknown value "Foo": expected
/// one of In, NotIn`; an object read from the API server names the field instead:
/// `unknown operator Foo (expected one of In, NotIn)`.
fn readable(path: &str, message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown value ") else {
        return message.to_string();
    };
    let Some((variant, expected)) = rest.split_once(": ") else {
        return message.to_string();
    };
    let variant = serde_json::from_str::<String>(variant).unwrap_or_else(|_| variant.to_string());
    let field = path.rsplit('.').next().unwrap_or(path);
    let noun = match field {
        "effect" => "taint effect",
        "" => "value",
        other => other,
    };
    format!("unknown {noun} {variant} ({expected})")
}

// ---------------------------------------------------------------------------------------
// NodePool

/// A NodePool as the controller keeps it: managedFields stripped (they are most of a
/// watched object's bytes and nothing reads them) and checked against the CRD's rules and
/// upstream's runtime validation. An invalid pool is reported rather than used, as
/// upstream marks it `ValidationSucceeded=False` and provisions nothing from it.
///
/// Defaults need no step here: the API server applies the CRD's defaults and the typed
/// model's serde defaults fill the same values for fields a client left out.
///
/// An invalid pool is kept, marked `ValidationSucceeded=False` with its problems (see
/// [`NodePool::validation_failure`]): it stays visible in the console and `state`, and
/// the engine neither launches from it nor disrupts its nodes.
pub fn nodepool(mut np: NodePool) -> NodePool {
    np.metadata.managed_fields = None;
    // A ValidationSucceeded verdict written for an earlier generation of the spec (by
    // this controller or upstream's) no longer holds: the pool is judged afresh, so a
    // fixed pool is not kept invalid by the status that reported it.
    let generation = np.metadata.generation;
    if let Some(s) = np.status.as_mut() {
        s.conditions.retain(|c| {
            c.type_ != crate::api::nodepool::CONDITION_VALIDATION_SUCCEEDED
                || c.observed_generation == generation
        });
    }
    let violations = crate::api::validation::validate_nodepool(&np);
    if !violations.is_empty() {
        np.mark_invalid(
            violations
                .iter()
                .map(|v| format!("{}: {}", v.path, v.message))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    np
}

/// Most fields a NodePool decode may set aside before giving up on the object.
const MAX_SET_ASIDE: usize = 16;

/// Decodes a watched NodePool so that a field we cannot read never drops the pool: a
/// value our types do not know (an enum value a newer Karpenter adds, a type mismatch)
/// is set aside and named, the rest of the pool is read, and the pool is kept marked
/// `ValidationSucceeded=False` with every problem (upstream would not act on a pool it
/// cannot validate either). Unknown fields are ignored, as upstream's own decoding does.
/// Only a pool whose template cannot be read at all is an error.
pub fn nodepool_value(mut value: Value) -> Result<NodePool, Malformed> {
    const KIND: &str = "NodePool";
    let mut problems: Vec<String> = Vec::new();
    let mut last_path: Option<String> = None;
    loop {
        match decode::<NodePool>(KIND, value.clone()) {
            Ok(np) => {
                let mut np = nodepool(np);
                if !problems.is_empty() {
                    if let Some(earlier) = np.validation_failure() {
                        problems.push(earlier.to_string());
                    }
                    np.mark_invalid(problems.join("; "));
                }
                return Ok(np);
            }
            Err(e) => {
                let path = e.message.split_once(": ").map(|(p, _)| p).unwrap_or("");
                // A required field cannot be set aside: the error comes back at the same
                // place, so set aside what holds it instead.
                let path = if last_path.as_deref() == Some(path) {
                    parent(path).to_string()
                } else {
                    path.to_string()
                };
                let settable = path.starts_with("spec.") && !is_template_core(&path);
                if !settable || problems.len() >= MAX_SET_ASIDE || !remove_at(&mut value, &path) {
                    return Err(e);
                }
                if last_path.as_deref() != Some(e.message.split_once(": ").map_or("", |p| p.0)) {
                    problems.push(e.message.clone());
                }
                last_path = Some(path);
            }
        }
    }
}

/// The parts of a pool without which nothing about it makes sense.
fn is_template_core(path: &str) -> bool {
    matches!(
        path,
        "spec.template" | "spec.template.spec" | "spec.template.spec.nodeClassRef"
    )
}

/// `a.b[2].c` -> `a.b[2]`; `a.b[2]` -> `a.b`.
fn parent(path: &str) -> &str {
    match path.rfind(['.', '[']) {
        Some(i) => &path[..i],
        None => "",
    }
}

/// Removes the value at a field path (`spec.x[1].y`) from a JSON object; false when the
/// path is not there.
fn remove_at(value: &mut Value, path: &str) -> bool {
    // The path as object keys and array indices, in order.
    let mut steps: Vec<Step> = Vec::new();
    for part in path.split('.') {
        let (field, indices) = split_indices(part);
        steps.push(Step::Key(field));
        steps.extend(indices.into_iter().map(Step::Index));
    }
    let Some(last) = steps.pop() else {
        return false;
    };
    let mut node = value;
    for step in steps {
        let next = match step {
            Step::Key(k) => node.get_mut(k),
            Step::Index(i) => node.get_mut(i),
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    match last {
        Step::Key(k) => node.as_object_mut().and_then(|o| o.remove(k)).is_some(),
        Step::Index(i) => match node.as_array_mut() {
            Some(a) if i < a.len() => {
                a.remove(i);
                true
            }
            _ => false,
        },
    }
}

/// One step of a field path.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `requirements[1]` -> (`requirements`, [1]).
fn split_indices(step: &str) -> (&str, Vec<usize>) {
    let field = step.split('[').next().unwrap_or(step);
    let indices = step
        .split('[')
        .skip(1)
        .filter_map(|s| s.trim_end_matches(']').parse().ok())
        .collect();
    (field, indices)
}

// ---------------------------------------------------------------------------------------
// Quantities

/// A quantity map (`status.allocatable`, `spec.resources.requests`) in milli-units,
/// naming the entry that does not parse.
fn quantity_map<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    path: &str,
) -> Result<Resources, At> {
    let mut r = Resources::default();
    for (name, q) in entries {
        let milli =
            resources::parse_milli(q).map_err(|e| at(format!("{path}[{name}]"), e.to_string()))?;
        r.add_named(name, milli);
    }
    Ok(r)
}

/// Resources as manifest quantities that parse back to exactly the same milli-units
/// (unlike the display form, which rounds memory to one decimal): whole units where
/// exact, with binary suffixes for byte resources, else milli-units.
fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    let fixed = [
        (resources::CPU, r.cpu),
        (resources::MEMORY, r.memory),
        (resources::PODS, r.pods),
        (resources::EPHEMERAL_STORAGE, r.ephemeral_storage),
    ];
    fixed
        .into_iter()
        .chain(r.extended.iter().map(|(n, v)| (n.as_str(), *v)))
        .filter(|(_, v)| *v != 0)
        .map(|(n, v)| (n.to_string(), Quantity(exact_quantity(n, v))))
        .collect()
}

fn exact_quantity(resource: &str, milli: i64) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let units = milli / 1000;
    let bytes = resource == resources::MEMORY
        || resource == resources::EPHEMERAL_STORAGE
        || resource.starts_with("hugepages-");
    if bytes {
        for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
            let size = 1i64 << shift;
            if units % size == 0 {
                return format!("{}{suffix}", units / size);
            }
        }
    }
    units.to_string()
}

// ---------------------------------------------------------------------------------------
// Node

/// A Node as the controller sees it. Ready is condition Ready=True (the kubelet's
/// heartbeat; upstream's `NodeClaim` Ready and initialization build on it).
pub fn node(n: &core::Node) -> Result<NodeObject, Malformed> {
    const KIND: &str = "Node";
    let name = required_name(KIND, &n.metadata, false)?;
    let fail = |e: At| e.of(KIND, &name);
    // Borrowed, not cloned: an untrimmed Node's status carries its whole image list.
    let spec = n.spec.as_ref();
    let status = n.status.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| taint(t, &format!("spec.taints[{i}]")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let allocatable = quantity_map(
        status
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
        "status.allocatable",
    )
    .map_err(fail)?;
    Ok(NodeObject {
        name: name.clone(),
        provider_id: spec.and_then(|s| s.provider_id.clone()).unwrap_or_default(),
        labels: std::sync::Arc::new(n.metadata.labels.clone().unwrap_or_default()),
        annotations: n.metadata.annotations.clone().unwrap_or_default(),
        taints,
        allocatable,
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        // A condition without a transition time reads as broken since the epoch: its
        // toleration has long run out, as upstream's zero time would have it.
        faults: status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let since = c
                    .last_transition_time
                    .as_ref()
                    .map(to_chrono)
                    .unwrap_or(DateTime::<Utc>::UNIX_EPOCH);
                crate::engine::repair::NodeFault::of(&c.type_, &c.status, since)
            })
            .collect(),
        // Nothing decides on a Node's age (NodeClaims carry the times that matter), so
        // a missing timestamp reads as the epoch rather than rejecting the Node.
        created: n
            .metadata
            .creation_timestamp
            .as_ref()
            .map(to_chrono)
            .unwrap_or(DateTime::<Utc>::UNIX_EPOCH),
    })
}

fn taint_effect(effect: &str) -> Option<TaintEffect> {
    match effect {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

const EFFECTS: &str = "NoSchedule, PreferNoSchedule or NoExecute";

/// A core/v1 taint with its effect checked: an unknown effect has no scheduling meaning
/// (the API server rejects it), so guessing one would mis-schedule.
fn taint(t: &core::Taint, path: &str) -> Result<Taint, At> {
    if t.key.is_empty() {
        return Err(at(format!("{path}.key"), "required"));
    }
    let effect = taint_effect(&t.effect).ok_or_else(|| {
        at(
            format!("{path}.effect"),
            format!("unknown taint effect {:?} (expected {EFFECTS})", t.effect),
        )
    })?;
    Ok(Taint {
        key: t.key.clone(),
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect,
        time_added: t.time_added.clone(),
    })
}
