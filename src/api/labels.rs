//! Well-known label, annotation, taint and finalizer keys of Karpenter v1 and Kubernetes.
//!
//! One place for every magic string so the engine, the controller and the console agree on
//! spelling; the values mirror `sigs.k8s.io/karpenter/pkg/apis/v1/labels.go` and the AWS
//! provider's `pkg/apis/v1/labels.go`.

/// API group of NodePools and NodeClaims.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// API group of EC2NodeClasses.
pub const AWS_GROUP: &str = "karpenter.k8s.aws";

// Labels Karpenter puts on every node it launches.
/// The NodePool that owns a node or NodeClaim.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// `spot`, `on-demand` or `reserved`.
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// Present (value "true") once the node is initialized.
pub const INITIALIZED: &str = "karpenter.sh/initialized";
/// Present once the node registered with the API server.
pub const REGISTERED: &str = "karpenter.sh/registered";

/// Capacity type values.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";

// Kubernetes well-known node labels.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";

// Deprecated aliases that upstream still accepts in requirements.
pub const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
pub const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
pub const ARCH_BETA: &str = "beta.kubernetes.io/arch";
pub const OS_BETA: &str = "beta.kubernetes.io/os";

// AWS provider instance labels (karpenter.k8s.aws/instance-*).
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_ENCRYPTION_IN_TRANSIT: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
/// The EC2NodeClass a node was launched from (label and instance tag).
pub const EC2NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// The EC2 capacity reservation a `reserved` node runs in (upstream's
/// `cloudprovider.ReservationIDLabel` in the AWS provider), its type (`default` or
/// `capacity-block`) and whether EC2 may take it back (`true`/`false`).
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
pub const CAPACITY_RESERVATION_INTERRUPTIBLE: &str =
    "karpenter.k8s.aws/capacity-reservation-interruptible";
/// The placement group a node runs in (its id), and its partition in a partition group
/// (upstream `LabelPlacementGroupID` and `LabelPlacementGroupPartition`).
pub const PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
pub const PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";
/// The labels a node loses when its reservation ends and it runs on as on-demand.
pub const RESERVED_CAPACITY_LABELS: [&str; 3] = [
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
];

/// Label keys Karpenter itself understands in requirements, beyond user-defined labels.
/// Upstream: `WellKnownLabels` in core plus the AWS provider's additions.
pub const WELL_KNOWN_LABELS: &[&str] = &[
    NODEPOOL,
    CAPACITY_TYPE,
    HOSTNAME,
    INSTANCE_TYPE,
    ZONE,
    REGION,
    ARCH,
    OS,
    WINDOWS_BUILD,
    INSTANCE_TYPE_BETA,
    ZONE_BETA,
    REGION_BETA,
    ARCH_BETA,
    OS_BETA,
    INSTANCE_CATEGORY,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_MEMORY,
    INSTANCE_HYPERVISOR,
    INSTANCE_LOCAL_NVME,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_ENCRYPTION_IN_TRANSIT,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_ACCELERATOR_COUNT,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    PLACEMENT_GROUP_ID,
    PLACEMENT_GROUP_PARTITION,
];

/// `kubernetes.io`-domain keys a NodePool may still use in requirements (upstream's
/// CEL allow-list on `requirements[].key`).
pub const ALLOWED_KUBERNETES_IO_REQUIREMENT_KEYS: &[&str] = &[
    INSTANCE_TYPE_BETA,
    REGION_BETA,
    OS_BETA,
    ARCH_BETA,
    ZONE_BETA,
    ZONE,
    REGION,
    INSTANCE_TYPE,
    ARCH,
    OS,
    WINDOWS_BUILD,
];

/// `kubernetes.io`-domain keys allowed in `template.metadata.labels` (the same list minus
/// `node.kubernetes.io/instance-type`, which is covered by the node.kubernetes.io rule).
pub const ALLOWED_KUBERNETES_IO_LABEL_KEYS: &[&str] = &[
    INSTANCE_TYPE_BETA,
    REGION_BETA,
    OS_BETA,
    ARCH_BETA,
    ZONE_BETA,
    ZONE,
    REGION,
    ARCH,
    OS,
    WINDOWS_BUILD,
];

// Annotations.
/// On a pod ("true" or a duration) or node ("true"): voluntary disruption must not touch it.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// Hash of the NodePool template, for NodePoolDrifted.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// Version of the hash scheme above.
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// Hash of the EC2NodeClass, for NodeClassDrift.
pub const EC2NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// Version of the hash scheme above.
pub const EC2NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// Set on a NodeClaim when a BestEffort minValues requirement was relaxed.
pub const NODECLAIM_MIN_VALUES_RELAXED: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
/// Absolute deadline by which a draining node is force-terminated.
pub const NODECLAIM_TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";
/// Kubernetes pod deletion cost (feeds the disruption cost).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// v1alpha5-era annotations replaced by `karpenter.sh/do-not-disrupt`.
pub const DEPRECATED_DO_NOT_EVICT: &str = "karpenter.sh/do-not-evict";
pub const DEPRECATED_DO_NOT_CONSOLIDATE: &str = "karpenter.sh/do-not-consolidate";
/// v1beta1 -> v1 conversion annotations upstream's conversion webhook wrote.
pub const V1BETA1_KUBELET_CONVERSION: &str =
    "compatibility.karpenter.sh/v1beta1-kubelet-conversion";
pub const V1BETA1_NODECLASS_REFERENCE: &str =
    "compatibility.karpenter.sh/v1beta1-nodeclass-reference";

// Taints.
/// Put on a candidate before it is disrupted, so nothing new schedules there.
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// Put on a node until Karpenter has registered it.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";
/// On a Node whose taints the provider manages: registration leaves its taints alone
/// (upstream `NodeDoNotSyncTaintsLabelKey`).
pub const DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";

// Finalizers.
/// Held on NodeClaims and Nodes until the instance is gone.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
