//! Scenario files: a whole cluster story in one multi-document YAML file (see
//! docs/scenarios.md). NodePools and EC2NodeClasses are real Karpenter manifests; workloads
//! are real Kubernetes manifests (apps/v1 Deployment and DaemonSet, batch/v1 Job, v1 Pod,
//! policy/v1 PodDisruptionBudget); one `karpenter-tui.dev/v1alpha1 Scenario` document adds
//! what manifests cannot say: timings, replica schedules, job run times and a timeline of
//! events at offsets. Every problem is reported as `file:line: field.path: message` before
//! anything runs.

mod spec;
pub mod timeline;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, core::v1 as core, policy::v1 as policy,
};
use serde_json::Value;

use super::DaemonSetObject;
use super::sim::SimSettings;
use super::sim::workloads::{Deployment, IntOrPercent, Job, PdbSpec, Replicas};
use crate::api::labels;
use crate::api::manifest::{self, Document};
use crate::api::nodepool::NodePool;
use crate::api::source_lines::SourceLines;
use crate::api::text::escape_controls;
use crate::api::validation;
use crate::engine::pod::Pod;
use crate::engine::selector::Selector;
pub use spec::ScenarioSpec;
pub use timeline::{Action, TimedAction};

/// The most pods one workload, or nodes one static NodePool, may ask for: five times the
/// largest benchmark. A Deployment of 2^31 replicas grew the simulated cluster until the
/// process was killed.
pub const MAX_REPLICAS: i64 = 100_000;
/// The longest run (`spec.duration`, `--until`): a year of virtual time. Longer runs
/// took hours and printed nothing meanwhile.
pub const MAX_RUN: TimeDelta = TimeDelta::days(366);
/// The most documents a scenario file may hold.
pub const MAX_DOCUMENTS: usize = 10_000;

/// The apiVersion of the scenario document.
pub const API_VERSION: &str = "karpenter-tui.dev/v1alpha1";

/// A scenario ready to run.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    /// How long `simulate` runs when `--until` is not given.
    pub duration: TimeDelta,
    /// The virtual time the run starts at (budget schedules and diurnal curves read it).
    pub start: DateTime<Utc>,
    pub settings: SimSettings,
    pub launch_latency: TimeDelta,
    /// Restricts the built-in catalog to these instance types (all when empty).
    pub instance_types: Vec<String>,
    /// Approval policy rules (`auto`, `manual`, `Underutilized=manual`, ...); the
    /// console's default when empty.
    pub approval: Vec<String>,
    /// `spec.featureGates` and `spec.minValuesPolicy`, as the controller's flags.
    pub features: crate::engine::features::Features,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<String>,
    pub deployments: Vec<Deployment>,
    pub jobs: Vec<Job>,
    pub daemonsets: Vec<DaemonSetObject>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<PdbSpec>,
    /// Nodes running at the start (NodeClaim documents: an exported cluster's nodes).
    pub nodes: Vec<RunningNode>,
    pub timeline: Vec<TimedAction>,
}

/// A node that runs when the scenario starts: a NodeClaim document, read for what the
/// cloud launched (its labels, as a cluster's NodeClaims carry them), so a cluster
/// exported by `karpenter-tui export` starts with the nodes it had, not from nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct RunningNode {
    pub name: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: crate::engine::catalog::CapacityType,
}

/// A problem in a scenario file, located like a compiler error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    /// For problems in the text itself (syntax, input limits).
    pub column: Option<usize>,
    pub path: String,
    pub message: String,
}

impl From<manifest::Diagnostic> for ScenarioError {
    fn from(d: manifest::Diagnostic) -> Self {
        ScenarioError {
            file: d.source,
            line: d.line,
            column: d.column,
            path: d.path,
            message: d.message,
        }
    }
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Input text is echoed escaped (see `api::text`).
        write!(f, "{}", escape_controls(&self.file))?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        f.write_str(": ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", escape_controls(&self.path))?;
        }
        f.write_str(&escape_controls(&self.message))
    }
}

/// Collects errors with their lines.
struct Errors<'a> {
    file: &'a str,
    lines: &'a SourceLines,
    list: Vec<ScenarioError>,
}

impl Errors<'_> {
    fn at(&mut self, doc: usize, path: &str, message: impl Into<String>) {
        self.list.push(ScenarioError {
            file: self.file.to_string(),
            line: self.lines.line(doc, path),
            column: None,
            path: path.to_string(),
            message: message.into(),
        });
    }
}

/// The built-in demo (also shipped as examples/demo.yaml).
pub const DEMO: &str = include_str!("../../../examples/demo.yaml");
/// The 1,000-node day, for benchmarks that need a controller with plenty to do.
pub const DIURNAL_1000: &str = include_str!("../../../examples/diurnal-1000.yaml");

/// Reads a scenario. Either everything in it is valid, or every problem found is
/// returned (the run never starts half-configured).
pub fn parse(file: &str, text: &str) -> Result<Scenario, Vec<ScenarioError>> {
    let stream = manifest::read_stream(file, text);
    let mut errors = Errors {
        file,
        lines: &stream.lines,
        list: Vec::new(),
    };
    if !stream.errors.is_empty() {
        // Syntax, input limits and duplicate keys: the run never starts on text that two
        // readers could take two ways.
        errors
            .list
            .extend(stream.errors.iter().cloned().map(ScenarioError::from));
        return Err(errors.list);
    }
    let docs = &stream.documents;
    if docs.len() > MAX_DOCUMENTS {
        errors.list.push(ScenarioError {
            file: file.to_string(),
            line: None,
            column: None,
            path: String::new(),
            message: format!(
                "{} documents: a scenario holds at most {MAX_DOCUMENTS} (use replicas for many pods)",
                docs.len()
            ),
        });
        return Err(errors.list);
    }
    let mut spec: Option<(usize, ScenarioSpec, String)> = None;
    let mut spec_seen = false;
    let mut nodepools = Vec::new();
    let mut nodeclasses = Vec::new();
    let mut deployments: Vec<(usize, apps::Deployment)> = Vec::new();
    let mut jobs: Vec<(usize, batch::Job)> = Vec::new();
    let mut daemonsets = Vec::new();
    let mut pods = Vec::new();
    let mut pdbs = Vec::new();
    let mut nodeclaims = Vec::new();
    for doc in docs {
        let (api_version, kind) = match (
            doc.value.get("apiVersion").and_then(Value::as_str),
            doc.value.get("kind").and_then(Value::as_str),
        ) {
            (Some(a), Some(k)) => (a.to_string(), k.to_string()),
            (None, _) => {
                errors.at(doc.index, "apiVersion", "required field is missing");
                continue;
            }
            (_, None) => {
                errors.at(doc.index, "kind", "required field is missing");
                continue;
            }
        };
        match (api_version.as_str(), kind.as_str()) {
            (API_VERSION, "Scenario") => {
                if spec_seen {
                    errors.at(doc.index, "kind", "a second Scenario document; a file holds one");
                    continue;
                }
                let name = doc
                    .value
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("scenario")
                    .to_string();
                spec_seen = true;
                let body = doc.value.get("spec").cloned().unwrap_or(Value::Null);
                match manifest::typed::<ScenarioSpec>(body) {
                    Ok((s, _)) => spec = Some((doc.index, s, name)),
                    Err((path, msg)) => errors.at(doc.index, &prefixed("spec", &path), msg),
                }
            }
            ("karpenter.sh/v1", _) | ("karpenter.k8s.aws/v1", _) | ("karpenter.sh/v1beta1", _) => {
                match manifest::parse_object(file, doc) {
                    Ok((object, _warnings)) => {
                        for v in validation::validate(&object) {
                            errors.at(doc.index, &v.path, v.message);
                        }
                        match object {
                            manifest::Object::NodePool(np) => nodepools.push((doc.index, *np)),
                            manifest::Object::EC2NodeClass(nc) => {
                                nodeclasses.push(nc.metadata.name.clone().unwrap_or_default())
                            }
                            manifest::Object::NodeClaim(nc) => {
                                nodeclaims.push((doc.index, nc.metadata.clone()))
                            }
                        }
                    }
                    Err(d) => errors.at(doc.index, &d.path, d.message),
                }
            }
            ("apps/v1", "Deployment") => {
                if let Some(d) = typed_doc::<apps::Deployment>(doc, &mut errors) {
                    deployments.push((doc.index, d));
                }
            }
            ("batch/v1", "Job") => {
                if let Some(j) = typed_doc::<batch::Job>(doc, &mut errors) {
                    jobs.push((doc.index, j));
                }
            }
            ("apps/v1", "DaemonSet") => {
                if let Some(d) = typed_doc::<apps::DaemonSet>(doc, &mut errors) {
                    daemonsets.push((doc.index, d));
                }
            }
            ("v1", "Pod") => {
                if let Some(p) = typed_doc::<core::Pod>(doc, &mut errors) {
                    pods.push((doc.index, p));
                }
            }
            ("policy/v1", "PodDisruptionBudget") => {
                if let Some(p) = typed_doc::<policy::PodDisruptionBudget>(doc, &mut errors) {
                    pdbs.push((doc.index, p));
                }
            }
            (a, k) => errors.at(
                doc.index,
                "kind",
                format!(
                    "unsupported object {a} {k}: a scenario holds karpenter.sh/v1 NodePool and NodeClaim, karpenter.k8s.aws/v1 EC2NodeClass, apps/v1 Deployment or DaemonSet, batch/v1 Job, v1 Pod, policy/v1 PodDisruptionBudget and one {API_VERSION} Scenario"
                ),
            ),
        }
    }
    let Some((spec_doc, spec, name)) = spec else {
        if spec_seen {
            // Its own error says what is wrong with it.
            return Err(errors.list);
        }
        errors.list.push(ScenarioError {
            file: file.to_string(),
            line: None,
            column: None,
            path: String::new(),
            message: format!("no {API_VERSION} Scenario document"),
        });
        return Err(errors.list);
    };
    let built = build(
        &mut errors,
        spec_doc,
        spec,
        name,
        Parts {
            nodepools,
            nodeclasses,
            deployments,
            jobs,
            daemonsets,
            pods,
            pdbs,
            nodeclaims,
        },
    );
    if errors.list.is_empty() {
        Ok(built)
    } else {
        Err(errors.list)
    }
}

fn prefixed(prefix: &str, path: &str) -> String {
    if path.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}.{path}")
    }
}

fn typed_doc<T: serde::de::DeserializeOwned>(doc: &Document, errors: &mut Errors) -> Option<T> {
    match manifest::typed::<T>(doc.value.clone()) {
        Ok((t, _)) => Some(t),
        Err((path, msg)) => {
            errors.at(doc.index, &path, msg);
            None
        }
    }
}

struct Parts {
    nodepools: Vec<(usize, NodePool)>,
    nodeclasses: Vec<String>,
    deployments: Vec<(usize, apps::Deployment)>,
    jobs: Vec<(usize, batch::Job)>,
    daemonsets: Vec<(usize, apps::DaemonSet)>,
    pods: Vec<(usize, core::Pod)>,
    pdbs: Vec<(usize, policy::PodDisruptionBudget)>,
    nodeclaims: Vec<(
        usize,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    )>,
}

/// The nodes the NodeClaim documents say run at the start. Each needs the labels a
/// launched NodeClaim carries, naming a NodePool of the scenario and an offering of the
/// built-in catalog (of `spec.cloud.instanceTypes`, when it narrows the catalog).
fn running_nodes(errors: &mut Errors, parts: &Parts, allowed: &[String]) -> Vec<RunningNode> {
    use crate::engine::catalog::CapacityType;
    let catalog = crate::engine::catalog::Catalog::builtin_shared();
    let mut nodes = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (doc, meta) in &parts.nodeclaims {
        let name = meta.name.clone().unwrap_or_default();
        if !names.insert(name.clone()) {
            errors.at(
                *doc,
                "metadata.name",
                format!("a second NodeClaim {name:?}"),
            );
            continue;
        }
        let labels = meta.labels.clone().unwrap_or_default();
        let mut label = |key: &str| {
            let v = labels.get(key).cloned();
            if v.is_none() {
                errors.at(
                    *doc,
                    &format!("metadata.labels.{key}"),
                    "a NodeClaim in a scenario is a node running at the start: it needs the \
                     label its launch gave it",
                );
            }
            v
        };
        let (Some(nodepool), Some(instance_type), Some(zone), Some(ct)) = (
            label(labels::NODEPOOL),
            label(labels::INSTANCE_TYPE),
            label(labels::ZONE),
            label(labels::CAPACITY_TYPE),
        ) else {
            continue;
        };
        if !parts
            .nodepools
            .iter()
            .any(|(_, p)| p.metadata.name.as_deref() == Some(nodepool.as_str()))
        {
            errors.at(
                *doc,
                &format!("metadata.labels.{}", labels::NODEPOOL),
                format!("no NodePool {nodepool:?} in this scenario"),
            );
            continue;
        }
        let capacity_type = match CapacityType::parse(&ct) {
            Some(c @ (CapacityType::OnDemand | CapacityType::Spot)) => c,
            _ => {
                errors.at(
                    *doc,
                    &format!("metadata.labels.{}", labels::CAPACITY_TYPE),
                    format!("{ct:?}: a running node of a scenario is on-demand or spot"),
                );
                continue;
            }
        };
        let offered = catalog.get(&instance_type).is_some_and(|t| {
            t.offerings
                .iter()
                .any(|o| o.zone == zone && o.capacity_type == capacity_type)
        });
        if !offered || (!allowed.is_empty() && !allowed.contains(&instance_type)) {
            errors.at(
                *doc,
                &format!("metadata.labels.{}", labels::INSTANCE_TYPE),
                format!(
                    "no {capacity_type} {instance_type} in {zone} in this scenario's cloud (the \
                     built-in us-east-1 catalog{})",
                    if allowed.is_empty() {
                        ""
                    } else {
                        ", narrowed by spec.cloud.instanceTypes"
                    }
                ),
            );
            continue;
        }
        nodes.push(RunningNode {
            name,
            nodepool,
            instance_type,
            zone,
            capacity_type,
        });
    }
    nodes
}

/// A workload's pod template as the engine's pod, named after its owner.
fn template_pod(
    errors: &mut Errors,
    doc: usize,
    namespace: &str,
    name: &str,
    template: &core::PodTemplateSpec,
) -> Option<Pod> {
    let pod = core::Pod {
        metadata: template.metadata.clone().unwrap_or_default(),
        spec: template.spec.clone(),
        status: None,
    };
    match Pod::from_k8s(&pod) {
        Ok(mut p) => {
            p.key.namespace = namespace.to_string();
            p.key.name = name.to_string();
            Some(p)
        }
        Err(e) => {
            errors.at(doc, "spec.template.spec.containers", e);
            None
        }
    }
}

fn meta_names(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

fn build(
    errors: &mut Errors,
    spec_doc: usize,
    spec: ScenarioSpec,
    name: String,
    parts: Parts,
) -> Scenario {
    let d = |errors: &mut Errors, path: &str, text: &Option<String>, default: TimeDelta| {
        spec::duration(text.as_deref())
            .map(|d| d.unwrap_or(default))
            .unwrap_or_else(|msg| {
                errors.at(spec_doc, path, msg);
                default
            })
    };
    let defaults = SimSettings::default();
    let c = spec.cluster.clone().unwrap_or_default();
    let settings = SimSettings {
        registration_delay: d(
            errors,
            "spec.cluster.registrationDelay",
            &c.registration_delay,
            defaults.registration_delay,
        ),
        ready_delay: d(
            errors,
            "spec.cluster.readyDelay",
            &c.ready_delay,
            defaults.ready_delay,
        ),
        startup_delay: d(
            errors,
            "spec.cluster.startupDelay",
            &c.startup_delay,
            defaults.startup_delay,
        ),
        bind_delay: d(
            errors,
            "spec.cluster.bindDelay",
            &c.bind_delay,
            defaults.bind_delay,
        ),
        watch_latency: d(
            errors,
            "spec.cluster.watchLatency",
            &c.watch_latency,
            defaults.watch_latency,
        ),
        unreachable_eviction: defaults.unreachable_eviction,
        chaos_taint: c.chaos_taint.clone(),
    };
    let cloud = spec.cloud.clone().unwrap_or_default();
    let launch_latency = d(
        errors,
        "spec.cloud.launchLatency",
        &cloud.launch_latency,
        TimeDelta::seconds(5),
    );
    let duration = d(
        errors,
        "spec.duration",
        &spec.duration,
        TimeDelta::minutes(10),
    );
    if let Err(m) = check_run_length(duration) {
        errors.at(spec_doc, "spec.duration", m);
    }
    let start = match spec.start.as_deref() {
        None => spec::default_start(),
        Some(s) => match s.parse::<DateTime<Utc>>() {
            // Kubernetes timestamps are RFC 3339 with four-digit years; far beyond them,
            // adding the run's duration overflowed (a panic, before this check).
            Ok(t) if (1970..=9999).contains(&chrono::Datelike::year(&t)) => t,
            Ok(_) => {
                errors.at(
                    spec_doc,
                    "spec.start",
                    format!(
                        "{s:?} is outside the years 1970 to 9999 that a Kubernetes \
                         (RFC 3339) time can hold"
                    ),
                );
                spec::default_start()
            }
            Err(e) => {
                errors.at(
                    spec_doc,
                    "spec.start",
                    format!("expected an RFC 3339 time such as 2026-01-05T09:00:00Z: {e}"),
                );
                spec::default_start()
            }
        },
    };
    let catalog = crate::engine::catalog::Catalog::builtin_shared();
    for (i, t) in cloud.instance_types.iter().enumerate() {
        if catalog.get(t).is_none() {
            errors.at(
                spec_doc,
                &format!("spec.cloud.instanceTypes[{i}]"),
                format!("unknown instance type {t:?} (not in the built-in us-east-1 catalog)"),
            );
        }
    }
    for (i, rule) in spec.approval.iter().enumerate() {
        if let Err(e) = crate::engine::approval::Rule::parse(rule) {
            errors.at(spec_doc, &format!("spec.approval[{i}]"), e);
        }
    }

    // NodePools must name an EC2NodeClass of the scenario (upstream: a NodePool whose
    // NodeClass is missing never becomes Ready and launches nothing).
    for (doc, np) in &parts.nodepools {
        let r = &np.spec.template.spec.node_class_ref;
        if !parts.nodeclasses.contains(&r.name) {
            errors.at(
                *doc,
                "spec.template.spec.nodeClassRef.name",
                format!("EC2NodeClass {:?} is not defined in this scenario", r.name),
            );
        }
    }

    let nodes = running_nodes(errors, &parts, &cloud.instance_types);

    let mut deployments = Vec::new();
    for (doc, dep) in &parts.deployments {
        let (ns, dname) = meta_names(&dep.metadata);
        let Some(s) = dep.spec.as_ref() else {
            errors.at(*doc, "spec", "required field is missing");
            continue;
        };
        let Some(template) = template_pod(errors, *doc, &ns, &dname, &s.template) else {
            continue;
        };
        let scheduled = [dname.clone(), format!("{ns}/{dname}")]
            .into_iter()
            .find_map(|key| spec.replicas.get_key_value(&key));
        let replicas = match scheduled {
            Some((key, r)) => match r.to_replicas() {
                Ok(r) => {
                    count(
                        errors,
                        spec_doc,
                        &format!("spec.replicas.{key}"),
                        r.most().into(),
                    );
                    r
                }
                Err((p, m)) => {
                    errors.at(spec_doc, &format!("spec.replicas.{key}{p}"), m);
                    Replicas::Fixed(0)
                }
            },
            None => Replicas::Fixed(count(
                errors,
                *doc,
                "spec.replicas",
                s.replicas.unwrap_or(1).into(),
            )),
        };
        deployments.push(Deployment {
            namespace: ns,
            name: dname,
            template,
            replicas,
        });
    }
    for key in spec.replicas.keys() {
        let known = deployments
            .iter()
            .any(|d| &d.name == key || &format!("{}/{}", d.namespace, d.name) == key);
        if !known {
            errors.at(
                spec_doc,
                &format!("spec.replicas.{key}"),
                format!("no Deployment named {key:?} in this scenario"),
            );
        }
    }

    let mut jobs = Vec::new();
    for (doc, job) in &parts.jobs {
        let (ns, jname) = meta_names(&job.metadata);
        let Some(s) = job.spec.as_ref() else {
            errors.at(*doc, "spec", "required field is missing");
            continue;
        };
        let Some(template) = template_pod(errors, *doc, &ns, &jname, &s.template) else {
            continue;
        };
        let run = spec.jobs.get(&jname).cloned().unwrap_or_default();
        let run_for = d(
            errors,
            &format!("spec.jobs.{jname}.runFor"),
            &run.run_for,
            TimeDelta::minutes(5),
        );
        let at = d(
            errors,
            &format!("spec.jobs.{jname}.start"),
            &run.start,
            TimeDelta::zero(),
        );
        jobs.push(Job {
            namespace: ns,
            name: jname,
            template,
            completions: count(
                errors,
                *doc,
                "spec.completions",
                s.completions.unwrap_or(1).into(),
            ),
            parallelism: count(
                errors,
                *doc,
                "spec.parallelism",
                s.parallelism.unwrap_or(1).into(),
            ),
            run_for,
            succeeded: 0,
            start: at,
        });
    }
    for key in spec.jobs.keys() {
        if !jobs.iter().any(|j| &j.name == key) {
            errors.at(
                spec_doc,
                &format!("spec.jobs.{key}"),
                format!("no Job named {key:?} in this scenario"),
            );
        }
    }

    let mut daemonsets = Vec::new();
    for (doc, ds) in &parts.daemonsets {
        let (ns, dname) = meta_names(&ds.metadata);
        let Some(s) = ds.spec.as_ref() else {
            errors.at(*doc, "spec", "required field is missing");
            continue;
        };
        if let Some(template) = template_pod(errors, *doc, &ns, &dname, &s.template) {
            daemonsets.push(DaemonSetObject {
                namespace: ns,
                name: dname,
                template,
            });
        }
    }

    let mut pods = Vec::new();
    for (doc, p) in &parts.pods {
        match Pod::from_k8s(p) {
            Ok(mut pod) => {
                pod.key.namespace = p
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into());
                pods.push(pod);
            }
            Err(e) => errors.at(*doc, "spec.containers", e),
        }
    }

    let mut pdbs = Vec::new();
    for (doc, p) in &parts.pdbs {
        let (ns, pname) = meta_names(&p.metadata);
        let s = p.spec.clone().unwrap_or_default();
        let parse =
            |errors: &mut Errors,
             field: &str,
             v: &Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>| {
                v.as_ref().and_then(|v| {
                    let r = IntOrPercent::parse(v);
                    if r.is_none() {
                        errors.at(
                            *doc,
                            &format!("spec.{field}"),
                            "expected an integer or a percentage such as \"50%\"",
                        );
                    }
                    r
                })
            };
        let min_available = parse(errors, "minAvailable", &s.min_available);
        let max_unavailable = parse(errors, "maxUnavailable", &s.max_unavailable);
        if min_available.is_some() && max_unavailable.is_some() {
            errors.at(
                *doc,
                "spec",
                "minAvailable and maxUnavailable are mutually exclusive",
            );
        }
        pdbs.push(PdbSpec {
            namespace: ns,
            name: pname,
            selector: Selector::from_k8s(s.selector.as_ref()),
            min_available,
            max_unavailable,
        });
    }

    let mut timeline = Vec::new();
    for (i, entry) in spec.timeline.iter().enumerate() {
        let path = format!("spec.timeline[{i}]");
        match entry.resolve(i) {
            Ok(t) => {
                if let Action::Scale { replicas, .. } = &t.action {
                    count(
                        errors,
                        spec_doc,
                        &format!("{path}.scale.replicas"),
                        (*replicas).into(),
                    );
                }
                timeline.push(t);
            }
            Err((p, m)) => errors.at(spec_doc, &prefixed(&path, &p), m),
        }
    }
    for (doc, np) in &parts.nodepools {
        if let Some(n) = np.spec.replicas {
            count(errors, *doc, "spec.replicas", n);
        }
    }
    let pools: Vec<NodePool> = parts.nodepools.iter().map(|(_, p)| p.clone()).collect();
    for t in &timeline {
        t.check(&pools, &deployments, |p, m| {
            errors.at(spec_doc, &format!("spec.timeline[{}]{p}", t.index), m)
        });
    }
    timeline.sort_by_key(|t| (t.at, t.index));
    let features =
        crate::engine::features::Features::parse(&crate::engine::features::SettingsText {
            feature_gates: spec.feature_gates.as_deref().unwrap_or(""),
            min_values_policy: spec.min_values_policy.as_deref().unwrap_or(""),
            preference_policy: spec.preference_policy.as_deref().unwrap_or(""),
            batch_max_duration: spec.batch_max_duration.as_deref().unwrap_or(""),
            batch_idle_duration: spec.batch_idle_duration.as_deref().unwrap_or(""),
        })
        .unwrap_or_else(|(which, why)| {
            let (_, _, field) = which.names();
            errors.at(spec_doc, field, why);
            Default::default()
        });
    let mut features = features;
    if let Some(p) = spec.split_consolidation {
        match crate::engine::features::split_percent(p) {
            Ok(p) => features.split_percent = Some(p),
            Err(why) => errors.at(spec_doc, "spec.splitConsolidation", why),
        }
    }

    Scenario {
        name,
        seed: spec.seed.unwrap_or(1),
        duration,
        start,
        settings,
        launch_latency,
        instance_types: cloud.instance_types.clone(),
        approval: spec.approval.clone(),
        features,
        nodepools: parts.nodepools.into_iter().map(|(_, p)| p).collect(),
        nodeclasses: parts.nodeclasses,
        deployments,
        jobs,
        daemonsets,
        pods,
        pdbs,
        nodes,
        timeline,
    }
}

/// Parses a duration as scenario files and `--until` write it (90s, 10m, 24h).
pub fn spec_duration(text: &str) -> Result<TimeDelta, String> {
    spec::duration(Some(text)).map(|d| d.unwrap_or_default())
}

/// A run's length (`spec.duration`, `--until`) within [`MAX_RUN`].
pub fn check_run_length(d: TimeDelta) -> Result<TimeDelta, String> {
    if d > MAX_RUN {
        return Err(format!(
            "{} is longer than the longest run, {}h (366 days of virtual time)",
            crate::api::duration::format_go(d.to_std().unwrap_or_default()),
            MAX_RUN.num_hours()
        ));
    }
    Ok(d)
}

/// A replica (or completion, or static node) count within 0..=[`MAX_REPLICAS`]; an
/// error at `path` otherwise, and the count clamped so checking can go on.
fn count(errors: &mut Errors, doc: usize, path: &str, n: i64) -> u32 {
    if n < 0 {
        errors.at(
            doc,
            path,
            format!(
                "must be 0 or more (Kubernetes: must be greater than or equal to 0), found {n}"
            ),
        );
        return 0;
    }
    if n > MAX_REPLICAS {
        errors.at(
            doc,
            path,
            format!(
                "{n} is more than a scenario runs: at most {MAX_REPLICAS} per workload or static NodePool (the simulated cluster would grow until memory ran out)"
            ),
        );
        return 0;
    }
    n as u32
}

#[cfg(test)]
mod tests;
