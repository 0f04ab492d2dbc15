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
