//! Notices as `events.k8s.io/v1` Events, so `kubectl describe nodeclaim` and `kubectl get
//! events` tell an operator what the controller did and why, as upstream Karpenter's do.
//!
//! Upstream's recorder drops a repeat of an event (same reason and object, plus the
//! event's own dedupe values; never the message) within the event's dedupe window (2
//! minutes unless it sets one), and lets pod nominations through at 5 a second with
//! bursts of 10 (`pkg/events/recorder.go`, `scheduling/events.go`); so does this one, from
//! what each [`Notice`] says. Posting happens on its own
//! task: a slow API server never holds up the control loop, and a failed post is logged,
//! not retried (Events are best effort in Kubernetes too).

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use tokio::sync::mpsc;

use crate::cluster::{Notice, ObjectRef};

/// Nominations allowed per second, and in a burst (upstream's
/// `PodNominationRateLimiter`).
const NOMINATIONS_PER_SECOND: f64 = 5.0;
const NOMINATION_BURST: f64 = 10.0;
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
        let mut dedupe = Dedupe::default();
        let mut nominations = TokenBucket::new(NOMINATIONS_PER_SECOND, NOMINATION_BURST);
        while let Some(notice) = rx.recv().await {
            let now = Instant::now();
            if !dedupe.admit(&notice, now) {
                continue;
            }
            if notice.rate_limited && !nominations.take(now) {
                continue;
            }
            let (event, ns) = event(&notice, &identity, chrono::Utc::now());
            let api: Api<Event> = Api::namespaced(client.clone(), &ns);
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::info!("event {} on {}: {e}", notice.reason, notice.regarding);
            }
        }
    })
}

/// Which notices were posted lately: a repeat (same object, reason and dedupe values)
/// within its window is dropped.
#[derive(Default)]
pub struct Dedupe {
    /// Key -> until when a repeat is dropped.
    seen: HashMap<(ObjectRef, &'static str, String), Instant>,
}

impl Dedupe {
    /// True when `notice` should be posted at `now` (and remembers it).
    pub fn admit(&mut self, notice: &Notice, now: Instant) -> bool {
        let key = (
            notice.regarding.clone(),
            notice.reason,
            notice.dedupe.clone(),
        );
        if self.seen.get(&key).is_some_and(|until| now < *until) {
            return false;
        }
        self.seen.retain(|_, until| now < *until);
        self.seen.insert(key, now + notice.dedupe_window);
        true
    }
}

/// A token bucket: `rate` tokens a second, at most `burst` saved.
struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Option<Instant>,
}

impl TokenBucket {
    fn new(rate: f64, burst: f64) -> Self {
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            at: None,
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        if let Some(at) = self.at {
            let refill = now.duration_since(at).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
            dedupe: String::new(),
            dedupe_window: Duration::from_secs(120),
            rate_limited: true,
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
            dedupe: String::new(),
            dedupe_window: Duration::from_secs(120),
            rate_limited: false,
        };
        let (e, ns) = event(&n, "controller-1", chrono::Utc::now());
        assert_eq!(
            ns, "default",
            "cluster-scoped objects' events go to default"
        );
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert!(e.note.unwrap().len() <= 1024);
    }

    #[test]
    fn repeats_are_dropped_by_object_and_reason_within_their_window_whatever_the_message() {
        let unconsolidatable = |note: &str| {
            crate::control::upstream_events::unconsolidatable(None, "default-a", note).remove(0)
        };
        let mut d = Dedupe::default();
        let t0 = Instant::now();
        assert!(d.admit(&unconsolidatable("no cheaper replacement"), t0));
        // Another message on the same object within 15 minutes: dropped, as upstream.
        let later = t0 + Duration::from_secs(10 * 60);
        assert!(!d.admit(&unconsolidatable("pods would not fit"), later));
        // The same reason on another object is its own event.
        let other =
            crate::control::upstream_events::unconsolidatable(Some("ip-1"), "default-a", "x");
        assert!(d.admit(&other[0], later));
        assert!(d.admit(&unconsolidatable("x"), t0 + Duration::from_secs(16 * 60)));
        // A budget block per reason: each reason is its own.
        let empty = crate::control::upstream_events::nodepool_blocked("default", "Empty");
        let drifted = crate::control::upstream_events::nodepool_blocked("default", "Drifted");
        assert!(d.admit(&empty, t0));
        assert!(d.admit(&drifted, t0));
        assert!(!d.admit(&empty, t0 + Duration::from_secs(30)));
        assert!(d.admit(&empty, t0 + Duration::from_secs(61)));
    }

    #[test]
    fn nominations_pass_at_five_a_second_in_bursts_of_ten() {
        let mut b = TokenBucket::new(NOMINATIONS_PER_SECOND, NOMINATION_BURST);
        let t0 = Instant::now();
        let burst = (0..20).filter(|_| b.take(t0)).count();
        assert_eq!(burst, 10);
        let one_second = (0..20)
            .filter(|_| b.take(t0 + Duration::from_secs(1)))
            .count();
        assert_eq!(one_second, 5);
    }
}
