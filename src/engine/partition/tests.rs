//! Partitions: offerings per partition, allowed by the partition requirement, and a
//! topology domain pods spread over.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::api::nodeclaim::Operator;
use crate::api::nodepool::NodePool;
use crate::engine::catalog::CapacityType;
use crate::engine::pod::{Pod, SpreadConstraint};
use crate::engine::provisioning::launch_order;
use crate::engine::resources::Resources;
use crate::engine::scheduling::{PoolInput, SolveInput, solve};
use crate::engine::selector::Selector;

fn offering(zone: &str, partition: Option<u32>) -> Offering {
    Offering {
        zone: zone.into(),
        capacity_type: CapacityType::OnDemand,
        price: 0.1,
        available: true,
        reservation: None,
        partition,
    }
}

/// A 2-core type offered on demand in one zone, in partitions 1..=`partitions`.
fn it(partitions: u32) -> Arc<InstanceType> {
    Arc::new(InstanceType {
        name: "m.large".into(),
        labels: BTreeMap::from([(labels::INSTANCE_TYPE.to_string(), "m.large".to_string())]),
        capacity: Resources {
            cpu: 2000,
            memory: 8 << 30 << 10,
            pods: 110_000,
            ..Default::default()
        },
        overhead: Resources::default(),
        offerings: expand(vec![offering("zone-a", None)], partitions),
    })
}

fn reqs(key_op: Operator, values: &[&str]) -> Requirements {
    let mut r = Requirements::new();
    r.add(
        Requirement::new(
            labels::PLACEMENT_GROUP_PARTITION,
            key_op,
            values.iter().map(|v| v.to_string()),
        )
        .unwrap(),
    );
    r
}

#[test]
fn an_offering_is_allowed_by_the_partition_it_launches_into() {
    let in_two = offering("zone-a", Some(2));
    let outside = offering("zone-a", None);
    assert!(allowed(&in_two, &Requirements::new()));
    assert!(allowed(&in_two, &reqs(Operator::In, &["2", "3"])));
    assert!(!allowed(&in_two, &reqs(Operator::In, &["1"])));
    assert!(!allowed(&in_two, &reqs(Operator::NotIn, &["2"])));
    assert!(!allowed(&outside, &reqs(Operator::In, &["1"])));
    assert!(allowed(&outside, &reqs(Operator::NotIn, &["1"])));
    assert!(allowed(&outside, &Requirements::new()));
}

#[test]
fn each_offering_is_expanded_once_per_partition_and_the_type_says_which() {
    let t = it(3);
    let partitions: Vec<Option<u32>> = t.offerings.iter().map(|o| o.partition).collect();
    assert_eq!(partitions, [Some(1), Some(2), Some(3)]);
    let r = type_requirement(&t).expect("a partition requirement");
    assert_eq!(r.values(), ["1", "2", "3"]);
    assert!(type_requirement(&it(0)).is_none());
    // A NodeClaim narrowed to partition 2 launches into partition 2's offering only.
    let order = launch_order(&reqs(Operator::In, &["2"]), &[t]);
    assert_eq!(order.len(), 1, "{order:?}");
}

/// Three pods that each fill a node and spread over partitions (maxSkew 1): three
/// NodeClaims, one per partition, each narrowed to its partition, as zones are.
#[test]
fn pods_spreading_over_partitions_get_a_nodeclaim_in_each() {
    let pool: NodePool = serde_norway::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: hpc}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n",
    )
    .unwrap();
    let app = BTreeMap::from([("app".to_string(), "mpi".to_string())]);
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = Pod::new(
                "default",
                &format!("mpi-{i}"),
                Resources::cpu_mem(1500, 1 << 30),
            );
            p.labels = app.clone();
            p.spread.push(SpreadConstraint {
                max_skew: 1,
                topology_key: labels::PLACEMENT_GROUP_PARTITION.into(),
                hard: true,
                selector: Selector::from_labels(&app),
                min_domains: None,
                honor_node_affinity: true,
                honor_node_taints: false,
                match_label_keys: vec![],
            });
            p
        })
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let input = SolveInput {
        pools: vec![PoolInput {
            nodepool: &pool,
            instance_types: vec![it(3)],
            in_use: Resources::default(),
        }],
        ..Default::default()
    };
    let r = solve(&input, &refs);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let mut partitions: Vec<String> = r
        .new_nodeclaims
        .iter()
        .map(|c| {
            let q = c
                .requirements
                .get(labels::PLACEMENT_GROUP_PARTITION)
                .expect("narrowed to a partition");
            assert_eq!(q.values().len(), 1, "{q}");
            q.values()[0].clone()
        })
        .collect();
    partitions.sort();
    assert_eq!(partitions, ["1", "2", "3"]);
}
