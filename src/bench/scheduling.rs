//! `bench scheduling`: Karpenter's scheduling benchmark on our scheduler.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::api::nodepool::NodePool;
use crate::engine::catalog::Catalog;
use crate::engine::pod::Pod;
use crate::engine::resources::Resources;
use crate::engine::scheduling::benchmark::{diverse_pods, first_fit_decreasing_nodes};
use crate::engine::scheduling::{PoolInput, SolveInput, solve};

/// Upstream's benchmark uses 400 fake instance types.
pub const INSTANCE_TYPES: usize = 400;

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Figures {
    pub pods: usize,
    pub nodes: usize,
    pub seconds: f64,
    pub pods_per_second: f64,
    /// Nodes a plain first-fit-decreasing needs for the same pods (see
    /// `first_fit_decreasing_nodes`).
    pub ffd_nodes: usize,
    /// Pods the solve left pending (0 expected).
    pub unscheduled: usize,
}

/// Solves `pods` benchmark pods against 400 synthetic instance types; only the solve is
/// timed (best of `repeat` runs).
pub fn run(pods: usize, seed: u64, repeat: usize) -> Figures {
    let catalog = Catalog::synthetic(INSTANCE_TYPES, seed);
    let types: Vec<Arc<_>> = catalog
        .instance_types
        .iter()
        .cloned()
        .map(Arc::new)
        .collect();
    let pool = NodePool::unconstrained("default");
    let workload = diverse_pods(pods, seed);
    let refs: Vec<&Pod> = workload.iter().collect();
    let input = SolveInput {
        pools: vec![PoolInput {
            nodepool: &pool,
            instance_types: types.clone(),
            in_use: Resources::default(),
        }],
        ..Default::default()
    };
    let mut best = f64::INFINITY;
    let mut results = None;
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let r = solve(&input, &refs);
        best = best.min(start.elapsed().as_secs_f64());
        results = Some(r);
    }
    let r = results.expect("at least one run");
    let mut largest = Resources::default();
    for t in &types {
        largest.max(&t.allocatable());
    }
    Figures {
        pods,
        nodes: r.new_nodeclaims.len(),
        seconds: best,
        pods_per_second: pods as f64 / best,
        ffd_nodes: first_fit_decreasing_nodes(&workload, &largest),
        unscheduled: r.errors.len(),
    }
}
