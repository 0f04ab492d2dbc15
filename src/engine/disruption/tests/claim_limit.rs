//! Consolidation's capped simulation stops at a second new node: what it says must be
//! what the whole simulation says, or that more nodes were needed, and the simulator it
//! used must answer the next question as if it had run to the end.

use crate::engine::pod::Pod;
use crate::engine::scheduling::{Results, Simulator};

use super::*;

/// What a run decided, in words that compare.
fn said(r: &Results) -> String {
    format!(
        "{:?} {:?} {:?}",
        r.errors,
        r.nominations,
        r.new_nodeclaims
            .iter()
            .map(|c| (&c.pods, c.requirements.to_string(), c.instance_types.len()))
            .collect::<Vec<_>>()
    )
}

#[test]
fn a_claim_limited_run_says_what_the_whole_run_says_or_that_it_needs_more() {
    let state = crate::bench::disruption::cluster(30, 1500, 5);
    let pods_by_node = state.pods_by_node();
    let sim_input = SimInput::new(&state, &pods_by_node);
    let mut sim = Simulator::new(&sim_input.input);
    let (mut stopped, mut whole) = (0, 0);
    for n in 0..state.nodes.len() {
        let mut pods: Vec<&Pod> = pods_by_node[n]
            .iter()
            .map(|&p| &state.pods[p])
            .filter(|p| crate::engine::state::is_reschedulable(p))
            .collect();
        // Two nodes' pods at once too, as multi-node consolidation asks.
        let mut excluded = vec![sim_input.index[n].unwrap()];
        if n % 4 == 0 && n + 1 < state.nodes.len() {
            pods.extend(pods_by_node[n + 1].iter().map(|&p| &state.pods[p]));
            excluded.push(sim_input.index[n + 1].unwrap());
        }
        let price = state.nodes[n].price * excluded.len() as f64;
        let cap = if n % 3 == 0 { None } else { Some(price) };
        let full = sim
            .run_within(&pods, &excluded, cap, usize::MAX)
            .expect("no limit");
        for limit in 0..3 {
            match sim.run_within(&pods, &excluded, cap, limit) {
                None => {
                    assert!(
                        full.new_nodeclaims.len() > limit,
                        "node {n}: stopped at {limit} claims, the whole run needs {}",
                        full.new_nodeclaims.len()
                    );
                    stopped += 1;
                }
                Some(r) => {
                    assert_eq!(said(&r), said(&full), "node {n}, limit {limit}");
                    whole += 1;
                }
            }
            // A stopped run undid its placements: asked again, the simulator answers
            // as before.
            let again = sim.run_within(&pods, &excluded, cap, usize::MAX).unwrap();
            assert_eq!(said(&again), said(&full), "node {n} after limit {limit}");
        }
    }
    assert!(
        stopped >= 30 && whole >= 10,
        "{stopped} stopped, {whole} whole"
    );
}
