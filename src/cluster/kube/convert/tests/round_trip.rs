//! The NodeClaim round trip: what the controller creates and patches, read back through a
//! stand-in API server, equals what it wrote (apart from the documented differences),
//! for a sample claim and for any claim the generators build.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::super::*;
use super::nodeclaim::{decode_claim, pool_with_uid, sample_claim, sample_launch};
use super::{at_secs, known_price, price_of};
use crate::api::labels;
use crate::api::nodeclaim::{NodeClaim, TaintEffect};
use crate::api::time::from_chrono;
use crate::cluster::{Launched, NodeClaimObject};
use crate::engine::catalog::CapacityType;
use crate::engine::requirements::{Requirement, Requirements};

/// RFC 7386 JSON merge patch, as the API server applies `application/merge-patch+json`.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("just made an object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// What the controller's writes leave in the API server: the created manifest (named by
/// generateName when unnamed, stamped with creationTimestamp), the launch's label patch
/// then its status patch, and the deletionTimestamp a delete sets.
fn through_the_api_server(claim: &NodeClaimObject, pool: &NodePool) -> NodeClaim {
    let mut v = serde_json::to_value(nodeclaim_manifest(claim, pool)).unwrap();
    if v["metadata"].get("name").is_none() {
        let name = format!("{}x9z9q", v["metadata"]["generateName"].as_str().unwrap());
        v["metadata"]["name"] = json!(name);
    }
    v["metadata"]["uid"] = json!("0c1d2e3f-0000-4000-8000-000000000002");
    v["metadata"]["creationTimestamp"] = serde_json::to_value(from_chrono(claim.created)).unwrap();
    if let Some(l) = &claim.launched {
        merge_patch(&mut v, &launched_labels(l));
        merge_patch(&mut v, &launched_status(l));
    }
    if let Some(d) = claim.deleting {
        v["metadata"]["deletionTimestamp"] = serde_json::to_value(from_chrono(d)).unwrap();
    }
    decode_claim(v).expect("the API server's object decodes")
}

/// The round trip's one documented difference: after launch the NodeClaim's labels are
/// the template's plus the launch's (upstream's `PopulateNodeClaimDetails`), and both
/// `labels` and `launched.labels` read back as that union; `launched.hostname` is
/// `status.nodeName`, which only registration sets; the price comes from the callback;
/// the conditions are the ones the launch status wrote.
fn expected_after_round_trip(claim: &NodeClaimObject) -> NodeClaimObject {
    let mut want = claim.clone();
    if let Some(l) = &claim.launched {
        want.conditions =
            serde_json::from_value(launched_status(l)["status"]["conditions"].clone()).unwrap();
    }
    want.labels
        .insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    if let Some(l) = &mut want.launched {
        want.labels.extend(l.labels.clone());
        want.labels
            .insert(labels::INSTANCE_TYPE.into(), l.instance_type.clone());
        want.labels.insert(labels::ZONE.into(), l.zone.clone());
        want.labels.insert(
            labels::CAPACITY_TYPE.into(),
            l.capacity_type.as_str().into(),
        );
        l.labels = want.labels.clone();
        l.hostname = String::new();
        l.price = price_of(&l.instance_type, &l.zone, l.capacity_type);
    }
    want
}

#[test]
fn a_nodeclaim_round_trips_through_create_and_launch() {
    let pool = pool_with_uid("default");
    let mut claim = sample_claim("default-abcde");
    let created = through_the_api_server(&claim, &pool);
    assert_eq!(
        nodeclaim(&created, &known_price).unwrap(),
        expected_after_round_trip(&claim)
    );

    claim.launched = Some(sample_launch());
    claim.deleting = Some(at_secs(1_714_600_000));
    let launched = through_the_api_server(&claim, &pool);
    let back = nodeclaim(&launched, &known_price).unwrap();
    assert_eq!(back, expected_after_round_trip(&claim));
    // The labels the node will carry are the same as the sim's.
    assert_eq!(
        back.labels.get(labels::INSTANCE_FAMILY).map(String::as_str),
        Some("m5")
    );
}

const KEYS: &[&str] = &[
    labels::CAPACITY_TYPE,
    labels::INSTANCE_TYPE,
    labels::INSTANCE_CPU,
    "example.com/team",
];
const VALUES: &[&str] = &["spot", "on-demand", "m5.large", "web", "0", "2", "4", "16"];

fn requirement(key: &'static str) -> impl Strategy<Value = Requirement> {
    let values = || proptest::sample::subsequence(VALUES, 0..=4);
    let base = prop_oneof![
        values().prop_map(move |v| Requirement::in_values(key, v)),
        values().prop_map(move |v| Requirement::not_in_values(key, v)),
        Just(Requirement::exists(key)),
        Just(Requirement::does_not_exist(key)),
        (-1i64..20).prop_map(move |n| Requirement::gt(key, n)),
        (-1i64..20).prop_map(move |n| Requirement::lt(key, n)),
    ];
    let both = (base.clone(), base.clone()).prop_map(|(a, b)| a.intersection(&b));
    (prop_oneof![base, both], proptest::option::of(1usize..4))
        .prop_map(|(r, m)| r.with_min_values(m))
}

fn requirements() -> impl Strategy<Value = Requirements> {
    proptest::collection::vec(
        proptest::sample::select(KEYS).prop_flat_map(requirement),
        0..4,
    )
    .prop_map(|rs| rs.into_iter().collect())
}

fn resources() -> impl Strategy<Value = Resources> {
    (
        0i64..64_000,
        0i64..1_000_000_000_000_000,
        0i64..300,
        proptest::option::of(1i64..8),
    )
        .prop_map(|(cpu, memory, pods, gpu)| {
            let mut r = Resources {
                cpu,
                memory,
                pods: pods * 1000,
                ..Resources::default()
            };
            if let Some(g) = gpu {
                r.add_named("nvidia.com/gpu", g * 1000);
            }
            r
        })
}

fn string_map(keys: &'static [&'static str]) -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(
        proptest::sample::select(keys).prop_map(String::from),
        "[a-z0-9]{1,8}",
        0..3,
    )
}

fn taints() -> impl Strategy<Value = Vec<Taint>> {
    let effect = prop_oneof![
        Just(TaintEffect::NoSchedule),
        Just(TaintEffect::PreferNoSchedule),
        Just(TaintEffect::NoExecute),
    ];
    proptest::collection::vec(
        ("[a-z]{1,6}", proptest::option::of("[a-z]{1,6}"), effect).prop_map(
            |(key, value, effect)| Taint {
                key,
                value,
                effect,
                time_added: None,
            },
        ),
        0..3,
    )
}

fn capacity_type() -> impl Strategy<Value = CapacityType> {
    proptest::sample::select(CapacityType::ALL.to_vec())
}

fn launch() -> impl Strategy<Value = Launched> {
    (
        "i-[0-9a-f]{8}",
        proptest::sample::select(&["m5.large", "c6g.xlarge", "r7i.2xlarge"][..]),
        proptest::sample::select(&["us-east-1a", "us-east-1b"][..]),
        capacity_type(),
        resources(),
        string_map(&[labels::ARCH, labels::OS, labels::INSTANCE_FAMILY, "team"]),
        "[a-z0-9.-]{1,20}",
        1_600_000_000i64..1_800_000_000,
    )
        .prop_map(
            |(id, it, zone, ct, allocatable, labels, hostname, at)| Launched {
                provider_id: format!("aws:///{zone}/{id}"),
                instance_type: it.into(),
                zone: zone.into(),
                capacity_type: ct,
                price: price_of(it, zone, ct),
                capacity: allocatable.clone(),
                allocatable,
                labels,
                hostname,
                at: at_secs(at),
                image_id: Some(format!("ami-{id}")),
                annotations: Default::default(),
            },
        )
}

fn claim() -> impl Strategy<Value = NodeClaimObject> {
    let times = (
        proptest::option::of(0i64..10_000_000),
        proptest::option::of(0i64..100_000),
        1_600_000_000i64..1_800_000_000,
        proptest::option::of(0i64..1_000_000),
    );
    (
        "[a-z0-9]{5}",
        proptest::sample::select(&["default", "gpu"][..]),
        requirements(),
        resources(),
        string_map(&["team", "example.com/tier", labels::ARCH]),
        string_map(&[labels::NODEPOOL_HASH, "example.com/note"]),
        (taints(), taints()),
        times,
        any::<bool>(),
        proptest::option::of(launch()),
    )
        .prop_map(
            |(
                suffix,
                pool,
                requirements,
                requests,
                labels,
                annotations,
                (taints, startup_taints),
                (expire, grace, created, deleting),
                finalizer,
                launched,
            )| {
                NodeClaimObject {
                    name: format!("{pool}-{suffix}"),
                    nodepool: pool.into(),
                    requirements,
                    requests,
                    labels,
                    annotations,
                    taints,
                    startup_taints,
                    expire_after: expire.map(TimeDelta::seconds),
                    termination_grace_period: grace.map(TimeDelta::seconds),
                    created: at_secs(created),
                    deleting: deleting.map(|d| at_secs(created + d)),
                    finalizer,
                    launched,
                    initialized_at: None,
                    conditions: Vec::new(),
                    last_pod_event: None,
                }
            },
        )
}

proptest! {
    #[test]
    fn any_nodeclaim_round_trips(claim in claim()) {
        let pool = pool_with_uid(&claim.nodepool);
        let back = nodeclaim(&through_the_api_server(&claim, &pool), &known_price);
        prop_assert_eq!(back, Ok(expected_after_round_trip(&claim)));
    }
}
