//! The engine's view of a pod: only what scheduling and disruption decisions read, so that
//! 50,000 pods stay small in memory and cheap to clone into snapshots.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1 as core;

use super::resources::{self, Resources};
use super::selector::Selector;
use crate::api::labels;

/// Namespace/name, the identity the console and the journal use.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

/// Serialized as `namespace/name`, the way operators write pods.
impl serde::Serialize for PodKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Pod lifecycle phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Phase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// A toleration (core/v1 semantics).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Toleration {
    /// Empty key with operator Exists tolerates everything.
    pub key: String,
    /// "Equal" (default) or "Exists".
    pub exists: bool,
    pub value: String,
    /// None tolerates every effect.
    pub effect: Option<crate::api::nodeclaim::TaintEffect>,
}

impl Toleration {
    /// True when this toleration tolerates the taint (key, value, effect), per core/v1.
    pub fn tolerates(&self, taint: &crate::api::nodeclaim::Taint) -> bool {
        if let Some(e) = self.effect
            && e != taint.effect
        {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        if self.key != taint.key {
            return false;
        }
        self.exists || self.value == taint.value.as_deref().unwrap_or("")
    }
}

/// As kubectl writes taints: `key=value:Effect` (Equal), `key:Effect` (Exists), `*`
/// with no key (tolerates everything); no effect means every effect.
impl std::fmt::Display for Toleration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.key.is_empty(), self.exists) {
            (true, _) => write!(f, "*")?,
            (false, true) => write!(f, "{}", self.key)?,
            (false, false) => write!(f, "{}={}", self.key, self.value)?,
        }
        match self.effect {
            Some(e) => write!(f, ":{}", e.as_str()),
            None => Ok(()),
        }
    }
}

/// A required or preferred pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    pub selector: Selector,
    /// Namespaces the selector applies to; empty means the pod's own namespace.
    pub namespaces: Vec<String>,
    pub topology_key: String,
    /// Weight for preferred terms (1..100); 0 for required ones.
    pub weight: i32,
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    /// True for DoNotSchedule, false for ScheduleAnyway.
    pub hard: bool,
    pub selector: Selector,
    pub min_domains: Option<i32>,
    /// nodeAffinityPolicy Honor (default) vs Ignore.
    pub honor_node_affinity: bool,
    /// nodeTaintsPolicy Honor vs Ignore (default).
    pub honor_node_taints: bool,
    pub match_label_keys: Vec<String>,
}

/// A host port a pod binds; two pods cannot share (ip, port, protocol) on one node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub port: i32,
    pub protocol: String,
}

impl HostPort {
    /// True when the two would collide (0.0.0.0 / empty collides with every address).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || wildcard(&self.ip) || wildcard(&other.ip))
    }
}

/// The controller that owns a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    pub kind: String,
    pub name: String,
}

/// A pod as the engine sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Pod {
    pub key: PodKey,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub node_name: Option<String>,
    pub phase: Phase,
    /// Effective requests: max(sum of containers, largest init container) + overhead, with
    /// `pods: 1`, limits standing in for missing requests as the API server defaults them.
    pub requests: Resources,
    pub node_selector: BTreeMap<String, String>,
    pub node_affinity: Option<core::NodeAffinity>,
    pub tolerations: Vec<Toleration>,
    pub affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub preferred_anti_affinity: Vec<AffinityTerm>,
    pub spread: Vec<SpreadConstraint>,
    pub host_ports: Vec<HostPort>,
    pub owner: Option<Owner>,
    pub priority: i32,
    pub priority_class_name: String,
    pub created: DateTime<Utc>,
    /// `status.startTime`: when the kubelet accepted it. A do-not-disrupt duration counts
    /// from here (upstream `pod.IsDoNotDisruptActive`), not from creation: a pod that sat
    /// pending for an hour is still protected for its full window once it runs.
    pub started: Option<DateTime<Utc>>,
    pub deleting: Option<DateTime<Utc>>,
    pub termination_grace_period_seconds: i64,
    /// PodScheduled=False with reason Unschedulable: the kube-scheduler gave up on it.
    pub unschedulable: bool,
}

impl Pod {
    /// A minimal pending pod, for tests, scenarios and benchmarks.
    pub fn new(namespace: &str, name: &str, requests: Resources) -> Pod {
        let mut requests = requests;
        requests.pods = requests.pods.max(1000);
        Pod {
            key: PodKey {
                namespace: namespace.into(),
                name: name.into(),
            },
            uid: format!("{namespace}/{name}"),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            node_name: None,
            phase: Phase::Pending,
            requests,
            node_selector: BTreeMap::new(),
            node_affinity: None,
            tolerations: Vec::new(),
            affinity: Vec::new(),
            preferred_affinity: Vec::new(),
            anti_affinity: Vec::new(),
            preferred_anti_affinity: Vec::new(),
            spread: Vec::new(),
            host_ports: Vec::new(),
            owner: None,
            priority: 0,
            priority_class_name: String::new(),
            created: DateTime::<Utc>::UNIX_EPOCH,
            started: None,
            deleting: None,
            termination_grace_period_seconds: 30,
            unschedulable: true,
        }
    }

    /// Owned by a DaemonSet: runs on every matching node and is never provisioned for.
    pub fn is_daemonset(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet")
    }

    /// A static (mirror) pod, owned by its Node.
    pub fn is_static(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "Node")
            || self.annotations.contains_key("kubernetes.io/config.mirror")
    }

    /// Succeeded or Failed: holds no resources.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, Phase::Succeeded | Phase::Failed)
    }

    /// Upstream `pod.IsProvisionable`: unschedulable per the kube-scheduler, not bound,
    /// not a DaemonSet or static pod, not terminal, not being deleted.
    pub fn is_provisionable(&self) -> bool {
        self.unschedulable
            && self.node_name.is_none()
            && !self.is_daemonset()
            && !self.is_static()
            && !self.is_terminal()
            && self.deleting.is_none()
    }

    /// system-cluster-critical or system-node-critical: drained last.
    pub fn is_critical(&self) -> bool {
        matches!(
            self.priority_class_name.as_str(),
            "system-cluster-critical" | "system-node-critical"
        )
    }

    /// The `karpenter.sh/do-not-disrupt` annotation value, if any.
    pub fn do_not_disrupt(&self) -> Option<&str> {
        self.annotations
            .get(labels::DO_NOT_DISRUPT)
            .map(String::as_str)
    }

    /// `controller.kubernetes.io/pod-deletion-cost`, 0 when absent or malformed.
    pub fn deletion_cost(&self) -> i64 {
        self.annotations
            .get(labels::POD_DELETION_COST)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Converts a Kubernetes Pod. Fails only on unparseable resource quantities, naming
    /// the container and resource.
    pub fn from_k8s(p: &core::Pod) -> Result<Pod, String> {
        let meta = &p.metadata;
        let spec = p.spec.clone().unwrap_or_default();
        let status = p.status.clone().unwrap_or_default();
        let key = PodKey {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
        };
        let requests = effective_requests(&spec).map_err(|e| format!("pod {key}: {e}"))?;
        let affinity = spec.affinity.clone().unwrap_or_default();
        let pa = affinity.pod_affinity.unwrap_or_default();
        let paa = affinity.pod_anti_affinity.unwrap_or_default();
        let required = |terms: Option<Vec<core::PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .unwrap_or_default()
                .iter()
                .map(|t| affinity_term(t, 0))
                .collect()
        };
        let preferred = |terms: Option<Vec<core::WeightedPodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .unwrap_or_default()
                .iter()
                .map(|w| affinity_term(&w.pod_affinity_term, w.weight))
                .collect()
        };
        let phase = match status.phase.as_deref() {
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            Some("Unknown") => Phase::Unknown,
            _ => Phase::Pending,
        };
        let unschedulable = status.conditions.iter().flatten().any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
        let owner = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .or_else(|| meta.owner_references.iter().flatten().next())
            .map(|o| Owner {
                kind: o.kind.clone(),
                name: o.name.clone(),
            });
        let mut host_ports = Vec::new();
        for c in &spec.containers {
            for port in c.ports.iter().flatten() {
                if let Some(hp) = port.host_port.filter(|p| *p > 0) {
                    host_ports.push(HostPort {
                        ip: port.host_ip.clone().unwrap_or_default(),
                        port: hp,
                        protocol: port.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    });
                }
            }
        }
        Ok(Pod {
            uid: meta.uid.clone().unwrap_or_else(|| key.to_string()),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            phase,
            requests,
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            node_affinity: affinity.node_affinity,
            tolerations: spec.tolerations.iter().flatten().map(toleration).collect(),
            affinity: required(pa.required_during_scheduling_ignored_during_execution),
            preferred_affinity: preferred(pa.preferred_during_scheduling_ignored_during_execution),
            anti_affinity: required(paa.required_during_scheduling_ignored_during_execution),
            preferred_anti_affinity: preferred(
                paa.preferred_during_scheduling_ignored_during_execution,
            ),
            spread: spec
                .topology_spread_constraints
                .iter()
                .flatten()
                .map(spread)
                .collect(),
            host_ports,
            owner,
            priority: spec.priority.unwrap_or(0),
            priority_class_name: spec.priority_class_name.clone().unwrap_or_default(),
            created: meta
                .creation_timestamp
                .as_ref()
                .map(crate::api::time::to_chrono)
                .unwrap_or(DateTime::<Utc>::UNIX_EPOCH),
            started: status.start_time.as_ref().map(crate::api::time::to_chrono),
            deleting: meta
                .deletion_timestamp
                .as_ref()
                .map(crate::api::time::to_chrono),
            termination_grace_period_seconds: spec.termination_grace_period_seconds.unwrap_or(30),
            unschedulable,
            key,
        })
    }
}

fn toleration(t: &core::Toleration) -> Toleration {
    use crate::api::nodeclaim::TaintEffect;
    Toleration {
        key: t.key.clone().unwrap_or_default(),
        exists: t.operator.as_deref() == Some("Exists"),
        value: t.value.clone().unwrap_or_default(),
        effect: match t.effect.as_deref() {
            Some("NoSchedule") => Some(TaintEffect::NoSchedule),
            Some("PreferNoSchedule") => Some(TaintEffect::PreferNoSchedule),
            Some("NoExecute") => Some(TaintEffect::NoExecute),
            _ => None,
        },
    }
}

fn affinity_term(t: &core::PodAffinityTerm, weight: i32) -> AffinityTerm {
    AffinityTerm {
        selector: Selector::from_k8s(t.label_selector.as_ref()),
        namespaces: t.namespaces.clone().unwrap_or_default(),
        topology_key: t.topology_key.clone(),
        weight,
    }
}

fn spread(c: &core::TopologySpreadConstraint) -> SpreadConstraint {
    SpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        hard: c.when_unsatisfiable == "DoNotSchedule",
        selector: Selector::from_k8s(c.label_selector.as_ref()),
        min_domains: c.min_domains,
        honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
        honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
    }
}

/// Upstream `resources.RequestsForPods` for one pod: the larger of the app containers'
/// sum (plus restartable init "sidecars") and each init container (plus the sidecars
/// started before it), plus the pod overhead; requests default to limits.
pub fn effective_requests(spec: &core::PodSpec) -> Result<Resources, String> {
    fn container(c: &core::Container) -> Result<Resources, String> {
        let res = c.resources.clone().unwrap_or_default();
        let mut merged: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in res.limits.iter().flatten() {
            merged.insert(k.clone(), v.0.clone());
        }
        for (k, v) in res.requests.iter().flatten() {
            merged.insert(k.clone(), v.0.clone());
        }
        let mut r = Resources::default();
        for (k, v) in &merged {
            let milli =
                resources::parse_milli(v).map_err(|e| format!("container {}: {k}: {e}", c.name))?;
            // Kubernetes' pod validation: "must be greater than or equal to 0".
            if milli < 0 {
                return Err(format!(
                    "container {}: {k}: {v:?} is negative; Kubernetes requires requests and limits to be 0 or more",
                    c.name
                ));
            }
            r.add_named(k, milli);
        }
        Ok(r)
    }
    let mut apps = Resources::default();
    for c in &spec.containers {
        apps.add(&container(c)?);
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let r = container(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
            init_max.max(&sidecars);
        } else {
            let mut with_sidecars = sidecars.clone();
            with_sidecars.add(&r);
            init_max.max(&with_sidecars);
        }
    }
    apps.add(&sidecars);
    apps.max(&init_max);
    for (k, v) in spec.overhead.iter().flatten() {
        let milli = resources::parse_milli(&v.0).map_err(|e| format!("overhead {k}: {e}"))?;
        apps.add_named(k, milli);
    }
    apps.pods = 1000;
    Ok(apps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_from_yaml(y: &str) -> core::Pod {
        serde_norway::from_str(y).expect("test pod parses")
    }

    #[test]
    fn requests_follow_init_container_and_limit_rules() {
        let p = pod_from_yaml(
            "metadata: {name: p, namespace: ns}
spec:
  initContainers:
    - {name: init, resources: {requests: {cpu: '2'}}}
    - {name: sidecar, restartPolicy: Always, resources: {requests: {cpu: 100m, memory: 64Mi}}}
  containers:
    - {name: a, resources: {requests: {cpu: 500m}, limits: {memory: 1Gi}}}
    - {name: b, resources: {limits: {cpu: '1', memory: 512Mi}}}
",
        );
        let pod = Pod::from_k8s(&p).unwrap();
        // apps 1.5 cpu + sidecar 0.1 = 1.6 < init 2.0
        assert_eq!(pod.requests.cpu, 2000);
        // apps 1.5Gi + 64Mi sidecar
        assert_eq!(pod.requests.memory, (1536 + 64) * 1024 * 1024 * 1000);
        assert_eq!(pod.requests.pods, 1000);
    }

    #[test]
    fn provisionable_pods_are_unschedulable_unbound_and_not_daemons() {
        let p = pod_from_yaml(
            "metadata:
  name: p
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u, controller: true}]
status:
  conditions: [{type: PodScheduled, status: 'False', reason: Unschedulable}]
",
        );
        let pod = Pod::from_k8s(&p).unwrap();
        assert!(pod.unschedulable);
        assert!(pod.is_daemonset());
        assert!(!pod.is_provisionable());
        let mut plain = pod.clone();
        plain.owner = None;
        assert!(plain.is_provisionable());
    }

    #[test]
    fn bad_quantities_name_the_container() {
        let p = pod_from_yaml(
            "metadata: {name: p}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: lots}}}]\n",
        );
        let err = Pod::from_k8s(&p).unwrap_err();
        assert!(err.contains("container c: cpu"), "{err}");
    }

    /// What was seen: a pending pod's details read `Toleration { key: "workload-class", ... }`.
    #[test]
    fn a_toleration_reads_as_kubectl_writes_it() {
        use crate::api::nodeclaim::TaintEffect;
        let t = Toleration {
            key: "workload-class".into(),
            exists: false,
            value: "batch".into(),
            effect: Some(TaintEffect::NoSchedule),
        };
        assert_eq!(t.to_string(), "workload-class=batch:NoSchedule");
        let exists = Toleration {
            exists: true,
            effect: None,
            ..t.clone()
        };
        assert_eq!(exists.to_string(), "workload-class");
        let all = Toleration {
            key: String::new(),
            exists: true,
            value: String::new(),
            effect: Some(TaintEffect::NoExecute),
        };
        assert_eq!(all.to_string(), "*:NoExecute");
    }

    #[test]
    fn tolerations_follow_core_rules() {
        use crate::api::nodeclaim::{Taint, TaintEffect};
        let taint = Taint {
            key: "gpu".into(),
            value: Some("true".into()),
            effect: TaintEffect::NoSchedule,
            time_added: None,
        };
        let eq = Toleration {
            key: "gpu".into(),
            exists: false,
            value: "true".into(),
            effect: None,
        };
        let wrong = Toleration {
            value: "false".into(),
            ..eq.clone()
        };
        let all = Toleration {
            key: String::new(),
            exists: true,
            value: String::new(),
            effect: None,
        };
        let other_effect = Toleration {
            effect: Some(TaintEffect::NoExecute),
            ..eq.clone()
        };
        assert!(eq.tolerates(&taint));
        assert!(!wrong.tolerates(&taint));
        assert!(all.tolerates(&taint));
        assert!(!other_effect.tolerates(&taint));
    }
}
