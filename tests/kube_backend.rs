//! `cluster::kube` against a real HTTP Kubernetes API (the kmock peer, with fault
//! injection): watches that survive drops and 410 Gone without losing or duplicating
//! state, writes that re-read on 409 and back off on 429, the eviction API's PDB answer,
//! and malformed objects reported by name and field instead of stopping the watch.

#[path = "peers/kube_peer.rs"]
mod kube_peer;

use std::time::{Duration, Instant};

use karpenter_tui::api::nodeclaim::{Taint, TaintEffect};
use karpenter_tui::cloud::prices::PriceBook;
use karpenter_tui::cluster::kube::writes::Writer;
use karpenter_tui::cluster::kube::{Connection, KubeCluster};
use karpenter_tui::cluster::{Change, Cluster, ClusterError, Object, ObjectRef};
use karpenter_tui::engine::pod::PodKey;
use kube_peer::KubePeer;

const PATIENCE: Duration = Duration::from_secs(30);

async fn connect(peer: &KubePeer) -> Connection {
    Connection {
        client: peer.client_without_retries().await,
        user: "peer".into(),
        context: "peer".into(),
        namespace: "default".into(),
        server: format!("http://127.0.0.1:{}", peer.port()),
        ca_bundle: None,
    }
}

fn no_prices() -> PriceBook {
    std::sync::Arc::new(|_: &str, _: &str, _| None)
}

/// Every change until `done` holds for the accumulated list (or PATIENCE runs out).
async fn collect(
    cluster: &mut KubeCluster,
    seen: &mut Vec<Change>,
    done: impl Fn(&[Change]) -> bool,
) {
    let start = Instant::now();
    loop {
        seen.extend(cluster.changes());
        if done(seen) {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "waited for changes; saw {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn pod_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: {{app: web}}}}\n\
         spec: {{containers: [{{name: main, image: nginx}}]}}\n"
    )
}

fn applied_pods(changes: &[Change], name: &str) -> usize {
    changes
        .iter()
        .filter(|c| matches!(c, Change::Applied(Object::Pod(p)) if p.key.name == name))
        .count()
}

fn deleted_pods(changes: &[Change], name: &str) -> usize {
    changes
        .iter()
        .filter(|c| matches!(c, Change::Deleted(ObjectRef::Pod(k)) if k.name == name))
        .count()
}

#[tokio::test]
async fn watches_resume_after_drops_and_relist_after_410_without_losing_anything() {
    let peer = KubePeer::start();
    peer.kubectl(&["create", "-f", "-"], &pod_yaml("p1"));
    let conn = connect(&peer).await;
    let mut cluster = KubeCluster::start(&conn, no_prices(), "test");
    let mut seen = Vec::new();
    collect(&mut cluster, &mut seen, |s| applied_pods(s, "p1") == 1).await;
    let start = Instant::now();
    while !cluster.synced() {
        assert!(start.elapsed() < PATIENCE, "never synced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A lost watch: every connection closed. The watcher resumes from its last version,
    // so p2 arrives once and p1 is not replayed.
    assert!(peer.drop_watches() > 0);
    peer.kubectl(&["create", "-f", "-"], &pod_yaml("p2"));
    seen.clear();
    collect(&mut cluster, &mut seen, |s| applied_pods(s, "p2") >= 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    seen.extend(cluster.changes());
    assert_eq!(applied_pods(&seen, "p2"), 1, "{seen:#?}");
    assert_eq!(applied_pods(&seen, "p1"), 0, "no replay: {seen:#?}");

    // History compacted, then p1 deleted while the watch is down: the resume gets 410
    // Gone, the watcher relists, and the deletion it never saw is reported once.
    peer.compact();
    peer.drop_watches();
    peer.kubectl(&["delete", "pod", "p1", "-n", "default"], "");
    seen.clear();
    collect(&mut cluster, &mut seen, |s| deleted_pods(s, "p1") >= 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    seen.extend(cluster.changes());
    assert_eq!(deleted_pods(&seen, "p1"), 1, "{seen:#?}");
    assert_eq!(deleted_pods(&seen, "p2"), 0, "{seen:#?}");
}

#[tokio::test]
async fn malformed_objects_are_reported_by_name_and_field_and_the_rest_still_arrive() {
    let peer = KubePeer::start();
    let bad = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: broken}\n\
               spec: {weight: heavy, template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}}}\n";
    let good = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: good}\n\
                spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}}}\n";
    peer.kubectl(&["create", "-f", "-"], bad);
    peer.kubectl(&["create", "-f", "-"], good);
    let conn = connect(&peer).await;
    let mut cluster = KubeCluster::start(&conn, no_prices(), "test");
    let mut seen = Vec::new();
    collect(&mut cluster, &mut seen, |s| {
        s.iter().any(|c| matches!(c, Change::Problem(_)))
            && s.iter().any(|c| matches!(c, Change::Applied(Object::NodePool(p)) if p.metadata.name.as_deref() == Some("good")))
    })
    .await;
    let problem = seen
        .iter()
        .find_map(|c| match c {
            Change::Problem(m) => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        problem.contains("NodePool") && problem.contains("broken"),
        "{problem}"
    );
    assert!(problem.contains("weight"), "names the field: {problem}");
    // The broken pool stays visible, marked ValidationSucceeded=False with the problem.
    collect(&mut cluster, &mut seen, |s| {
        s.iter().any(|c| matches!(c, Change::Applied(Object::NodePool(p)) if p.metadata.name.as_deref() == Some("broken")))
    })
    .await;
    let broken = seen
        .iter()
        .find_map(|c| match c {
            Change::Applied(Object::NodePool(p))
                if p.metadata.name.as_deref() == Some("broken") =>
            {
                Some(p.clone())
            }
            _ => None,
        })
        .unwrap();
    let why = broken.validation_failure().expect("marked invalid");
    assert!(why.contains("spec.weight"), "{why}");
    // Later objects of the same kind still arrive.
    peer.kubectl(
        &["create", "-f", "-"],
        &good.replace("name: good", "name: later"),
    );
    collect(&mut cluster, &mut seen, |s| {
        s.iter().any(|c| matches!(c, Change::Applied(Object::NodePool(p)) if p.metadata.name.as_deref() == Some("later")))
    })
    .await;
}

fn node_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nspec: {{providerID: 'kwok:///z/{name}'}}\n"
    )
}

fn taint() -> Taint {
    Taint {
        key: "karpenter.sh/disrupted".into(),
        value: None,
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }
}

#[tokio::test]
async fn writes_reread_on_conflict_and_back_off_on_throttling() {
    let peer = KubePeer::start();
    peer.kubectl(&["create", "-f", "-"], &node_yaml("n1"));
    let conn = connect(&peer).await;
    let w = Writer {
        client: conn.client.clone(),
        namespace: "default".into(),
    };

    // 409 on the first PATCH: the write reads the node again and succeeds.
    peer.clear_requests();
    peer.inject("PATCH", "/nodes/n1", 409, 1);
    w.taint("n1", &taint(), true)
        .await
        .expect("taint after a conflict");
    let node: serde_json::Value =
        serde_json::from_str(&peer.kubectl(&["get", "node", "n1", "-o", "json"], "")).unwrap();
    assert_eq!(node["spec"]["taints"][0]["key"], "karpenter.sh/disrupted");
    let patches = peer
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("/nodes/n1"))
        .count();
    assert_eq!(patches, 2, "one conflict, one success");

    // 429 twice: backs off and gets through; the taint is not added twice.
    peer.inject("PATCH", "/nodes/n1", 429, 2);
    w.taint("n1", &taint(), false)
        .await
        .expect("untaint after throttling");
    w.taint("n1", &taint(), true).await.expect("taint again");
    assert_eq!(peer.faults_served(), 3);
    let node: serde_json::Value =
        serde_json::from_str(&peer.kubectl(&["get", "node", "n1", "-o", "json"], "")).unwrap();
    assert_eq!(
        node["spec"]["taints"].as_array().map(Vec::len),
        Some(1),
        "{node}"
    );

    // A server that keeps failing: the error comes back, naming the object.
    peer.inject("PATCH", "/nodes/n1", 503, 100);
    let err = w.taint("n1", &taint(), false).await.unwrap_err();
    assert!(err.to_string().contains("Node n1"), "{err}");
}

#[tokio::test]
async fn eviction_is_refused_by_a_pdb_at_zero_and_allowed_otherwise() {
    let peer = KubePeer::start();
    peer.kubectl(&["create", "-f", "-"], &pod_yaml("web-1"));
    peer.kubectl(
        &["create", "-f", "-"],
        &pod_yaml("web-2").replace("app: web", "app: api"),
    );
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: default}\n\
               spec: {maxUnavailable: 0, selector: {matchLabels: {app: web}}}\n\
               status: {disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}\n";
    peer.kubectl(&["create", "-f", "-"], pdb);
    let conn = connect(&peer).await;
    // Ready pods: the eviction API lets unready ones go without consulting the budget.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(conn.client.clone(), "default");
    for name in ["web-1", "web-2"] {
        let status = serde_json::json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        pods.patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(status),
        )
        .await
        .expect("the pod's status");
    }
    let w = Writer {
        client: conn.client.clone(),
        namespace: "default".into(),
    };
    let key = |n: &str| PodKey {
        namespace: "default".into(),
        name: n.into(),
    };
    match w.evict(&key("web-1")).await {
        Err(ClusterError::DisruptionBudget { pdb, .. }) => assert_eq!(pdb, "web"),
        other => panic!("expected the PDB's refusal, got {other:?}"),
    }
    w.evict(&key("web-2")).await.expect("no PDB covers web-2");
    let pods = peer.kubectl(&["get", "pods", "-n", "default", "-o", "name"], "");
    assert!(pods.contains("web-1") && !pods.contains("web-2"), "{pods}");
}
