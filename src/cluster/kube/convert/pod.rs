//! Pods and the objects that carry or select them: DaemonSet templates (every node's
//! overhead) and PodDisruptionBudgets (what eviction may take).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{At, EFFECTS, Malformed, at, display_name, required_name, taint_effect};
use crate::cluster::DaemonSetObject;
use crate::engine::pod::{Owner, Pod};
use crate::engine::requirements::Requirement;
use crate::engine::resources;
use crate::engine::selector::Selector;
use crate::engine::state::Pdb;

/// A Pod as the engine sees it ([`Pod::from_k8s`]), after the checks the API server
/// would have made on the fields the engine reads, so a bad object is reported with its
/// field path instead of quietly meaning something else (an unknown toleration effect
/// would tolerate every effect; an unknown selector operator would match nothing).
pub fn pod(p: &core::Pod) -> Result<Pod, Malformed> {
    const KIND: &str = "Pod";
    let name = display_name(&p.metadata, true);
    required_name(KIND, &p.metadata, true)?;
    if let Some(spec) = &p.spec {
        check_pod_spec(spec, "spec").map_err(|e| e.of(KIND, &name))?;
    }
    Pod::from_k8s(p).map_err(|e| at("spec", e).of(KIND, &name))
}

/// A DaemonSet's pod template as the pod every node gets, owned by the DaemonSet, as the
/// simulated cluster and the controller's ingest treat it (upstream's scheduler adds the
/// daemons' requests to every new node the same way).
pub fn daemonset(d: &DaemonSet) -> Result<DaemonSetObject, Malformed> {
    const KIND: &str = "DaemonSet";
    let name = required_name(KIND, &d.metadata, true)?;
    let shown = display_name(&d.metadata, true);
    let fail = |e: At| e.of(KIND, &shown);
    let spec = d
        .spec
        .as_ref()
        .ok_or_else(|| fail(at("spec", "required")))?;
    let template = &spec.template;
    let template_spec = template
        .spec
        .as_ref()
        .ok_or_else(|| fail(at("spec.template.spec", "required")))?;
    check_pod_spec(template_spec, "spec.template.spec").map_err(fail)?;
    let namespace = d
        .metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let as_pod = core::Pod {
        metadata: template.metadata.clone().unwrap_or_default(),
        spec: Some(template_spec.clone()),
        status: None,
    };
    let mut pod = Pod::from_k8s(&as_pod).map_err(|e| fail(at("spec.template.spec", e)))?;
    pod.key.namespace = namespace.clone();
    pod.key.name = name.clone();
    pod.uid = d
        .metadata
        .uid
        .clone()
        .unwrap_or_else(|| pod.key.to_string());
    pod.owner = Some(Owner {
        kind: KIND.into(),
        name: name.clone(),
    });
    Ok(DaemonSetObject {
        namespace,
        name,
        template: pod,
    })
}

/// A PodDisruptionBudget: its selector and how many more evictions it allows now.
///
/// policy/v1 semantics: a missing selector selects no pods, an empty one every pod in
/// the namespace. Until the disruption controller has processed the current generation
/// (no status, or `status.observedGeneration` behind `metadata.generation`) it allows
/// none, as the eviction API refuses evictions then.
pub fn pdb(p: &PodDisruptionBudget) -> Result<Pdb, Malformed> {
    const KIND: &str = "PodDisruptionBudget";
    let name = required_name(KIND, &p.metadata, true)?;
    let shown = display_name(&p.metadata, true);
    let selector = p.spec.as_ref().and_then(|s| s.selector.as_ref());
    check_selector(selector, "spec.selector").map_err(|e| e.of(KIND, &shown))?;
    let disruptions_allowed = match &p.status {
        Some(s) if s.observed_generation.unwrap_or(0) >= p.metadata.generation.unwrap_or(0) => {
            s.disruptions_allowed.max(0)
        }
        _ => 0,
    };
    Ok(Pdb {
        namespace: p
            .metadata
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into()),
        name,
        selector: Selector::from_k8s(selector),
        disruptions_allowed,
    })
}

/// The API server's checks on the pod fields the engine reads: resource quantities,
/// toleration operators and effects, node affinity requirements, label selector
/// operators and topology spread's whenUnsatisfiable.
fn check_pod_spec(spec: &core::PodSpec, base: &str) -> Result<(), At> {
    let containers = spec.containers.iter().map(|c| (c, "containers"));
    let inits = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| (c, "initContainers"));
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (c, list) in containers.chain(inits) {
        let i = index.entry(list).or_default();
        let path = format!("{base}.{list}[{i}].resources");
        *i += 1;
        let Some(res) = &c.resources else { continue };
        for (field, map) in [("requests", &res.requests), ("limits", &res.limits)] {
            for (k, q) in map.iter().flatten() {
                resources::parse_milli(&q.0)
                    .map_err(|e| at(format!("{path}.{field}[{k}]"), e.to_string()))?;
            }
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        resources::parse_milli(&q.0)
            .map_err(|e| at(format!("{base}.overhead[{k}]"), e.to_string()))?;
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let path = format!("{base}.tolerations[{i}]");
        match t.operator.as_deref() {
            None | Some("" | "Equal" | "Exists") => {}
            Some(other) => {
                return Err(at(
                    format!("{path}.operator"),
                    format!("unknown operator {other:?} (expected Equal or Exists)"),
                ));
            }
        }
        match t.effect.as_deref() {
            None | Some("") => {}
            Some(e) if taint_effect(e).is_some() => {}
            Some(other) => {
                return Err(at(
                    format!("{path}.effect"),
                    format!("unknown taint effect {other:?} (expected {EFFECTS})"),
                ));
            }
        }
    }
    if let Some(affinity) = &spec.affinity {
        check_affinity(affinity, &format!("{base}.affinity"))?;
    }
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let path = format!("{base}.topologySpreadConstraints[{i}]");
        if !matches!(
            c.when_unsatisfiable.as_str(),
            "DoNotSchedule" | "ScheduleAnyway"
        ) {
            return Err(at(
                format!("{path}.whenUnsatisfiable"),
                format!(
                    "unknown value {:?} (expected DoNotSchedule or ScheduleAnyway)",
                    c.when_unsatisfiable
                ),
            ));
        }
        check_selector(c.label_selector.as_ref(), &format!("{path}.labelSelector"))?;
    }
    Ok(())
}

fn check_affinity(a: &core::Affinity, base: &str) -> Result<(), At> {
    if let Some(na) = &a.node_affinity {
        let base = format!("{base}.nodeAffinity");
        let required = na
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .map(|s| s.node_selector_terms.as_slice())
            .unwrap_or_default();
        for (i, term) in required.iter().enumerate() {
            let path = format!(
                "{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            );
            check_node_selector_term(term, &path)?;
        }
        let preferred = na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten();
        for (i, p) in preferred.enumerate() {
            let path =
                format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference");
            check_node_selector_term(&p.preference, &path)?;
        }
    }
    let terms = [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (field, lists) in terms {
        let Some((required, preferred)) = lists else {
            continue;
        };
        for (i, t) in required.iter().flatten().enumerate() {
            let path = format!(
                "{base}.{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}].labelSelector"
            );
            check_selector(t.label_selector.as_ref(), &path)?;
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let path = format!(
                "{base}.{field}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm.labelSelector"
            );
            check_selector(w.pod_affinity_term.label_selector.as_ref(), &path)?;
        }
    }
    Ok(())
}

fn check_node_selector_term(term: &core::NodeSelectorTerm, path: &str) -> Result<(), At> {
    for (j, r) in term.match_expressions.iter().flatten().enumerate() {
        Requirement::try_from(r)
            .map_err(|e| at(format!("{path}.matchExpressions[{j}]"), e.to_string()))?;
    }
    Ok(())
}

/// Label selector operators: [`Selector::from_k8s`] turns an unknown one into "matches
/// nothing", which for a PDB would silently stop protecting its pods.
fn check_selector(sel: Option<&LabelSelector>, path: &str) -> Result<(), At> {
    let exprs = sel.and_then(|s| s.match_expressions.as_ref());
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        if !matches!(
            e.operator.as_str(),
            "In" | "NotIn" | "Exists" | "DoesNotExist"
        ) {
            return Err(at(
                format!("{path}.matchExpressions[{i}].operator"),
                format!(
                    "unknown operator {:?} (expected In, NotIn, Exists or DoesNotExist)",
                    e.operator
                ),
            ));
        }
    }
    Ok(())
}
