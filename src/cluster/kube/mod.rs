//! The Kubernetes backend: what the controller needs from a real API server.

pub mod convert;
pub mod lease;
