//! `karpenter.k8s.aws/v1` EC2NodeClass: the AWS side of a node (AMI, subnets, security
//! groups, IAM, kubelet settings, disks, IMDS).
//!
//! Field names, defaults and CRD markers mirror the AWS provider's
//! `pkg/apis/v1/ec2nodeclass.go`; the CEL rules are its `+kubebuilder:validation:XValidation`
//! markers.

// kube's `printcolumn(...)` repeats `type_` and `priority` once per column; clippy reads
// the repeats as duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::capacity_reservation::{CapacityReservation, CapacityReservationSelectorTerm};
use super::instance_options::{
    ConnectionTracking, CpuOptions, NetworkInterface, PlacementGroupSelector,
};
use super::nodeclaim::NodeSelectorRequirementWithMinValues;
use super::quantity::Quantity;

/// AMI families with an `alias` (lower-case) and the version rules that apply to them.
pub const ALIAS_FAMILIES: &[&str] = &[
    "al2",
    "al2023",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];

/// Configuration of the EC2 instances a NodePool launches.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    category = "karpenter",
    status = "EC2NodeClassStatus",
    derive = "PartialEq",
    doc = "EC2NodeClass is the Schema for the EC2NodeClass API",
    printcolumn(
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        name = "Ready",
        type_ = "string"
    ),
    printcolumn(
        json_path = ".metadata.creationTimestamp",
        name = "Age",
        type_ = "date"
    ),
    printcolumn(
        json_path = ".spec.role",
        name = "Role",
        type_ = "string",
        priority = "1"
    )
)]
#[x_kube(validation = Rule::new("has(self.amiSelectorTerms) && self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)").message("amiFamily must be set if amiSelectorTerms does not contain an alias"))]
#[x_kube(validation = Rule::new("(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))").message("must specify exactly one of ['role', 'instanceProfile']"))]
#[x_kube(validation = Rule::new("(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))").message("changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate this node class if you want to change this."))]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    /// Which subnets nodes launch into (tags, including "*", or ids).
    #[x_kube(validation = Rule::new("self.size() != 0").message("subnetSelectorTerms cannot be empty"))]
    #[x_kube(validation = Rule::new("self.all(x, has(x.tags) || has(x.id))").message("expected at least one, got none, ['tags', 'id']"))]
    #[x_kube(validation = Rule::new("!self.exists(x, has(x.id) && has(x.tags))").message("'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"))]
    #[schemars(length(max = 30))]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Which security groups nodes get (tags, id or name).
    #[x_kube(validation = Rule::new("self.size() != 0").message("securityGroupSelectorTerms cannot be empty"))]
    #[x_kube(validation = Rule::new("self.all(x, has(x.tags) || has(x.id) || has(x.name))").message("expected at least one, got none, ['tags', 'id', 'name']"))]
    #[x_kube(validation = Rule::new("!self.exists(x, has(x.id) && (has(x.tags) || has(x.name)))").message("'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"))]
    #[x_kube(validation = Rule::new("!self.exists(x, has(x.name) && (has(x.tags) || has(x.id)))").message("'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"))]
    #[schemars(length(max = 30))]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Which AMIs nodes boot; an alias such as `al2023@latest` must be the only term.
    #[x_kube(validation = Rule::new("self.size() != 0").message("expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"))]
    #[x_kube(validation = Rule::new("!(self.exists(x, has(x.alias)) && self.size() != 1)").message("'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"))]
    #[schemars(length(min = 1, max = 30))]
    pub ami_selector_terms: Vec<AMISelectorTerm>,
    /// The AMI family; required unless an alias names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AMIFamily>,
    /// Raw user data merged with Karpenter's own (nodeadm for AL2023, TOML for Bottlerocket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role; Karpenter creates the instance profile for it. Exclusive with instanceProfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self != ''").message("role cannot be empty"))]
    pub role: Option<String>,
    /// An existing instance profile. Exclusive with role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self != ''").message("instanceProfile cannot be empty"))]
    pub instance_profile: Option<String>,
    /// Tags applied to instances, volumes and launch templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[x_kube(validation = Rule::new("self.all(k, k != '')").message("empty tag keys aren't supported"))]
    #[x_kube(validation = Rule::new("self.all(k, k != 'eks:eks-cluster-name')").message("tag contains a restricted tag matching eks:eks-cluster-name"))]
    #[x_kube(validation = Rule::new("self.all(k, !k.startsWith('kubernetes.io/cluster') )").message("tag contains a restricted tag matching kubernetes.io/cluster/"))]
    #[x_kube(validation = Rule::new("self.all(k, k != 'karpenter.sh/nodepool')").message("tag contains a restricted tag matching karpenter.sh/nodepool"))]
    #[x_kube(validation = Rule::new("self.all(k, k != 'karpenter.sh/nodeclaim')").message("tag contains a restricted tag matching karpenter.sh/nodeclaim"))]
    #[x_kube(validation = Rule::new("self.all(k, k != 'karpenter.k8s.aws/ec2nodeclass')").message("tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"))]
    pub tags: BTreeMap<String, String>,
    /// Kubelet settings for nodes of this class (moved here from the NodePool in v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// Block devices; at most one may be the root volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1").message("must have only one blockDeviceMappings with rootVolume"))]
    #[schemars(length(max = 50))]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    /// How local instance-store disks are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// IMDS settings; upstream defaults to IMDSv2 required with hop limit 1.
    #[serde(default = "default_metadata_options")]
    #[schemars(extend("default" = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}))]
    pub metadata_options: MetadataOptions,
    /// Enables CloudWatch detailed monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Overrides the subnet's public-IP setting.
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// Reserved-capacity context (Outposts / capacity reservations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Capacity reservations the nodes may launch into: offered as `reserved` capacity,
    /// tried before spot and on-demand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))").message("expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"))]
    #[x_kube(validation = Rule::new("!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))").message("'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"))]
    #[schemars(length(max = 30))]
    pub capacity_reservation_selector_terms: Option<Vec<CapacityReservationSelectorTerm>>,
    /// The placement group to launch into, by name or id; the NodeClass is not Ready
    /// until an available group answers to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// The network interface layout, e.g. EFA-only interfaces: the launch template's
    /// interfaces, and only instance types with those cards and EFA interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')").message("networkInterfaces must include a primary interface with interfaceType='interface'"))]
    #[x_kube(validation = Rule::new("self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))").message("networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"))]
    #[schemars(length(max = 150))]
    pub network_interfaces: Option<Vec<NetworkInterface>>,
    /// IPv4 prefixes per interface (prefix delegation), set on every interface but
    /// EFA-only ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_prefix_count: Option<i32>,
    /// Connection tracking timeouts of the interfaces (not EFA-only ones); Nitro types
    /// only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// CPU options: nested virtualization, on types whose processor supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
}

/// Selects subnets by tags or by id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must carry; a value of "*" matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
    /// A subnet id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

/// Selects security groups by tags, id or name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupSelectorTerm {
    /// Tags the group must carry; a value of "*" matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
    /// A security group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "sg-[0-9a-z]+"))]
    pub id: Option<String>,
    /// A security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Selects AMIs by alias, id, name/owner, tags or an SSM parameter.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.tags) || has(self.id) || has(self.name) || has(self.alias) || has(self.ssmParameter)").message("expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"))]
#[x_kube(validation = Rule::new("!(has(self.id) && (has(self.alias) || has(self.tags) || has(self.name) || has(self.owner)))").message("'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"))]
#[x_kube(validation = Rule::new("!(has(self.alias) && (has(self.id) || has(self.tags) || has(self.name) || has(self.owner)))").message("'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"))]
pub struct AMISelectorTerm {
    /// `family@version`, e.g. `al2023@latest` or `al2023@v20240807`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[a-zA-Z0-9]+@.+$')").message("'alias' is improperly formatted, must match the format 'family@version'"))]
    #[x_kube(validation = Rule::new("self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']").message("family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"))]
    #[x_kube(validation = Rule::new("self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true").message("windows families may only specify version 'latest'"))]
    #[schemars(length(max = 30))]
    pub alias: Option<String>,
    /// Tags the AMI must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(k, k != '' && self[k] != '')").message("empty tag keys or values aren't supported"))]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
    /// An AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "ami-[0-9a-z]+"))]
    pub id: Option<String>,
    /// An AMI name (wildcards allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The AMI owner: an account id or alias such as "amazon" or "self".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// An SSM parameter whose value is an AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// AMI families Karpenter knows how to bootstrap.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum AMIFamily {
    AL2,
    AL2023,
    Bottlerocket,
    Custom,
    Windows2019,
    Windows2022,
    Windows2025,
}

impl AMIFamily {
    /// The alias family name (`al2023` for AL2023); `None` for Custom.
    pub fn alias_name(self) -> Option<&'static str> {
        match self {
            AMIFamily::AL2 => Some("al2"),
            AMIFamily::AL2023 => Some("al2023"),
            AMIFamily::Bottlerocket => Some("bottlerocket"),
            AMIFamily::Windows2019 => Some("windows2019"),
            AMIFamily::Windows2022 => Some("windows2022"),
            AMIFamily::Windows2025 => Some("windows2025"),
            AMIFamily::Custom => None,
        }
    }

    /// The family an alias names (`al2023` -> AL2023).
    pub fn from_alias_family(name: &str) -> Option<AMIFamily> {
        [
            AMIFamily::AL2,
            AMIFamily::AL2023,
            AMIFamily::Bottlerocket,
            AMIFamily::Windows2019,
            AMIFamily::Windows2022,
            AMIFamily::Windows2025,
        ]
        .into_iter()
        .find(|f| f.alias_name() == Some(name))
    }
}

/// Instance store handling.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum InstanceStorePolicy {
    /// Stripe all local NVMe disks into one RAID0 array for ephemeral storage.
    RAID0,
}

/// Kubelet settings Karpenter renders into user data and accounts for in allocatable.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true").message("imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"))]
#[x_kube(validation = Rule::new("has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true").message("evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"))]
#[x_kube(validation = Rule::new("has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true").message("evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"))]
pub struct KubeletConfiguration {
    /// Cluster DNS server addresses.
    #[serde(
        default,
        rename = "clusterDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_dns: Option<Vec<String>>,
    /// Maximum pods per node; overrides the ENI-based default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    /// Pods per core; the smaller of this and maxPods applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    /// Resources reserved for system daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')").message("valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']"))]
    #[x_kube(validation = Rule::new("self.all(x, !self[x].startsWith('-'))").message("systemReserved value cannot be a negative resource quantity"))]
    pub system_reserved: Option<BTreeMap<String, String>>,
    /// Resources reserved for Kubernetes daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')").message("valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']"))]
    #[x_kube(validation = Rule::new("self.all(x, !self[x].startsWith('-'))").message("kubeReserved value cannot be a negative resource quantity"))]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// Hard eviction thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])").message("valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"))]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Soft eviction thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])").message("valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"))]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Grace periods of the soft thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])").message("valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"))]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    /// Longest grace period used for soft evictions, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk usage above which image GC always runs.
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage below which image GC never runs.
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// Enforce CPU limits with CFS quota.
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

/// A block device for the launch template.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// The device name, e.g. /dev/xvda.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The EBS volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Marks the volume that backs the root filesystem (ephemeral-storage capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

/// An EBS volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.snapshotID) || has(self.volumeSize)").message("snapshotID or volumeSize must be defined"))]
pub struct BlockDevice {
    /// Delete the volume with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Encrypt the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS (io1, io2, gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// KMS key for encryption.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Snapshot to restore from.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Size, e.g. 20Gi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<Quantity>,
    /// Volume type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<VolumeType>,
    /// How fast EBS fills a volume created from a snapshot, in MiB/s (the launch
    /// template's `VolumeInitializationRate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
}

/// EBS volume types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VolumeType {
    Standard,
    Io1,
    Io2,
    Gp2,
    Sc1,
    St1,
    Gp3,
}

/// Instance Metadata Service options.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// IMDS on or off.
    #[serde(default = "default_enabled")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub http_endpoint: String,
    /// The IPv6 IMDS endpoint on or off.
    #[serde(default = "default_disabled", rename = "httpProtocolIPv6")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub http_protocol_ipv6: String,
    /// Network hops a metadata response may take; 1 keeps IMDS away from pods.
    #[serde(default = "default_hop_limit")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: i64,
    /// "required" enforces IMDSv2 session tokens.
    #[serde(default = "default_required")]
    #[schemars(extend("enum" = ["required", "optional"]))]
    pub http_tokens: String,
}

fn default_enabled() -> String {
    "enabled".into()
}
fn default_disabled() -> String {
    "disabled".into()
}
fn default_required() -> String {
    "required".into()
}
fn default_hop_limit() -> i64 {
    1
}

fn default_metadata_options() -> MetadataOptions {
    MetadataOptions {
        http_endpoint: default_enabled(),
        http_protocol_ipv6: default_disabled(),
        http_put_response_hop_limit: default_hop_limit(),
        http_tokens: default_required(),
    }
}

impl Default for MetadataOptions {
    fn default() -> Self {
        default_metadata_options()
    }
}

/// The volumes upstream gives each family when no blockDeviceMappings are set (its
/// `DefaultBlockDeviceMappings`): 20Gi gp3, encrypted, on the family's root device (50Gi for
/// Windows), and for Bottlerocket a 4Gi OS volume besides.
pub fn default_block_device_mappings(family: AMIFamily) -> Vec<BlockDeviceMapping> {
    let volume = |device: &str, size: &str, root: Option<bool>| BlockDeviceMapping {
        device_name: Some(device.to_string()),
        ebs: Some(BlockDevice {
            encrypted: Some(true),
            volume_size: Some(Quantity(size.to_string())),
            volume_type: Some(VolumeType::Gp3),
            ..Default::default()
        }),
        root_volume: root,
    };
    match family {
        AMIFamily::AL2 | AMIFamily::AL2023 => vec![volume("/dev/xvda", "20Gi", Some(true))],
        // Bottlerocket boots from a small OS volume and keeps images and pods on the data
        // volume (upstream `amifamily/bottlerocket.go`).
        AMIFamily::Bottlerocket => vec![
            volume("/dev/xvda", "4Gi", None),
            volume("/dev/xvdb", "20Gi", Some(true)),
        ],
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            vec![volume("/dev/sda1", "50Gi", Some(true))]
        }
        AMIFamily::Custom => Vec::new(),
    }
}

impl EC2NodeClassSpec {
    /// The AMI family in effect: the explicit field, else the alias's family.
    pub fn effective_ami_family(&self) -> Option<AMIFamily> {
        self.ami_family.or_else(|| {
            self.ami_selector_terms
                .iter()
                .filter_map(|t| t.alias.as_deref())
                .find_map(|a| AMIFamily::from_alias_family(a.split('@').next().unwrap_or("")))
        })
    }

    /// The block devices launches use: the explicit list, else the family's default root
    /// volume.
    pub fn effective_block_device_mappings(&self) -> Vec<BlockDeviceMapping> {
        match &self.block_device_mappings {
            Some(b) => b.clone(),
            None => self
                .effective_ami_family()
                .map(default_block_device_mappings)
                .unwrap_or_default(),
        }
    }
}

/// What the provider resolved the selectors to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// Resolved subnets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    /// Resolved security groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    /// Resolved AMIs with the requirements under which each applies (e.g. arch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<AMI>,
    /// The instance profile in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Capacity reservations resolved from the selector terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    /// Ready, SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A resolved subnet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

/// A resolved security group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroup {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A resolved AMI.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AMI {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// Requirements (e.g. kubernetes.io/arch In [arm64]) under which this AMI applies.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
}

#[cfg(test)]
mod v1_14_fields {
    use super::*;

    /// An EC2NodeClass as upstream v1.14.1 writes it, with every field our CRD adds for
    /// v1.14.1: it reads without unknown fields and writes back unchanged.
    #[test]
    fn an_upstream_v1_14_1_ec2nodeclass_round_trips_with_every_field() {
        let v = serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "role": "KarpenterNodeRole",
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"},
                "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "snapshotID": "snap-1", "volumeInitializationRate": 200}}],
                "capacityReservationSelectorTerms": [
                    {"id": "cr-0123abc"},
                    {"tags": {"team": "ml"}, "ownerID": "123456789012", "instanceMatchCriteria": "targeted"}
                ],
                "placementGroupSelector": {"name": "pg-cluster"},
                "networkInterfaces": [
                    {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                    {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}
                ],
                "ipPrefixCount": 2,
                "connectionTracking": {"tcpEstablishedTimeout": 3600, "udpStreamTimeout": 120, "udpTimeout": 30},
                "cpuOptions": {"nestedVirtualization": "enabled"}
            },
            "status": {
                "capacityReservations": [{
                    "availabilityZone": "us-west-2a", "endTime": "2026-12-01T00:00:00Z",
                    "id": "cr-0123abc", "instanceMatchCriteria": "targeted",
                    "instanceType": "p5.48xlarge", "interruptible": false,
                    "ownerID": "123456789012", "reservationType": "capacity-block",
                    "state": "active"
                }]
            }
        });
        let (nc, unknown) = crate::api::manifest::typed::<EC2NodeClass>(v.clone()).unwrap();
        // apiVersion and kind are read by kube's type, not by the spec model.
        assert_eq!(unknown, ["apiVersion", "kind"]);
        assert_eq!(serde_json::to_value(&nc).unwrap(), v);
    }
}
