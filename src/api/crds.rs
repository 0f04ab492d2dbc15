//! CRD manifests for NodePool, NodeClaim and EC2NodeClass.
