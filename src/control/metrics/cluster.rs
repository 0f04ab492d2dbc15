//! The gauges upstream derives from its cluster state, computed at scrape time from the
//! last [`ClusterState`] the controller handed over (upstream refreshes them every 5 to 30
//! seconds from its own state, so a scrape sees a picture at most that old too):
//!
//! - `karpenter_nodes_allocatable`, `karpenter_nodes_total_pod_requests` (DaemonSet pods
//!   included) and `karpenter_nodes_total_daemon_requests`, per registered node and
//!   `resource_type`, labelled with the node's name, `phase`, `managed` and the well-known
//!   labels as snake case (`nodepool`, `zone`, `region`, `instance_type`, `arch`, `os`,
//!   `capacity_type`, `windows_build`): upstream `pkg/controllers/metrics/node`;
//! - `karpenter_pods_state` per pod, labelled with its node's well-known labels:
//!   `pkg/controllers/metrics/pod`;
//! - `karpenter_nodepools_usage` (what `status.resources` counts: the nodes' capacity and
//!   their number) and `karpenter_nodepools_limit` (`spec.limits`):
//!   `pkg/controllers/metrics/nodepool`.
//!
//! CPU is reported in cores, everything else in units (bytes, pods), as upstream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::api::labels;
use crate::engine::pod::{Phase, Pod};
use crate::engine::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources, parse_milli};
use crate::engine::state::{ClusterState, StateNode};

/// The well-known node labels upstream turns into metric labels (`v1.WellKnownLabels`,
/// each name after its `/`, snake case).
const WELL_KNOWN: [(&str, &str); 8] = [
    (labels::NODEPOOL, "nodepool"),
    (labels::ZONE, "zone"),
    (labels::REGION, "region"),
    (labels::INSTANCE_TYPE, "instance_type"),
    (labels::ARCH, "arch"),
    (labels::OS, "os"),
    (labels::CAPACITY_TYPE, "capacity_type"),
    ("node.kubernetes.io/windows-build", "windows_build"),
];

/// The state the gauges are computed from; the controller replaces it.
#[derive(Clone, Debug, Default)]
pub struct StateView {
    state: Arc<Mutex<Option<Arc<ClusterState>>>>,
}

impl StateView {
    pub fn set(&self, state: Arc<ClusterState>) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(state);
    }

    fn get(&self) -> Option<Arc<ClusterState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

type Labels = Vec<(String, String)>;

/// Upstream's `resource_type` spelling: lower case, `-` as `_`.
fn resource_type(name: &str) -> String {
    name.to_ascii_lowercase().replace('-', "_")
}

/// (resource_type, value in cores or units) for every resource of a list: the four
/// every node has, then the extended ones.
fn resources(r: &Resources) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = [CPU, MEMORY, PODS, EPHEMERAL_STORAGE]
        .into_iter()
        .map(|n| (resource_type(n), r.get(n) as f64 / 1000.0))
        .collect();
    out.extend(
        r.extended
            .iter()
            .map(|(n, v)| (resource_type(n), *v as f64 / 1000.0)),
    );
    out
}

fn node_labels(n: &StateNode) -> Labels {
    let mut l: Labels = vec![
        ("node_name".into(), n.name.clone()),
        // Node.status.phase: the kubelet no longer sets it, so upstream reports "".
        ("phase".into(), String::new()),
        ("managed".into(), "true".into()),
    ];
    for (key, label) in WELL_KNOWN {
        l.push((label.into(), n.labels.get(key).cloned().unwrap_or_default()));
    }
    l
}

/// Requests of pods, with `pods` counting them (upstream's pod requests count each pod).
fn requests<'a>(pods: impl Iterator<Item = &'a Pod>) -> Resources {
    let mut total = Resources::default();
    let mut count = 0;
    for p in pods {
        total.add(&p.requests);
        count += 1;
    }
    total.pods = count * 1000;
    total
}

fn phase(p: Phase) -> &'static str {
    match p {
        Phase::Pending => "Pending",
        Phase::Running => "Running",
        Phase::Succeeded => "Succeeded",
        Phase::Failed => "Failed",
        Phase::Unknown => "Unknown",
    }
}

/// The owner's path as upstream writes it (`/apis/<version>/namespaces/<ns>/<kind>s/<name>`).
fn owner(p: &Pod) -> String {
    let Some(o) = &p.owner else {
        return String::new();
    };
    let version = match o.kind.as_str() {
        "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Deployment" => "apps/v1",
        "Job" => "batch/v1",
        _ => "v1",
    };
    format!(
        "/apis/{version}/namespaces/{}/{}s/{}",
        p.key.namespace,
        o.kind.to_ascii_lowercase(),
        o.name
    )
}

fn pod_labels(p: &Pod, node: Option<&StateNode>) -> Labels {
    let label = |key: &str| {
        node.and_then(|n| n.labels.get(key))
            .cloned()
            .unwrap_or_default()
    };
    let nodepool = label(labels::NODEPOOL);
    vec![
        ("name".into(), p.key.name.clone()),
        ("namespace".into(), p.key.namespace.clone()),
        ("owner".into(), owner(p)),
        ("node".into(), p.node_name.clone().unwrap_or_default()),
        ("scheduled".into(), p.node_name.is_some().to_string()),
        ("nodepool".into(), nodepool.clone()),
        ("zone".into(), label(labels::ZONE)),
        ("arch".into(), label(labels::ARCH)),
        ("capacity_type".into(), label(labels::CAPACITY_TYPE)),
        ("instance_type".into(), label(labels::INSTANCE_TYPE)),
        ("phase".into(), phase(p.phase).into()),
        // The controller does not read the Ready condition: a running pod counts as
        // ready.
        ("ready".into(), (p.phase == Phase::Running).to_string()),
        ("managed".into(), (!nodepool.is_empty()).to_string()),
    ]
}

/// One gauge family with float values.
fn family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, f64)],
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        let gauge = ConstGauge::new(*value);
        gauge.encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

/// The scrape-time gauges.
#[derive(Debug)]
pub struct ClusterGauges {
    pub view: StateView,
}

impl Collector for ClusterGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let state = self.view.get().unwrap_or_default();
        let pods_by_node = state.pods_by_node();
        let (mut allocatable, mut pod_requests, mut daemon_requests) =
            (Vec::new(), Vec::new(), Vec::new());
        for (i, n) in state.nodes.iter().enumerate() {
            if !n.registered {
                continue;
            }
            let base = node_labels(n);
            let with = |rt: String| {
                let mut l = base.clone();
                l.push(("resource_type".into(), rt));
                l
            };
            let on_node = || {
                pods_by_node[i]
                    .iter()
                    .map(|&p| &state.pods[p])
                    .filter(|p| !p.is_terminal())
            };
            for (rt, v) in resources(&n.allocatable) {
                allocatable.push((with(rt), v));
            }
            for (rt, v) in resources(&requests(on_node())) {
                pod_requests.push((with(rt), v));
            }
            for (rt, v) in resources(&requests(on_node().filter(|p| p.is_daemonset()))) {
                daemon_requests.push((with(rt), v));
            }
        }
        family(
            &mut encoder,
            "karpenter_nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes",
            &allocatable,
        )?;
        family(
            &mut encoder,
            "karpenter_nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods",
            &pod_requests,
        )?;
        family(
            &mut encoder,
            "karpenter_nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes",
            &daemon_requests,
        )?;

        let by_name: HashMap<&str, &StateNode> =
            state.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let pods: Vec<(Labels, f64)> = state
            .pods
            .iter()
            .map(|p| {
                let node = p.node_name.as_deref().and_then(|n| by_name.get(n).copied());
                (pod_labels(p, node), 1.0)
            })
            .collect();
        family(
            &mut encoder,
            "karpenter_pods_state",
            "Pod state is the current state of pods, labeled by the pod name, namespace, owner, node, nodepool, zone, architecture, capacity type, instance type, phase and readiness",
            &pods,
        )?;

        let (mut usage, mut limit) = (Vec::new(), Vec::new());
        for (name, pool) in &state.nodepools {
            let labels = |rt: String| -> Labels {
                vec![
                    ("resource_type".into(), rt),
                    ("nodepool".into(), name.clone()),
                ]
            };
            let used = state.pool_usage(name);
            for (rt, v) in resources(&used) {
                usage.push((labels(rt), v));
            }
            for (resource, q) in &pool.spec.limits {
                // A limit that is not a quantity is reported by validation, not here.
                if let Ok(milli) = parse_milli(&q.0) {
                    limit.push((labels(resource_type(resource)), milli as f64 / 1000.0));
                }
            }
        }
        family(
            &mut encoder,
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool, labeled by nodepool and resource type",
            &usage,
        )?;
        family(
            &mut encoder,
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned, labeled by nodepool and resource type",
            &limit,
        )
    }
}
