//! What a watcher keeps of each Pod and Node before it stores them: the fields the
//! conversions read, and nothing else. A watched Pod is mostly managedFields, env,
//! command lines, volumes, probes and container statuses; a Node mostly its image list.
//! Trimming them is what lets 50,000 pods fit the memory target.
//!
//! Used on each watch event (e.g. `kube_runtime::WatchStreamExt::modify(trim_pod)`) before
//! the reflector stores the object. Converting a trimmed object gives the same result as
//! converting the original, apart from annotations nothing reads (tested), so trimming
//! never changes a decision.
//!
//! If a conversion starts reading another field, keep it here too: the
//! trimmed-equals-original tests fail for fields their fixtures carry.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::labels;

/// Annotation keys the engine and controller read on Pods: do-not-disrupt (and
/// Karpenter's other pod annotations), the deletion cost that orders disruption, the
/// mirror-pod marker, and this tool's own protocol annotations.
fn pod_annotation_kept(key: &str) -> bool {
    key.starts_with("karpenter.sh/")
        || key.starts_with("karpenter-tui.dev/")
        || key == labels::POD_DELETION_COST
        || key == "kubernetes.io/config.mirror"
}

/// Annotation keys read on Nodes: do-not-disrupt, the NodePool and EC2NodeClass hashes
/// drift compares, and this tool's protocol annotations.
fn node_annotation_kept(key: &str) -> bool {
    key.starts_with("karpenter.sh/")
        || key.starts_with("karpenter.k8s.aws/")
        || key.starts_with("karpenter-tui.dev/")
}

/// Keeps identity (name, namespace, uid, resourceVersion, generation), labels, owner
/// references, timestamps and the annotations `keep` admits; drops managedFields (often
/// half an object's bytes), finalizers and the rest.
fn trim_meta(meta: &mut ObjectMeta, keep: fn(&str) -> bool) {
    let annotations = meta.annotations.take().map(|mut a| {
        a.retain(|k, _| keep(k));
        a
    });
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        generation: meta.generation.take(),
        labels: meta.labels.take(),
        annotations: annotations.filter(|a| !a.is_empty()),
        owner_references: meta.owner_references.take(),
        creation_timestamp: meta.creation_timestamp.take(),
        deletion_timestamp: meta.deletion_timestamp.take(),
        ..ObjectMeta::default()
    };
}

/// A container reduced to what requests and host ports are computed from: name,
/// resources, host ports and the restart policy that makes an init container a sidecar.
fn trim_container(c: core::Container) -> core::Container {
    let ports: Vec<core::ContainerPort> = c
        .ports
        .into_iter()
        .flatten()
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .collect();
    core::Container {
        name: c.name,
        resources: c.resources,
        ports: Some(ports).filter(|p| !p.is_empty()),
        restart_policy: c.restart_policy,
        ..core::Container::default()
    }
}

/// Trims a Pod in place to the fields [`super::pod`] reads: identity, labels, the kept
/// annotations, owner, timestamps; the scheduling constraints of the spec (node name and
/// selector, affinity, tolerations, spread, priority, grace period, overhead) with
/// containers reduced to resources and host ports; phase, start time and the PodScheduled condition
/// (without its message, which lists every node).
pub fn trim_pod(p: &mut core::Pod) {
    trim_meta(&mut p.metadata, pod_annotation_kept);
    if let Some(spec) = p.spec.take() {
        p.spec = Some(core::PodSpec {
            containers: spec.containers.into_iter().map(trim_container).collect(),
            init_containers: spec
                .init_containers
                .map(|cs| cs.into_iter().map(trim_container).collect()),
            overhead: spec.overhead,
            node_name: spec.node_name,
            node_selector: spec.node_selector,
            affinity: spec.affinity,
            tolerations: spec.tolerations,
            topology_spread_constraints: spec.topology_spread_constraints,
            priority: spec.priority,
            priority_class_name: spec.priority_class_name,
            termination_grace_period_seconds: spec.termination_grace_period_seconds,
            ..core::PodSpec::default()
        });
    }
    if let Some(status) = p.status.take() {
        let conditions: Vec<core::PodCondition> = status
            .conditions
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "PodScheduled")
            .map(|c| core::PodCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                ..core::PodCondition::default()
            })
            .collect();
        p.status = Some(core::PodStatus {
            phase: status.phase,
            start_time: status.start_time,
            conditions: Some(conditions).filter(|c| !c.is_empty()),
            ..core::PodStatus::default()
        });
    }
}

/// Trims a Node in place to the fields [`super::node`] reads: identity, all labels (the
/// scheduler matches on them), the kept annotations, providerID, taints, unschedulable,
/// allocatable and the Ready condition (without heartbeat times and message). The image
/// list, addresses, node info and capacity go.
pub fn trim_node(n: &mut core::Node) {
    trim_meta(&mut n.metadata, node_annotation_kept);
    if let Some(spec) = n.spec.take() {
        n.spec = Some(core::NodeSpec {
            provider_id: spec.provider_id,
            taints: spec.taints,
            unschedulable: spec.unschedulable,
            ..core::NodeSpec::default()
        });
    }
    if let Some(status) = n.status.take() {
        let ready: Vec<core::NodeCondition> = status
            .conditions
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "Ready")
            .map(|c| core::NodeCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                ..core::NodeCondition::default()
            })
            .collect();
        n.status = Some(core::NodeStatus {
            allocatable: status.allocatable,
            conditions: Some(ready).filter(|c| !c.is_empty()),
            ..core::NodeStatus::default()
        });
    }
}
