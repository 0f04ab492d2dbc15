//! Capacity reservations with `run --cloud aws` end to end: the binary against a
//! Kubernetes API (the kmock peer) and EC2 (the moto peer). Reserved capacity is launched
//! into first and never past its count; an ended reservation's nodes run on as
//! on-demand; a capacity block's nodes are drained before the block ends.

// Both peers include their venv helper (tests/peers/venv.rs) as a private module.
#![allow(clippy::duplicate_mod)]

#[path = "peers/aws_live_fixtures.rs"]
mod aws_live_fixtures;
#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/moto_peer.rs"]
mod moto_peer;
#[path = "peers/proc.rs"]
mod proc;

use std::time::{Duration, Instant};

use aws_live_fixtures::*;
use kube_peer::KubePeer;
use moto_peer::MotoPeer;

/// Reservation `cr-0e2e` (two m5.large in us-east-1a) selected by tag, a pool that may
/// use reserved and on-demand capacity, and three pods of which one fits an m5.large.
const RESERVED_MANIFESTS: &str = r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-e2e
  amiSelectorTerms:
  - alias: al2023@latest
  subnetSelectorTerms:
  - tags: {karpenter.sh/discovery: e2e}
  securityGroupSelectorTerms:
  - tags: {karpenter.sh/discovery: e2e}
  capacityReservationSelectorTerms:
  - tags: {team: ml}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
"#;

fn big_pod(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: ml}}}}
spec:
  containers:
  - name: main
    image: nginx
    resources: {{requests: {{cpu: 1500m, memory: 1Gi}}}}
status:
  phase: Pending
  conditions:
  - {{type: PodScheduled, status: "False", reason: Unschedulable, message: "0/0 nodes are available"}}
"#
    )
}

/// Capacity reservations end to end: the EC2NodeClass's status lists the reservation its
/// terms select; of three pods that each need a node, two get NodeClaims pinned to the
/// reservation (capacity type `reserved`, the reservation id in their requirements and
/// labels) and launched into it, and the third is not promised the reservation a third
/// time but launches on demand once the first two have counted it out. When the
/// reservation ends, the two run on and are relabelled on-demand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_fill_a_capacity_reservation_first_and_never_past_its_count() {
    let moto = MotoPeer::start();
    aws_setup(&moto).await;
    moto.capacity_reservations(
        "us-east-1",
        serde_json::json!([
            {"id": "cr-0e2e", "instance_type": "m5.large", "availability_zone": "us-east-1a",
             "total": 2, "tags": {"team": "ml"}},
        ]),
    );
    let kube = KubePeer::start();
    kube.kubectl(&["apply", "-f", "-"], RESERVED_MANIFESTS);
    let pods: String = ["ml-0", "ml-1", "ml-2"]
        .iter()
        .map(|n| big_pod(n))
        .collect::<Vec<_>>()
        .join("---\n");
    kube.kubectl(&["apply", "-f", "-"], &pods);
    let mut run = run_aws(&kube, &moto);

    let status = wait_for("the reservation in the EC2NodeClass's status", &run, || {
        let nc = kube.get_json(&["get", "ec2nodeclass", "default"]);
        let listed = nc["status"]["capacityReservations"].as_array()?.clone();
        (!listed.is_empty()).then_some(listed)
    });
    assert_eq!(status[0]["id"], "cr-0e2e", "{status:?}");
    assert_eq!(status[0]["instanceType"], "m5.large");
    assert_eq!(status[0]["reservationType"], "default");

    let claims = wait_for("three launched NodeClaims", &run, || {
        let claims = kube.get_json(&["get", "nodeclaims"]);
        let launched: Vec<serde_json::Value> = claims["items"]
            .as_array()?
            .iter()
            .filter(|c| c["status"]["providerID"].as_str().is_some())
            .cloned()
            .collect();
        (launched.len() >= 3).then_some(launched)
    });
    let label =
        |c: &serde_json::Value, k: &str| c["metadata"]["labels"][k].as_str().map(str::to_string);
    let reserved: Vec<&serde_json::Value> = claims
        .iter()
        .filter(|c| label(c, "karpenter.sh/capacity-type").as_deref() == Some("reserved"))
        .collect();
    assert_eq!(reserved.len(), 2, "{claims:#?}");
    for c in &reserved {
        assert_eq!(
            label(c, "karpenter.k8s.aws/capacity-reservation-id").as_deref(),
            Some("cr-0e2e"),
            "{c}"
        );
        let pinned = c["spec"]["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| {
                r["key"] == "karpenter.k8s.aws/capacity-reservation-id"
                    && r["values"] == serde_json::json!(["cr-0e2e"])
            });
        assert!(pinned, "{c}");
    }
    assert_eq!(claims.len(), 3, "{claims:#?}");
    let other = claims
        .iter()
        .find(|c| label(c, "karpenter.sh/capacity-type").as_deref() != Some("reserved"))
        .unwrap();
    assert_eq!(
        label(other, "karpenter.sh/capacity-type").as_deref(),
        Some("on-demand"),
        "{other}"
    );
    assert_eq!(
        moto.capacity_reservations_now("us-east-1")[0]["available"],
        0
    );
    // No launch was ever refused for the reservation's capacity.
    let refused = moto
        .fleets()
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["errors"].as_array().cloned().unwrap_or_default())
        .any(|e| e["error_code"] == "ReservationCapacityExceeded");
    assert!(!refused, "{}", moto.fleets());

    // The reservation ends: EC2 keeps its instances running as on-demand, and the next
    // garbage collection (every 2 minutes) relabels their NodeClaims so.
    moto.expire_capacity_reservation("us-east-1", "cr-0e2e");
    let names: Vec<String> = reserved
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    wait_until(
        "the reserved NodeClaims relabelled on-demand",
        &run,
        Instant::now() + Duration::from_secs(180),
        || {
            let claims = kube.get_json(&["get", "nodeclaims"]);
            let items = claims["items"].as_array()?;
            names
                .iter()
                .all(|n| {
                    items.iter().any(|c| {
                        c["metadata"]["name"] == n.as_str()
                            && label(c, "karpenter.sh/capacity-type").as_deref()
                                == Some("on-demand")
                            && label(c, "karpenter.k8s.aws/capacity-reservation-id").is_none()
                    })
                })
                .then_some(())
        },
    );
    assert_eq!(run.terminate(), Some(0), "stderr:\n{}", run.stderr());
}

/// A capacity block's nodes leave before the block ends (upstream
/// `capacityreservation/expiration`): a pod's NodeClaim launches into the block; when the
/// block enters its last 40 minutes, the next garbage collection deletes that NodeClaim
/// and the pod gets an on-demand one. Before, the binary never drained a block: the cloud
/// wrapper `run` uses answered the provider's `expiring` with its default, nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_blocks_nodes_are_drained_before_the_block_ends() {
    let moto = MotoPeer::start();
    aws_setup(&moto).await;
    let block = |end: chrono::DateTime<chrono::Utc>, available: u32| {
        serde_json::json!([
            {"id": "cr-0b10c", "instance_type": "m5.large", "availability_zone": "us-east-1a",
             "total": 1, "available": available, "reservation_type": "capacity-block",
             "end_date": end.to_rfc3339(), "tags": {"team": "ml"}},
        ])
    };
    moto.capacity_reservations(
        "us-east-1",
        block(chrono::Utc::now() + chrono::TimeDelta::hours(6), 1),
    );
    let kube = KubePeer::start();
    kube.kubectl(&["apply", "-f", "-"], RESERVED_MANIFESTS);
    kube.kubectl(&["apply", "-f", "-"], &big_pod("ml-0"));
    let mut run = run_aws(&kube, &moto);
    let label =
        |c: &serde_json::Value, k: &str| c["metadata"]["labels"][k].as_str().map(str::to_string);
    let in_block = wait_for("a NodeClaim launched into the block", &run, || {
        let claims = kube.get_json(&["get", "nodeclaims"]);
        claims["items"].as_array()?.iter().find_map(|c| {
            (c["status"]["providerID"].as_str().is_some()
                && label(c, "karpenter.k8s.aws/capacity-reservation-id").as_deref()
                    == Some("cr-0b10c")
                && label(c, "karpenter.k8s.aws/capacity-reservation-type").as_deref()
                    == Some("capacity-block"))
            .then(|| c["metadata"]["name"].as_str().unwrap().to_string())
        })
    });

    // The block's last 40 minutes: EC2 will take the instance back at its end.
    moto.capacity_reservations(
        "us-east-1",
        block(chrono::Utc::now() + chrono::TimeDelta::minutes(30), 0),
    );
    let replacement = wait_until(
        "the block's NodeClaim deleted and an on-demand one launched",
        &run,
        Instant::now() + Duration::from_secs(200),
        || {
            let claims = kube.get_json(&["get", "nodeclaims"]);
            let items = claims["items"].as_array()?;
            let gone = items.iter().all(|c| {
                c["metadata"]["name"] != in_block.as_str()
                    || c["metadata"]["deletionTimestamp"].is_string()
            });
            let on_demand = items.iter().find(|c| {
                c["status"]["providerID"].as_str().is_some()
                    && label(c, "karpenter.sh/capacity-type").as_deref() == Some("on-demand")
            })?;
            gone.then(|| on_demand["metadata"]["name"].as_str().unwrap().to_string())
        },
    );
    assert_ne!(replacement, in_block);
    assert_eq!(run.terminate(), Some(0), "stderr:\n{}", run.stderr());
}
