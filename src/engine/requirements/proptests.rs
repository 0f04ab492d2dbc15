//! Algebraic properties over random requirements on a small universe of values, mixing
//! strings, integers and integer spellings that only parse (`+3`, `03`).

use proptest::prelude::*;

use super::*;

const KEY: &str = "example.com/k";
const UNIVERSE: &[&str] = &["a", "b", "c", "-1", "0", "1", "2", "3", "5", "10"];
const PROBES: &[&str] = &[
    "a", "b", "c", "z", "-2", "-1", "0", "1", "2", "3", "4", "5", "6", "10", "11", "+3", "03", "",
];

fn subset() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(UNIVERSE, 0..=UNIVERSE.len())
}

fn base() -> impl Strategy<Value = Requirement> {
    prop_oneof![
        subset().prop_map(|v| Requirement::in_values(KEY, v)),
        subset().prop_map(|v| Requirement::not_in_values(KEY, v)),
        Just(Requirement::exists(KEY)),
        Just(Requirement::does_not_exist(KEY)),
        (-2i64..12).prop_map(|n| Requirement::gt(KEY, n)),
        (-2i64..12).prop_map(|n| Requirement::lt(KEY, n)),
        (-2i64..12).prop_map(|n| Requirement::gte(KEY, n)),
        (-2i64..12).prop_map(|n| Requirement::lte(KEY, n)),
    ]
}

/// Base requirements and intersections of two, which reach bounded NotIn and two-sided
/// bounds; some carry minValues.
fn requirement() -> impl Strategy<Value = Requirement> {
    let plain = prop_oneof![
        base(),
        (base(), base()).prop_map(|(a, b)| a.intersection(&b))
    ];
    (plain, proptest::option::of(1usize..4)).prop_map(|(r, m)| r.with_min_values(m))
}

proptest! {
    #[test]
    fn intersection_is_commutative(a in requirement(), b in requirement()) {
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
        prop_assert_eq!(a.has_intersection(&b), b.has_intersection(&a));
    }

    #[test]
    fn intersection_allows_exactly_what_both_allow(a in requirement(), b in requirement()) {
        let both = a.intersection(&b);
        for v in PROBES {
            prop_assert_eq!(both.has(v), a.has(v) && b.has(v), "value {:?}: {} ∩ {} = {}", v, a, b, both);
        }
    }

    #[test]
    fn intersection_is_associative(a in requirement(), b in requirement(), c in requirement()) {
        let left = a.intersection(&b).intersection(&c);
        let right = a.intersection(&b.intersection(&c));
        for v in PROBES {
            prop_assert_eq!(left.has(v), right.has(v));
        }
    }

    #[test]
    fn has_intersection_agrees_with_intersection(a in requirement(), b in requirement()) {
        let both = a.intersection(&b);
        prop_assert_eq!(a.has_intersection(&b), !both.is_empty(), "{} ∩ {} = {}", a, b, both);
        // Whatever a probe finds in the intersection, has_intersection must have seen.
        if PROBES.iter().any(|v| both.has(v)) {
            prop_assert!(a.has_intersection(&b));
        }
    }

    #[test]
    fn any_is_a_member(r in requirement()) {
        if let Some(v) = r.any() {
            prop_assert!(r.has(&v), "{} picked {:?}", r, v);
        }
        if !r.is_complement() {
            prop_assert_eq!(r.any().is_some(), !r.is_empty());
        }
    }

    #[test]
    fn intersects_is_symmetric(a in requirement(), b in requirement()) {
        let (x, y) = (Requirements::from_iter([a]), Requirements::from_iter([b]));
        prop_assert_eq!(x.intersects(&y).is_ok(), y.intersects(&x).is_ok());
    }

    #[test]
    fn spec_round_trip_keeps_meaning(r in requirement()) {
        let reqs = Requirements::from_iter([r]);
        let back = Requirements::from_karpenter(&reqs.to_node_selector_requirements());
        prop_assert!(back.is_ok());
        let back = back.unwrap_or_default();
        for v in PROBES {
            let before = reqs.get(KEY).is_some_and(|r| r.has(v));
            let after = back.get(KEY).is_some_and(|r| r.has(v));
            prop_assert_eq!(before, after, "{} vs {}", reqs, back);
        }
    }

    #[test]
    fn labels_satisfy_requirements_exactly_when_the_full_check_says_so(
        rs in proptest::collection::vec((0usize..3, requirement()), 0..4),
        ls in proptest::collection::vec((0usize..4, 0usize..PROBES.len()), 0..4),
    ) {
        // Keys 0-2 are plain; key 3 is the deprecated zone label, which the quick check
        // leaves to the full one.
        let keys = ["example.com/a", "example.com/b", labels::ZONE, labels::ZONE_BETA];
        let mut specs = Vec::new();
        for (k, r) in rs {
            for mut spec in Requirements::from_iter([r]).to_node_selector_requirements() {
                spec.key = keys[k].to_string();
                specs.push(spec);
            }
        }
        let reqs = Requirements::from_karpenter(&specs);
        prop_assert!(reqs.is_ok());
        let reqs = reqs.unwrap_or_default();
        let node: BTreeMap<String, String> =
            ls.into_iter().map(|(k, v)| (keys[k].to_string(), PROBES[v].to_string())).collect();
        let full = Requirements::from_labels(&node).compatible(&reqs, &allow_no_undefined).is_ok();
        let quick = reqs.satisfied_by_labels(&node);
        if node.contains_key(labels::ZONE_BETA) {
            prop_assert!(!quick || full, "quick said yes, full said no: {} vs {:?}", reqs, node);
        } else {
            prop_assert_eq!(quick, full, "{} vs {:?}", reqs, node);
        }
    }
}
