//! Kubernetes objects of the Karpenter v1 API: types, upstream defaults, validation with
//! field paths, manifest loading, CRD generation and the v1beta1 -> v1 migration.

pub mod capacity_reservation;
pub mod crds;
pub mod duration;
pub mod ec2nodeclass;
pub mod generate_name;
pub mod input;
pub mod instance_options;
pub mod labels;
pub mod manifest;
pub mod migrate;
pub mod nodeclaim;
pub mod nodepool;
pub mod pool_settings;
pub mod protocol;
pub mod quantity;
pub mod schedule;
pub mod source_lines;
pub mod text;
pub mod time;
pub mod type_errors;
pub mod validation;
pub mod yaml_limits;
