//! An EC2 + SSM + IAM + SQS (+ Pricing) endpoint on 127.0.0.1 for the AWS provider's tests: moto (PyPI, an
//! AWS emulator) with the adapter in moto_server.py, in a venv cached under
//! `$HOME/.cache/karpenter-tui/peers/moto-venv`. Each `MotoPeer` is a fresh, empty account
//! (moto's 123456789012) in its own process, killed on drop. Without Python or PyPI the
//! tests fail with the reason; they never pass silently.
//!
//! At start us-east-1 holds the EKS-optimized AL2023 images of Kubernetes 1.33 (release
//! v20241115) and their SSM parameters (moto_server.py, item 1); the AMI ids are fixed
//! (`AL2023_X86_AMI`, ...). The test controls (items 10-13) are plain HTTP on the same
//! port: injected ICE for CreateFleet, throttling, the request log, the recorded
//! CreateFleet requests, SSM parameters and new AMIs; and (items 15-16) the EC2 capacity
//! reservations moto lacks, which DescribeCapacityReservations answers and CreateFleet
//! launches into; and (items 17-20) placement groups (Create/Describe/DeletePlacementGroup;
//! CreateFleet launches into them, with their spread, partition and strategy rules) and
//! launch template network interfaces, checked against the instance type's NetworkInfo.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

/// The moto release the adapter was written against (its gaps are listed in
/// moto_server.py); data/catalog/us-east-1.json was generated from its data too.
const MOTO: &str = "moto[server,ec2,ssm,iam,sqs]==5.2.5";

/// The Kubernetes version of the seeded EKS-optimized images and parameters.
#[allow(dead_code)]
pub const K8S_VERSION: &str = "1.33";

/// The seeded `recommended` AL2023 parameters (x86_64 and arm64, standard variant), as
/// upstream Karpenter's AL2023 alias resolution reads them.
#[allow(dead_code)]
pub const AL2023_X86_PARAM: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id";
#[allow(dead_code)]
pub const AL2023_ARM_PARAM: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id";
/// The x86_64 GPU variants' `recommended` parameters.
#[allow(dead_code)]
pub const AL2023_NVIDIA_PARAM: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id";
#[allow(dead_code)]
pub const AL2023_NEURON_PARAM: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/neuron/recommended/image_id";

/// The seeded images' ids ("ami-" and 17 hex digits of sha256(name), the same every run and
/// in every region) and names. Each `recommended` parameter above holds its image's id, as
/// does the pinned form `.../ARCH/VARIANT/NAME/image_id`.
#[allow(dead_code)]
pub const AL2023_X86_AMI: &str = "ami-70f878bdab4487796";
#[allow(dead_code)]
pub const AL2023_X86_AMI_NAME: &str = "amazon-eks-node-al2023-x86_64-standard-1.33-v20241115";
#[allow(dead_code)]
pub const AL2023_ARM_AMI: &str = "ami-1593005047fe15fa3";
#[allow(dead_code)]
pub const AL2023_ARM_AMI_NAME: &str = "amazon-eks-node-al2023-arm64-standard-1.33-v20241115";
#[allow(dead_code)]
pub const AL2023_NVIDIA_AMI: &str = "ami-af9fa7ce5951e33c8";
#[allow(dead_code)]
pub const AL2023_NVIDIA_AMI_NAME: &str = "amazon-eks-node-al2023-x86_64-nvidia-1.33-v20241115";
#[allow(dead_code)]
pub const AL2023_NEURON_AMI: &str = "ami-403f5e1f74aa8ccd2";
#[allow(dead_code)]
pub const AL2023_NEURON_AMI_NAME: &str = "amazon-eks-node-al2023-x86_64-neuron-1.33-v20241115";

/// A TagSpecification for EC2 create calls.
#[allow(dead_code)]
pub fn tag_spec(
    resource: aws_sdk_ec2::types::ResourceType,
    tags: &[(&str, &str)],
) -> aws_sdk_ec2::types::TagSpecification {
    let mut s = aws_sdk_ec2::types::TagSpecification::builder().resource_type(resource);
    for (k, v) in tags {
        s = s.tags(aws_sdk_ec2::types::Tag::builder().key(*k).value(*v).build());
    }
    s.build()
}

/// One AWS request the peer received (`GET /_peer/requests`), oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[allow(dead_code)]
pub struct PeerCall {
    /// "ec2", "ssm" or "iam" (the SigV4 credential scope's service).
    pub service: Option<String>,
    /// "CreateFleet", "GetParameter", ... (EC2/IAM `Action`, SSM `X-Amz-Target`).
    pub action: Option<String>,
    /// Answered by an injected throttle, not by moto.
    pub throttled: bool,
}

/// A running peer: the server process and its port.
pub struct MotoPeer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

#[allow(dead_code)]
impl MotoPeer {
    /// Starts a fresh peer on a free port, creating the venv first if needed; returns once
    /// the port answers.
    pub fn start() -> MotoPeer {
        let (child, port, dir) =
            server::start(python(), "moto_server.py", Duration::from_secs(120));
        MotoPeer { child, port, dir }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`, the endpoint for every AWS SDK client (EC2, SSM, IAM).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment for a process (the console's binary) that should use the peer:
    /// static test credentials, us-east-1, the endpoint, and no instance metadata lookups.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", "testing".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// An EC2 client for the peer (test credentials, us-east-1); `retries: false` sees
    /// every throttled answer.
    #[allow(dead_code)]
    pub fn ec2(&self, retries: bool) -> aws_sdk_ec2::Client {
        use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
        let mut config = aws_sdk_ec2::config::Builder::new()
            .endpoint_url(self.endpoint())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
            .behavior_version(BehaviorVersion::latest());
        if !retries {
            config = config.retry_config(RetryConfig::disabled());
        }
        aws_sdk_ec2::Client::from_conf(config.build())
    }

    /// An IAM client for the peer.
    #[allow(dead_code)]
    pub fn iam(&self) -> aws_sdk_iam::Client {
        use aws_sdk_iam::config::{BehaviorVersion, Credentials, Region};
        aws_sdk_iam::Client::from_conf(
            aws_sdk_iam::config::Builder::new()
                .endpoint_url(self.endpoint())
                .region(Region::new("us-east-1"))
                .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
                .behavior_version(BehaviorVersion::latest())
                .build(),
        )
    }

    /// Sets a region's on-demand price table for the Pricing API stand-in (item 14).
    #[allow(dead_code)]
    pub fn pricing(&self, region: &str, prices: &[(&str, f64)]) {
        let prices: serde_json::Map<String, Value> = prices
            .iter()
            .map(|(t, p)| (t.to_string(), json!(p)))
            .collect();
        let answer = self.control(
            "POST",
            "pricing",
            Some(&json!({"region": region, "prices": prices})),
        );
        assert_eq!(answer["count"], prices.len(), "{answer}");
    }

    /// An SQS client for the peer (the interruption queue's tests send EventBridge
    /// events with it).
    #[allow(dead_code)]
    pub fn sqs(&self) -> aws_sdk_sqs::Client {
        use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
        aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::new()
                .endpoint_url(self.endpoint())
                .region(Region::new("us-east-1"))
                .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
                .behavior_version(BehaviorVersion::latest())
                .build(),
        )
    }

    /// The server's stderr so far (for failure messages).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Replaces the set of (instance type, zone, capacity type) that CreateFleet answers
    /// with InsufficientInstanceCapacity; capacity type None matches spot and on-demand.
    pub fn ice(&self, pairs: &[(&str, &str, Option<&str>)]) {
        let pairs: Vec<Value> = pairs
            .iter()
            .map(|(instance_type, zone, capacity_type)| {
                json!({"instance_type": instance_type, "zone": zone,
                       "capacity_type": capacity_type})
            })
            .collect();
        self.control("POST", "ice", Some(&json!({ "pairs": pairs })));
    }

    /// Sets placement group `name`'s state in `region` ("pending", "available", "deleting"
    /// or "deleted"), as EC2 moves a group through them; groups made with
    /// CreatePlacementGroup start available. A test needs it to make a group the provider
    /// must not use: DescribePlacementGroups shows the state, and CreateFleet refuses
    /// launches into a group that is not available. Panics when the group is unknown.
    pub fn set_placement_group_state(&self, region: &str, name: &str, state: &str) {
        self.control(
            "POST",
            "placement-groups/state",
            Some(&json!({"region": region, "name": name, "state": state})),
        );
    }

    /// The next `count` calls of `action` ("DescribeInstanceTypes", "GetParameter", ...)
    /// are refused: EC2 with HTTP 503 RequestLimitExceeded, SSM with HTTP 400
    /// ThrottlingException, IAM with HTTP 400 Throttling.
    pub fn throttle(&self, action: &str, count: u32) {
        self.control(
            "POST",
            "throttle",
            Some(&json!({"action": action, "count": count})),
        );
    }

    /// The AWS requests received so far (the last 5000), oldest first.
    pub fn requests(&self) -> Vec<PeerCall> {
        serde_json::from_value(self.control("GET", "requests", None)).expect("the request log")
    }

    /// The actions received so far for `service` ("ec2", "ssm", "iam"), oldest first.
    pub fn actions(&self, service: &str) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|c| c.service.as_deref() == Some(service))
            .filter_map(|c| c.action)
            .collect()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.control("DELETE", "requests", None);
    }

    /// Every instant CreateFleet so far, oldest first: an array of {"fleet_id",
    /// "capacity_type", "total_target_capacity", "spot_allocation_strategy",
    /// "on_demand_allocation_strategy", "overrides": [{"launch_template_id", "version",
    /// "instance_type", "subnet_id", "availability_zone", "image_id", "priority"}] (in the
    /// order sent), "errors": [{"instance_type", "availability_zone", "error_code"}],
    /// "instance_ids", "tags": {RESOURCE_TYPE: {KEY: VALUE}}}.
    pub fn fleets(&self) -> Value {
        self.control("GET", "fleets", None)
    }

    /// Sets (a new version of) any SSM parameter in us-east-1, /aws/service names
    /// included: a new AMI release.
    pub fn set_ssm(&self, name: &str, value: &str) {
        self.control("POST", "ssm", Some(&json!({"name": name, "value": value})));
    }

    /// Registers an available image owned by 602401143452 (alias "amazon") in us-east-1;
    /// returns its id ("ami-" and 17 hex digits of sha256(name)). `creation_date` as EC2
    /// writes it, e.g. "2024-12-01T00:00:00.000Z".
    pub fn register_ami(&self, name: &str, arch: &str, creation_date: &str) -> String {
        let body = json!({"name": name, "architecture": arch, "creation_date": creation_date});
        self.control("POST", "ami", Some(&body))["image_id"]
            .as_str()
            .expect("the new image id")
            .to_string()
    }

    /// Replaces `region`'s capacity reservations (moto has none; DescribeCapacityReservations,
    /// CreateFleet and TerminateInstances use these, moto_server.py items 15-16).
    /// `reservations` is an array of {"id": "cr-0a1", "instance_type", "availability_zone",
    /// "total", and optionally "available" (default total), "instance_match_criteria"
    /// ("targeted" default | "open"), "owner_id", "tags": {KEY: VALUE}, "reservation_type"
    /// ("default" | "capacity-block"), "end_date" (ISO-8601 or null), "state" ("active"
    /// default), "interruptible"}. Panics with the peer's answer when it refuses them.
    pub fn capacity_reservations(&self, region: &str, reservations: Value) {
        self.control(
            "POST",
            "capacity-reservations",
            Some(&json!({"region": region, "reservations": reservations})),
        );
    }

    /// `region`'s capacity reservations as the peer holds them now: the fields posted, with
    /// "available" counting the launches into them and terminations, and "instance_ids" (the
    /// instances holding their slots), so a test can see what CreateFleet consumed.
    pub fn capacity_reservations_now(&self, region: &str) -> Value {
        self.control(
            "GET",
            "capacity-reservations",
            Some(&json!({ "region": region })),
        )["reservations"]
            .clone()
    }

    /// Ends a reservation as EC2 does when its time is up: state "expired"; an ODCR's
    /// instances keep running as plain on-demand ones (no CapacityReservationId, preference
    /// open), a Capacity Block's are terminated.
    pub fn expire_capacity_reservation(&self, region: &str, id: &str) {
        self.control(
            "POST",
            "capacity-reservations/expire",
            Some(&json!({"region": region, "id": id})),
        );
    }

    /// A test control (`/_peer/NAME`), which must answer 200 with JSON.
    fn control(&self, method: &str, name: &str, body: Option<&Value>) -> Value {
        let path = format!("/_peer/{name}");
        let (status, head, body) = self.http(method, &path, body);
        assert_eq!(
            status,
            200,
            "{method} {path}: {head}\n{body}\nserver log:\n{}",
            self.log()
        );
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"))
    }

    /// One HTTP/1.1 request to the peer; returns the status, the head and the body.
    pub fn http(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String, String) {
        http::request(self.port, method, path, body, || self.log())
    }
}

impl Drop for MotoPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[path = "http.rs"]
mod http;
#[path = "server.rs"]
mod server;
#[path = "venv.rs"]
mod venv;

/// The venv's python (moto 5.2.5 with its server, EC2, SSM, IAM and SQS extras), created once
/// per machine.
fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(|| {
        venv::ensure(
            "peers/moto-venv",
            &[MOTO],
            "import moto, werkzeug, flask, moto.ec2.responses, moto.ssm.models, \
             moto.iam.models, moto.sqs.models, moto.moto_server.werkzeug_app; \
             assert moto.__version__ == '5.2.5'",
        )
    }) {
        Ok(path) => path,
        Err(why) => panic!("cannot set up the moto venv: {why}"),
    }
}
