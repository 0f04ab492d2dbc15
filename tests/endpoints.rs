//! The headless controller's HTTP endpoints over a real socket, spoken to in raw HTTP/1.1
//! (no HTTP client library between the test and the server): status codes of the probes
//! as the loop's health changes, /metrics as parseable Prometheus text carrying upstream
//! Karpenter's metric names, and a graceful shutdown that closes the port.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use chrono::TimeDelta;
use karpenter_tui::cluster::scenario;
use karpenter_tui::control::endpoints::{Endpoints, Health};
use karpenter_tui::control::metrics::Metrics;
use karpenter_tui::simulation::{Options, Pace, Simulation};
use tokio::sync::oneshot;

/// Bounds every wait; nothing here asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(20);

struct Reply {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

/// One request on a fresh connection, read to the end (`Connection: close`).
fn request(addr: SocketAddr, method: &str, path: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect to the endpoints");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let raw = String::from_utf8(raw).expect("a UTF-8 response");
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .expect("headers end with CRLF CRLF");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line}");
    let status = parts.next().unwrap().parse().expect("a numeric status");
    let headers: BTreeMap<String, String> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').expect("header: value");
            (k.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    if let Some(len) = headers.get("content-length") {
        assert_eq!(len.parse::<usize>().unwrap(), body.len(), "content-length");
    }
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// Parses Prometheus / OpenMetrics text strictly enough to catch a broken exposition:
/// every line is a HELP/TYPE/UNIT comment, a sample `name{label="value",...} number`, or
/// the final `# EOF`; every sample belongs to a declared family. Returns family name ->
/// type and the samples (name with labels -> value).
fn parse_exposition(text: &str) -> (BTreeMap<String, String>, BTreeMap<String, f64>) {
    let mut types = BTreeMap::new();
    let mut samples = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.last(),
        Some(&"# EOF"),
        "OpenMetrics text ends with # EOF"
    );
    let valid_name = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, arg) = (parts.next(), parts.next(), parts.next());
            let name = name.unwrap_or_else(|| panic!("comment without a name: {line}"));
            assert!(valid_name(name), "bad metric name in {line}");
            match kind {
                Some("TYPE") => {
                    let t = arg.unwrap_or_default();
                    assert!(
                        [
                            "counter",
                            "gauge",
                            "histogram",
                            "summary",
                            "info",
                            "unknown"
                        ]
                        .contains(&t),
                        "unknown type in {line}"
                    );
                    types.insert(name.to_string(), t.to_string());
                }
                Some("HELP") | Some("UNIT") => {}
                _ => panic!("unexpected comment: {line}"),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line}"));
        let name = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels.strip_suffix('}').expect("labels close with }");
                let mut rest = labels;
                while !rest.is_empty() {
                    let (label, after) = rest.split_once("=\"").expect("label=\"value\"");
                    assert!(valid_name(label), "bad label name in {line}");
                    let mut end = None;
                    let mut escaped = false;
                    for (i, c) in after.char_indices() {
                        match (escaped, c) {
                            (true, _) => escaped = false,
                            (false, '\\') => escaped = true,
                            (false, '"') => {
                                end = Some(i);
                                break;
                            }
                            _ => {}
                        }
                    }
                    let end = end.unwrap_or_else(|| panic!("unterminated label in {line}"));
                    rest = after[end + 1..]
                        .strip_prefix(',')
                        .unwrap_or(&after[end + 1..]);
                }
                name
            }
            None => series,
        };
        assert!(valid_name(name), "bad sample name in {line}");
        let family = ["", "_total", "_bucket", "_sum", "_count"]
            .map(|suffix| name.strip_suffix(suffix).unwrap_or(name));
        assert!(
            family.iter().any(|f| types.contains_key(*f)),
            "sample {name} of an undeclared family"
        );
        samples.insert(series.to_string(), value);
    }
    (types, samples)
}

async fn start(
    metrics: Metrics,
    health: Health,
) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let endpoints = Endpoints::bind("127.0.0.1:0".parse().unwrap(), metrics, health)
        .await
        .expect("bind 127.0.0.1:0");
    let addr = endpoints.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(endpoints.serve(async {
        let _ = stopped.await;
    }));
    (addr, stop, task)
}

/// Runs a blocking request off the runtime's threads.
async fn get(addr: SocketAddr, path: &'static str) -> Reply {
    tokio::task::spawn_blocking(move || request(addr, "GET", path))
        .await
        .unwrap()
}

#[tokio::test]
async fn readyz_turns_ready_after_the_initial_sync() {
    let health = Health::new(Duration::from_secs(60));
    let (addr, stop, task) = start(Metrics::new(), health.clone()).await;

    let r = get(addr, "/readyz").await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("sync"), "{}", r.body);
    health.set_ready(true);
    let r = get(addr, "/readyz").await;
    assert_eq!(r.status, 200, "{}", r.body);

    let r = get(addr, "/healthz").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(get(addr, "/nothing-here").await.status, 404);
    let post = tokio::task::spawn_blocking(move || request(addr, "POST", "/metrics"))
        .await
        .unwrap();
    assert_eq!(post.status, 405);

    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn healthz_fails_while_the_loop_is_silent_and_recovers_when_it_beats() {
    let health = Health::new(Duration::from_millis(300));
    let (addr, stop, task) = start(Metrics::new(), health.clone()).await;

    assert_eq!(get(addr, "/healthz").await.status, 200);
    // Silent for longer than the limit: the kubelet would restart it.
    let mut silent = get(addr, "/healthz").await;
    let waited = tokio::time::Instant::now();
    while silent.status == 200 && waited.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(100)).await;
        silent = get(addr, "/healthz").await;
    }
    assert_eq!(silent.status, 500, "{}", silent.body);
    assert!(silent.body.contains("has not run"), "{}", silent.body);
    health.beat();
    assert_eq!(get(addr, "/healthz").await.status, 200);

    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
}

/// The demo scenario run for a while on a virtual clock: a real controller that has
/// provisioned nodes and run disruption passes, whose metrics the endpoint serves.
async fn demo_controller_metrics() -> Metrics {
    let scenario = scenario::parse("demo", scenario::DEMO).expect("the demo parses");
    let mut sim =
        Simulation::new(&scenario, &Options::default(), Pace::Virtual).expect("the demo starts");
    let until = sim.start() + TimeDelta::minutes(10);
    sim.run_until(until, |_| {}).await;
    sim.controller.disruption.metrics.clone()
}

#[tokio::test]
async fn metrics_are_prometheus_text_with_upstream_names() {
    let metrics = demo_controller_metrics().await;
    metrics.set_synced(true);
    metrics.set_leader("karpenter-tui-leader-election", true);
    let (addr, stop, task) = start(metrics.clone(), Health::new(Duration::from_secs(60))).await;

    let r = get(addr, "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers.get("content-type").map(String::as_str),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let (types, samples) = parse_exposition(&r.body);
    for (family, kind) in [
        ("karpenter_nodeclaims_created", "counter"),
        ("karpenter_voluntary_disruption_eligible_nodes", "gauge"),
        ("karpenter_nodepools_allowed_disruptions", "gauge"),
        ("karpenter_cluster_state_node_count", "gauge"),
        ("karpenter_cluster_state_synced", "gauge"),
        ("karpenter_build_info", "gauge"),
        ("leader_election_master_status", "gauge"),
        ("karpenter_tui_pending_decisions", "gauge"),
    ] {
        assert_eq!(
            types.get(family).map(String::as_str),
            Some(kind),
            "{family} in\n{}",
            r.body
        );
    }
    let value = |prefix: &str| -> f64 {
        samples
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v)
            .sum()
    };
    // The demo provisions its first nodes for pending pods within minutes.
    assert!(
        value(r#"karpenter_nodeclaims_created_total{reason="provisioned""#) >= 1.0,
        "{}",
        r.body
    );
    assert!(
        value("karpenter_cluster_state_node_count") >= 1.0,
        "{}",
        r.body
    );
    for reason in ["underutilized", "empty", "drifted"] {
        let series =
            format!(r#"karpenter_voluntary_disruption_eligible_nodes{{reason="{reason}"}}"#);
        assert!(samples.contains_key(&series), "{series} in\n{}", r.body);
    }
    assert!(
        samples
            .keys()
            .any(|s| s.starts_with("karpenter_nodepools_allowed_disruptions{nodepool=")),
        "{}",
        r.body
    );
    assert_eq!(samples.get("karpenter_cluster_state_synced"), Some(&1.0));
    assert!(
        samples
            .keys()
            .any(|s| s.starts_with("karpenter_build_info{version=")),
        "{}",
        r.body
    );

    // The endpoint serves the controller's live values, not a copy taken at startup.
    let leader = r#"leader_election_master_status{name="karpenter-tui-leader-election"}"#;
    assert_eq!(samples.get(leader), Some(&1.0));
    metrics.set_leader("karpenter-tui-leader-election", false);
    metrics.nodeclaim_terminated("default", "spot", "zone-x");
    let (_, samples) = parse_exposition(&get(addr, "/metrics").await.body);
    assert_eq!(samples.get(leader), Some(&0.0));
    assert_eq!(
        samples.get(
            r#"karpenter_nodeclaims_terminated_total{nodepool="default",capacity_type="spot",zone="zone-x"}"#
        ),
        Some(&1.0)
    );

    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_stops_serving_and_closes_the_port() {
    let (addr, stop, task) = start(Metrics::new(), Health::new(Duration::from_secs(60))).await;
    assert_eq!(get(addr, "/healthz").await.status, 200);
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, task)
        .await
        .expect("serve returns after shutdown")
        .unwrap();
    assert!(
        TcpStream::connect(addr).is_err(),
        "the port still accepts connections after shutdown"
    );
}

/// A series' labels, name -> value (values unescaped enough for these names).
fn labels_of(series: &str) -> BTreeMap<String, String> {
    let Some((_, rest)) = series.split_once('{') else {
        return BTreeMap::new();
    };
    let rest = rest.strip_suffix('}').unwrap_or(rest);
    let mut out = BTreeMap::new();
    let mut rest = rest;
    while let Some((k, after)) = rest.split_once("=\"") {
        let end = after.find('"').expect("a closing quote");
        out.insert(k.to_string(), after[..end].to_string());
        rest = after[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&after[end + 1..]);
    }
    out
}

/// The series of one metric (its name exactly, before the labels).
fn series_of<'a>(samples: &'a BTreeMap<String, f64>, name: &str) -> Vec<(&'a String, f64)> {
    samples
        .iter()
        .filter(|(k, _)| k.split('{').next() == Some(name))
        .map(|(k, v)| (k, *v))
        .collect()
}

/// Every family upstream's capacity and performance dashboards (the AWS provider's
/// getting-started guide, v1.14.1) query, with the labels they filter and group on, cased
/// as upstream writes them, and values that match what the controller did: the demo run
/// on a virtual clock with the endpoint serving its metrics.
#[tokio::test]
async fn metrics_cover_upstreams_dashboards_with_upstreams_labels_and_values() {
    let scenario = scenario::parse("demo", scenario::DEMO).expect("the demo parses");
    let mut sim =
        Simulation::new(&scenario, &Options::default(), Pace::Virtual).expect("the demo starts");
    let metrics = sim.controller.disruption.metrics.clone();
    let (addr, stop, task) = start(metrics.clone(), Health::new(Duration::from_secs(60))).await;

    let mut registered = 0usize;
    let mut decisions = 0usize;
    let mut disrupted = 0usize;
    let mut count = |e: &karpenter_tui::control::events::Event| match &e.kind {
        karpenter_tui::control::events::EventKind::NodeRegistered { .. } => registered += 1,
        karpenter_tui::control::events::EventKind::DisruptionExecuted { nodeclaims, .. } => {
            decisions += 1;
            disrupted += nodeclaims.len();
        }
        // A NodeClaim deleted on an interruption notice counts too, with the notice's
        // kind as the reason (the demo's spot interruption), as upstream counts it.
        karpenter_tui::control::events::EventKind::Interrupted { reason, .. }
            if reason == "spot_interrupted" =>
        {
            disrupted += 1;
        }
        _ => {}
    };
    let until = sim.start() + TimeDelta::minutes(30);
    sim.run_until(until, &mut count).await;
    // One more round past the gauges' refresh interval: they show the state of now.
    sim.wait_until(until + TimeDelta::seconds(5)).await;
    for e in sim.step().await {
        count(&e);
    }
    let state = sim.controller.state().clone();

    let r = get(addr, "/metrics").await;
    assert_eq!(r.status, 200);
    let (types, samples) = parse_exposition(&r.body);
    let body = &r.body;
    for (family, kind) in [
        ("karpenter_nodes_allocatable", "gauge"),
        ("karpenter_nodes_total_pod_requests", "gauge"),
        ("karpenter_nodes_total_daemon_requests", "gauge"),
        ("karpenter_nodes_created", "counter"),
        ("karpenter_nodes_terminated", "counter"),
        ("karpenter_nodes_termination_duration_seconds", "summary"),
        ("karpenter_pods_state", "gauge"),
        ("karpenter_pods_startup_duration_seconds", "summary"),
        ("karpenter_nodepools_usage", "gauge"),
        ("karpenter_nodepools_limit", "gauge"),
        ("karpenter_nodeclaims_disrupted", "counter"),
        ("karpenter_voluntary_disruption_decisions", "counter"),
        ("karpenter_voluntary_disruption_eligible_nodes", "gauge"),
        ("controller_runtime_reconcile", "counter"),
        ("controller_runtime_reconcile_time_seconds", "histogram"),
    ] {
        assert_eq!(
            types.get(family).map(String::as_str),
            Some(kind),
            "{family} in\n{body}"
        );
    }
    let has_labels = |name: &str, wanted: &[&str]| {
        let series = series_of(&samples, name);
        assert!(!series.is_empty(), "no {name} series in\n{body}");
        for (s, _) in &series {
            let l = labels_of(s);
            for w in wanted {
                assert!(l.contains_key(*w), "{s} has no label {w}");
            }
        }
        series
    };

    // Per node: one series per resource, labelled as the capacity dashboard filters.
    let node_labels = [
        "node_name",
        "resource_type",
        "arch",
        "capacity_type",
        "instance_type",
        "nodepool",
        "zone",
    ];
    let allocatable = has_labels("karpenter_nodes_allocatable", &node_labels);
    has_labels("karpenter_nodes_total_pod_requests", &node_labels);
    has_labels("karpenter_nodes_total_daemon_requests", &node_labels);
    let registered_nodes: Vec<_> = state.nodes.iter().filter(|n| n.registered).collect();
    let cpu: BTreeMap<String, f64> = allocatable
        .iter()
        .map(|(s, v)| (labels_of(s), *v))
        .filter(|(l, _)| l["resource_type"] == "cpu")
        .map(|(l, v)| (l["node_name"].clone(), v))
        .collect();
    assert_eq!(cpu.len(), registered_nodes.len(), "{body}");
    for n in &registered_nodes {
        assert_eq!(cpu.get(&n.name), Some(&(n.allocatable.cpu as f64 / 1000.0)));
        let pods: Vec<_> = state
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(&n.name) && !p.is_terminal())
            .collect();
        let labels = format!(
            "node_name=\"{}\",phase=\"\",managed=\"true\",nodepool=\"{}\",zone=\"{}\"",
            n.name, n.nodepool, n.zone
        );
        let requested = |name: &str, daemon: bool| -> f64 {
            samples
                .iter()
                .find(|(k, _)| {
                    k.starts_with(&format!("{name}{{{labels}"))
                        && k.ends_with("resource_type=\"pods\"}")
                })
                .map(|(_, v)| *v)
                .unwrap_or_else(|| panic!("no {name} pods series for {}", n.name))
                - if daemon { 0.0 } else { pods.len() as f64 }
        };
        assert_eq!(requested("karpenter_nodes_total_pod_requests", false), 0.0);
        let daemons = pods.iter().filter(|p| p.is_daemonset()).count() as f64;
        assert_eq!(
            requested("karpenter_nodes_total_daemon_requests", true),
            daemons
        );
    }

    // Counters: every Node that registered, every disruption executed.
    let sum = |name: &str| -> f64 { series_of(&samples, name).iter().map(|(_, v)| v).sum() };
    assert!(registered > 0, "the demo registers nodes");
    has_labels("karpenter_nodes_created_total", &["nodepool", "zone"]);
    assert_eq!(sum("karpenter_nodes_created_total"), registered as f64);
    assert!(decisions > 0, "the demo disrupts within 30 minutes");
    for (s, _) in has_labels(
        "karpenter_voluntary_disruption_decisions_total",
        &["decision", "reason", "consolidation_type"],
    ) {
        let l = labels_of(s);
        assert!(
            ["delete", "replace"].contains(&l["decision"].as_str()),
            "{s}"
        );
        assert_eq!(l["reason"], l["reason"].to_lowercase(), "{s}");
    }
    assert_eq!(
        sum("karpenter_voluntary_disruption_decisions_total"),
        decisions as f64
    );
    has_labels(
        "karpenter_nodeclaims_disrupted_total",
        &["nodepool", "reason", "capacity_type"],
    );
    assert_eq!(
        sum("karpenter_nodeclaims_disrupted_total"),
        disrupted as f64
    );
    assert!(
        samples
            .keys()
            .any(|k| k
                .starts_with("karpenter_nodeclaims_disrupted_total{reason=\"spot_interrupted\"")),
        "{body}"
    );
    has_labels("karpenter_nodes_terminated_total", &["nodepool", "zone"]);
    assert!(sum("karpenter_nodes_terminated_total") >= 1.0, "{body}");
    for reason in ["underutilized", "empty", "drifted"] {
        let series =
            format!(r#"karpenter_voluntary_disruption_eligible_nodes{{reason="{reason}"}}"#);
        assert!(samples.contains_key(&series), "{series} in\n{body}");
    }
    // The budget's reason as the API spells it (the issue: these were lower case).
    for reason in ["Underutilized", "Empty", "Drifted"] {
        let series = format!(
            r#"karpenter_nodepools_allowed_disruptions{{nodepool="general",reason="{reason}"}}"#
        );
        assert!(samples.contains_key(&series), "{series} in\n{body}");
    }

    // Summaries: the quantiles the performance dashboard reads.
    for (name, labels) in [
        (
            "karpenter_nodes_termination_duration_seconds",
            "nodepool=\"",
        ),
        ("karpenter_pods_startup_duration_seconds", ""),
    ] {
        for q in ["0", "0.5", "0.9", "0.99", "1"] {
            assert!(
                samples
                    .keys()
                    .any(|k| k.starts_with(&format!("{name}{{{labels}"))
                        && k.contains(&format!("quantile=\"{q}\""))),
                "{name} quantile {q} in\n{body}"
            );
        }
        assert!(
            sum(&format!("{name}_count")) >= 1.0,
            "{name}_count in\n{body}"
        );
        assert!(sum(&format!("{name}_sum")) > 0.0, "{name}_sum in\n{body}");
    }

    // Pods: one series each, with the labels the dashboard groups by.
    let pods = has_labels(
        "karpenter_pods_state",
        &[
            "name",
            "namespace",
            "node",
            "nodepool",
            "zone",
            "arch",
            "capacity_type",
            "instance_type",
            "phase",
        ],
    );
    assert_eq!(pods.len(), state.pods.len());
    assert!(
        pods.iter().any(|(s, _)| labels_of(s)["phase"] == "Running"),
        "phases as upstream spells them"
    );

    // Pools: usage counts the nodes; the demo's general pool limits cpu to 64.
    has_labels("karpenter_nodepools_usage", &["nodepool", "resource_type"]);
    assert_eq!(
        samples.get(r#"karpenter_nodepools_limit{resource_type="cpu",nodepool="general"}"#),
        Some(&64.0),
        "{body}"
    );
    for pool in state.nodepools.keys() {
        let nodes = state.nodes.iter().filter(|n| &n.nodepool == pool).count();
        assert_eq!(
            samples.get(&format!(
                r#"karpenter_nodepools_usage{{resource_type="nodes",nodepool="{pool}"}}"#
            )),
            Some(&(nodes as f64)),
            "{body}"
        );
    }

    // Reconciles per controller, with upstream's controller names.
    has_labels(
        "controller_runtime_reconcile_total",
        &["controller", "result"],
    );
    for controller in [
        "provisioner",
        "disruption",
        "nodeclaim.lifecycle",
        "node.termination",
    ] {
        let timed = series_of(&samples, "controller_runtime_reconcile_time_seconds_bucket");
        assert!(
            timed.iter().any(
                |(s, _)| labels_of(s).get("controller").map(String::as_str) == Some(controller)
            ),
            "{controller} in\n{body}"
        );
        assert!(
            samples
                .get(&format!(
                    r#"controller_runtime_reconcile_total{{controller="{controller}",result="success"}}"#
                ))
                .is_some_and(|v| *v >= 1.0),
            "{controller} in\n{body}"
        );
    }

    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
}
