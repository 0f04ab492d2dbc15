//! Batching, the unavailable-offerings cache and the launch choice.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use super::*;
use crate::api::nodepool::NodePool;
use crate::engine::catalog::{CapacityType, InstanceType, Offering};
use crate::engine::pod::Pod;
use crate::engine::resources::Resources;
use crate::engine::scheduling::{PoolInput, SolveInput, solve};

fn t0() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(20_000)
}

fn ms(n: i64) -> TimeDelta {
    TimeDelta::milliseconds(n)
}

/// Feeds arrivals into a batcher on a 100 ms tick and returns when each batch closed,
/// with the arrivals it held.
fn run_batches(arrivals: &[i64], until_ms: i64) -> Vec<(i64, Vec<i64>)> {
    let mut b = Batcher::default();
    let mut batches = Vec::new();
    let mut current = Vec::new();
    let mut next = 0;
    for tick in (0..=until_ms).step_by(100) {
        while next < arrivals.len() && arrivals[next] <= tick {
            b.trigger(t0() + ms(arrivals[next]));
            current.push(arrivals[next]);
            next += 1;
        }
        if b.take_if_closed(t0() + ms(tick)) {
            batches.push((tick, std::mem::take(&mut current)));
        }
    }
    batches
}

fn pool() -> NodePool {
    NodePool::unconstrained("default")
}

fn it(name: &str, cpu: i64, price: f64) -> Arc<InstanceType> {
    let mut offerings = Vec::new();
    for (i, z) in ["zone-a", "zone-b"].iter().enumerate() {
        offerings.push(Offering {
            zone: z.to_string(),
            capacity_type: CapacityType::OnDemand,
            price,
            available: true,
            reservation: None,
            partition: None,
        });
        offerings.push(Offering {
            zone: z.to_string(),
            capacity_type: CapacityType::Spot,
            price: price * (0.3 + 0.1 * i as f64),
            available: true,
            reservation: None,
            partition: None,
        });
    }
    Arc::new(InstanceType {
        name: name.into(),
        labels: BTreeMap::from([(
            crate::api::labels::INSTANCE_TYPE.to_string(),
            name.to_string(),
        )]),
        capacity: Resources {
            cpu: cpu * 1000,
            memory: ((cpu * 4) << 30) * 1000,
            pods: 110_000,
            ..Default::default()
        },
        overhead: Resources::default(),
        offerings,
    })
}

#[test]
fn two_pods_half_a_second_apart_share_a_batch_and_a_nodeclaim() {
    let batches = run_batches(&[0, 500], 5_000);
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0], (1_500, vec![0, 500]));

    let np = pool();
    let input = SolveInput {
        pools: vec![PoolInput {
            nodepool: &np,
            instance_types: vec![it("m.large", 2, 0.1), it("m.xlarge", 4, 0.2)],
            in_use: Resources::default(),
        }],
        ..Default::default()
    };
    let a = Pod::new("default", "a", Resources::cpu_mem(500, 1 << 30));
    let b = Pod::new("default", "b", Resources::cpu_mem(500, 1 << 30));
    let r = solve(&input, &[&a, &b]);
    assert_eq!(r.new_nodeclaims.len(), 1);
    assert_eq!(r.new_nodeclaims[0].pods.len(), 2);
}

#[test]
fn a_steady_trickle_is_cut_into_batches_at_the_ten_second_maximum() {
    let arrivals: Vec<i64> = (0..=16).map(|i| i * 900).filter(|t| *t <= 15_000).collect();
    let batches = run_batches(&arrivals, 30_000);
    assert_eq!(batches.len(), 2, "{batches:?}");
    assert_eq!(batches[0].0, 10_000, "the first batch closes at 10 s");
    assert_eq!(batches[0].1.len() + batches[1].1.len(), arrivals.len());
    assert!(batches[1].1.iter().all(|t| *t > 10_000));
}

#[test]
fn an_ice_keeps_the_offering_out_for_three_minutes() {
    let np = pool();
    let types = vec![it("m.large", 2, 0.1), it("m.xlarge", 4, 0.2)];
    let pod = Pod::new("default", "a", Resources::cpu_mem(500, 1 << 30));
    let launch_at = |cache: &UnavailableOfferings, now| {
        let input = SolveInput {
            pools: vec![PoolInput {
                nodepool: &np,
                instance_types: cache.apply(&types, None, now),
                in_use: Resources::default(),
            }],
            ..Default::default()
        };
        let r = solve(&input, &[&pod]);
        choose_launch(&r.new_nodeclaims[0]).expect("a launch")
    };
    let mut cache = UnavailableOfferings::default();
    let first = launch_at(&cache, t0());
    assert_eq!(
        (
            first.instance_type.as_str(),
            first.zone.as_str(),
            first.capacity_type
        ),
        ("m.large", "zone-a", CapacityType::Spot)
    );
    cache.mark("m.large", "zone-a", CapacityType::Spot, None, t0());
    let during = launch_at(&cache, t0() + TimeDelta::seconds(179));
    assert_ne!(
        (during.instance_type.as_str(), during.zone.as_str()),
        ("m.large", "zone-a")
    );
    assert_eq!(during.capacity_type, CapacityType::Spot);
    let after = launch_at(&cache, t0() + TimeDelta::seconds(180));
    assert_eq!(after, first);
}

/// An ICE met inside a placement group keeps the offering out for launches into that
/// group only (upstream `WithPlacementGroup`); one met outside any group keeps it out
/// everywhere.
#[test]
fn an_ice_inside_a_placement_group_holds_for_that_group_only() {
    let types = vec![it("m.large", 2, 0.1)];
    let spot_a_available = |cache: &UnavailableOfferings, scope: Option<&str>| {
        cache.apply(&types, scope, t0())[0]
            .offerings
            .iter()
            .find(|o| o.zone == "zone-a" && o.capacity_type == CapacityType::Spot)
            .unwrap()
            .available
    };
    let mut cache = UnavailableOfferings::default();
    cache.mark("m.large", "zone-a", CapacityType::Spot, Some("pg-1"), t0());
    assert!(!spot_a_available(&cache, Some("pg-1")), "out in the group");
    assert!(
        spot_a_available(&cache, None),
        "still tried outside any group"
    );
    assert!(
        spot_a_available(&cache, Some("pg-2")),
        "and in another group"
    );
    cache.mark("m.large", "zone-a", CapacityType::Spot, None, t0());
    assert!(!spot_a_available(&cache, None));
    assert!(
        !spot_a_available(&cache, Some("pg-2")),
        "a general ICE holds in groups too"
    );
}

#[test]
fn spot_is_preferred_but_never_pricier_than_the_cheapest_on_demand() {
    let np = pool();
    let mut pricey_spot = (*it("m.large", 2, 0.1)).clone();
    for o in &mut pricey_spot.offerings {
        if o.capacity_type == CapacityType::Spot {
            o.price = 0.15;
        }
    }
    let input = SolveInput {
        pools: vec![PoolInput {
            nodepool: &np,
            instance_types: vec![Arc::new(pricey_spot)],
            in_use: Resources::default(),
        }],
        ..Default::default()
    };
    let pod = Pod::new("default", "a", Resources::cpu_mem(500, 1 << 30));
    let r = solve(&input, &[&pod]);
    let l = choose_launch(&r.new_nodeclaims[0]).unwrap();
    assert_eq!(l.capacity_type, CapacityType::OnDemand);
    assert!((l.price - 0.1).abs() < 1e-9);
}

#[test]
fn pods_on_deleting_nodes_are_rescheduled_but_daemons_and_bound_pods_are_not() {
    let mut pending = Pod::new("default", "pending", Resources::cpu_mem(100, 1 << 20));
    pending.unschedulable = true;
    let mut not_yet_tried = Pod::new("default", "fresh", Resources::cpu_mem(100, 1 << 20));
    not_yet_tried.unschedulable = false;
    let mut on_deleting = Pod::new("default", "moving", Resources::cpu_mem(100, 1 << 20));
    on_deleting.unschedulable = false;
    on_deleting.node_name = Some("old-node".into());
    let mut daemon = on_deleting.clone();
    daemon.key.name = "daemon".into();
    daemon.owner = Some(crate::engine::pod::Owner {
        kind: "DaemonSet".into(),
        name: "ds".into(),
    });
    let mut settled = on_deleting.clone();
    settled.key.name = "settled".into();
    settled.node_name = Some("healthy-node".into());
    let all = [pending, not_yet_tried, on_deleting, daemon, settled];
    let picked: Vec<&str> = pods_to_schedule(&all, |n| n == "old-node")
        .into_iter()
        .map(|p| p.key.name.as_str())
        .collect();
    assert_eq!(picked, vec!["pending", "moving"]);
}
