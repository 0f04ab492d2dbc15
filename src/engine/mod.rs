//! The autoscaler's decisions: pure functions over a cluster snapshot and a time value.
//! No I/O, no async runtime, no wall clock: that keeps it fast to test, benchmark and replay.

pub mod approval;
pub mod catalog;
pub mod disruption;
pub mod fast_hash;
pub mod features;
pub mod partition;
pub mod pod;
pub mod pod_places;
pub mod provisioning;
pub mod repair;
pub mod requirements;
pub mod reservation;
pub mod resources;
pub mod scheduling;
pub mod selector;
pub mod state;
pub mod static_pools;
pub mod termination;
