//! karpenter-tui: a terminal console for Kubernetes node autoscaling in the Karpenter v1
//! model. See DESIGN.md for the map of the crate.

pub mod api;
pub mod bench;
pub mod cloud;
pub mod cluster;
pub mod control;
pub mod demo;
pub mod engine;
pub mod export;
pub mod fuzzing;
pub mod live;
pub mod simulation;
pub mod tui;
pub mod whatif;
