//! What the AWS provider tests share: the provider's options against the EC2 emulator,
//! the network and role a NodeClass selects, the NodeClass most tests use, launch
//! requests, and reading back the launch templates and tags EC2 holds.
#![allow(dead_code)]

use std::collections::BTreeMap;

use karpenter_tui::api::ec2nodeclass::EC2NodeClass;
use karpenter_tui::api::labels;
use karpenter_tui::api::nodepool::NodePool;
use karpenter_tui::cloud::aws::user_data::ClusterInfo;
use karpenter_tui::cloud::aws::{AwsCloud, AwsHandle, AwsOptions};
use karpenter_tui::cloud::{CloudProvider, LaunchRequest, Launched};
use karpenter_tui::cluster::{Launched as ClaimLaunch, NodeClaimObject};
use karpenter_tui::engine::catalog::CapacityType;
use karpenter_tui::engine::provisioning::{Launch, launch_order};
use karpenter_tui::engine::requirements::Requirements;

use crate::moto_peer::{MotoPeer, tag_spec};

pub const CLUSTER: &str = "test-cluster";

pub fn options(peer: &MotoPeer) -> AwsOptions {
    AwsOptions {
        region: Some("us-east-1".into()),
        endpoint: Some(peer.endpoint()),
        cluster: ClusterInfo {
            name: CLUSTER.into(),
            endpoint: "https://api.test-cluster.example".into(),
            ca_bundle: Some("Q0E=".into()),
            cidr: Some("10.100.0.0/16".into()),
        },
        kubernetes_version: "1.33".into(),
        max_attempts: 6,
        capacity: Default::default(),
        isolated_vpc: false,
        credentials: Some(("testing".into(), "testing".into())),
    }
}

pub fn tag(k: &str, v: &str) -> aws_sdk_ec2::types::Tag {
    aws_sdk_ec2::types::Tag::builder().key(k).value(v).build()
}

/// What the tests' NodeClass selects: two discovery-tagged subnets (us-east-1a, 1b), one
/// untagged subnet (1c), a discovery-tagged security group and an untagged one, and the
/// node role.
pub struct Network {
    pub subnet_a: String,
    pub subnet_b: String,
    pub subnet_c: String,
    pub group: String,
    pub other_group: String,
}

pub async fn network(peer: &MotoPeer) -> Network {
    use aws_sdk_ec2::types::ResourceType;
    let ec2 = peer.ec2(true);
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc").to_string();
    let mut subnets = Vec::new();
    for (n, (zone, tags)) in [
        ("us-east-1a", vec![("karpenter.sh/discovery", CLUSTER)]),
        ("us-east-1b", vec![("karpenter.sh/discovery", CLUSTER)]),
        ("us-east-1c", vec![("team", "other")]),
    ]
    .into_iter()
    .enumerate()
    {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.0.{}.0/24", n + 1))
            .availability_zone(zone)
            .tag_specifications(tag_spec(ResourceType::Subnet, &tags))
            .send()
            .await
            .expect("CreateSubnet");
        subnets.push(
            s.subnet()
                .and_then(|s| s.subnet_id())
                .expect("subnet")
                .to_string(),
        );
    }
    let mut groups = Vec::new();
    for (name, tags) in [
        ("nodes", vec![("karpenter.sh/discovery", CLUSTER)]),
        ("other", vec![("team", "other")]),
    ] {
        let g = ec2
            .create_security_group()
            .group_name(name)
            .description(name)
            .vpc_id(&vpc)
            .tag_specifications(tag_spec(ResourceType::SecurityGroup, &tags))
            .send()
            .await
            .expect("CreateSecurityGroup");
        groups.push(g.group_id().expect("group").to_string());
    }
    peer.iam()
        .create_role()
        .role_name("KarpenterNodeRole")
        .assume_role_policy_document(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
        )
        .send()
        .await
        .expect("CreateRole");
    Network {
        subnet_a: subnets[0].clone(),
        subnet_b: subnets[1].clone(),
        subnet_c: subnets[2].clone(),
        group: groups[0].clone(),
        other_group: groups[1].clone(),
    }
}

pub fn nodeclass(yaml_spec: &str) -> EC2NodeClass {
    let text = format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata:\n  name: default\n  generation: 1\nspec:\n{yaml_spec}"
    );
    serde_norway::from_str(&text).expect("EC2NodeClass YAML")
}

/// The NodeClass most tests use: discovery tags, the AL2023 alias, a role, a tag.
pub fn discovery_nodeclass() -> EC2NodeClass {
    nodeclass(&format!(
        "  role: KarpenterNodeRole\n  amiSelectorTerms:\n  - alias: al2023@latest\n  subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: {CLUSTER}\n  securityGroupSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: \"*\"\n  tags:\n    team: platform\n"
    ))
}

/// A provider with the discovery NodeClass resolved.
pub async fn ready_cloud(peer: &MotoPeer) -> (AwsCloud, AwsHandle, Network) {
    let net = network(peer).await;
    let cloud = AwsCloud::connect(options(peer)).await.expect("connect");
    let handle = cloud.handle();
    handle.set_nodeclass(&discovery_nodeclass());
    handle.resolve_all().await;
    assert!(
        matches!(handle.resolved("default"), Some(Ok(_))),
        "{:?}",
        handle.resolved("default")
    );
    (cloud, handle, net)
}

pub fn pool() -> NodePool {
    NodePool::unconstrained("web")
}

/// A launch request for `types` (cheapest offerings first, as the controller orders them)
/// restricted to `capacity_type`.
pub fn request(
    cloud: &AwsCloud,
    name: &str,
    types: &[&str],
    capacity_type: CapacityType,
) -> LaunchRequest {
    let its: Vec<_> = cloud
        .instance_types(&pool())
        .into_iter()
        .filter(|t| types.contains(&t.name.as_str()))
        .collect();
    let offerings: Vec<Launch> = launch_order(&Requirements::new(), &its)
        .into_iter()
        .filter(|o| o.capacity_type == capacity_type)
        .collect();
    LaunchRequest {
        nodeclaim: name.into(),
        nodepool: "web".into(),
        offerings,
        nodeclass: Some("default".into()),
        labels: BTreeMap::from([(labels::NODEPOOL.to_string(), "web".to_string())]),
        taints: Vec::new(),
        requests: Default::default(),
    }
}

/// The NodeClaim a launch became, as the controller records it.
pub fn claim(name: &str, l: &Launched) -> NodeClaimObject {
    let i = &l.instance;
    NodeClaimObject {
        name: name.into(),
        nodepool: "web".into(),
        requirements: Requirements::new(),
        requests: Default::default(),
        labels: BTreeMap::new(),
        annotations: l.annotations.clone(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        expire_after: None,
        termination_grace_period: None,
        created: i.launched,
        deleting: None,
        finalizer: true,
        launched: Some(ClaimLaunch {
            provider_id: i.provider_id.clone(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: i.capacity_type,
            price: i.price,
            capacity: Default::default(),
            allocatable: Default::default(),
            // The provider's labels (reservation, placement group), as the controller
            // records them.
            labels: l.labels.clone(),
            hostname: i.hostname.clone(),
            at: i.launched,
            image_id: i.image_id.clone(),
            annotations: l.annotations.clone(),
        }),
        initialized_at: None,
        conditions: Vec::new(),
        last_pod_event: None,
    }
}

/// The instance behind a provider id, as DescribeInstances shows it.
pub async fn describe_instance(peer: &MotoPeer, provider_id: &str) -> aws_sdk_ec2::types::Instance {
    let id = provider_id.rsplit('/').next().unwrap();
    let out = peer
        .ec2(true)
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()[0].instances()[0].clone()
}

pub async fn instance_tags(peer: &MotoPeer, provider_id: &str) -> BTreeMap<String, String> {
    describe_instance(peer, provider_id)
        .await
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
        .collect()
}

/// The data of the launch template a fleet's first override used, as EC2 holds it.
pub async fn template_data(
    peer: &MotoPeer,
    fleet: &serde_json::Value,
) -> aws_sdk_ec2::types::ResponseLaunchTemplateData {
    let id = fleet["overrides"][0]["launch_template_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{fleet}"));
    let versions = peer
        .ec2(true)
        .describe_launch_template_versions()
        .launch_template_id(id)
        .send()
        .await
        .unwrap();
    versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap()
        .clone()
}
