//! What `kubectl` shows of a cluster this controller runs, read as upstream Karpenter
//! v1.14 writes it (the kmock peer on 127.0.0.1 with its kube-scheduler and kubelet
//! stand-ins). Seen before: NodeClaims stayed `Launched=True` with Registered,
//! Initialized and Ready `Unknown`, no `status.nodeName` and no `status.capacity`; the
//! NodePool's `.status` was null; the Node got no `karpenter.sh/registered` or
//! `initialized` label, no finalizer and no owner reference.
//!
//! `KARPENTER_TUI_BIN=/path/to/other/build cargo test --test status_live` runs the same
//! case against another build.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/wait.rs"]
mod wait;

use std::process::Command;
use std::time::Duration;

use kube_peer::KubePeer;
use objects::{nodepool, pending_pod};
use proc::controller;
use serde_json::Value;

/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(90);

fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, PATIENCE, probe)
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn is_true(obj: &Value, type_: &str) -> bool {
    condition(obj, type_).is_some_and(|c| c["status"] == "True")
}

/// The printer columns our CRD declares for `kind`, as kubectl custom-columns: kubectl's
/// own JSONPath then reads the object the way `kubectl get` prints it.
fn printer_columns(kind: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .arg("crds")
        .output()
        .expect("run crds");
    let text = String::from_utf8(out.stdout).unwrap();
    let crd = text
        .split("\n---")
        .map(|d| serde_norway::from_str::<Value>(d).unwrap_or(Value::Null))
        .find(|d| d["spec"]["names"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"));
    crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c["name"].as_str().unwrap().to_uppercase(),
                c["jsonPath"].as_str().unwrap()
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `kubectl get <what> <name>` through the CRD's printer columns: column -> value.
fn columns(peer: &KubePeer, what: &str, name: &str, kind: &str) -> Vec<(String, String)> {
    let spec = format!("custom-columns={}", printer_columns(kind));
    let out = peer.kubectl(&["get", what, name, "-o", &spec], "");
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let row: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    header
        .iter()
        .zip(row)
        .map(|(h, v)| (h.to_string(), v.to_string()))
        .collect()
}

fn column(cols: &[(String, String)], name: &str) -> String {
    cols.iter()
        .find(|(h, _)| h == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no column {name} in {cols:?}"))
}

#[test]
fn registration_and_status_read_as_upstream_writes_them() {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.start_scheduler(0.5, 1.0);
    peer.start_kubelet(1.0);
    peer.kubectl(
        &["apply", "-f", "-"],
        &nodepool(
            "m5.large",
            "    consolidationPolicy: WhenEmpty\n    consolidateAfter: 1h",
        ),
    );
    let mut run = controller(&kubeconfig, &[]);
    peer.kubectl(
        &["create", "-f", "-"],
        &pending_pod("web-1", "500m", "512Mi"),
    );

    let claim = eventually("a NodeClaim Ready with its Node", || {
        peer.items(&["get", "nodeclaims"])
            .into_iter()
            .find(|c| is_true(c, "Ready") && c["status"]["nodeName"].is_string())
    });
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    let node_name = claim["status"]["nodeName"].as_str().unwrap().to_string();
    for c in ["Launched", "Registered", "Initialized", "Ready"] {
        let cond = condition(&claim, c).unwrap_or_else(|| panic!("no {c} in {claim}"));
        assert_eq!(cond["status"], "True", "{c}: {cond}");
        assert_eq!(cond["reason"], c, "{c}: {cond}");
        assert!(cond["lastTransitionTime"].is_string(), "{cond}");
    }
    assert!(
        condition(&claim, "Drifted").is_none(),
        "not drifted, so no Drifted condition: {claim}"
    );
    assert_eq!(claim["status"]["capacity"]["cpu"], "2", "{claim}");
    assert!(
        claim["status"]["allocatable"]["memory"].is_string(),
        "{claim}"
    );

    let cols = columns(&peer, "nodeclaims", &name, "NodeClaim");
    assert_eq!(column(&cols, "NODE"), node_name);
    assert_eq!(column(&cols, "READY"), "True");
    assert_eq!(column(&cols, "TYPE"), "m5.large");

    let node = peer.get_json(&["get", "node", &node_name]);
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["karpenter.sh/registered"], "true", "{node}");
    assert_eq!(labels["karpenter.sh/initialized"], "true", "{node}");
    assert_eq!(labels["karpenter.sh/nodepool"], "default", "{node}");
    assert!(
        node["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "karpenter.sh/termination")),
        "{node}"
    );
    let owner = &node["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "NodeClaim", "{node}");
    assert_eq!(owner["name"], name.as_str(), "{node}");
    assert_eq!(owner["uid"], claim["metadata"]["uid"], "{node}");
    let taints: Vec<&str> = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["key"].as_str())
        .collect();
    assert!(!taints.contains(&"karpenter.sh/unregistered"), "{taints:?}");

    // The pod landed there once the Node was registered.
    let pod = eventually("the pod bound", || {
        let p = peer.get_json(&["get", "pod", "web-1"]);
        p["spec"]["nodeName"].is_string().then_some(p)
    });
    assert_eq!(pod["spec"]["nodeName"], node_name.as_str());

    // The NodePool counts it.
    let pool = eventually("the NodePool's status", || {
        let p = peer.get_json(&["get", "nodepool", "default"]);
        (p["status"]["nodes"] == 1 && is_true(&p, "Ready")).then_some(p)
    });
    assert_eq!(pool["status"]["resources"]["nodes"], "1", "{pool}");
    assert_eq!(pool["status"]["resources"]["cpu"], "2", "{pool}");
    for c in ["ValidationSucceeded", "NodeClassReady", "Ready"] {
        assert!(is_true(&pool, c), "{c}: {pool}");
    }
    let cols = columns(&peer, "nodepools", "default", "NodePool");
    assert_eq!(column(&cols, "NODES"), "1");
    assert_eq!(column(&cols, "READY"), "True");

    // The pod goes, and the NodeClaim records the pod event (upstream writes it at
    // most every 10 s per node, so the removal comes more than 10 s after the bind).
    let before = eventually("the bind recorded", || {
        let c = peer.get_json(&["get", "nodeclaim", &name]);
        c["status"]["lastPodEventTime"].is_string().then_some(c)
    });
    std::thread::sleep(Duration::from_secs(11));
    peer.kubectl(&["delete", "pod", "web-1", "--wait=false"], "");
    eventually("lastPodEventTime recorded", || {
        let c = peer.get_json(&["get", "nodeclaim", &name]);
        (c["status"]["lastPodEventTime"].is_string()
            && c["status"]["lastPodEventTime"] != before["status"]["lastPodEventTime"])
            .then_some(())
    });
    run.terminate();
}
