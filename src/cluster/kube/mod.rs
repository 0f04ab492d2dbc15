//! The Kubernetes backend: what the controller needs from a real API server.

pub mod lease;
