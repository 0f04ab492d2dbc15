//! The Helm chart (charts/karpenter-tui), with the real helm: it lints strictly; its
//! crds/ are what `karpenter-tui crds` prints; rendered with its defaults it grants the
//! same RBAC rules as deploy/rbac.yaml (the sync between the Helm and plain-manifest
//! paths) and runs the controller as deploy/controller.yaml does; its values land where
//! a user expects (upstream's settings as upstream's environment variables, service
//! account annotations, scheduling overrides, a ServiceMonitor); values the controller
//! would refuse are refused at render time; and the rendered objects apply to the kube
//! peer with kubectl and read back as rendered.

// Both peer files include their venv helper (tests/peers/venv.rs) as a private module.
#![allow(clippy::duplicate_mod)]

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/packaging_tools.rs"]
mod packaging_tools;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/rbac.rs"]
mod rbac;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

use karpenter_tui::api::crds::crds_yaml;
use karpenter_tui::cluster::kube::SETTINGS;
use karpenter_tui::cluster::kube::lease::DEFAULT_LEASE_NAME;
use kube_peer::KubePeer;
use packaging_tools::{helm, output, stdout_of};
use rbac::{grants, strings};
use serde::Deserialize;
use serde_json::{Value, json};

const RELEASE: &str = "karpenter-tui";
const NAMESPACE: &str = "karpenter-tui";
/// Required with the default `cloud: aws`.
const CLUSTER: &str = "settings.clusterName=test-cluster";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("charts/karpenter-tui")
}

fn yaml_docs(text: &str, what: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{what}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn helm_template(release: &str, namespace: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(helm());
    cmd.args(["template", release])
        .arg(chart())
        .args(["--namespace", namespace])
        .args(extra);
    cmd
}

/// `helm template` of the chart (release karpenter-tui in karpenter-tui), every document.
fn render(extra: &[&str]) -> Vec<Value> {
    render_as(RELEASE, NAMESPACE, extra)
}

fn render_as(release: &str, namespace: &str, extra: &[&str]) -> Vec<Value> {
    let text = stdout_of(&mut helm_template(release, namespace, extra));
    yaml_docs(&text, "helm template output")
}

/// `helm template` that must fail; its error output.
fn render_refused(extra: &[&str]) -> String {
    let out = output(&mut helm_template(RELEASE, NAMESPACE, extra));
    assert!(
        !out.status.success(),
        "helm template {extra:?} rendered:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn deploy_docs(file: &str) -> Vec<Value> {
    let path = root().join("deploy").join(file);
    yaml_docs(
        &fs::read_to_string(&path).unwrap(),
        &path.display().to_string(),
    )
}

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<_> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "{} {kind} rendered", found.len());
    found[0]
}

fn kinds(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .map(|d| d["kind"].as_str().expect("a kind").to_string())
        .collect()
}

fn container(deployment: &Value) -> &Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// The container's literal environment (valueFrom entries as "<fieldPath>").
fn env_of(deployment: &Value) -> BTreeMap<String, String> {
    container(deployment)["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let value = match e["value"].as_str() {
                Some(v) => v.to_string(),
                None => format!(
                    "<{}>",
                    e["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap()
                ),
            };
            (e["name"].as_str().unwrap().to_string(), value)
        })
        .collect()
}

/// `selector` (a label map) picks pods labelled `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a label map");
    !selector.is_empty() && selector.iter().all(|(k, v)| &labels[k] == v)
}

#[test]
fn helm_lint_strict_passes() {
    for values in [CLUSTER, "cloud=sim"] {
        let out = stdout_of(
            Command::new(helm())
                .args(["lint", "--strict"])
                .arg(chart())
                .args(["--set", values]),
        );
        assert!(out.contains("0 chart(s) failed"), "--set {values}:\n{out}");
    }
}

#[test]
fn the_charts_crds_are_what_the_crds_command_prints() {
    let dir = chart().join("crds");
    let files: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["karpenter-tui-crds.yaml"], "crds/ holds one file");
    let ours = fs::read_to_string(dir.join("karpenter-tui-crds.yaml")).unwrap();
    let printed = stdout_of(Command::new(env!("CARGO_BIN_EXE_karpenter-tui")).arg("crds"));
    assert!(
        ours == printed && ours == crds_yaml(),
        "charts/karpenter-tui/crds/karpenter-tui-crds.yaml is stale: regenerate it with \
         `cargo run --release -- crds > charts/karpenter-tui/crds/karpenter-tui-crds.yaml`"
    );
    // `helm template --include-crds` (and helm install) sends all three.
    let docs = render(&["--set", CLUSTER, "--include-crds"]);
    let crds: Vec<_> = docs
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .map(|d| d["spec"]["names"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(crds, ["NodePool", "NodeClaim", "EC2NodeClass"]);
}

#[test]
fn the_default_rbac_is_deploys_rules_bound_to_the_controllers_account() {
    let plain = deploy_docs("rbac.yaml");
    // Another release name and namespace than deploy/'s: names follow the release, but
    // the Lease and ConfigMap the Role names are the binary's fixed ones.
    for (release, namespace) in [(RELEASE, NAMESPACE), ("prod", "ops")] {
        let docs = render_as(release, namespace, &["--set", CLUSTER]);
        for kind in ["ClusterRole", "Role"] {
            let chart = grants(find(&docs, kind));
            let deploy = grants(find(&plain, kind));
            let missing: Vec<_> = deploy.difference(&chart).collect();
            let extra: Vec<_> = chart.difference(&deploy).collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{release}: the chart's {kind} differs from deploy/rbac.yaml's: \
                 lacks {missing:?}, adds {extra:?}"
            );
        }
        let role = grants(find(&docs, "Role"));
        assert!(role.iter().any(|g| g.3 == DEFAULT_LEASE_NAME));
        assert!(role.iter().any(|g| g.1 == "configmaps" && g.3 == SETTINGS));
        let cm = find(&docs, "ConfigMap");
        assert_eq!(cm["metadata"]["name"], SETTINGS, "the pause object's name");
        assert_eq!(cm["metadata"]["namespace"], namespace);
        assert!(
            cm["data"].is_null(),
            "the pause ConfigMap ships without data"
        );

        let sa = find(&docs, "ServiceAccount");
        let account = sa["metadata"]["name"].as_str().unwrap();
        assert_eq!(sa["metadata"]["namespace"], namespace);
        if release == RELEASE {
            assert_eq!(
                account, "karpenter-tui",
                "deploy/'s names for the default release"
            );
        }
        for (binding, role_kind) in [
            ("ClusterRoleBinding", "ClusterRole"),
            ("RoleBinding", "Role"),
        ] {
            let b = find(&docs, binding);
            assert_eq!(b["roleRef"]["kind"], role_kind);
            assert_eq!(
                b["roleRef"]["name"],
                find(&docs, role_kind)["metadata"]["name"]
            );
            assert_eq!(
                b["subjects"],
                json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]),
                "{release}: {binding}"
            );
        }
        let deployment = find(&docs, "Deployment");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["serviceAccountName"],
            account
        );
        assert_eq!(env_of(deployment)["POD_NAMESPACE"], "<metadata.namespace>");
    }
}

#[test]
fn the_default_deployment_runs_as_deploy_controller_yaml_does() {
    let docs = render(&["--set", CLUSTER]);
    assert_eq!(
        kinds(&docs),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
        .map(String::from)
        .into(),
        "no ServiceMonitor by default"
    );
    for d in &docs {
        let cluster_scoped =
            ["ClusterRole", "ClusterRoleBinding"].contains(&d["kind"].as_str().unwrap());
        assert_eq!(
            d["metadata"]["namespace"].is_null(),
            cluster_scoped,
            "{} namespace",
            d["kind"]
        );
    }

    let plain = deploy_docs("controller.yaml");
    let want = find(&plain, "Deployment");
    let got = find(&docs, "Deployment");
    assert_eq!(got["spec"]["replicas"], 2);
    for path in [
        "/spec/replicas",
        "/spec/revisionHistoryLimit",
        "/spec/strategy",
        "/spec/template/spec/securityContext",
        "/spec/template/spec/affinity",
        "/spec/template/spec/priorityClassName",
        "/spec/template/spec/terminationGracePeriodSeconds",
    ] {
        assert_eq!(got.pointer(path), want.pointer(path), "{path}");
    }
    let (c, w) = (container(got), container(want));
    for field in [
        "ports",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "args",
    ] {
        assert_eq!(c[field], w[field], "container {field}");
    }
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(
        strings(&c["securityContext"]["capabilities"]["drop"]),
        ["ALL"]
    );
    assert_eq!(c["image"], "karpenter-tui:0.1.0", "the appVersion tag");

    // The spread constraints are deploy/'s, each selecting this release's pods.
    let labels = &got["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&got["spec"]["selector"]["matchLabels"], labels));
    let spread = got["spec"]["template"]["spec"]["topologySpreadConstraints"]
        .as_array()
        .unwrap();
    let want_spread = want["spec"]["template"]["spec"]["topologySpreadConstraints"]
        .as_array()
        .unwrap();
    assert_eq!(spread.len(), want_spread.len());
    for (g, w) in spread.iter().zip(want_spread) {
        for key in ["maxSkew", "topologyKey", "whenUnsatisfiable"] {
            assert_eq!(g[key], w[key], "spread {key}");
        }
        assert!(selects(&g["labelSelector"]["matchLabels"], labels));
    }

    // Upstream's defaults, as the controller reads them; the gate string is one the
    // binary accepts.
    let env = env_of(got);
    let expected: BTreeMap<String, String> = [
        ("CLUSTER_NAME", "test-cluster"),
        ("ISOLATED_VPC", "false"),
        ("RESERVED_ENIS", "0"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.075"),
        ("BATCH_MAX_DURATION", "10s"),
        ("BATCH_IDLE_DURATION", "1s"),
        ("PREFERENCE_POLICY", "Respect"),
        ("MIN_VALUES_POLICY", "Strict"),
        (
            "FEATURE_GATES",
            "SpotToSpotConsolidation=false,NodeRepair=false,ReservedCapacity=true,NodeOverlay=false,StaticCapacity=false",
        ),
        ("LOG_LEVEL", "info"),
        ("POD_NAME", "<metadata.name>"),
        ("POD_NAMESPACE", "<metadata.namespace>"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into();
    assert_eq!(
        env, expected,
        "empty settings (endpoint, queue) are left out"
    );
    settings_of(&env)
        .unwrap_or_else(|(_, why)| panic!("the binary refuses the chart's defaults: {why}"));

    let pdb = find(&docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));

    let service = find(&docs, "Service");
    assert_eq!(
        service["metadata"]["name"], "karpenter-tui-metrics",
        "deploy/'s name"
    );
    assert!(selects(&service["spec"]["selector"], labels));
    assert_eq!(
        service["spec"]["ports"],
        find(&plain, "Service")["spec"]["ports"]
    );
}

const OVERRIDES: &str = r#"
cloud: aws
logLevel: debug
settings:
  clusterName: prod-east
  clusterEndpoint: https://ABC.gr7.us-east-1.eks.amazonaws.com
  interruptionQueue: prod-east-interruptions
  isolatedVPC: true
  reservedENIs: "1"
  vmMemoryOverheadPercent: 0.1
  batchMaxDuration: 30s
  batchIdleDuration: 500ms
  preferencePolicy: Ignore
  minValuesPolicy: BestEffort
  featureGates:
    spotToSpotConsolidation: true
    nodeRepair: true
    reservedCapacity: false
    nodeOverlay: false
    staticCapacity: true
serviceAccount:
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/karpenter-tui
controller:
  image:
    repository: registry.example.com/karpenter-tui
    tag: "0.2.0"
    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  extraArgs: [--approve, manual]
  env:
    - name: AWS_REGION
      value: us-east-1
  resources:
    requests: {cpu: "1", memory: 1Gi}
    limits: {memory: 2Gi}
imagePullSecrets: [{name: regcred}]
replicas: 3
podAnnotations: {example.com/scrape: "no"}
podLabels: {team: platform}
priorityClassName: ops-critical
nodeSelector: {node-role: system}
tolerations: [{key: dedicated, value: system, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: node-role, operator: In, values: [system]}]
topologySpreadConstraints:
  - maxSkew: 2
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {team: platform}}
podDisruptionBudget: {maxUnavailable: 2}
serviceMonitor:
  enabled: true
  additionalLabels: {release: prometheus}
  endpointConfig: {interval: 15s, scrapeTimeout: 10s}
"#;

fn values_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    fs::write(file.path(), text).unwrap();
    file
}

fn values_arg(file: &tempfile::NamedTempFile) -> String {
    file.path().display().to_string()
}

#[test]
fn values_land_as_settings_env_service_account_annotations_and_scheduling() {
    let file = values_file(OVERRIDES);
    let docs = render(&["-f", &values_arg(&file)]);
    let d = find(&docs, "Deployment");
    let env = env_of(d);
    for (var, value) in [
        ("CLUSTER_NAME", "prod-east"),
        (
            "CLUSTER_ENDPOINT",
            "https://ABC.gr7.us-east-1.eks.amazonaws.com",
        ),
        ("INTERRUPTION_QUEUE", "prod-east-interruptions"),
        ("ISOLATED_VPC", "true"),
        ("RESERVED_ENIS", "1"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.1"),
        ("BATCH_MAX_DURATION", "30s"),
        ("BATCH_IDLE_DURATION", "500ms"),
        ("PREFERENCE_POLICY", "Ignore"),
        ("MIN_VALUES_POLICY", "BestEffort"),
        (
            "FEATURE_GATES",
            "SpotToSpotConsolidation=true,NodeRepair=true,ReservedCapacity=false,NodeOverlay=false,StaticCapacity=true",
        ),
        ("LOG_LEVEL", "debug"),
        ("AWS_REGION", "us-east-1"),
        ("POD_NAMESPACE", "<metadata.namespace>"),
    ] {
        assert_eq!(env.get(var).map(String::as_str), Some(value), "{var}");
    }
    let features = settings_of(&env)
        .unwrap_or_else(|(_, why)| panic!("the binary refuses the rendered settings: {why}"));
    assert!(features.spot_to_spot && features.node_repair);

    let sa = find(&docs, "ServiceAccount");
    assert_eq!(
        sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::111122223333:role/karpenter-tui"
    );

    let c = container(d);
    assert_eq!(
        strings(&c["args"]),
        ["controller", "--cloud", "aws", "--approve", "manual"]
    );
    assert_eq!(
        c["image"],
        "registry.example.com/karpenter-tui:0.2.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    assert_eq!(
        c["resources"],
        json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}})
    );
    assert_eq!(d["spec"]["replicas"], 3);
    let pod = &d["spec"]["template"];
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({"example.com/scrape": "no"})
    );
    assert_eq!(pod["metadata"]["labels"]["team"], "platform");
    let spec = &pod["spec"];
    assert_eq!(spec["priorityClassName"], "ops-critical");
    // Helm merges a values map into the default one: the default linux selector stays
    // unless set to null.
    assert_eq!(
        spec["nodeSelector"],
        json!({"kubernetes.io/os": "linux", "node-role": "system"})
    );
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "regcred"}]));
    assert_eq!(
        spec["tolerations"],
        json!([{"key": "dedicated", "value": "system", "effect": "NoSchedule"}])
    );
    assert_eq!(
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "node-role"
    );
    let spread = spec["topologySpreadConstraints"].as_array().unwrap();
    assert_eq!(spread[0]["maxSkew"], 2);
    assert_eq!(spread[0]["whenUnsatisfiable"], "DoNotSchedule");
    assert!(selects(
        &spread[0]["labelSelector"]["matchLabels"],
        &pod["metadata"]["labels"]
    ));
    assert_eq!(
        spread[1]["labelSelector"],
        json!({"matchLabels": {"team": "platform"}}),
        "a given labelSelector is kept"
    );
    assert_eq!(
        find(&docs, "PodDisruptionBudget")["spec"]["maxUnavailable"],
        2
    );

    // The ServiceMonitor scrapes the metrics Service's port from its labels.
    let monitor = find(&docs, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    let service = find(&docs, "Service");
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &service["metadata"]["labels"]
    ));
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        json!([NAMESPACE])
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "http-metrics");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["interval"], "15s");
    assert!(
        service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "http-metrics"),
        "the Service has no http-metrics port to scrape"
    );

    // `cloud: sim` needs no cluster name, and an empty one is left out.
    let docs = render(&["--set", "cloud=sim", "--set", "serviceAccount.create=false"]);
    let d = find(&docs, "Deployment");
    assert_eq!(
        strings(&container(d)["args"]),
        ["controller", "--cloud", "sim"]
    );
    assert!(!env_of(d).contains_key("CLUSTER_NAME"));
    assert!(!kinds(&docs).contains("ServiceAccount"));
    assert_eq!(
        d["spec"]["template"]["spec"]["serviceAccountName"],
        "default"
    );
}

#[test]
fn values_the_controller_would_refuse_fail_the_render() {
    let why = render_refused(&[]);
    assert!(why.contains("settings.clusterName"), "{why}");
    for (value, field) in [
        (
            "settings.featureGates.capacityBuffer=true",
            "capacityBuffer",
        ),
        ("logLevel=verbose", "logLevel"),
        ("settings.batchMaxDuration=10", "batchMaxDuration"),
        ("settings.batchIdleDuration=1sec", "batchIdleDuration"),
        ("settings.preferencePolicy=respect", "preferencePolicy"),
        ("settings.minValuesPolicy=Lenient", "minValuesPolicy"),
        ("cloud=gcp", "cloud"),
    ] {
        let why = render_refused(&["--set", CLUSTER, "--set", value]);
        assert!(why.contains(field), "--set {value}: {why}");
    }
}

/// A minimal prometheus-operator ServiceMonitor CRD: the peer serves a kind once its
/// CRD is applied (kmock_server.py items 23-24), as a cluster with the operator would.
const SERVICE_MONITOR_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

#[test]
fn the_rendered_chart_applies_to_a_cluster_and_reads_back_as_rendered() {
    let peer = KubePeer::start();
    let file = values_file("serviceMonitor: {enabled: true}\n");
    let rendered = stdout_of(&mut helm_template(
        RELEASE,
        NAMESPACE,
        &["--set", CLUSTER, "-f", &values_arg(&file), "--include-crds"],
    ));
    let docs = yaml_docs(&rendered, "helm template output");

    // helm template renders no Namespace; helm install --create-namespace would. (The
    // peer answers `kubectl create namespace` with an AttributeError; apply works.)
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n");
    peer.kubectl(&["apply", "-f", "-"], &namespace);
    peer.kubectl(&["apply", "-f", "-"], SERVICE_MONITOR_CRD);
    peer.kubectl(&["apply", "-f", "-"], &rendered);

    for (kind, resource) in [
        ("CustomResourceDefinition", "customresourcedefinitions"),
        ("ServiceAccount", "serviceaccounts"),
        ("ClusterRole", "clusterroles.rbac.authorization.k8s.io"),
        (
            "ClusterRoleBinding",
            "clusterrolebindings.rbac.authorization.k8s.io",
        ),
        ("Role", "roles.rbac.authorization.k8s.io"),
        ("RoleBinding", "rolebindings.rbac.authorization.k8s.io"),
        ("ConfigMap", "configmaps"),
        ("Deployment", "deployments.apps"),
        ("PodDisruptionBudget", "poddisruptionbudgets.policy"),
        ("Service", "services"),
        ("ServiceMonitor", "servicemonitors.monitoring.coreos.com"),
    ] {
        let want: BTreeSet<&str> = docs
            .iter()
            .filter(|d| d["kind"] == kind)
            .map(|d| d["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(!want.is_empty(), "nothing of kind {kind} rendered");
        let items = peer.items(&["get", resource, "-A"]);
        let have: BTreeSet<&str> = items
            .iter()
            .map(|d| d["metadata"]["name"].as_str().unwrap())
            .filter(|n| want.contains(n))
            .collect();
        assert_eq!(have, want, "{kind} read back");
    }

    let ns = ["-n", NAMESPACE];
    let deployment = peer.get_json(&["get", "deployment", "karpenter-tui", ns[0], ns[1]]);
    let rendered_deployment = find(&docs, "Deployment");
    for path in [
        "/spec/replicas",
        "/spec/selector",
        "/spec/template/metadata/labels",
        "/spec/template/spec/serviceAccountName",
        "/spec/template/spec/securityContext",
        "/spec/template/spec/topologySpreadConstraints",
        "/spec/template/spec/affinity",
        "/spec/template/spec/containers/0/args",
        "/spec/template/spec/containers/0/env",
        "/spec/template/spec/containers/0/livenessProbe",
        "/spec/template/spec/containers/0/readinessProbe",
    ] {
        assert_eq!(
            deployment.pointer(path),
            rendered_deployment.pointer(path),
            "{path} read back from the cluster"
        );
    }
    assert_eq!(deployment["spec"]["replicas"], 2);

    let role = peer.get_json(&["get", "role", "karpenter-tui", ns[0], ns[1]]);
    assert_eq!(
        grants(&role),
        grants(find(&deploy_docs("rbac.yaml"), "Role"))
    );
    let monitor = peer.get_json(&["get", "servicemonitor", "karpenter-tui", ns[0], ns[1]]);
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "http-metrics");
    let pdb = peer.get_json(&["get", "pdb", "karpenter-tui", ns[0], ns[1]]);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    let crd = peer.get_json(&["get", "crd", "nodepools.karpenter.sh"]);
    assert_eq!(crd["spec"]["names"]["kind"], "NodePool");
}

/// The rendered Deployment's container, run as the kubelet would run it (its args, its
/// environment with the downward API filled in) against the kube peer where the chart
/// was applied: the controller starts with every setting the chart wrote, reads each
/// under upstream's name (its first log line says what they became), elects itself on
/// the Lease and serves /readyz. A setting the binary refused would stop it here, where
/// a real pod would crash-loop.
#[test]
fn the_rendered_controller_starts_with_the_charts_settings() {
    let peer = KubePeer::start();
    let file = values_file(
        "cloud: sim\nlogLevel: debug\nsettings:\n  batchMaxDuration: 20s\n  batchIdleDuration: 2s\n  preferencePolicy: Ignore\n  minValuesPolicy: BestEffort\n  featureGates: {spotToSpotConsolidation: true}\n",
    );
    let rendered = stdout_of(&mut helm_template(
        RELEASE,
        NAMESPACE,
        &["-f", &values_arg(&file), "--include-crds"],
    ));
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n");
    peer.kubectl(&["apply", "-f", "-"], &namespace);
    peer.kubectl(&["apply", "-f", "-"], &rendered);
    let docs = yaml_docs(&rendered, "helm template output");
    let c = container(find(&docs, "Deployment"));
    let mut args: Vec<String> = strings(&c["args"]);
    assert_eq!(args[..3], ["controller", "--cloud", "sim"]);
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    // Outside a pod: the peer's kubeconfig instead of the service account, any free port
    // instead of 8080, short lease timings.
    args.extend(
        [
            "--kubeconfig",
            &kubeconfig,
            "--metrics-addr",
            "127.0.0.1:0",
            "--lease",
            "3,2,0.5",
        ]
        .map(String::from),
    );
    let env: Vec<(String, String)> = env_of(find(&docs, "Deployment"))
        .into_iter()
        .map(|(k, v)| match v.as_str() {
            "<metadata.name>" => (k, "karpenter-tui-7d9f-abcde".into()),
            "<metadata.namespace>" => (k, NAMESPACE.into()),
            _ => (k, v),
        })
        .collect();
    assert!(
        env.iter().any(|(k, v)| k == "LOG_LEVEL" && v == "debug"),
        "{env:?}"
    );
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = proc::Proc::start_with(&arg_refs, &env);
    let addr = proc::endpoints_of(&p);
    let log = p.wait_stderr("the settings line", |s| s.contains("settings: "));
    let line = log.lines().find(|l| l.contains("settings: ")).unwrap();
    for want in [
        "SpotToSpotConsolidation=true",
        "NodeRepair=false",
        "MIN_VALUES_POLICY=BestEffort",
        "PREFERENCE_POLICY=Ignore",
        "BATCH_MAX_DURATION=20s",
        "BATCH_IDLE_DURATION=2s",
    ] {
        assert!(line.contains(want), "{want} in {line}");
    }
    assert!(
        log.contains("DEBUG"),
        "LOG_LEVEL=debug logs at debug:\n{log}"
    );
    // Ready once it listed the cluster, as the readiness probe asks.
    let ready = (0..600).any(|_| {
        let ok = http_get(&addr, "/readyz").starts_with("HTTP/1.1 200");
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        ok
    });
    assert!(ready, "/readyz never answered 200; stderr:\n{}", p.stderr());
    let lease = peer.get_json(&["get", "lease", DEFAULT_LEASE_NAME, "-n", NAMESPACE]);
    assert_eq!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .map(|h| h.is_empty()),
        Some(false)
    );
}

/// The engine settings a container environment gives, through the binary's own parser.
fn settings_of(
    env: &BTreeMap<String, String>,
) -> Result<
    karpenter_tui::engine::features::Features,
    (karpenter_tui::engine::features::Setting, String),
> {
    let get = |k: &str| env.get(k).map_or("", String::as_str);
    karpenter_tui::engine::features::Features::parse(
        &karpenter_tui::engine::features::SettingsText {
            feature_gates: get("FEATURE_GATES"),
            min_values_policy: get("MIN_VALUES_POLICY"),
            preference_policy: get("PREFERENCE_POLICY"),
            batch_max_duration: get("BATCH_MAX_DURATION"),
            batch_idle_duration: get("BATCH_IDLE_DURATION"),
        },
    )
}

/// One GET over a fresh connection; the whole answer.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
