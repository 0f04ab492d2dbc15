//! Installing our CRDs over upstream Karpenter v1.14.1's loses nothing upstream wrote.
//!
//! Against the kube peer (kmock_server.py items 23-24: CRDs stored, objects pruned by
//! their CRD's structural schema on every read and write, as the API server does), with
//! kubectl as the reader: CRDs shaped as upstream v1.14.1's (every property path with its
//! type, from tests/fixtures/upstream-v1.14.1-crd-paths.txt) are applied, one object of
//! each kind is written with a value at every leaf (status through the status
//! subresource, as upstream's controller writes it), then `karpenter-tui crds | kubectl
//! apply -f -` (as the README says) replaces them, and each object reads back whole, also
//! after a write under our CRDs.
//!
//! Seen before: ours lacked `spec.replicas`, `status.nodes`, EC2NodeClass
//! `capacityReservationSelectorTerms`, ...; applying ours over upstream's pruned them.
//! The test shows it would see that: a CRD narrower by one path hides that path.
//! `KARPENTER_TUI_BIN=/path/to/other/build cargo test --test crds_live` runs it against
//! another build's `crds`.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "fixtures/upstream_crds.rs"]
mod upstream_crds;

use std::process::Command;

use kube_peer::KubePeer;
use serde_json::{Value, json};
use upstream_crds::{Upstream, is_under, values_at};

const KINDS: [&str; 3] = ["NodePool", "NodeClaim", "EC2NodeClass"];
const NAME: &str = "written-by-upstream";

/// One path per kind that the narrower CRDs leave out (fields v1.14.1 added).
const NARROWED: [(&str, &str); 3] = [
    ("NodePool", ".spec.replicas"),
    ("NodeClaim", ".status.lastPodEventTime"),
    ("EC2NodeClass", ".spec.capacityReservationSelectorTerms"),
];

/// The binary under test: this build's, or `$KARPENTER_TUI_BIN`.
fn our_crds() -> String {
    let bin = std::env::var("KARPENTER_TUI_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_karpenter-tui").to_string());
    let out = Command::new(&bin)
        .arg("crds")
        .output()
        .unwrap_or_else(|e| panic!("run {bin} crds: {e}"));
    assert!(
        out.status.success(),
        "{bin} crds: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("crds output is UTF-8")
}

fn apply(peer: &KubePeer, doc: &Value) {
    peer.kubectl(&["apply", "-f", "-"], &doc.to_string());
}

/// Applies the upstream-shaped CRDs, without the `omit`ted paths of each kind.
fn apply_upstream_shaped(peer: &KubePeer, up: &Upstream, omit: &[(&str, &str)]) {
    for kind in KINDS {
        let left_out: Vec<&str> = omit
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, p)| *p)
            .collect();
        apply(peer, &up.crd_manifest(kind, &left_out));
    }
}

fn plural(up: &Upstream, kind: &str) -> String {
    up.crd(kind).plural.clone()
}

/// Creates the object as upstream's users and controller write it: spec (and metadata)
/// by a create, then status through the status subresource.
fn write_as_upstream(peer: &KubePeer, up: &Upstream, kind: &str) -> Value {
    let full = up.sample(kind, NAME);
    let mut spec_only = full.clone();
    let status = spec_only
        .as_object_mut()
        .and_then(|o| o.remove("status"))
        .expect("a status in the sample");
    peer.kubectl(&["create", "-f", "-"], &spec_only.to_string());
    let patch = json!({ "status": status }).to_string();
    peer.kubectl(
        &[
            "patch",
            &plural(up, kind),
            NAME,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
        "",
    );
    full
}

/// The fixture paths of `kind` that `kubectl get` no longer shows.
fn lost_paths(peer: &KubePeer, up: &Upstream, kind: &str) -> Vec<String> {
    let got = peer.get_json(&["get", &plural(up, kind), NAME]);
    up.paths_of(kind)
        .into_iter()
        .filter(|(p, _)| values_at(&got, p).is_empty())
        .map(|(p, _)| p.to_string())
        .collect()
}

/// Every path is there and holds what upstream wrote.
fn assert_whole(peer: &KubePeer, up: &Upstream, kind: &str, written: &Value, when: &str) {
    let lost = lost_paths(peer, up, kind);
    assert!(
        lost.is_empty(),
        "{when}: {kind} {NAME} lost fields upstream v1.14.1 wrote: {lost:#?}"
    );
    let got = peer.get_json(&["get", &plural(up, kind), NAME]);
    for part in ["spec", "status"] {
        assert_eq!(
            got[part], written[part],
            "{when}: {kind} {NAME} {part} changed"
        );
    }
}

#[test]
fn our_crds_over_upstreams_lose_no_field_upstream_wrote() {
    let up = upstream_crds::load();
    let peer = KubePeer::start();
    apply_upstream_shaped(&peer, &up, &[]);
    let written: Vec<(&str, Value)> = KINDS
        .iter()
        .map(|kind| (*kind, write_as_upstream(&peer, &up, kind)))
        .collect();
    for (kind, obj) in &written {
        assert_whole(&peer, &up, kind, obj, "under upstream's CRDs");
    }

    // The check can fail: under CRDs narrower by one path, exactly that path is gone.
    apply_upstream_shaped(&peer, &up, &NARROWED);
    for (kind, top) in NARROWED {
        let want: Vec<String> = up
            .paths_of(kind)
            .into_iter()
            .filter(|(p, _)| is_under(p, top))
            .map(|(p, _)| p.to_string())
            .collect();
        assert!(!want.is_empty(), "{kind}: the fixture has {top}");
        assert_eq!(
            lost_paths(&peer, &up, kind),
            want,
            "{kind}: a CRD without {top} prunes exactly it"
        );
    }

    // Ours, as the README installs them.
    peer.kubectl(&["apply", "-f", "-"], &our_crds());
    for (kind, obj) in &written {
        assert_whole(&peer, &up, kind, obj, "under our CRDs");
    }
    // A write under our CRDs stores the object pruned by them: still whole.
    for (kind, obj) in &written {
        peer.kubectl(
            &["label", &plural(&up, kind), NAME, "written-again=yes"],
            "",
        );
        assert_whole(&peer, &up, kind, obj, "written again under our CRDs");
    }
}

/// The peer's pruning and scale subresource, on a small CRD, as the API server has them:
/// unknown fields dropped, map values by `additionalProperties`, list elements by `items`,
/// `x-kubernetes-preserve-unknown-fields` keeping unknown fields (known ones still pruned),
/// and the scale subresource writing `spec.replicas`.
#[test]
fn the_peer_prunes_and_scales_as_the_api_server_does() {
    let peer = KubePeer::start();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {"group": "example.dev", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wg"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.ready"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"keep": {"type": "string"}}}},
                        "items": {"type": "array", "items": {"type": "object", "properties": {"keep": {"type": "string"}}}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                 "properties": {"typed": {"type": "object", "properties": {"keep": {"type": "string"}}}}}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "integer"}}}}}}}]}});
    apply(&peer, &crd);
    let widget = json!({
        "apiVersion": "example.dev/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default", "labels": {"a": "b"}},
        "spec": {"size": 2, "dropped": 1,
                 "labels": {"x": {"keep": "1", "dropped": 2}},
                 "items": [{"keep": "1", "dropped": 2}],
                 "free": {"anything": {"deep": 1}, "typed": {"keep": "1", "dropped": 2}}},
        "dropped": true});
    peer.kubectl(&["create", "-f", "-"], &widget.to_string());
    let got = peer.get_json(&["get", "wg", "w", "-n", "default"]);
    assert_eq!(
        got["spec"],
        json!({"size": 2, "labels": {"x": {"keep": "1"}}, "items": [{"keep": "1"}],
               "free": {"anything": {"deep": 1}, "typed": {"keep": "1"}}})
    );
    assert!(got.get("dropped").is_none(), "{got}");
    assert_eq!(got["metadata"]["labels"], json!({"a": "b"}));

    // The status subresource is pruned too.
    peer.kubectl(
        &[
            "patch",
            "wg",
            "w",
            "-n",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status": {"ready": 1, "dropped": 1}}"#,
        ],
        "",
    );
    let got = peer.get_json(&["get", "wg", "w", "-n", "default"]);
    assert_eq!(got["status"], json!({"ready": 1}));

    // Scale: read at the CRD's paths, written at specReplicasPath.
    let scaled = peer.kubectl(
        &["scale", "wg", "w", "-n", "default", "--replicas", "4"],
        "",
    );
    assert!(scaled.contains("scaled"), "{scaled}");
    let got = peer.get_json(&["get", "wg", "w", "-n", "default"]);
    assert_eq!(got["spec"]["size"], 4);
    let (status, _, body) = peer.http(
        "GET",
        "/apis/example.dev/v1/namespaces/default/widgets/w/scale",
        None,
    );
    assert_eq!(status, 200, "{body}");
    let scale: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (
            scale["kind"].as_str(),
            scale["apiVersion"].as_str(),
            &scale["spec"],
            &scale["status"]
        ),
        (
            Some("Scale"),
            Some("autoscaling/v1"),
            &json!({"replicas": 4}),
            &json!({"replicas": 1})
        )
    );
    let mut stale = scale.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["spec"]["replicas"] = json!(7);
    let (status, _, body) = peer.http(
        "PUT",
        "/apis/example.dev/v1/namespaces/default/widgets/w/scale",
        Some(&stale),
    );
    assert_eq!(status, 409, "a stale Scale is a conflict: {body}");
    let negative = json!({"spec": {"replicas": -1}});
    let (status, _, body) = peer.http(
        "PATCH",
        "/apis/example.dev/v1/namespaces/default/widgets/w/scale",
        Some(&negative),
    );
    assert_eq!(status, 422, "negative replicas refused: {body}");
    assert_eq!(
        peer.get_json(&["get", "wg", "w", "-n", "default"])["spec"]["size"],
        4
    );
}
