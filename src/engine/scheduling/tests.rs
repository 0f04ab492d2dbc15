//! Acceptance tests of the scheduling simulation, on small hand-made catalogs.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::api::nodepool::NodePool;
use crate::engine::catalog::{CapacityType, InstanceType, Offering};
use crate::engine::pod::{AffinityTerm, Pod, SpreadConstraint};
use crate::engine::resources::Resources;
use crate::engine::selector::Selector;

const GIB: i64 = 1 << 30;

fn it(name: &str, cpu: i64, mem_gib: i64, price: f64, zones: &[&str]) -> Arc<InstanceType> {
    let mut offerings = Vec::new();
    for z in zones {
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
            price: price * 0.4,
            available: true,
            reservation: None,
            partition: None,
        });
    }
    Arc::new(InstanceType {
        name: name.to_string(),
        labels: BTreeMap::from([
            (labels::INSTANCE_TYPE.to_string(), name.to_string()),
            (labels::ARCH.to_string(), "amd64".to_string()),
            (labels::OS.to_string(), "linux".to_string()),
        ]),
        capacity: Resources {
            cpu: cpu * 1000,
            memory: mem_gib * GIB * 1000,
            pods: 110_000,
            ..Default::default()
        },
        overhead: Resources::default(),
        offerings,
    })
}

fn two_and_four() -> Vec<Arc<InstanceType>> {
    vec![
        it("small.2cpu", 2, 8, 0.2, &["zone-a", "zone-b", "zone-c"]),
        it("large.4cpu", 4, 16, 0.4, &["zone-a", "zone-b", "zone-c"]),
    ]
}

fn pool(yaml_extra: &str, name: &str) -> NodePool {
    let text = format!(
        "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: []
{yaml_extra}"
    );
    serde_norway::from_str(&text).expect("test pool parses")
}

/// A hard zonal spread, maxSkew 1, over pods with these labels.
fn zone_spread(labels: &BTreeMap<String, String>) -> SpreadConstraint {
    SpreadConstraint {
        max_skew: 1,
        topology_key: labels::ZONE.into(),
        hard: true,
        selector: Selector::from_labels(labels),
        min_domains: None,
        honor_node_affinity: true,
        honor_node_taints: false,
        match_label_keys: vec![],
    }
}

fn cpu_pod(name: &str, millicores: i64) -> Pod {
    Pod::new("default", name, Resources::cpu_mem(millicores, 256 << 20))
}

fn input<'a>(pools: &'a [NodePool], types: &[Arc<InstanceType>]) -> SolveInput<'a> {
    SolveInput {
        pools: pools
            .iter()
            .map(|p| PoolInput {
                nodepool: p,
                instance_types: types.to_vec(),
                in_use: Resources::default(),
            })
            .collect(),
        ..Default::default()
    }
}

fn names(c: &NewNodeClaim) -> Vec<&str> {
    c.instance_types.iter().map(|t| t.name.as_str()).collect()
}

#[test]
fn one_pod_one_claim_listing_every_fitting_type_cheapest_first() {
    let pools = [pool("", "default")];
    let p = cpu_pod("p", 1000);
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.new_nodeclaims.len(), 1);
    assert_eq!(
        names(&r.new_nodeclaims[0]),
        vec!["small.2cpu", "large.4cpu"]
    );
    assert_eq!(r.new_nodeclaims[0].nodepool, "default");
}

#[test]
fn a_label_no_nodepool_offers_leaves_the_pod_pending_with_the_label_named() {
    let pools = [pool("", "default")];
    let mut p = cpu_pod("p", 1000);
    p.node_selector
        .insert("example.com/team".into(), "ml".into());
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert!(r.new_nodeclaims.is_empty());
    let why = &r.errors[&p.key];
    assert!(why.contains("example.com/team"), "{why}");
}

#[test]
fn the_heavier_nodepool_wins_and_equal_weights_go_to_the_name_sorting_last() {
    let spot = pool("  weight: 10\n", "spot");
    let od = pool("  weight: 50\n", "on-demand");
    let pools = [spot, od];
    let p = cpu_pod("p", 1000);
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert_eq!(r.new_nodeclaims[0].nodepool, "on-demand");

    let pools = [
        pool("  weight: 10\n", "alpha"),
        pool("  weight: 10\n", "beta"),
    ];
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert_eq!(r.new_nodeclaims[0].nodepool, "beta");
}

#[test]
fn limits_are_applied_pessimistically_and_named_in_the_reason() {
    let pools = [pool("  limits: {cpu: 3}\n", "default")];
    let anti = AffinityTerm {
        selector: Selector::from_labels(&BTreeMap::from([("app".to_string(), "db".to_string())])),
        namespaces: vec![],
        topology_key: labels::HOSTNAME.into(),
        weight: 0,
    };
    let mut a = cpu_pod("a", 1500);
    let mut b = cpu_pod("b", 1500);
    for p in [&mut a, &mut b] {
        p.labels.insert("app".into(), "db".into());
        p.anti_affinity.push(anti.clone());
    }
    let r = solve(&input(&pools, &two_and_four()), &[&a, &b]);
    assert_eq!(r.new_nodeclaims.len(), 1, "{:?}", r.errors);
    assert_eq!(names(&r.new_nodeclaims[0]), vec!["small.2cpu"]);
    assert_eq!(r.errors.len(), 1);
    let why = r.errors.values().next().unwrap();
    assert!(why.contains("limits"), "{why}");
}

#[test]
fn a_node_limit_counts_existing_nodes_and_each_new_claim_as_one() {
    // limits.nodes used to be ignored for dynamic pools: no instance type has a `nodes`
    // capacity, so nothing was ever subtracted and every pod got a node.
    let pools = [pool("  limits: {nodes: 3}\n", "default")];
    let mut inp = input(&pools, &two_and_four());
    inp.pools[0]
        .in_use
        .add_named(crate::engine::resources::NODES, 1000);
    let pods: Vec<Pod> = (0..4).map(|i| cpu_pod(&format!("p{i}"), 3000)).collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let r = solve(&inp, &refs);
    assert_eq!(
        r.new_nodeclaims.len(),
        2,
        "3 allowed, 1 exists: {:?}",
        r.errors
    );
    assert_eq!(r.errors.len(), 2);
    let why = r.errors.values().next().unwrap();
    assert!(why.contains("node limits have been exhausted"), "{why}");
}

#[test]
fn a_pool_whose_requirements_match_no_type_is_named() {
    let pools = [pool("", "default"), pool("", "nowhere")];
    let mut pools = pools;
    pools[1].spec.template.spec.requirements = vec![
        serde_norway::from_str(
            "{key: node.kubernetes.io/instance-type, operator: In, values: [no-such.type]}",
        )
        .unwrap(),
    ];
    let p = cpu_pod("p", 1000);
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert_eq!(r.pools_without_types, vec!["nowhere".to_string()]);
}

#[test]
fn daemonset_overhead_is_part_of_every_new_node() {
    let pools = [pool("", "default")];
    let ds = Pod::new("kube-system", "ds", Resources::cpu_mem(1000, 0));
    let p = cpu_pod("p", 1500);
    let mut inp = input(&pools, &two_and_four());
    inp.daemonsets = vec![ds];
    let r = solve(&inp, &[&p]);
    let c = &r.new_nodeclaims[0];
    assert_eq!(names(c), vec!["large.4cpu"]);
    assert_eq!(c.requests.cpu, 2500);
}

#[test]
fn zonal_spread_puts_two_pods_in_each_of_three_zones() {
    let pools = [pool("", "default")];
    let app = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let pods: Vec<Pod> = (0..6)
        .map(|i| {
            let mut p = cpu_pod(&format!("web-{i}"), 1000);
            p.labels = app.clone();
            p.spread.push(zone_spread(&app));
            p
        })
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let r = solve(&input(&pools, &two_and_four()), &refs);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for c in &r.new_nodeclaims {
        let zone = c.requirements.get(labels::ZONE).expect("pinned to a zone");
        assert_eq!(zone.values().len(), 1, "claim not pinned: {zone}");
        *per_zone.entry(zone.values()[0].clone()).or_default() += c.pods.len();
    }
    assert_eq!(
        per_zone,
        BTreeMap::from([
            ("zone-a".into(), 2),
            ("zone-b".into(), 2),
            ("zone-c".into(), 2)
        ])
    );
}

#[test]
fn existing_nodes_with_room_are_used_before_new_claims() {
    let pools = [pool("", "default")];
    let mut inp = input(&pools, &two_and_four());
    inp.nodes.push(NodeInput {
        name: "node-1".into(),
        labels: NodeLabels::from(BTreeMap::from([(
            labels::ZONE.to_string(),
            "zone-a".to_string(),
        )])),
        taints: vec![],
        allocatable: Resources {
            pods: 110_000,
            ..Resources::cpu_mem(4000, 16 * GIB)
        },
        requested: Resources::cpu_mem(1000, GIB),
        host_ports: vec![],
        initialized: true,
    });
    let p = cpu_pod("p", 2000);
    let big = cpu_pod("big", 3500);
    let r = solve(&inp, &[&p, &big]);
    assert_eq!(
        r.nominations,
        vec![Nomination {
            node: "node-1".into(),
            pods: vec![p.key.clone()]
        }]
    );
    assert_eq!(r.new_nodeclaims.len(), 1);
    assert_eq!(r.new_nodeclaims[0].pods, vec![big.key.clone()]);
}

#[test]
fn preferred_node_affinity_is_relaxed_when_it_cannot_be_met() {
    let pools = [pool("", "default")];
    let mut p = cpu_pod("p", 1000);
    p.node_affinity = Some(serde_json::from_value(serde_json::json!({
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["does-not-exist"]}]}}
        ]
    })).unwrap());
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.new_nodeclaims.len(), 1);
}

/// PREFERENCE_POLICY: a pod that prefers the large type gets a NodeClaim of that type
/// alone under Respect; under Ignore the preference is gone and the NodeClaim may be any
/// type that fits, cheapest first. A zonal ScheduleAnyway spread goes the same way.
#[test]
fn preferences_are_requirements_under_respect_and_gone_under_ignore() {
    let pools = [pool("", "default")];
    let mut p = cpu_pod("p", 1000);
    p.node_affinity = Some(serde_json::from_value(serde_json::json!({
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["large.4cpu"]}]}}
        ]
    })).unwrap());
    let types_of = |policy| {
        let mut inp = input(&pools, &two_and_four());
        inp.preference_policy = policy;
        let r = solve(&inp, &[&p]);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.new_nodeclaims.len(), 1);
        r.new_nodeclaims[0]
            .instance_types
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(types_of(PreferencePolicy::Respect), ["large.4cpu"]);
    assert_eq!(
        types_of(PreferencePolicy::Ignore),
        ["small.2cpu", "large.4cpu"]
    );

    let mut spread = cpu_pod("s", 1000);
    let labels = BTreeMap::from([("app".to_string(), "s".to_string())]);
    spread.labels = labels.clone();
    let mut zonal = zone_spread(&labels);
    zonal.hard = false;
    spread.spread.push(zonal);
    let ignored = WorkPod::new(&spread, PreferencePolicy::Ignore).unwrap();
    assert!(ignored.pod.spread.is_empty() && !ignored.has_topology);
    let respected = WorkPod::new(&spread, PreferencePolicy::Respect).unwrap();
    assert_eq!(respected.pod.spread.len(), 1);
}

/// Random batches of pods with random sizes, hostname anti-affinity and zonal spreads.
fn arb_pods() -> impl Strategy<Value = Vec<Pod>> {
    prop::collection::vec((1i64..=8, 0u8..4, 0u8..3), 1..40).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (cpu_quarter, kind, app))| {
                let mut p = cpu_pod(&format!("p{i}"), cpu_quarter * 250);
                // Spread pods get their own apps so only they count toward their skew.
                let prefix = if kind == 2 { "s" } else { "a" };
                let labels = BTreeMap::from([("app".to_string(), format!("{prefix}{app}"))]);
                p.labels = labels.clone();
                match kind {
                    1 => p.anti_affinity.push(AffinityTerm {
                        selector: Selector::from_labels(&labels),
                        namespaces: vec![],
                        topology_key: labels::HOSTNAME.into(),
                        weight: 0,
                    }),
                    2 => p.spread.push(zone_spread(&labels)),
                    _ => {}
                }
                p
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_claim_is_overcommitted_and_hard_constraints_hold(pods in arb_pods()) {
        let pools = [pool("", "default")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let types = two_and_four();
        let r = solve(&input(&pools, &types), &refs);
        let by_key: BTreeMap<_, _> = pods.iter().map(|p| (p.key.clone(), p)).collect();
        // Every pod is either placed once or has a reason.
        prop_assert_eq!(r.scheduled() + r.errors.len(), pods.len());
        let mut zone_counts: BTreeMap<(String, String), i32> = BTreeMap::new();
        for c in &r.new_nodeclaims {
            let mut sum = Resources::default();
            for k in &c.pods { sum.add(&by_key[k].requests); }
            // The cheapest (first) option must hold everything: no over-commit.
            let first = &c.instance_types[0];
            prop_assert!(sum.fits_in(&first.allocatable()), "{} over-committed", first.name);
            for t in &c.instance_types { prop_assert!(sum.fits_in(&t.allocatable())); }
            // Hostname anti-affinity: a pod with it shares its node with no pod of its app.
            for k in &c.pods {
                let p = by_key[k];
                if !p.anti_affinity.is_empty() {
                    let same_app = c.pods.iter().filter(|o| by_key[*o].labels["app"] == p.labels["app"]).count();
                    prop_assert_eq!(same_app, 1, "anti-affinity violated for {}", p.key);
                }
            }
            let zone = c.requirements.get(labels::ZONE);
            for k in &c.pods {
                let p = by_key[k];
                if !p.spread.is_empty() {
                    let z = zone.expect("spread pods pin their claim's zone");
                    prop_assert_eq!(z.values().len(), 1);
                    *zone_counts.entry((p.labels["app"].clone(), z.values()[0].clone())).or_default() += 1;
                }
            }
        }
        // Zonal spread: per app, max - min over the three zones is at most 1.
        let apps: std::collections::BTreeSet<String> = zone_counts.keys().map(|(a, _)| a.clone()).collect();
        for app in apps {
            let counts: Vec<i32> = ["zone-a", "zone-b", "zone-c"]
                .iter()
                .map(|z| zone_counts.get(&(app.clone(), z.to_string())).copied().unwrap_or(0))
                .collect();
            let (mx, mn) = (counts.iter().max().unwrap(), counts.iter().min().unwrap());
            prop_assert!(mx - mn <= 1, "skew violated for {}: {:?}", app, counts);
        }
    }

    #[test]
    fn the_same_input_gives_the_same_output(pods in arb_pods()) {
        let pools = [pool("", "default")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let types = two_and_four();
        let a = solve(&input(&pools, &types), &refs);
        let b = solve(&input(&pools, &types), &refs);
        let shape = |r: &Results| -> Vec<(Vec<String>, Vec<PodKey>, String)> {
            r.new_nodeclaims.iter().map(|c| (c.instance_types.iter().map(|t| t.name.clone()).collect(), c.pods.clone(), c.requirements.to_string())).collect()
        };
        prop_assert_eq!(shape(&a), shape(&b));
        prop_assert_eq!(a.errors, b.errors);
    }
}

#[test]
fn an_untolerated_taint_is_named_in_the_reason() {
    let pools = [pool(
        "      taints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n",
        "gpu",
    )];
    let p = cpu_pod("p", 1000);
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert!(r.new_nodeclaims.is_empty());
    let why = &r.errors[&p.key];
    assert!(why.contains("dedicated=gpu:NoSchedule"), "{why}");
}

#[test]
fn min_values_strict_fails_the_pod_and_best_effort_relaxes_the_claim() {
    let np: NodePool = serde_norway::from_str(
        "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [small.2cpu, large.4cpu], minValues: 2}
",
    )
    .expect("pool parses");
    let pools = [np];
    // 3 CPUs fit only the 4-CPU type: one distinct instance type, minValues asks for 2.
    let p = cpu_pod("p", 3000);
    let r = solve(&input(&pools, &two_and_four()), &[&p]);
    assert!(r.new_nodeclaims.is_empty());
    assert!(
        r.errors[&p.key].contains("minValues"),
        "{}",
        r.errors[&p.key]
    );

    let mut relaxed = input(&pools, &two_and_four());
    relaxed.min_values_policy = MinValuesPolicy::BestEffort;
    let r = solve(&relaxed, &[&p]);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert!(r.new_nodeclaims[0].min_values_relaxed);
    assert_eq!(names(&r.new_nodeclaims[0]), vec!["large.4cpu"]);
}

#[test]
fn preferences_relax_in_upstream_order() {
    let mut p = cpu_pod("p", 1000);
    p.node_affinity = Some(
        serde_json::from_value(serde_json::json!({
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
            ]
        }))
        .unwrap(),
    );
    let term = AffinityTerm {
        selector: Selector::from_labels(&BTreeMap::from([("x".to_string(), "y".to_string())])),
        namespaces: vec![],
        topology_key: labels::ZONE.into(),
        weight: 5,
    };
    p.preferred_affinity.push(term.clone());
    p.preferred_anti_affinity.push(term);
    p.spread.push(SpreadConstraint {
        hard: false,
        ..zone_spread(&BTreeMap::new())
    });
    let mut w = WorkPod::new(&p, PreferencePolicy::Respect).unwrap();
    assert!(
        w.requirements.get("a").is_some(),
        "the heaviest preference starts as a requirement"
    );
    let mut steps = Vec::new();
    while let Some(step) = w.relax(true) {
        steps.push(step);
    }
    assert_eq!(
        steps,
        vec![
            "required node affinity term",
            "preferred pod affinity",
            "preferred pod anti-affinity",
            "preferred node affinity",
            "ScheduleAnyway topology spread",
            "PreferNoSchedule taints",
        ]
    );
    let arch = w.requirements.get(labels::ARCH).unwrap();
    assert!(
        arch.has("amd64") && !arch.has("arm64"),
        "the second required term is in effect"
    );
    assert!(w.requirements.get("a").is_none());
}

/// A spread pod honouring node taints ignores matching pods on nodes it cannot tolerate.
#[test]
fn node_taints_policy_honor_skips_tainted_nodes_when_counting() {
    use crate::api::nodeclaim::{Taint, TaintEffect};
    let pools = [pool("", "default")];
    let app = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let zone_a = BTreeMap::from([
        (labels::ZONE.to_string(), "zone-a".to_string()),
        (labels::HOSTNAME.to_string(), "tainted".to_string()),
    ]);
    let taints = vec![Taint {
        key: "dedicated".into(),
        value: Some("batch".into()),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }];
    // Two web pods already run in zone-a, on a node the new pod does not tolerate.
    let mut running: Vec<Pod> = (0..2).map(|i| cpu_pod(&format!("old-{i}"), 100)).collect();
    for p in &mut running {
        p.labels = app.clone();
        p.node_name = Some("tainted".into());
    }
    let spread = |honor_taints: bool| {
        let mut p = cpu_pod("new", 1000);
        p.labels = app.clone();
        p.spread.push(SpreadConstraint {
            honor_node_taints: honor_taints,
            ..zone_spread(&app)
        });
        p
    };
    let zone_of = |honor: bool| {
        let p = spread(honor);
        let mut inp = input(&pools, &two_and_four());
        inp.bound = running
            .iter()
            .map(|r| BoundPod::new(r, &zone_a, &taints))
            .collect();
        let r = solve(&inp, &[&p]);
        r.new_nodeclaims[0]
            .requirements
            .get(labels::ZONE)
            .unwrap()
            .values()[0]
            .clone()
    };
    // Ignore (default): zone-a already has 2, the pod goes to the emptiest zone.
    assert_eq!(zone_of(false), "zone-b");
    // Honor: the tainted node's pods do not count, so every zone is empty: zone-a first.
    assert_eq!(zone_of(true), "zone-a");
}

/// What a solve decided, pod by pod: each new claim's pods, requirements and instance
/// types, each nomination, each error.
type Decisions = (
    Vec<(Vec<PodKey>, String, Vec<String>)>,
    Vec<Nomination>,
    BTreeMap<PodKey, String>,
);

fn decisions(r: &Results) -> Decisions {
    (
        r.new_nodeclaims
            .iter()
            .map(|c| {
                (
                    c.pods.clone(),
                    c.requirements.to_string(),
                    c.instance_types.iter().map(|t| t.name.clone()).collect(),
                )
            })
            .collect(),
        r.nominations.clone(),
        r.errors.clone(),
    )
}

/// Solves with the pinned-domain claim index and with the plain scan of every open claim.
fn indexed_and_plain(input: &SolveInput, pods: &[&Pod]) -> (Decisions, Decisions) {
    let fast = Simulator::new(input).run(pods, &[]);
    let plain = Simulator::new(input).with_plain_claim_scan().run(pods, &[]);
    (decisions(&fast), decisions(&plain))
}

#[test]
fn the_pinned_claim_index_decides_as_the_plain_scan_on_the_benchmark_mix() {
    use crate::engine::catalog::Catalog;
    for (n, seed) in [(600, 3), (2500, 42)] {
        let catalog = Catalog::synthetic(100, seed);
        let types: Vec<Arc<InstanceType>> = catalog
            .instance_types
            .iter()
            .cloned()
            .map(Arc::new)
            .collect();
        let pools = [NodePool::unconstrained("default")];
        let pods = benchmark::diverse_pods(n, seed);
        let refs: Vec<&Pod> = pods.iter().collect();
        let (fast, plain) = indexed_and_plain(&input(&pools, &types), &refs);
        assert!(fast.0.len() > 10, "{n} pods need many claims");
        assert_eq!(fast, plain, "{n} benchmark pods, seed {seed}");
    }
}

/// Random batches mixing generic pods, hostname anti-affinity, zonal spread and zonal
/// self-affinity, some pinned to a zone by a node selector.
fn arb_zonal_pods() -> impl Strategy<Value = Vec<Pod>> {
    prop::collection::vec((1i64..=8, 0u8..5, 0u8..3, 0u8..4), 1..80).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (cpu_quarter, kind, app, zone))| {
                let mut p = cpu_pod(&format!("p{i}"), cpu_quarter * 250);
                let labels = BTreeMap::from([("app".to_string(), format!("k{kind}-{app}"))]);
                p.labels = labels.clone();
                let term = |key: &str| AffinityTerm {
                    selector: Selector::from_labels(&labels),
                    namespaces: vec![],
                    topology_key: key.into(),
                    weight: 0,
                };
                match kind {
                    1 => p.anti_affinity.push(term(labels::HOSTNAME)),
                    2 => p.spread.push(zone_spread(&labels)),
                    3 => p.affinity.push(term(labels::ZONE)),
                    4 => p.anti_affinity.push(term(labels::ZONE)),
                    _ => {}
                }
                if zone < 3 && i % 3 == 0 {
                    let z = ["zone-a", "zone-b", "zone-c"][zone as usize];
                    p.node_selector = BTreeMap::from([(labels::ZONE.to_string(), z.to_string())]);
                }
                p
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_pinned_claim_index_decides_as_the_plain_scan(pods in arb_zonal_pods()) {
        let pools = [pool("", "default")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let types = two_and_four();
        let (fast, plain) = indexed_and_plain(&input(&pools, &types), &refs);
        prop_assert_eq!(fast, plain);
    }
}
