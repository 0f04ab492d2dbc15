//! The Kubernetes API peer (tests/peers/kube_peer.rs: kmock plus the adapter in
//! tests/peers/kmock_server.py) serves kube-rs and kubectl as a real API server would:
//! lists with resource versions and uids, label selectors, kube-runtime watchers without
//! error loops, the Karpenter custom resources with a status subresource, and watches
//! resumed from a resource version. And what the controller backend's tests need:
//! evictions under PodDisruptionBudgets, Leases, Events and ConfigMaps, watchers that
//! survive dropped watches and 410 Gone, and injected faults seen in the request log.

#[path = "peers/kube_peer.rs"]
mod kube_peer;

use std::collections::BTreeSet;
use std::pin::pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, Namespace, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams,
    Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::discovery::{Scope, pinned_kind};
use kube::runtime::events::{Event as Published, EventType, Recorder, Reporter};
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

/// A watcher event in a word: "InitApply(web-1)", "WatchError(410)", "WatchFailed", ...
fn summary(event: Result<watcher::Event<Pod>, watcher::Error>) -> String {
    match event {
        Ok(watcher::Event::Init) => "Init".into(),
        Ok(watcher::Event::InitApply(p)) => format!("InitApply({})", p.name_any()),
        Ok(watcher::Event::InitDone) => "InitDone".into(),
        Ok(watcher::Event::Apply(p)) => format!("Apply({})", p.name_any()),
        Ok(watcher::Event::Delete(p)) => format!("Delete({})", p.name_any()),
        Err(watcher::Error::WatchError(status)) => format!("WatchError({})", status.code),
        Err(watcher::Error::WatchFailed(_)) => "WatchFailed".into(),
        Err(other) => format!("Err({other})"),
    }
}

/// The watcher's next events, summarised, up to and including `last`.
async fn events_until(
    peer: &KubePeer,
    stream: &mut (impl Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Unpin),
    last: &str,
) -> Vec<String> {
    let mut seen = Vec::new();
    let waited = tokio::time::timeout(PATIENCE, async {
        loop {
            let event = summary(stream.next().await.expect("the watcher stream ends"));
            seen.push(event.clone());
            if event == last {
                break;
            }
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "no {last} within the timeout; saw {seen:?}; server log:\n{}",
        peer.log()
    );
    seen
}

/// A pod that is Running and Ready (the eviction's budget check counts only Ready pods as
/// healthy), created and then given its status as the kubelet would.
async fn running_pod(pods: &Api<Pod>, name: &str, app: &str) {
    let mut p = pod(name);
    p.metadata.labels = Some([("app".to_string(), app.to_string())].into());
    pods.create(&PostParams::default(), &p)
        .await
        .expect("create a pod");
    let status = json!({"status": {"phase": "Running",
                                   "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("the pod's status");
}

/// Namespace `shop` with Ready pods web-1 and web-2 and the budget `web` over them, its
/// status as the disruption controller would have it with `allowed` disruptions.
async fn shop_with_budget(peer: &KubePeer, allowed: u32) -> (Api<Pod>, Api<PodDisruptionBudget>) {
    peer.kubectl(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\n\
         apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\n  \
         namespace: shop\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels:\n      \
         app: web\n",
    );
    let client = peer.client().await;
    let pods = Api::<Pod>::namespaced(client.clone(), "shop");
    running_pod(&pods, "web-1", "web").await;
    running_pod(&pods, "web-2", "web").await;
    running_pod(&pods, "db-1", "db").await;
    let budgets = Api::<PodDisruptionBudget>::namespaced(client, "shop");
    let status = json!({"status": {"disruptionsAllowed": allowed, "currentHealthy": 2,
                                   "desiredHealthy": 1, "expectedPods": 2}});
    budgets
        .patch_status("web", &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("the budget's status");
    (pods, budgets)
}

#[tokio::test]
async fn an_eviction_within_the_budget_deletes_the_pod_and_decrements_the_budget() {
    let peer = KubePeer::start();
    let (pods, budgets) = shop_with_budget(&peer, 1).await;

    let status = pods
        .evict("web-1", &EvictParams::default())
        .await
        .unwrap_or_else(|e| panic!("evict web-1: {e:?}\nserver log:\n{}", peer.log()));
    assert_eq!(status.code, 201, "{status:?}");
    assert!(status.is_success(), "{status:?}");

    let names = peer.kubectl(&["get", "pods", "-n", "shop", "-o", "name"], "");
    let names: BTreeSet<&str> = names.lines().collect();
    assert_eq!(names, BTreeSet::from(["pod/db-1", "pod/web-2"]));
    let allowed = peer.kubectl(
        &[
            "get",
            "pdb",
            "web",
            "-n",
            "shop",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        "",
    );
    assert_eq!(allowed, "0");
    let budget = budgets.get("web").await.expect("the budget");
    let disrupted = budget
        .status
        .and_then(|s| s.disrupted_pods)
        .unwrap_or_default();
    assert!(disrupted.contains_key("web-1"), "{disrupted:?}");

    // A pod no budget selects goes without touching the budget; a missing pod is 404.
    pods.evict("db-1", &EvictParams::default())
        .await
        .expect("evict db-1");
    let err = pods
        .evict("db-1", &EvictParams::default())
        .await
        .expect_err("db-1 is gone");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_eviction_a_budget_at_zero_refuses_is_a_429_and_the_pod_stays() {
    let peer = KubePeer::start();
    let (_, budgets) = shop_with_budget(&peer, 0).await;
    // The refusal has no Retry-After (as upstream), so kube's own retries of a 429 would
    // back off for minutes before the error came back; this client hands it back at once.
    let pods = Api::<Pod>::namespaced(peer.client_without_retries().await, "shop");

    let err = pods
        .evict("web-1", &EvictParams::default())
        .await
        .expect_err("the budget allows no disruption");
    let kube::Error::Api(status) = &err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!(status.code, 429, "{status:?}");
    assert_eq!(status.reason, "TooManyRequests");
    assert!(status.message.contains("disruption budget"), "{status:?}");
    let cause = &status.details.as_ref().expect("details").causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert!(cause.message.contains("web"), "{cause:?}");

    pods.get("web-1").await.expect("web-1 is still there");
    let budget = budgets.get("web").await.expect("the budget");
    assert_eq!(budget.status.expect("status").disruptions_allowed, 0);
    let evictions: Vec<_> = peer
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/eviction"))
        .map(|r| r.status)
        .collect();
    assert_eq!(evictions, [Some(429)]);
}

#[tokio::test]
async fn a_watcher_survives_dropped_watches_and_resumes_without_duplicates() {
    let peer = KubePeer::start();
    let client = peer.client().await;
    let pods = Api::<Pod>::namespaced(client, "default");
    let pp = PostParams::default();
    pods.create(&pp, &pod("before"))
        .await
        .expect("create before");
    let mut stream = pin!(watcher(pods.clone(), watcher::Config::default()));
    assert_eq!(
        events_until(&peer, &mut stream, "InitDone").await,
        ["Init", "InitApply(before)", "InitDone"]
    );
    // An event through the watch: the watch is open.
    let first = pods.create(&pp, &pod("first")).await.expect("create first");
    assert_eq!(
        events_until(&peer, &mut stream, "Apply(first)").await,
        ["Apply(first)"]
    );

    assert_eq!(peer.drop_watches(), 1);
    pods.create(&pp, &pod("after")).await.expect("create after");
    // kube reads a watch cut short as its end (not an error) and watches again from the
    // last version it saw; an error event in between would be tolerable too.
    let seen = events_until(&peer, &mut stream, "Apply(after)").await;
    let events: Vec<_> = seen.iter().filter(|e| *e != "WatchFailed").collect();
    assert_eq!(events, ["Apply(after)"], "{seen:?}");
    // Nothing is delivered twice: the next event is the next pod.
    pods.create(&pp, &pod("last")).await.expect("create last");
    assert_eq!(
        events_until(&peer, &mut stream, "Apply(last)").await,
        ["Apply(last)"]
    );

    // The watch was resumed from the last version seen, not relisted.
    let requests = peer.requests();
    let watches: Vec<_> = requests.iter().filter(|r| r.is_watch()).collect();
    assert_eq!(watches.len(), 2, "{watches:?}");
    assert_eq!(
        watches[1].query.get("resourceVersion"),
        first.resource_version().as_ref(),
        "{watches:?}"
    );
    assert_eq!(
        requests
            .iter()
            .filter(|r| !r.is_watch() && r.method == "GET")
            .count(),
        1,
        "one list: {requests:?}"
    );
}

#[tokio::test]
async fn after_compaction_a_watcher_resumed_from_an_old_version_relists() {
    let peer = KubePeer::start();
    let client = peer.client().await;
    let pods = Api::<Pod>::namespaced(client, "default");
    let pp = PostParams::default();
    pods.create(&pp, &pod("before"))
        .await
        .expect("create before");
    let mut stream = pin!(watcher(pods.clone(), watcher::Config::default()));
    events_until(&peer, &mut stream, "InitDone").await;
    let first = pods.create(&pp, &pod("first")).await.expect("create first");
    events_until(&peer, &mut stream, "Apply(first)").await;

    // The watch breaks while the watcher is not polled; then a pod is created and the
    // journal forgets everything up to it, so the watcher's version is too old.
    assert_eq!(peer.drop_watches(), 1);
    let between = pods
        .create(&pp, &pod("between"))
        .await
        .expect("create between");
    let compacted = peer.compact();
    assert_eq!(
        between.resource_version(),
        Some(compacted.to_string()),
        "compacted at the newest version"
    );

    let seen = events_until(&peer, &mut stream, "InitDone").await;
    assert!(seen.contains(&"WatchError(410)".to_string()), "{seen:?}");
    let events: Vec<_> = seen.iter().filter(|e| !e.starts_with("Watch")).collect();
    assert_eq!(
        events,
        [
            "Init",
            "InitApply(before)",
            "InitApply(first)",
            "InitApply(between)",
            "InitDone"
        ],
        "a relist with each pod once: {seen:?}"
    );
    pods.create(&pp, &pod("after")).await.expect("create after");
    assert_eq!(
        events_until(&peer, &mut stream, "Apply(after)").await,
        ["Apply(after)"]
    );

    // The peer saw the resume from the old version answered, then a second list.
    let requests = peer.requests();
    let resumed = requests
        .iter()
        .position(|r| {
            r.is_watch() && r.query.get("resourceVersion") == first.resource_version().as_ref()
        })
        .unwrap_or_else(|| panic!("no watch from {:?}: {requests:?}", first.resource_version()));
    assert_eq!(requests[resumed].status, Some(200));
    assert!(
        requests[resumed..]
            .iter()
            .any(|r| !r.is_watch() && r.method == "GET"),
        "no relist after the expired watch: {requests:?}"
    );

    // A watch from a forgotten version gets the API server's Expired status.
    let mut events = pin!(
        pods.watch(&WatchParams::default(), "1")
            .await
            .expect("watch from version 1")
    );
    let event = tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("an event within the timeout")
        .expect("the stream ends")
        .expect("a watch event");
    let WatchEvent::Error(status) = event else {
        panic!("expected an ERROR event, got {event:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(
        status.message.starts_with("too old resource version: 1 ("),
        "{status:?}"
    );
}

#[tokio::test]
async fn an_injected_429_on_a_patch_is_answered_once_then_the_retry_succeeds() {
    let peer = KubePeer::start();
    let client = peer.client_without_retries().await;
    let pods = Api::<Pod>::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("p1"))
        .await
        .expect("create p1");
    peer.clear_requests();

    peer.inject("PATCH", "/pods/p1", 429, 1);
    pods.get("p1")
        .await
        .expect("a GET does not match the fault");
    let label = |value: &str| Patch::Merge(json!({"metadata": {"labels": {"tried": value}}}));
    let err = pods
        .patch("p1", &PatchParams::default(), &label("once"))
        .await
        .expect_err("the injected 429");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 429 && s.reason == "TooManyRequests"),
        "{err:?}"
    );
    let patched = pods
        .patch("p1", &PatchParams::default(), &label("twice"))
        .await
        .expect("the retry succeeds");
    assert_eq!(
        patched.labels().get("tried").map(String::as_str),
        Some("twice")
    );
    assert_eq!(peer.faults_served(), 1);
    let seen: Vec<(String, Option<u16>, bool)> = peer
        .requests()
        .into_iter()
        .map(|r| (r.method, r.status, r.injected))
        .collect();
    assert_eq!(
        seen,
        [
            ("GET".to_string(), Some(200), false),
            ("PATCH".to_string(), Some(429), true),
            ("PATCH".to_string(), Some(200), false),
        ]
    );

    // The 429 says when to come back, and a default kube client does so by itself.
    peer.inject("PATCH", "/pods/p1", 429, 1);
    peer.clear_requests();
    let retrying = Api::<Pod>::namespaced(peer.client().await, "default");
    let patched = retrying
        .patch("p1", &PatchParams::default(), &label("retried"))
        .await
        .expect("kube's retry succeeds");
    assert_eq!(
        patched.labels().get("tried").map(String::as_str),
        Some("retried")
    );
    let statuses: Vec<_> = peer.requests().into_iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(429), Some(200)]);
    peer.inject("*", "/pods/p1", 429, 1);
    let (status, head, body) = peer.http("GET", "/api/v1/namespaces/default/pods/p1", None);
    assert_eq!(status, 429, "{head}\n{body}");
    assert!(
        head.lines()
            .any(|l| l.eq_ignore_ascii_case("retry-after: 1")),
        "{head}"
    );
    assert_eq!(peer.faults_served(), 3);
}

#[tokio::test]
async fn a_lease_replaced_with_a_stale_version_conflicts() {
    let peer = KubePeer::start();
    let client = peer.client().await;
    let leases = Api::<Lease>::namespaced(client, "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "karpenter-leader-election"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }))
    .expect("a lease");
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create the lease");
    let created_rv = created.resource_version().expect("a resourceVersion");
    let fetched = leases
        .get("karpenter-leader-election")
        .await
        .expect("get the lease");
    assert_eq!(fetched.resource_version(), Some(created_rv.clone()));
    let mut events = pin!(
        leases
            .watch(&WatchParams::default(), &created_rv)
            .await
            .expect("watch leases")
    );

    let mut renewed = fetched.clone();
    renewed.spec.get_or_insert_default().holder_identity = Some("b".into());
    let replaced = leases
        .replace(
            "karpenter-leader-election",
            &PostParams::default(),
            &renewed,
        )
        .await
        .expect("replace with the current version");
    assert_ne!(replaced.resource_version(), Some(created_rv));
    assert_eq!(replaced.namespace().as_deref(), Some("kube-system"));

    // `renewed` still carries the version it was read at.
    let err = leases
        .replace(
            "karpenter-leader-election",
            &PostParams::default(),
            &renewed,
        )
        .await
        .expect_err("a stale resourceVersion must conflict");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );

    let event = tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("an event within the timeout")
        .expect("the stream ends")
        .expect("a watch event");
    let WatchEvent::Modified(seen) = event else {
        panic!("expected Modified, got {event:?}")
    };
    let holder = seen.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("b"));
}

#[tokio::test]
async fn recorded_events_core_events_and_configmaps_round_trip() {
    let peer = KubePeer::start();
    let client = peer.client().await;

    // kube-runtime's Recorder creates an events.k8s.io/v1 Event, then patches its series.
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "karpenter".into(),
            instance: None,
        },
    );
    let node = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("ip-10-0-0-1".into()),
        ..ObjectReference::default()
    };
    let published = Published {
        type_: EventType::Normal,
        reason: "DisruptionBlocked".into(),
        note: Some("the node is not empty".into()),
        action: "Disrupt".into(),
        secondary: None,
    };
    for _ in 0..2 {
        recorder
            .publish(&published, &node)
            .await
            .expect("publish the event");
    }
    let events = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("list events.k8s.io events");
    assert_eq!(events.items.len(), 1, "{:?}", events.items);
    let event = &events.items[0];
    assert_eq!(event.reason.as_deref(), Some("DisruptionBlocked"));
    assert_eq!(event.series.as_ref().map(|s| s.count), Some(2));

    let core: CoreEvent = serde_json::from_value(json!({
        "metadata": {"generateName": "ip-10-0-0-1."},
        "involvedObject": {"kind": "Node", "name": "ip-10-0-0-1"},
        "reason": "Unconsolidatable", "type": "Normal",
    }))
    .expect("a core event");
    let created = Api::<CoreEvent>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &core)
        .await
        .expect("create a core v1 Event");
    assert!(
        created.name_any().starts_with("ip-10-0-0-1."),
        "{created:?}"
    );

    let configmaps = Api::<ConfigMap>::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "karpenter-global-settings"},
        "data": {"batchMaxDuration": "10s"},
    }))
    .expect("a configmap");
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .expect("create the configmap");
    configmaps
        .patch(
            "karpenter-global-settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"batchIdleDuration": "1s"}})),
        )
        .await
        .expect("patch the configmap");
    let data = configmaps
        .get("karpenter-global-settings")
        .await
        .expect("get the configmap")
        .data
        .unwrap_or_default();
    assert_eq!(
        data.get("batchMaxDuration").map(String::as_str),
        Some("10s")
    );
    assert_eq!(
        data.get("batchIdleDuration").map(String::as_str),
        Some("1s")
    );
}
