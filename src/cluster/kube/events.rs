//! Notices as `events.k8s.io/v1` Events, so `kubectl describe nodeclaim` and `kubectl get
//! events` tell an operator what the controller did and why, as upstream Karpenter's do.
//!
//! Upstream's recorder drops an identical event (same object, reason and message) seen
//! within its dedupe window (2 minutes); so does this one. Posting happens on its own
//! task: a slow API server never holds up the control loop, and a failed post is logged,
//! not retried (Events are best effort in Kubernetes too).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use tokio::sync::mpsc;

use crate::cluster::{Notice, ObjectRef};

/// Upstream's dedupe window.
pub const DEDUPE: Duration = Duration::from_secs(120);
/// The `reportingController` of every Event.
pub const CONTROLLER: &str = "karpenter-tui.dev/controller";

/// The object reference and the namespace the Event lives in (cluster-scoped objects'
/// Events go to `default`, as kubectl looks for them there).
pub fn regarding(r: &ObjectRef, settings_namespace: &str) -> (ObjectReference, String) {
    let (api_version, kind, name, namespace) = match r {
        ObjectRef::NodePool(n) => ("karpenter.sh/v1", "NodePool", n.clone(), None),
        ObjectRef::NodeClaim(n) => ("karpenter.sh/v1", "NodeClaim", n.clone(), None),
        ObjectRef::Node(n) => ("v1", "Node", n.clone(), None),
        ObjectRef::Pod(k) => ("v1", "Pod", k.name.clone(), Some(k.namespace.clone())),
        ObjectRef::Pdb(ns, n) => (
            "policy/v1",
            "PodDisruptionBudget",
            n.clone(),
            Some(ns.clone()),
        ),
        ObjectRef::DaemonSet(ns, n) => ("apps/v1", "DaemonSet", n.clone(), Some(ns.clone())),
        ObjectRef::Settings => (
            "v1",
            "ConfigMap",
            super::SETTINGS.to_string(),
            Some(settings_namespace.to_string()),
        ),
    };
    let event_ns = namespace.clone().unwrap_or_else(|| "default".into());
    (
        ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(name),
            namespace,
            ..Default::default()
        },
        event_ns,
    )
}

/// The Event for a notice.
pub fn event(
    notice: &Notice,
    identity: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> (Event, String) {
    let (regarding, namespace) = regarding(&notice.regarding, "default");
    let object = regarding.name.clone().unwrap_or_default();
    // client-go names events `<object>.<unix nanos in hex>`.
    let name = format!(
        "{object}.{:x}",
        now.timestamp_nanos_opt().unwrap_or_default()
    );
    let mut note = notice.note.clone();
    // The API server refuses notes over 1 kB.
    if note.len() > 1024 {
        let mut cut = 1021;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    let mut e = Event {
        event_time: Some(MicroTime(
            k8s_openapi::jiff::Timestamp::from_microsecond(now.timestamp_micros())
                .unwrap_or_default(),
        )),
        reason: Some(notice.reason.into()),
        action: Some(notice.reason.into()),
        note: Some(note),
        type_: Some(if notice.warning { "Warning" } else { "Normal" }.into()),
        regarding: Some(regarding),
        reporting_controller: Some(CONTROLLER.into()),
        reporting_instance: Some(identity.chars().take(128).collect()),
        ..Default::default()
    };
    e.metadata.name = Some(name);
    e.metadata.namespace = Some(namespace.clone());
    (e, namespace)
}

/// Posts notices as Events until the sender goes away.
pub fn spawn(
    client: kube::Client,
    identity: String,
    mut rx: mpsc::UnboundedReceiver<Notice>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen: HashMap<(ObjectRef, &'static str, String), Instant> = HashMap::new();
        while let Some(notice) = rx.recv().await {
            let key = (notice.regarding.clone(), notice.reason, notice.note.clone());
            let now = Instant::now();
            if seen
                .get(&key)
                .is_some_and(|t| now.duration_since(*t) < DEDUPE)
            {
                continue;
            }
            seen.retain(|_, t| now.duration_since(*t) < DEDUPE);
            seen.insert(key, now);
            let (event, ns) = event(&notice, &identity, chrono::Utc::now());
            let api: Api<Event> = Api::namespaced(client.clone(), &ns);
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::info!("event {} on {:?}: {e}", notice.reason, notice.regarding);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::pod::PodKey;

    #[test]
    fn events_name_their_object_and_live_where_kubectl_looks() {
        let n = Notice {
            regarding: ObjectRef::Pod(PodKey {
                namespace: "shop".into(),
                name: "web-1".into(),
            }),
            reason: "Nominated",
            note: "Pod should schedule on: nodeclaim/default-abcde".into(),
            warning: false,
        };
        let (e, ns) = event(&n, "controller-1", chrono::Utc::now());
        assert_eq!(ns, "shop");
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        let r = e.regarding.unwrap();
        assert_eq!(
            (r.kind.as_deref(), r.name.as_deref()),
            (Some("Pod"), Some("web-1"))
        );
        assert!(e.metadata.name.unwrap().starts_with("web-1."));

        let n = Notice {
            regarding: ObjectRef::NodeClaim("default-abcde".into()),
            reason: "DisruptionBlocked",
            note: "x".repeat(5000),
            warning: true,
        };
        let (e, ns) = event(&n, "controller-1", chrono::Utc::now());
        assert_eq!(
            ns, "default",
            "cluster-scoped objects' events go to default"
        );
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert!(e.note.unwrap().len() <= 1024);
    }
}
