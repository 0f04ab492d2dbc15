//! Criterion version of `karpenter-tui bench scheduling`: the solve of Karpenter's
//! scheduling benchmark workload over 400 synthetic instance types.

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use karpenter_tui::api::nodepool::NodePool;
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::pod::Pod;
use karpenter_tui::engine::resources::Resources;
use karpenter_tui::engine::scheduling::benchmark::diverse_pods;
use karpenter_tui::engine::scheduling::{PoolInput, SolveInput, solve};

fn scheduling(c: &mut Criterion) {
    let pool = NodePool::unconstrained("default");
    let types: Vec<_> = Catalog::synthetic(400, 42)
        .instance_types
        .into_iter()
        .map(Arc::new)
        .collect();
    let mut group = c.benchmark_group("solve");
    group.sample_size(10);
    for n in [1000usize, 5000, 20000] {
        let pods = diverse_pods(n, 42);
        let refs: Vec<&Pod> = pods.iter().collect();
        let input = SolveInput {
            pools: vec![PoolInput {
                nodepool: &pool,
                instance_types: types.clone(),
                in_use: Resources::default(),
            }],
            ..Default::default()
        };
        group.bench_with_input(BenchmarkId::from_parameter(n), &refs, |b, refs| {
            b.iter(|| solve(&input, refs))
        });
    }
    group.finish();
}

criterion_group!(benches, scheduling);
criterion_main!(benches);
