//! Candidates rank cheapest to disrupt first, ties by NodeClaim: which node a pass
//! disrupts depends on it.

use proptest::prelude::*;

use super::candidates::{Candidate, rank};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the costs (ties and zeroes included) and the order the nodes come in,
    /// each candidate comes out once, with its own pods, in (cost, NodeClaim) order.
    #[test]
    fn candidates_rank_by_cost_then_nodeclaim(
        costs in prop::collection::vec(0usize..4, 1..40),
        rotate in 0usize..40,
    ) {
        let state = crate::bench::disruption::cluster(40, 0, 9);
        let n = costs.len();
        let mut cands: Vec<Candidate> = costs
            .iter()
            .enumerate()
            .map(|(k, &c)| {
                let node = (k + rotate) % n;
                Candidate {
                    node,
                    pods: vec![node],
                    cost: [0.0, 0.5, 1.25, 3.0][c],
                    eviction: 0.0,
                    consolidatable: Ok(()),
                    pod_block: None,
                    drift: None,
                }
            })
            .collect();
        let mut expected: Vec<(f64, String)> = cands
            .iter()
            .map(|c| (c.cost, state.nodes[c.node].nodeclaim.clone()))
            .collect();
        expected.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        rank(&mut cands, &state);
        let got: Vec<(f64, String)> = cands
            .iter()
            .map(|c| (c.cost, state.nodes[c.node].nodeclaim.clone()))
            .collect();
        prop_assert_eq!(got, expected);
        prop_assert!(cands.iter().all(|c| c.pods == vec![c.node]));
    }
}
