//! Leader election against a real HTTP Kubernetes API (the kmock peer,
//! tests/peers/kube_peer.rs), with kubectl as the independent client that reads the Lease
//! and plays the intruder. Short timings (2 s lease, 1 s renew deadline, 200 ms retry)
//! keep the tests quick; waits are bounded generously and only the order of events is
//! asserted, except where a bound is the behaviour (a released lease is taken over long
//! before it would have expired).

#[path = "peers/kube_peer.rs"]
mod kube_peer;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use karpenter_tui::cluster::kube::lease::{LeaderElector, LeaseConfig};
use kube::Api;
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use kube_peer::KubePeer;

const NAMESPACE: &str = "karpenter-tui";
const LEASE: &str = "karpenter-tui-leader-election";
/// Bounds every wait; far above every timing in play.
const PATIENCE: Duration = Duration::from_secs(20);

fn fast() -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_secs(1),
        retry_period: Duration::from_millis(200),
    }
}

/// A running candidate: its "am I leader" receiver, a way to shut it down, its task.
struct Candidate {
    identity: String,
    leader: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Candidate {
    fn start(client: kube::Client, identity: &str, config: LeaseConfig) -> Candidate {
        let elector = LeaderElector::new(client, NAMESPACE, LEASE, identity, config)
            .expect("valid election settings");
        assert_eq!(elector.identity(), identity);
        let leader = elector.subscribe();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(elector.run(async {
            let _ = stopped.await;
        }));
        Candidate {
            identity: identity.to_string(),
            leader,
            stop: Some(stop),
            task,
        }
    }

    fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    /// Waits until the candidate's leadership is `want`; false if it is not within `limit`.
    async fn becomes(&mut self, want: bool, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.leader.wait_for(|&l| l == want))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Graceful shutdown: returns once the elector has released the lease and stopped.
    async fn shut_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the elector stops after shutdown")
            .expect("the elector task did not panic");
    }
}

/// The Lease's spec as kubectl sees it.
fn lease_spec(peer: &KubePeer) -> Value {
    let out = peer.kubectl(&["get", "lease", LEASE, "-n", NAMESPACE, "-o", "json"], "");
    let lease: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    lease["spec"].clone()
}

/// Polls until exactly one of the candidates leads; returns its index.
async fn one_leader(candidates: &[&Candidate]) -> usize {
    let began = Instant::now();
    loop {
        let leading: Vec<usize> = (0..candidates.len())
            .filter(|&i| candidates[i].leads())
            .collect();
        assert!(leading.len() <= 1, "two leaders at once: {leading:?}");
        if let [i] = leading[..] {
            return i;
        }
        assert!(began.elapsed() < PATIENCE, "nobody became leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_candidates_never_lead_at_once_and_the_lease_names_the_leader() {
    let peer = KubePeer::start();
    // A 2 s renew deadline: a loaded machine stalling one renewal must not move the
    // leadership, which this test asserts stays put.
    let steady = LeaseConfig {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(2),
        ..fast()
    };
    let a = Candidate::start(peer.client().await, "replica-a", steady);
    let b = Candidate::start(peer.client().await, "replica-b", steady);

    let first = one_leader(&[&a, &b]).await;
    let leader = [&a, &b][first];

    // Watch every change of either flag for several lease durations: never both at once,
    // and the leadership stays put while its holder keeps renewing.
    let (mut ra, mut rb) = (a.leader.clone(), b.leader.clone());
    let watch_until = Instant::now() + Duration::from_secs(6);
    let mut handovers = 0;
    let mut was = (*ra.borrow(), *rb.borrow());
    while Instant::now() < watch_until {
        tokio::select! {
            _ = ra.changed() => {}
            _ = rb.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        let now = (*ra.borrow_and_update(), *rb.borrow_and_update());
        assert!(!(now.0 && now.1), "both candidates lead at once");
        if now != was {
            handovers += 1;
            was = now;
        }
    }
    assert_eq!(
        handovers, 0,
        "leadership moved although the leader kept renewing"
    );
    assert!(leader.leads());

    // kubectl, an independent client, reads the record client-go would have written.
    let spec = lease_spec(&peer);
    assert_eq!(spec["holderIdentity"], leader.identity.as_str(), "{spec}");
    assert_eq!(spec["leaseDurationSeconds"], 4, "{spec}");
    assert_eq!(spec["leaseTransitions"], 0, "{spec}");
    for field in ["acquireTime", "renewTime"] {
        let t = spec[field].as_str().unwrap_or_default();
        assert!(
            t.ends_with('Z') && t.split_once('.').is_some_and(|(_, f)| f.len() == 7),
            "{field} is not a MicroTime: {spec}"
        );
    }
    assert_ne!(
        spec["acquireTime"], spec["renewTime"],
        "the leader renewed: {spec}"
    );

    a.shut_down().await;
    b.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_over_long_before_it_would_expire() {
    let peer = KubePeer::start();
    // A 15 s lease: without the release, the standby would wait 15 s from its last sight
    // of a renewal.
    let slow_expiry = LeaseConfig {
        lease_duration: Duration::from_secs(15),
        ..fast()
    };
    let a = Candidate::start(peer.client().await, "replica-a", slow_expiry);
    let b = Candidate::start(peer.client().await, "replica-b", slow_expiry);
    let first = one_leader(&[&a, &b]).await;
    let (leader, mut standby) = if first == 0 { (a, b) } else { (b, a) };
    let leader_id = leader.identity.clone();

    let stopped = Instant::now();
    leader.shut_down().await;
    assert!(
        standby.becomes(true, Duration::from_secs(8)).await,
        "the standby did not take over the released lease"
    );
    assert!(
        stopped.elapsed() < Duration::from_secs(8),
        "takeover took as long as an expiry"
    );
    let spec = lease_spec(&peer);
    assert_eq!(spec["holderIdentity"], standby.identity.as_str(), "{spec}");
    assert_ne!(spec["holderIdentity"], leader_id.as_str());
    assert_eq!(spec["leaseTransitions"], 1, "{spec}");
    assert_eq!(spec["leaseDurationSeconds"], 15, "{spec}");

    // The last one out releases too: the record names nobody.
    standby.shut_down().await;
    let spec = lease_spec(&peer);
    assert_eq!(spec["holderIdentity"], "", "{spec}");
    assert_eq!(spec["leaseDurationSeconds"], 1, "{spec}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_was_taken_steps_down_then_retakes_it_when_it_expires() {
    let peer = KubePeer::start();
    let mut a = Candidate::start(peer.client().await, "replica-a", fast());
    assert!(a.becomes(true, PATIENCE).await, "the only candidate leads");

    // Someone else writes themselves in as the holder, as another client-go replica would.
    peer.kubectl(
        &[
            "patch",
            "lease",
            LEASE,
            "-n",
            NAMESPACE,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"holderIdentity":"intruder"}}"#,
        ],
        "",
    );
    assert!(
        a.becomes(false, Duration::from_secs(5)).await,
        "the leader kept leading after losing the lease"
    );
    assert_eq!(lease_spec(&peer)["holderIdentity"], "intruder");

    // The intruder never renews: after its lease duration the candidate takes it back.
    assert!(
        a.becomes(true, PATIENCE).await,
        "the expired lease was not retaken"
    );
    let spec = lease_spec(&peer);
    assert_eq!(spec["holderIdentity"], "replica-a", "{spec}");
    assert_eq!(spec["leaseTransitions"], 1, "{spec}");
    a.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_leading_within_the_renew_deadline() {
    let peer = KubePeer::start();
    let client = peer.client().await;
    // A 5 s lease against the 1 s renew deadline: stepping down after the lease could
    // have expired for others would be the unsafe outcome this test rules out.
    let config = LeaseConfig {
        lease_duration: Duration::from_secs(5),
        ..fast()
    };
    let mut a = Candidate::start(client.clone(), "replica-a", config);
    assert!(a.becomes(true, PATIENCE).await, "the only candidate leads");
    let lease = Api::<Lease>::namespaced(client, NAMESPACE)
        .get(LEASE)
        .await
        .expect("the lease exists");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("replica-a")
    );

    // The API server goes away: every renewal fails from now on.
    drop(peer);
    let lost = Instant::now();
    assert!(
        a.becomes(false, PATIENCE).await,
        "the leader kept leading without renewing"
    );
    // Its last renewal started before the drop, so others could take over 5 s after the
    // drop at the earliest; it must have stopped by then (it stops ~1 s after its last
    // successful renewal).
    assert!(
        lost.elapsed() < Duration::from_secs(5),
        "stepped down only after {:?}, when the lease may have been taken",
        lost.elapsed()
    );
    a.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_acquire_does_not_shorten_the_first_term() {
    let peer = KubePeer::start();
    // The API server is slow: the create that takes the lease is answered 4 s late and
    // the first renewal 1 s late. Counted from the start of the acquire, the 5 s renew
    // deadline would end 1 s after the lease was won, while that renewal is still on its
    // way, and the leader would step down although every write succeeded.
    peer.delay("POST", "/leases", 4.0, 1);
    peer.delay("PUT", "/leases/", 1.0, 1);
    let config = LeaseConfig {
        lease_duration: Duration::from_secs(10),
        renew_deadline: Duration::from_secs(5),
        retry_period: Duration::from_millis(500),
    };
    let mut a = Candidate::start(peer.client().await, "replica-a", config);
    assert!(a.becomes(true, PATIENCE).await, "the only candidate leads");
    // It keeps leading through the slow renewal and the quick ones after it.
    let mut flag = a.leader.clone();
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        tokio::select! {
            _ = flag.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        assert!(
            *flag.borrow_and_update(),
            "stepped down although every renewal succeeded"
        );
    }
    let spec = lease_spec(&peer);
    assert_eq!(spec["holderIdentity"], "replica-a", "{spec}");
    assert_ne!(spec["acquireTime"], spec["renewTime"], "it renewed: {spec}");
    a.shut_down().await;
}
