use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};

use super::*;
use crate::api::manifest::{self, Object};

const FAMILY: &str = "karpenter.k8s.aws/instance-family";
const CPU: &str = "karpenter.k8s.aws/instance-cpu";
const K: &str = "example.com/k";

fn inn(values: &[&str]) -> Requirement {
    Requirement::in_values(K, values.iter().copied())
}
fn not_in(values: &[&str]) -> Requirement {
    Requirement::not_in_values(K, values.iter().copied())
}
fn exists() -> Requirement {
    Requirement::exists(K)
}
fn dne() -> Requirement {
    Requirement::does_not_exist(K)
}

fn reqs(items: &[Requirement]) -> Requirements {
    items.iter().cloned().collect()
}

/// Every operator pair: `a ∩ b` (checked both ways round), written as its constraint.
#[test]
fn intersection_of_every_operator_pair() {
    use Operator::*;
    let k = |op, v: &str| Requirement::new(K, op, [v]).expect("valid");
    let max = i64::MAX.to_string();
    let min = i64::MIN.to_string();
    #[rustfmt::skip]
    let cases = [
        (inn(&["a", "b"]), inn(&["b", "c"]), "In [b]"),
        (inn(&["a"]), inn(&["b"]), "DoesNotExist"),
        (inn(&["a", "b"]), not_in(&["b"]), "In [a]"),
        (inn(&["a"]), not_in(&["a"]), "DoesNotExist"),
        (inn(&["a"]), exists(), "In [a]"),
        (inn(&["a"]), dne(), "DoesNotExist"),
        (inn(&[]), exists(), "DoesNotExist"),
        (not_in(&["a"]), not_in(&["b"]), "NotIn [a b]"),
        (not_in(&["a"]), exists(), "NotIn [a]"),
        (not_in(&["a"]), dne(), "DoesNotExist"),
        (exists(), exists(), "Exists"),
        (exists(), dne(), "DoesNotExist"),
        (dne(), dne(), "DoesNotExist"),
        // Bounds: Gt/Lt become inclusive, and meet or cross.
        (k(Gt, "1"), k(Lt, "5"), "Gte 2 Lte 4"),
        (k(Gt, "4"), k(Lt, "6"), "Gte 5 Lte 5"),
        (k(Gt, "5"), k(Lt, "5"), "DoesNotExist"),
        (k(Gt, "4"), k(Lt, "5"), "DoesNotExist"),
        (k(Gte, "5"), k(Lte, "5"), "Gte 5 Lte 5"),
        (k(Gte, "2"), k(Gt, "4"), "Gte 5"),
        (k(Lte, "9"), k(Lt, "3"), "Lte 2"),
        (k(Gt, &max), exists(), "DoesNotExist"),
        (k(Lt, &min), exists(), "DoesNotExist"),
        // Bounds against sets: non-integers never qualify; concrete sets drop the bounds.
        (k(Gt, "3"), inn(&["1", "4", "10", "abc"]), "In [10 4]"),
        (k(Lt, "3"), inn(&["abc"]), "DoesNotExist"),
        (k(Gt, "3"), not_in(&["4", "abc", "2"]), "NotIn [4] Gte 4"),
        (k(Gt, "3"), exists(), "Gte 4"),
        (k(Gt, "3"), dne(), "DoesNotExist"),
        // minValues: the stricter floor wins.
        (inn(&["a", "b"]).with_min_values(Some(2)), exists().with_min_values(Some(1)), "In [a b] minValues 2"),
    ];
    for (a, b, expected) in cases {
        for (x, y) in [(&a, &b), (&b, &a)] {
            let got = x.intersection(y);
            assert_eq!(got.to_string(), format!("{K} {expected}"), "{x} ∩ {y}");
            assert_eq!(x.has_intersection(y), !got.is_empty(), "{x} ∩ {y}");
        }
    }
}

#[test]
fn has_respects_bounds_and_complements() {
    let gt3 = Requirement::gt(K, 3);
    assert!(gt3.has("4") && gt3.has("+4") && gt3.has("1000"));
    assert!(!gt3.has("3") && !gt3.has("abc") && !gt3.has("4.5") && !gt3.has(""));
    assert!(not_in(&["a"]).has("b") && !not_in(&["a"]).has("a"));
    assert!(exists().has("anything") && !dne().has("anything"));
    let bounded = Requirement::gte(K, 2)
        .intersection(&Requirement::lt(K, 5))
        .intersection(&not_in(&["3"]));
    let allowed: Vec<i32> = (0..7).filter(|n| bounded.has(&n.to_string())).collect();
    assert_eq!(allowed, [2, 4]);
}

#[test]
fn any_is_a_deterministic_member() {
    assert_eq!(inn(&["b", "a"]).any().as_deref(), Some("a"));
    assert_eq!(exists().any().as_deref(), Some("0"));
    assert_eq!(Requirement::gt(K, 5).any().as_deref(), Some("6"));
    assert_eq!(Requirement::lt(K, -3).any().as_deref(), Some("-4"));
    assert_eq!(not_in(&["0", "1"]).any().as_deref(), Some("2"));
    let capped = Requirement::lte(K, 1).intersection(&not_in(&["0", "1"]));
    assert_eq!(capped.any().as_deref(), Some("-1"));
    let pinned = Requirement::gte(K, 3).intersection(&Requirement::lte(K, 3));
    assert_eq!(pinned.any().as_deref(), Some("3"));
    assert_eq!(pinned.intersection(&not_in(&["3"])).any(), None);
    assert_eq!(dne().any(), None);
}

#[test]
fn operator_and_len_follow_upstream() {
    assert_eq!(Requirement::gt(K, 1).operator(), Operator::Exists);
    assert_eq!(
        Requirement::gt(K, 1)
            .intersection(&not_in(&["7"]))
            .operator(),
        Operator::NotIn
    );
    assert_eq!(inn(&[]).operator(), Operator::DoesNotExist);
    assert_eq!(exists().len(), usize::MAX);
    assert_eq!(not_in(&["a", "b"]).len(), usize::MAX - 2);
    assert_eq!(inn(&["a", "b", "a"]).len(), 2);
    assert!(dne().is_empty());
}

#[test]
fn constructors_reject_malformed_numeric_values() {
    for values in [vec![], vec!["abc"], vec!["1", "2"], vec!["1.5"]] {
        let err = Requirement::new(CPU, Operator::Gt, values.clone()).expect_err("must fail");
        assert!(err.to_string().contains("exactly one integer"), "{err}");
    }
    let err = Requirement::parse(CPU, "Greater", ["1"]).expect_err("must fail");
    assert!(
        err.to_string().contains("unknown operator \"Greater\""),
        "{err}"
    );
    // Exists ignores stray values, as upstream does.
    assert_eq!(
        Requirement::parse(K, "Exists", ["x"]).expect("valid"),
        exists()
    );
}

#[test]
fn deprecated_keys_are_normalized() {
    let r = Requirement::in_values("beta.kubernetes.io/arch", ["arm64"]);
    assert_eq!(r.key(), labels::ARCH);
    let pool = reqs(&[Requirement::in_values(labels::ARCH, ["amd64"])]);
    let pod = reqs(&[r]);
    assert!(pool.compatible(&pod, &allow_well_known_labels).is_err());
}

#[test]
fn add_intersects_the_same_key() {
    let mut r = Requirements::new();
    r.add(Requirement::in_values(labels::ZONE, ["a", "b"]));
    r.add(Requirement::in_values(labels::ZONE, ["b", "c"]));
    r.add(Requirement::exists(labels::ARCH));
    assert_eq!(r.len(), 2);
    let mut keys: Vec<&str> = r.keys().collect();
    keys.sort_unstable();
    assert_eq!(keys, [labels::ARCH, labels::ZONE]);
    assert!(r.has(labels::ZONE) && !r.has(labels::OS));
    assert_eq!(
        r.get(labels::ZONE).map(Requirement::values),
        Some(&["b".to_string()][..])
    );
}

fn pool() -> Requirements {
    reqs(&[
        Requirement::in_values(FAMILY, ["m5", "m6i"]),
        Requirement::in_values(labels::CAPACITY_TYPE, ["on-demand", "spot"]),
        Requirement::does_not_exist("example.com/gpu"),
    ])
}

#[test]
fn compatible_names_the_key_and_both_sides() {
    let pool = pool();
    let pod = reqs(&[Requirement::in_values(FAMILY, ["c5"])]);
    let err = pool
        .compatible(&pod, &allow_well_known_labels)
        .expect_err("disjoint");
    assert_eq!(err.kind(), IncompatibilityKind::Disjoint);
    assert_eq!(err.key(), FAMILY);
    assert_eq!(
        err.describe("NodePool \"default\"").to_string(),
        "key \"karpenter.k8s.aws/instance-family\" In [c5] not compatible with NodePool \"default\" requirement In [m5, m6i]"
    );
    assert!(
        pool.compatible(
            &reqs(&[Requirement::in_values(FAMILY, ["c5", "m5"])]),
            &allow_well_known_labels
        )
        .is_ok()
    );
}

#[test]
fn undefined_custom_labels_fail_but_well_known_ones_are_allowed() {
    let pool = pool();
    let team = reqs(&[Requirement::in_values("example.com/team", ["a"])]);
    let err = pool
        .compatible(&team, &allow_well_known_labels)
        .expect_err("undefined");
    assert_eq!(err.kind(), IncompatibilityKind::Undefined);
    assert_eq!(
        err.describe("NodePool \"default\"").to_string(),
        "key \"example.com/team\" In [a] not compatible with NodePool \"default\", which does not define the label"
    );
    // Excluding values of an undefined label is fine: the node will not carry it.
    for r in [
        Requirement::not_in_values("example.com/team", ["a"]),
        Requirement::does_not_exist("example.com/team"),
    ] {
        assert!(
            pool.compatible(&reqs(&[r]), &allow_well_known_labels)
                .is_ok()
        );
    }
    // Well-known labels may stay undefined on a NodePool, but not on a node.
    let zonal = reqs(&[Requirement::in_values(labels::ZONE, ["us-east-1a"])]);
    assert!(pool.compatible(&zonal, &allow_well_known_labels).is_ok());
    let err = pool
        .compatible(&zonal, &allow_no_undefined)
        .expect_err("node lacks zone");
    assert_eq!(
        err.to_string(),
        "key \"topology.kubernetes.io/zone\" In [us-east-1a] not compatible: the label does not have known values"
    );
}

#[test]
fn undefined_label_hints_at_a_likely_typo() {
    let pool = pool();
    let pod = reqs(&[Requirement::in_values("example.com/zone", ["a"])]);
    let err = pool
        .compatible(&pod, &allow_well_known_labels)
        .expect_err("undefined");
    assert_eq!(err.hint(), Some(labels::ZONE));
    assert!(
        err.to_string()
            .ends_with("(typo of \"topology.kubernetes.io/zone\"?)"),
        "{err}"
    );
    let pod = reqs(&[Requirement::in_values("example.com/gp", ["a"])]);
    let err = pool
        .compatible(&pod, &allow_well_known_labels)
        .expect_err("undefined");
    assert_eq!(err.hint(), Some("example.com/gpu"));
}

#[test]
fn exists_and_does_not_exist_special_cases() {
    let gpu = "example.com/gpu";
    let pool = pool(); // gpu DoesNotExist
    let wants = |r: Requirement| {
        pool.compatible(&reqs(&[r]), &allow_well_known_labels)
            .is_ok()
    };
    assert!(!wants(Requirement::exists(gpu)));
    assert!(!wants(Requirement::in_values(gpu, ["1"])));
    assert!(!wants(Requirement::gt(gpu, 0)));
    assert!(wants(Requirement::does_not_exist(gpu)));
    assert!(wants(Requirement::not_in_values(gpu, ["1"])));
    // Both only excluding: compatible even when no value is left (upstream quirk kept).
    let a = reqs(&[Requirement::gt(CPU, 8).intersection(&Requirement::not_in_values(CPU, ["9"]))]);
    let b = reqs(&[Requirement::lt(CPU, 2).intersection(&Requirement::not_in_values(CPU, ["1"]))]);
    assert!(a.intersects(&b).is_ok() && b.intersects(&a).is_ok());
    let c = reqs(&[Requirement::lt(CPU, 2)]);
    assert!(a.intersects(&c).is_err());
}

#[test]
fn incompatibility_outlives_the_requirements() {
    let owned = {
        let pool = pool();
        let pod = reqs(&[Requirement::in_values(FAMILY, ["c5"])]);
        let err = pool
            .compatible(&pod, &allow_well_known_labels)
            .expect_err("disjoint");
        err.into_owned()
    };
    assert!(
        owned
            .to_string()
            .contains("In [c5] not compatible with requirement In [m5, m6i]")
    );
}

#[test]
fn labels_are_the_single_valued_in_requirements() {
    let r = reqs(&[
        Requirement::in_values(labels::ZONE, ["a"]),
        Requirement::in_values(labels::ARCH, ["amd64", "arm64"]),
        Requirement::exists("example.com/x"),
        Requirement::in_values(labels::HOSTNAME, ["placeholder"]),
    ]);
    let expected: BTreeMap<String, String> = [(labels::ZONE.to_string(), "a".to_string())].into();
    assert_eq!(r.labels(), expected);
}

#[test]
fn display_reads_like_kubectl() {
    let r = reqs(&[
        Requirement::in_values(labels::CAPACITY_TYPE, ["spot", "on-demand"]),
        Requirement::gt(CPU, 3).intersection(&Requirement::lte(CPU, 16)),
        Requirement::not_in_values(FAMILY, ["t3"]).with_min_values(Some(2)),
        Requirement::does_not_exist("example.com/gpu"),
    ]);
    assert_eq!(
        r.to_string(),
        "example.com/gpu DoesNotExist, karpenter.k8s.aws/instance-cpu Gte 4 Lte 16, \
         karpenter.k8s.aws/instance-family NotIn [t3] minValues 2, karpenter.sh/capacity-type In [on-demand spot]"
    );
    let many = Requirement::in_values(FAMILY, ["a", "b", "c", "d", "e", "f", "g"]);
    assert_eq!(
        many.to_string(),
        format!("{FAMILY} In [a b c d e and 2 others]")
    );
}

fn options(values: &[&str]) -> Vec<BTreeMap<String, String>> {
    values
        .iter()
        .map(|v| [(FAMILY.to_string(), v.to_string())].into())
        .collect()
}

#[test]
fn min_values_reports_the_unmet_floor() {
    let r = reqs(&[
        Requirement::in_values(FAMILY, ["m5", "m6i", "c5"]).with_min_values(Some(2)),
        Requirement::in_values(labels::ZONE, ["a"]),
    ]);
    assert_eq!(r.min_values().collect::<Vec<_>>(), [(FAMILY, 2)]);
    assert_eq!(r.satisfies_min_values(&options(&["m5", "m6i"])), Ok(2));
    assert_eq!(
        r.satisfies_min_values(&options(&["m5", "m5", "c5", "m6i"])),
        Ok(3)
    );
    // r5 is not allowed, so it adds no flexibility.
    let err = r
        .satisfies_min_values(&options(&["m5", "m5", "r5"]))
        .expect_err("one family");
    assert_eq!(
        err,
        [MinValuesShortfall {
            key: FAMILY.to_string(),
            needed: 2,
            available: 1
        }]
    );
    assert_eq!(
        err[0].to_string(),
        "minValues requirement on \"karpenter.k8s.aws/instance-family\" needs 2 distinct values, \
         the compatible instance types offer 1"
    );
    assert_eq!(
        reqs(&[Requirement::exists(FAMILY)]).satisfies_min_values(&options(&[])),
        Ok(0)
    );
    // Options described by requirements count every offered value.
    let zonal =
        reqs(&[Requirement::in_values(labels::ZONE, ["a", "b", "c"]).with_min_values(Some(3))]);
    let it = reqs(&[Requirement::in_values(labels::ZONE, ["a", "b", "c"])]);
    assert_eq!(zonal.satisfies_min_values(&[&it]), Ok(1));
}

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: [m5, m6i, c6i]
          minValues: 2
        - key: karpenter.k8s.aws/instance-cpu
          operator: Gt
          values: ['3']
        - key: karpenter.k8s.aws/instance-cpu
          operator: Lte
          values: ['32']
        - key: beta.kubernetes.io/arch
          operator: In
          values: [amd64]
        - key: karpenter.sh/capacity-type
          operator: NotIn
          values: [spot]
";

fn pool_from_manifest() -> Requirements {
    let loaded = manifest::load("pool.yaml", POOL);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    let Some((_, Object::NodePool(pool))) = loaded.objects.first() else {
        panic!("no NodePool")
    };
    Requirements::from_karpenter(&pool.spec.template.spec.requirements).expect("valid requirements")
}

#[test]
fn node_pool_manifest_converts() {
    let r = pool_from_manifest();
    assert_eq!(
        r.to_string(),
        "karpenter.k8s.aws/instance-cpu Gte 4 Lte 32, karpenter.k8s.aws/instance-family In [c6i m5 m6i] minValues 2, \
         karpenter.sh/capacity-type NotIn [spot], kubernetes.io/arch In [amd64]"
    );
    let pod = |k: &str, v: &str| reqs(&[Requirement::in_values(k, [v])]);
    assert!(r.is_compatible(&pod(CPU, "8"), &allow_well_known_labels));
    assert!(!r.is_compatible(&pod(CPU, "2"), &allow_well_known_labels));
    assert!(!r.is_compatible(
        &pod(labels::CAPACITY_TYPE, "spot"),
        &allow_well_known_labels
    ));
    assert!(r.is_compatible(&pod(labels::ARCH_BETA, "amd64"), &allow_well_known_labels));
    // Back to spec form and again: the same constraints.
    let again =
        Requirements::from_karpenter(&r.to_node_selector_requirements()).expect("round trip");
    assert_eq!(again, r);
}

fn expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: op.to_string(),
        values: Some(values.iter().map(|v| v.to_string()).collect()),
    }
}

fn term(exprs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(exprs),
        match_fields: None,
    }
}

fn affinity() -> NodeAffinity {
    NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![
                NodeSelectorTerm {
                    match_fields: Some(vec![expr("metadata.name", "In", &["node-1"])]),
                    ..term(vec![expr(
                        labels::ZONE,
                        "In",
                        &["us-east-1a", "us-east-1b"],
                    )])
                },
                term(vec![expr(labels::ZONE, "In", &["us-east-1c"])]),
            ],
        }),
        preferred_during_scheduling_ignored_during_execution: Some(vec![
            PreferredSchedulingTerm {
                weight: 10,
                preference: term(vec![expr(labels::ARCH, "In", &["arm64"])]),
            },
            PreferredSchedulingTerm {
                weight: 50,
                preference: term(vec![expr(labels::CAPACITY_TYPE, "In", &["spot"])]),
            },
            PreferredSchedulingTerm {
                weight: 50,
                preference: term(vec![expr(FAMILY, "In", &["m5"])]),
            },
        ]),
    }
}

#[test]
fn pod_requirements_take_the_first_required_term_and_heaviest_preference() {
    let selector: BTreeMap<String, String> = [(labels::OS.to_string(), "linux".to_string())].into();
    let aff = affinity();
    let r = pod_requirements(&selector, Some(&aff)).expect("valid");
    assert_eq!(
        r.to_string(),
        "karpenter.sh/capacity-type In [spot], kubernetes.io/os In [linux], topology.kubernetes.io/zone In [us-east-1a us-east-1b]"
    );
    let strict = strict_pod_requirements(&selector, Some(&aff)).expect("valid");
    assert_eq!(
        strict.to_string(),
        "kubernetes.io/os In [linux], topology.kubernetes.io/zone In [us-east-1a us-east-1b]"
    );
    assert_eq!(
        pod_requirements(&selector, None)
            .expect("valid")
            .to_string(),
        "kubernetes.io/os In [linux]"
    );
    assert_eq!(
        heaviest_preference(
            aff.preferred_during_scheduling_ignored_during_execution
                .as_deref()
                .unwrap_or_default()
        ),
        Some(1)
    );
}

#[test]
fn pod_requirements_report_invalid_expressions() {
    let mut aff = affinity();
    aff.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term(vec![expr(CPU, "Gt", &["four"])])],
    });
    let err = pod_requirements(&BTreeMap::new(), Some(&aff)).expect_err("invalid Gt");
    assert_eq!(
        err.to_string(),
        "key \"karpenter.k8s.aws/instance-cpu\": operator Gt needs exactly one integer value, got [\"four\"]"
    );
}
