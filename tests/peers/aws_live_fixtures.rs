//! What the `run --cloud aws` end-to-end tests share: the EC2 side a NodeClass selects
//! (subnet, security group, role, an orphan instance), starting the binary against the
//! two peers, and waiting on what it does.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::ResourceType;

use crate::kube_peer::KubePeer;
use crate::moto_peer::{AL2023_X86_AMI, MotoPeer, tag_spec};
use crate::proc::Proc;

pub const PATIENCE: Duration = Duration::from_secs(90);
/// Garbage collection spares instances younger than this (the controller's GC_GRACE).
pub const GC_GRACE: Duration = Duration::from_secs(30);

/// A tagged subnet and security group for the NodeClass, the node role, and an orphan:
/// an instance tagged for the cluster that no NodeClaim launched. Returns its id.
pub async fn aws_setup(peer: &MotoPeer) -> String {
    let ec2 = peer.ec2(true);
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).unwrap().to_string();
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.0.1.0/24")
        .availability_zone("us-east-1a")
        .tag_specifications(tag_spec(
            ResourceType::Subnet,
            &[("karpenter.sh/discovery", "e2e")],
        ))
        .send()
        .await
        .unwrap();
    let subnet = subnet
        .subnet()
        .and_then(|s| s.subnet_id())
        .unwrap()
        .to_string();
    ec2.create_security_group()
        .group_name("nodes")
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(tag_spec(
            ResourceType::SecurityGroup,
            &[("karpenter.sh/discovery", "e2e")],
        ))
        .send()
        .await
        .unwrap();
    let iam = peer.iam();
    iam.create_role()
        .role_name("KarpenterNodeRole-e2e")
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[]}"#)
        .send()
        .await
        .unwrap();
    let orphan = ec2
        .run_instances()
        .image_id(AL2023_X86_AMI)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .subnet_id(&subnet)
        .tag_specifications(tag_spec(
            ResourceType::Instance,
            &[
                ("kubernetes.io/cluster/e2e", "owned"),
                ("karpenter.sh/nodepool", "default"),
            ],
        ))
        .send()
        .await
        .unwrap();
    orphan.instances()[0].instance_id().unwrap().to_string()
}

/// `run --cloud aws` against the two peers.
pub fn run_aws(kube: &KubePeer, moto: &MotoPeer) -> Proc {
    run_aws_with(kube, moto, &[])
}

/// The flags that point the binary at the moto peer as cluster `e2e` (EC2 in us-east-1,
/// Kubernetes 1.33).
pub fn aws_flags(moto: &MotoPeer) -> Vec<String> {
    [
        "--cloud",
        "aws",
        "--region",
        "us-east-1",
        "--aws-endpoint",
        &moto.endpoint(),
        "--cluster-name",
        "e2e",
        "--kubernetes-version",
        "1.33",
    ]
    .map(str::to_string)
    .to_vec()
}

/// `run --cloud aws` against the two peers, with more flags.
pub fn run_aws_with(kube: &KubePeer, moto: &MotoPeer, more: &[&str]) -> Proc {
    let kubeconfig = kube.kubeconfig_path();
    let aws = aws_flags(moto);
    let mut args = vec![
        "run",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--namespace",
        "default",
    ];
    args.extend(aws.iter().map(String::as_str));
    args.extend_from_slice(more);
    Proc::start_with(&args, &moto.env())
}

pub fn wait_for<T>(what: &str, proc: &Proc, f: impl FnMut() -> Option<T>) -> T {
    wait_until(what, proc, Instant::now() + PATIENCE, f)
}

/// EC2 takes a spot instance back two minutes after its interruption warning.
pub const RECLAIM: Duration = Duration::from_secs(120);

pub fn wait_until<T>(
    what: &str,
    proc: &Proc,
    deadline: Instant,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "waited for {what}; stderr:\n{}\nstdout:\n{}",
            proc.stderr(),
            proc.stdout()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub async fn instance_state(peer: &MotoPeer, id: &str) -> (String, Vec<(String, String)>) {
    let out = peer
        .ec2(true)
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap();
    let i = &out.reservations()[0].instances()[0];
    (
        i.state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_string())
            .unwrap_or_default(),
        i.tags()
            .iter()
            .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
            .collect(),
    )
}
