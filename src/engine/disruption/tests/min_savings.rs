//! Minimum savings (issue 22): a pool's `karpenter-tui.dev/min-savings-*` holds back
//! consolidation that saves less, and the node says by how much.

use super::*;

fn with_min_savings(mut p: NodePool, settings: &[(&str, &str)]) -> NodePool {
    p.metadata.annotations = Some(
        settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    p
}

#[test]
fn a_replace_below_the_pools_minimum_savings_is_not_proposed_and_says_by_how_much() {
    use crate::api::pool_settings::{MIN_SAVINGS_PER_HOUR, MIN_SAVINGS_PERCENT};
    // big ($1.00) -> l ($0.70): saves $0.30/h, 30% of the node's price.
    for (settings, replaced, why) in [
        (vec![], true, ""),
        (vec![(MIN_SAVINGS_PERCENT, "30")], true, ""),
        (
            vec![(MIN_SAVINGS_PERCENT, "40")],
            false,
            "blocked: saves $0.3000/h (30.0% of $1.0000/h), below the minimum savings of NodePool default (40.0%)",
        ),
        (
            vec![(MIN_SAVINGS_PER_HOUR, "0.5"), (MIN_SAVINGS_PERCENT, "10")],
            false,
            "blocked: saves $0.3000/h (30.0% of $1.0000/h), below the minimum savings of NodePool default ($0.5000/h and 10.0%)",
        ),
        (
            vec![(MIN_SAVINGS_PERCENT, "most")],
            false,
            "blocked: NodePool default: annotation karpenter-tui.dev/min-savings-percent: \"most\" is not a number from 0 to 100 (percent of the nodes' price, e.g. 20)",
        ),
    ] {
        let mut f = balanced_fixture();
        f.pool(with_min_savings(
            pool("default", vec![budget("100%")], &["on-demand"]),
            &settings,
        ));
        f.node("big", "default", "big", OnDemand, hour());
        f.pod("p1", "big", 6000, 4096);
        let pass = run(&f);
        assert_eq!(pass.command.is_some(), replaced, "{settings:?}");
        if !replaced {
            assert_eq!(outcome(&pass, "big").to_string(), why);
            assert_eq!(pass.events[0].reason, "Unconsolidatable");
        }
    }
}

#[test]
fn a_multi_node_move_meets_the_strictest_pool_and_deletes_meet_only_the_absolute_part() {
    use crate::api::pool_settings::{MIN_SAVINGS_PER_HOUR, MIN_SAVINGS_PERCENT};
    // Two m nodes ($0.40 each, one per pool) whose pods fit on a big one: deleting both
    // saves $0.80/h, 100% of their price.
    let cases = [
        (vec![(MIN_SAVINGS_PERCENT, "90")], vec![], 2),
        (vec![(MIN_SAVINGS_PER_HOUR, "0.30")], vec![], 2),
        // b asks $0.90/h: the pair is held back, a's node alone goes.
        (vec![], vec![(MIN_SAVINGS_PER_HOUR, "0.90")], 1),
    ];
    for (a, b, deleted) in cases {
        let mut f = balanced_fixture();
        f.pool(with_min_savings(
            pool("a", vec![budget("100%")], &["on-demand"]),
            &a,
        ));
        f.pool(with_min_savings(
            pool("b", vec![budget("100%")], &["on-demand"]),
            &b,
        ));
        f.node("keep", "a", "big", OnDemand, hour());
        for i in 0..10 {
            f.pod(&format!("k{i}"), "keep", 1000, 1024);
        }
        f.node("m1", "a", "m", OnDemand, hour());
        f.pod("p1", "m1", 500, 512);
        f.node("m2", "b", "m", OnDemand, hour());
        f.pod("p2", "m2", 500, 512);
        let pass = run(&f);
        let cmd = pass.command.as_ref().expect("a delete");
        assert!(cmd.replacements.is_empty(), "a delete");
        assert_eq!(
            cmd.candidates.len(),
            deleted,
            "{a:?} {b:?}: {:?}",
            pass.outcomes
        );
        if deleted == 1 {
            assert_eq!(cmd.method, Method::SingleNodeConsolidation);
            assert_eq!(
                outcome(&pass, "m2").to_string(),
                "blocked: saves $0.4000/h (100.0% of $0.4000/h), below the minimum savings of NodePool b ($0.9000/h)"
            );
        }
    }
}
