//! The control loop over time: the approval gate, the orchestration of disruption
//! commands, the journal and the metrics. Decisions come from `engine/`; this layer decides
//! when they run and records what happened.

pub mod approvals;
pub mod breaker;
pub mod clock;
pub mod controller;
pub mod disruption;
pub mod endpoints;
pub mod events;
pub mod journal;
pub mod metrics;
pub mod notify;
pub mod orchestration;
pub mod requests;
pub mod upstream_events;
pub mod whatif;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod properties;
