//! v1beta1 -> v1 migration of Karpenter manifests.
