//! The election's pure rules (who may take the lease, what a claim or release writes)
//! and its timing checks.

use super::*;

fn spec(holder: &str, seconds: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(seconds),
        acquire_time: Some(at(100)),
        renew_time: Some(at(110)),
        lease_transitions: Some(3),
        ..LeaseSpec::default()
    }
}

fn at(second: i64) -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
}

const S: fn(u64) -> Duration = Duration::from_secs;

#[test]
fn a_missing_or_released_lease_is_free() {
    let t = Instant::now();
    assert_eq!(verdict(None, "me", t, t), Verdict::Acquire);
    assert_eq!(
        verdict(Some(&LeaseSpec::default()), "me", t, t),
        Verdict::Acquire
    );
    assert_eq!(verdict(Some(&spec("", 15)), "me", t, t), Verdict::Acquire);
}

#[test]
fn a_record_naming_us_is_renewed_even_when_it_looks_expired() {
    let t = Instant::now();
    assert_eq!(verdict(Some(&spec("me", 15)), "me", t, t), Verdict::Renew);
    assert_eq!(
        verdict(Some(&spec("me", 15)), "me", t, t + S(3600)),
        Verdict::Renew
    );
}

#[test]
fn another_holder_keeps_the_lease_for_its_duration_from_our_first_sight() {
    let t = Instant::now();
    let other = spec("other", 15);
    assert_eq!(
        verdict(Some(&other), "me", t, t + S(1)),
        Verdict::HeldBy {
            holder: "other".into(),
            expires_in: S(14),
        }
    );
    assert!(matches!(
        verdict(Some(&other), "me", t, t + Duration::from_millis(14_999)),
        Verdict::HeldBy { .. }
    ));
    // Expired exactly at observed + duration, as client-go's `After(now)`.
    assert_eq!(verdict(Some(&other), "me", t, t + S(15)), Verdict::Acquire);
    assert_eq!(verdict(Some(&other), "me", t, t + S(60)), Verdict::Acquire);
}

#[test]
fn a_holder_without_a_usable_duration_has_already_expired() {
    let t = Instant::now();
    let mut s = spec("other", 15);
    s.lease_duration_seconds = None;
    assert_eq!(verdict(Some(&s), "me", t, t), Verdict::Acquire);
    s.lease_duration_seconds = Some(-5);
    assert_eq!(verdict(Some(&s), "me", t, t), Verdict::Acquire);
}

#[test]
fn renewing_keeps_acquire_time_and_transitions() {
    let config = LeaseConfig::default();
    let mut old = spec("me", 15);
    old.preferred_holder = Some("keep-me".into());
    let s = claimed(Some(&old), true, "me", &config, at(200));
    assert_eq!(s.holder_identity.as_deref(), Some("me"));
    assert_eq!(s.lease_duration_seconds, Some(15));
    assert_eq!(s.acquire_time, Some(at(100)));
    assert_eq!(s.renew_time, Some(at(200)));
    assert_eq!(s.lease_transitions, Some(3));
    assert_eq!(s.preferred_holder.as_deref(), Some("keep-me"));
}

#[test]
fn taking_over_counts_a_transition_and_restarts_acquire_time() {
    let config = LeaseConfig {
        lease_duration: S(2),
        renew_deadline: S(1),
        retry_period: Duration::from_millis(200),
    };
    let s = claimed(Some(&spec("other", 15)), false, "me", &config, at(300));
    assert_eq!(s.holder_identity.as_deref(), Some("me"));
    assert_eq!(s.lease_duration_seconds, Some(2));
    assert_eq!(s.acquire_time, Some(at(300)));
    assert_eq!(s.renew_time, Some(at(300)));
    assert_eq!(s.lease_transitions, Some(4));
}

#[test]
fn releasing_clears_the_holder_with_a_one_second_lease() {
    let s = released(Some(&spec("me", 15)), at(400));
    assert_eq!(s.holder_identity.as_deref(), Some(""));
    assert_eq!(s.lease_duration_seconds, Some(1));
    assert_eq!(s.renew_time, Some(at(400)));
    assert_eq!(s.acquire_time, Some(at(400)));
    assert_eq!(s.lease_transitions, Some(3));
    let t = Instant::now();
    assert_eq!(verdict(Some(&s), "next", t, t), Verdict::Acquire);
}

#[test]
fn records_serialize_as_client_go_writes_them() {
    let s = claimed(None, false, "pod-a_1", &LeaseConfig::default(), at(0));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["holderIdentity"], "pod-a_1");
    assert_eq!(json["leaseDurationSeconds"], 15);
    assert_eq!(json["renewTime"], "1970-01-01T00:00:00.000000Z");
    assert_eq!(json["acquireTime"], "1970-01-01T00:00:00.000000Z");
    assert_eq!(json["leaseTransitions"], 0);
}

#[test]
fn the_defaults_are_client_gos_and_valid() {
    let c = LeaseConfig::default();
    assert_eq!(
        (c.lease_duration, c.renew_deadline, c.retry_period),
        (S(15), S(10), S(2))
    );
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn timing_that_could_overlap_two_leaders_is_refused() {
    let ok = LeaseConfig {
        lease_duration: S(2),
        renew_deadline: S(1),
        retry_period: Duration::from_millis(200),
    };
    assert_eq!(ok.validate(), Ok(()));
    for bad in [
        LeaseConfig {
            renew_deadline: S(2),
            ..ok
        },
        LeaseConfig {
            lease_duration: Duration::from_millis(2500),
            ..ok
        },
        LeaseConfig {
            retry_period: Duration::from_millis(900),
            ..ok
        },
        LeaseConfig {
            retry_period: Duration::ZERO,
            ..ok
        },
    ] {
        assert!(
            matches!(bad.validate(), Err(LeaseError::Config(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn identities_are_unique_per_process_start() {
    let a = default_identity();
    let b = default_identity();
    assert_ne!(a, b);
    assert!(a.rsplit_once('_').is_some_and(|(_, s)| s.len() == 16));
}
