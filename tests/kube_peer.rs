//! The Kubernetes API peer (tests/peers/kube_peer.rs: kmock plus the adapter in
//! tests/peers/kmock_server.py) serves kube-rs and kubectl as a real API server would:
//! lists with resource versions and uids, label selectors, kube-runtime watchers without
//! error loops, the Karpenter custom resources with a status subresource, and watches
//! resumed from a resource version.

#[path = "peers/kube_peer.rs"]
mod kube_peer;

use std::collections::BTreeSet;
use std::pin::pin;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::discovery::{Scope, pinned_kind};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use kube_peer::KubePeer;

/// Bounds every wait on the peer; the tests never assert on elapsed time.
const PATIENCE: Duration = Duration::from_secs(20);

fn pod_yaml(namespace: &str, name: &str, app: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  \
         labels:\n    app: {app}\nspec:\n  containers:\n  - name: main\n    image: nginx\n"
    )
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }))
    .expect("a pod")
}

fn nodeclaim_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    )
}

#[tokio::test]
async fn kubectl_applied_pods_are_listed_by_kube_with_versions_uids_and_labels() {
    let peer = KubePeer::start();
    let manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\n{}---\n{}",
        pod_yaml("shop", "web-1", "web"),
        pod_yaml("shop", "db-1", "db")
    );
    let out = peer.kubectl(&["apply", "-f", "-"], &manifest);
    assert!(out.contains("namespace/shop created"), "{out}");
    assert!(out.contains("pod/web-1 created"), "{out}");

    let client = peer.client().await;
    let namespace = Api::<Namespace>::all(client.clone())
        .get("shop")
        .await
        .expect("the namespace kubectl created");
    assert!(namespace.uid().is_some_and(|u| !u.is_empty()));

    let pods = Api::<Pod>::namespaced(client.clone(), "shop");
    let all = pods.list(&ListParams::default()).await.expect("list pods");
    assert!(
        all.metadata
            .resource_version
            .as_deref()
            .is_some_and(|rv| rv.parse::<u64>().is_ok()),
        "list resourceVersion: {:?}",
        all.metadata.resource_version
    );
    let names: BTreeSet<String> = all.items.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, BTreeSet::from(["db-1".into(), "web-1".into()]));
    for p in &all.items {
        assert!(
            p.resource_version().is_some_and(|rv| !rv.is_empty()),
            "{p:?}"
        );
        assert!(p.uid().is_some_and(|uid| !uid.is_empty()), "{p:?}");
        assert_eq!(p.namespace().as_deref(), Some("shop"));
    }
    let uids: BTreeSet<String> = all.items.iter().filter_map(|p| p.uid()).collect();
    assert_eq!(uids.len(), 2, "uids are distinct");

    let select = |selector: &'static str| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels(selector))
                .await
                .expect("list with a label selector");
            list.items.iter().map(|p| p.name_any()).collect::<Vec<_>>()
        }
    };
    assert_eq!(select("app=web").await, ["web-1"]);
    assert_eq!(select("app!=web").await, ["db-1"]);
    assert_eq!(select("app in (db,cache)").await, ["db-1"]);
    assert!(select("app=cache").await.is_empty());
    let everywhere = Api::<Pod>::all(client)
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list in all namespaces");
    assert_eq!(everywhere.items.len(), 1);
}

#[tokio::test]
async fn watcher_sees_the_initial_pod_then_one_kubectl_creates_without_errors() {
    let peer = KubePeer::start();
    peer.kubectl(&["apply", "-f", "-"], &pod_yaml("default", "before", "web"));
    let client = peer.client().await;
    let mut stream = pin!(watcher(Api::<Pod>::all(client), watcher::Config::default()));

    let mut initial = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.next().await.expect("the watcher stream ends") {
                Ok(watcher::Event::Init) => {}
                Ok(watcher::Event::InitApply(p)) => initial.push(p.name_any()),
                Ok(watcher::Event::InitDone) => break,
                other => panic!("unexpected before InitDone: {other:?}"),
            }
        }
    })
    .await
    .expect("the initial list within the timeout");
    assert_eq!(initial, ["before"]);

    peer.kubectl(&["apply", "-f", "-"], &pod_yaml("default", "after", "web"));
    let applied = tokio::time::timeout(PATIENCE, async {
        match stream.next().await.expect("the watcher stream ends") {
            Ok(watcher::Event::Apply(p)) => p,
            // An error here is the NoResourceVersion loop this peer exists to avoid.
            other => panic!("expected Apply(after), got {other:?}"),
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no event for the new pod; server log:\n{}", peer.log()));
    assert_eq!(applied.name_any(), "after");
    assert!(applied.uid().is_some());
}

#[tokio::test]
async fn nodeclaims_support_create_get_status_patch_watch_and_kubectl() {
    let peer = KubePeer::start();
    let client = peer.client().await;

    // Discovery serves all three Karpenter kinds, cluster-scoped.
    for (group, kind, plural) in [
        ("karpenter.sh", "NodePool", "nodepools"),
        ("karpenter.sh", "NodeClaim", "nodeclaims"),
        ("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses"),
    ] {
        let (resource, caps) = pinned_kind(&client, &GroupVersionKind::gvk(group, "v1", kind))
            .await
            .unwrap_or_else(|e| panic!("discover {group}/v1 {kind}: {e}"));
        assert_eq!(resource.plural, plural);
        assert_eq!(caps.scope, Scope::Cluster, "{kind}");
    }

    let ar = nodeclaim_resource();
    let api = Api::<DynamicObject>::all_with(client.clone(), &ar);
    let mut claim = DynamicObject::new("default-abcde", &ar);
    claim.data = json!({"spec": {"nodeClassRef": {
        "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}});
    let created = api
        .create(&PostParams::default(), &claim)
        .await
        .expect("create a NodeClaim");
    let created_rv = created.resource_version().expect("a resourceVersion");
    assert!(created.uid().is_some());
    assert_eq!(created.namespace(), None);

    let fetched = api.get("default-abcde").await.expect("get the NodeClaim");
    assert_eq!(fetched.data["spec"]["nodeClassRef"]["name"], "default");
    assert_eq!(fetched.uid(), created.uid());

    // Merge patch on /status changes the status only.
    let patched = api
        .patch_status(
            "default-abcde",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "status": {"providerID": "aws:///us-west-2a/i-0123456789abcdef0"},
                "spec": {"nodeClassRef": {"name": "ignored"}},
            })),
        )
        .await
        .expect("patch the NodeClaim status");
    assert_eq!(
        patched.data["status"]["providerID"],
        "aws:///us-west-2a/i-0123456789abcdef0"
    );
    assert_eq!(patched.data["spec"]["nodeClassRef"]["name"], "default");
    assert_ne!(patched.resource_version(), Some(created_rv.clone()));

    // A replace (PUT) carrying the stale version is a conflict.
    let mut stale = created.clone();
    stale.data["status"] = json!({"nodeName": "ip-10-0-0-1"});
    let err = api
        .replace_status("default-abcde", &PostParams::default(), &stale)
        .await
        .expect_err("a stale resourceVersion must conflict");
    assert!(
        matches!(&err, kube::Error::Api(status) if status.code == 409),
        "{err:?}"
    );

    // A watcher lists it, then sees the next status change.
    let mut stream = pin!(watcher(api.clone(), watcher::Config::default()));
    tokio::time::timeout(PATIENCE, async {
        let mut listed = Vec::new();
        loop {
            match stream.next().await.expect("the watcher stream ends") {
                Ok(watcher::Event::Init) => {}
                Ok(watcher::Event::InitApply(o)) => listed.push(o.name_any()),
                Ok(watcher::Event::InitDone) => break,
                other => panic!("unexpected before InitDone: {other:?}"),
            }
        }
        assert_eq!(listed, ["default-abcde"]);
    })
    .await
    .expect("the initial list within the timeout");
    api.patch_status(
        "default-abcde",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"nodeName": "ip-10-0-0-1"}})),
    )
    .await
    .expect("patch the status again");
    let seen = tokio::time::timeout(PATIENCE, async {
        match stream.next().await.expect("the watcher stream ends") {
            Ok(watcher::Event::Apply(o)) => o,
            other => panic!("expected Apply, got {other:?}"),
        }
    })
    .await
    .expect("the status change within the timeout");
    assert_eq!(seen.data["status"]["nodeName"], "ip-10-0-0-1");
    assert_eq!(
        seen.data["status"]["providerID"],
        "aws:///us-west-2a/i-0123456789abcdef0"
    );

    let listed: Value =
        serde_json::from_str(&peer.kubectl(&["get", "nodeclaims.karpenter.sh", "-o", "json"], ""))
            .expect("kubectl prints JSON");
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{listed}");
    assert_eq!(items[0]["metadata"]["name"], "default-abcde");
    assert_eq!(items[0]["status"]["nodeName"], "ip-10-0-0-1");
}

#[tokio::test]
async fn a_watch_resumed_from_the_last_seen_version_gets_only_newer_events() {
    let peer = KubePeer::start();
    let client = peer.client().await;
    let pods = Api::<Pod>::namespaced(client, "default");
    let pp = PostParams::default();
    pods.create(&pp, &pod("p1")).await.expect("create p1");
    let listed_rv = pods
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list resourceVersion");

    // First watch: from the list's version it sees p2 only (not p1 again).
    let last_seen = {
        let mut events = pin!(
            pods.watch(&WatchParams::default(), &listed_rv)
                .await
                .expect("watch")
        );
        pods.create(&pp, &pod("p2")).await.expect("create p2");
        let event = tokio::time::timeout(PATIENCE, events.next())
            .await
            .expect("an event within the timeout")
            .expect("the stream ends")
            .expect("a watch event");
        let WatchEvent::Added(p2) = event else {
            panic!("expected Added(p2), got {event:?}")
        };
        assert_eq!(p2.name_any(), "p2");
        p2.resource_version().expect("p2's resourceVersion")
    }; // the stream is dropped here

    // While nobody watches: p3 created, p2 relabelled, p1 deleted.
    pods.create(&pp, &pod("p3")).await.expect("create p3");
    pods.patch(
        "p2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"seen": "twice"}}})),
    )
    .await
    .expect("patch p2");
    pods.delete("p1", &DeleteParams::default())
        .await
        .expect("delete p1");

    // Resumed: exactly those three, in order, each newer than the last seen version.
    // The server ends the stream after timeoutSeconds, which bounds the collection.
    let events: Vec<_> = tokio::time::timeout(
        PATIENCE,
        pods.watch(&WatchParams::default().timeout(2), &last_seen)
            .await
            .expect("resume the watch")
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the resumed watch ends within the timeout");
    let summary: Vec<(String, String, u64)> = events
        .into_iter()
        .map(|e| {
            let (kind, p) = match e.expect("a watch event") {
                WatchEvent::Added(p) => ("Added", p),
                WatchEvent::Modified(p) => ("Modified", p),
                WatchEvent::Deleted(p) => ("Deleted", p),
                other => panic!("unexpected {other:?}"),
            };
            let rv = p.meta().resource_version.clone().expect("resourceVersion");
            (kind.to_string(), p.name_any(), rv.parse().expect("numeric"))
        })
        .collect();
    let kinds: Vec<(&str, &str)> = summary
        .iter()
        .map(|(k, n, _)| (k.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("Added", "p3"), ("Modified", "p2"), ("Deleted", "p1")]
    );
    let last_seen: u64 = last_seen.parse().expect("numeric");
    assert!(
        summary.windows(2).all(|w| w[0].2 < w[1].2) && summary[0].2 > last_seen,
        "versions not increasing past {last_seen}: {summary:?}"
    );
}
