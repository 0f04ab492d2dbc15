//! Benchmarks behind `karpenter-tui bench`: each builds a workload, times only the work
//! the figure names, and returns the numbers. Nothing here asserts timings; that would
//! make tests flaky on a loaded machine.

pub mod disruption;
pub mod fuzz;
pub mod render;
pub mod scheduling;
pub mod simulate;
pub mod snapshot;
