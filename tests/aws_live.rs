//! `run --cloud aws` end to end: the binary against a Kubernetes API (the kmock peer,
//! driven by kubectl) and EC2 (the moto peer), both on 127.0.0.1. The EC2NodeClass
//! resolves and its status is written back, a pending pod gets a NodeClaim whose instance
//! exists in EC2 with the cluster's tags (after the cheaper offering answered
//! InsufficientInstanceCapacity, which the next launch then leaves out), and an instance of
//! the cluster that no NodeClaim owns is garbage collected. A spot interruption warning on
//! the interruption queue (SQS) drains its node, and a replacement launches inside the
//! two minutes' notice.

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
use moto_peer::{AL2023_X86_AMI, MotoPeer};

const MANIFESTS: &str = r#"apiVersion: karpenter.k8s.aws/v1
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
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web}}
spec:
  containers:
  - name: main
    image: nginx
    resources: {requests: {cpu: "1", memory: 1Gi}}
status:
  phase: Pending
  conditions:
  - {type: PodScheduled, status: "False", reason: Unschedulable, message: "0/0 nodes are available"}
"#;

/// A pod that may not run beside web-0 (required anti-affinity on the hostname).
const SPREAD_POD: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web}}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: web}}
        topologyKey: kubernetes.io/hostname
  containers:
  - name: main
    image: nginx
    resources: {requests: {cpu: "1", memory: 1Gi}}
status:
  phase: Pending
  conditions:
  - {type: PodScheduled, status: "False", reason: Unschedulable, message: "0/1 nodes are available"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_the_aws_cloud_resolves_the_nodeclass_launches_around_ice_and_collects_an_orphan()
{
    let moto = MotoPeer::start();
    let orphan = aws_setup(&moto).await;
    let orphaned_at = Instant::now();
    // m5.large is out of on-demand capacity in the only subnet's zone.
    moto.ice(&[("m5.large", "us-east-1a", Some("on-demand"))]);
    let kube = KubePeer::start();
    kube.kubectl(&["apply", "-f", "-"], MANIFESTS);
    // The orphan must be older than the grace period when the controller first looks.
    if let Some(rest) = GC_GRACE.checked_sub(orphaned_at.elapsed()) {
        tokio::time::sleep(rest + Duration::from_secs(1)).await;
    }

    let mut run = run_aws(&kube, &moto);

    // The NodeClass resolves and the status says so.
    let status = wait_for("the EC2NodeClass to be Ready", &run, || {
        let nc = kube.get_json(&["get", "ec2nodeclass", "default"]);
        let ready = nc["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then(|| nc["status"].clone())
    });
    assert_eq!(status["amis"].as_array().map(Vec::len), Some(4), "{status}");
    assert_eq!(status["subnets"][0]["zone"], "us-east-1a", "{status}");
    assert!(
        status["instanceProfile"]
            .as_str()
            .is_some_and(|p| p.starts_with("e2e_")),
        "{status}"
    );

    // The pod gets a NodeClaim launched on a real (emulated) instance.
    let claim = wait_for("a launched NodeClaim", &run, || {
        let claims = kube.get_json(&["get", "nodeclaims"]);
        claims["items"]
            .as_array()?
            .iter()
            .find(|c| c["status"]["providerID"].as_str().is_some())
            .cloned()
    });
    let provider_id = claim["status"]["providerID"].as_str().unwrap().to_string();
    assert!(
        provider_id.starts_with("aws:///us-east-1a/i-"),
        "{provider_id}"
    );
    assert_eq!(claim["status"]["imageID"], AL2023_X86_AMI, "{claim}");
    // The cheaper m5.large was tried first, answered ICE, and the fleet fell over.
    let it = claim["metadata"]["labels"]["node.kubernetes.io/instance-type"].as_str();
    assert_eq!(it, Some("m5.xlarge"), "{claim}");
    let fleets = moto.fleets();
    let first = &fleets.as_array().unwrap()[0];
    assert_eq!(first["errors"].as_array().map(Vec::len), Some(1), "{first}");
    assert!(
        claim["metadata"]["annotations"]["karpenter.k8s.aws/ec2nodeclass-hash"].is_string(),
        "{claim}"
    );
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    let id = provider_id.rsplit('/').next().unwrap();
    let (state, tags) = instance_state(&moto, id).await;
    assert!(state == "running" || state == "pending", "{state}");
    assert!(
        tags.contains(&("karpenter.sh/nodeclaim".into(), name.clone())),
        "{tags:?}"
    );
    assert!(
        tags.contains(&("kubernetes.io/cluster/e2e".into(), "owned".into())),
        "{tags:?}"
    );

    // The orphan was terminated by garbage collection; the NodeClaim's instance was not.
    let (orphan_state, _) = instance_state(&moto, &orphan).await;
    assert_eq!(orphan_state, "terminated", "stderr:\n{}", run.stderr());
    assert!(
        run.stdout().contains("InstanceGarbageCollected"),
        "stdout:\n{}",
        run.stdout()
    );
    let (state, _) = instance_state(&moto, id).await;
    assert_ne!(state, "terminated");

    // A second pod that must not share a node: the next fleet leaves m5.large in
    // us-east-1a out, the unavailable-offerings cache holding it for 3 minutes.
    kube.kubectl(&["apply", "-f", "-"], SPREAD_POD);
    let fleets = wait_for("a second fleet", &run, || {
        let f = moto.fleets();
        (f.as_array()?.len() >= 2).then_some(f)
    });
    let second = &fleets.as_array().unwrap()[1];
    let types: Vec<&str> = second["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["InstanceType"].as_str().or(o["instance_type"].as_str()))
        .collect();
    assert!(
        !types.is_empty() && !types.contains(&"m5.large"),
        "{second}"
    );
    assert_eq!(run.terminate(), Some(0), "stderr:\n{}", run.stderr());
}

/// The Node a kubelet registers on AWS: the instance's provider id and name, Ready, and
/// only the labels nodeadm passes before Karpenter's registration adds the rest.
fn joined_node(name: &str, provider_id: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{karpenter.sh/nodepool: default}}
spec:
  providerID: {provider_id}
status:
  capacity: {{cpu: "4", memory: 16Gi, pods: "58"}}
  allocatable: {{cpu: 3920m, memory: 15Gi, pods: "58"}}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, lastTransitionTime: "2026-01-01T00:00:00Z"}}
"#
    )
}

/// An instance that joins more than `consolidateAfter` after its NodeClaim was created,
/// with only the pool's label on its Node, is neither drifted nor deleted: consolidation
/// counts from initialization, and requirements drift reads the NodeClaim's labels. Seen:
/// the instance was terminated 2.4 s after joining, inside `consolidateAfter: 30s`, and
/// every registered node read RequirementsDrifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_joins_late_is_neither_drifted_nor_deleted_inside_consolidate_after() {
    let moto = MotoPeer::start();
    aws_setup(&moto).await;
    let kube = KubePeer::start();
    let manifests = MANIFESTS.replace(
        "      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}\n",
        "      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}\n  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}\n",
    );
    assert_ne!(manifests, MANIFESTS);
    kube.kubectl(&["apply", "-f", "-"], &manifests);
    let mut run = run_aws(&kube, &moto);
    let claim = wait_for("a launched NodeClaim", &run, || {
        let claims = kube.get_json(&["get", "nodeclaims"]);
        claims["items"]
            .as_array()?
            .iter()
            .find(|c| c["status"]["providerID"].as_str().is_some())
            .cloned()
    });
    let launched_at = Instant::now();
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    let provider_id = claim["status"]["providerID"].as_str().unwrap().to_string();
    // The pod goes away before the node joins: nothing is nominated to it, and the node
    // joins empty, well after consolidateAfter has passed since its NodeClaim's creation.
    kube.kubectl(&["delete", "pod", "web-0", "-n", "default"], "");
    tokio::time::sleep(Duration::from_secs(35)).await;
    kube.kubectl(
        &["create", "-f", "-"],
        &joined_node("ip-10-0-1-17.ec2.internal", &provider_id),
    );
    let joined = Instant::now();
    wait_for("the node registered", &run, || {
        run.stdout().contains("NodeInitialized").then_some(())
    });
    // consolidateAfter counts from here: for 25 s nothing may happen to it.
    while joined.elapsed() < Duration::from_secs(25) {
        let c = kube.get_json(&["get", "nodeclaim", &name]);
        assert!(
            c["metadata"]["deletionTimestamp"].is_null(),
            "deleted {} s after joining ({} s after launch); stdout:\n{}",
            joined.elapsed().as_secs(),
            launched_at.elapsed().as_secs(),
            run.stdout()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let out = run.stdout();
    assert!(
        !out.contains("\"reason\":\"Drifted\"") && !out.contains("RequirementsDrifted"),
        "the joined node is not drifted:\n{out}"
    );
    assert_eq!(run.terminate(), Some(0), "stderr:\n{}", run.stderr());
}

const QUEUE: &str = "e2e-interruption";

/// An EventBridge event as EC2 and AWS Health put them on the interruption queue.
fn eventbridge(source: &str, detail_type: &str, detail: &str) -> String {
    format!(
        r#"{{"version":"0","id":"{}","detail-type":"{detail_type}","source":"{source}","account":"123456789012","time":"{}","region":"us-east-1","resources":[],"detail":{detail}}}"#,
        uuid_like(),
        chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
    )
}

fn uuid_like() -> String {
    format!("{:032x}", fastrand::u128(..))
}

/// The interruption queue, created as the CloudFormation in docs/aws.md creates it.
async fn create_queue(sqs: &aws_sdk_sqs::Client) -> String {
    sqs.create_queue()
        .queue_name(QUEUE)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string()
}

async fn send(sqs: &aws_sdk_sqs::Client, url: &str, body: &str) -> String {
    let out = sqs
        .send_message()
        .queue_url(url)
        .message_body(body)
        .send()
        .await
        .unwrap();
    out.message_id().unwrap().to_string()
}

/// Messages on the queue, visible or being handled.
async fn queued(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    let attrs = out.attributes().cloned().unwrap_or_default();
    [
        A::ApproximateNumberOfMessages,
        A::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .map(|a| {
        attrs
            .get(a)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    })
    .sum()
}

/// `--interruption-queue`: what EC2 says through EventBridge reaches the controller. A body
/// that is not an event, an event of another source and a rebalance recommendation are
/// deleted and leave the node alone (the recommendation is reported); a spot interruption
/// warning deletes the NodeClaim at once, its pod's replacement launches well inside the two
/// minutes' notice and away from the interrupted offering, and every message leaves the
/// queue. The queue is unreadable at first (more throttled answers than the SDK retries):
/// the loop says so and reads it once it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_interruption_on_the_queue_drains_the_node_and_a_replacement_launches_before_the_reclaim()
 {
    let moto = MotoPeer::start();
    aws_setup(&moto).await;
    let sqs = moto.sqs();
    let url = create_queue(&sqs).await;
    moto.throttle("ReceiveMessage", 8);
    let kube = KubePeer::start();
    kube.start_scheduler(0.0, 0.0);
    let manifests = MANIFESTS.replace("values: [on-demand]", "values: [spot]");
    assert_ne!(manifests, MANIFESTS);
    kube.kubectl(&["apply", "-f", "-"], &manifests);
    let mut run = run_aws_with(&kube, &moto, &["--interruption-queue", QUEUE]);

    let claim = wait_for("a launched NodeClaim", &run, || {
        let claims = kube.get_json(&["get", "nodeclaims"]);
        claims["items"]
            .as_array()?
            .iter()
            .find(|c| c["status"]["providerID"].as_str().is_some())
            .cloned()
    });
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    let provider_id = claim["status"]["providerID"].as_str().unwrap().to_string();
    let instance = provider_id.rsplit('/').next().unwrap().to_string();
    let labels = &claim["metadata"]["labels"];
    assert_eq!(labels["karpenter.sh/capacity-type"], "spot", "{claim}");
    let interrupted_type = labels["node.kubernetes.io/instance-type"]
        .as_str()
        .unwrap()
        .to_string();
    kube.kubectl(
        &["create", "-f", "-"],
        &joined_node("ip-10-0-1-4.ec2.internal", &provider_id),
    );
    wait_for("web-0 bound to the node", &run, || {
        let pod = kube.get_json(&["get", "pod", "web-0", "-n", "default"]);
        (pod["spec"]["nodeName"] == "ip-10-0-1-4.ec2.internal").then_some(())
    });

    // Nothing to act on: each message is deleted, the node stays.
    let malformed = send(&sqs, &url, "{not an event").await;
    send(
        &sqs,
        &url,
        &eventbridge("aws.autoscaling", "EC2 Instance Launch Successful", "{}"),
    )
    .await;
    send(
        &sqs,
        &url,
        &eventbridge(
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            &format!(r#"{{"instance-id":"{instance}"}}"#),
        ),
    )
    .await;
    wait_for("the rebalance recommendation reported", &run, || {
        run.stdout().contains("InterruptionWarning").then_some(())
    });
    let start = Instant::now();
    while queued(&sqs, &url).await > 0 {
        assert!(
            start.elapsed() < PATIENCE,
            "messages left on the queue; stderr:\n{}",
            run.stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let c = kube.get_json(&["get", "nodeclaim", &name]);
    assert!(c["metadata"]["deletionTimestamp"].is_null(), "{c}");
    let err = run.stderr();
    assert!(
        err.contains(&malformed) && err.contains("not an EventBridge event"),
        "the malformed message is named:\n{err}"
    );
    assert!(
        err.contains("ReceiveMessage"),
        "the unreadable queue is reported:\n{err}"
    );

    // The spot interruption warning: two minutes before EC2 takes the instance back.
    let warned = Instant::now();
    send(
        &sqs,
        &url,
        &eventbridge(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            &format!(r#"{{"instance-id":"{instance}","instance-action":"terminate"}}"#),
        ),
    )
    .await;
    // The pod is evicted; its ReplicaSet (the test stands in for it: the peer has no
    // workload controllers) creates it again, pending.
    wait_for("web-0 evicted", &run, || {
        let pods = kube.get_json(&["get", "pods", "-n", "default"]);
        let gone = !pods["items"]
            .as_array()?
            .iter()
            .any(|p| p["metadata"]["name"] == "web-0");
        gone.then_some(())
    });
    let pending = MANIFESTS.split("---\n").last().unwrap();
    assert!(pending.contains("kind: Pod"), "{pending}");
    kube.kubectl(&["create", "-f", "-"], pending);
    let replacement = wait_until(
        "a replacement launched before the reclaim",
        &run,
        warned + RECLAIM,
        || {
            let claims = kube.get_json(&["get", "nodeclaims"]);
            claims["items"]
                .as_array()?
                .iter()
                .find(|c| {
                    c["metadata"]["name"] != name.as_str()
                        && c["status"]["providerID"].as_str().is_some()
                })
                .cloned()
        },
    );
    // The figure for the record (the bound is the wait's: EC2 reclaims after 2 minutes).
    eprintln!(
        "replacement launched {:.1} s after the spot interruption warning",
        warned.elapsed().as_secs_f64()
    );
    // The interrupted NodeClaim went at once (deleting, or gone after its drain).
    let old = kube.get_json(&["get", "nodeclaims"]);
    let old = old["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metadata"]["name"] == name.as_str());
    assert!(
        old.is_none_or(|c| !c["metadata"]["deletionTimestamp"].is_null()),
        "{old:?}"
    );
    // The interrupted offering is out: the replacement's fleet did not offer it.
    let fleets = moto.fleets();
    let last = fleets.as_array().unwrap().last().unwrap();
    let offered: Vec<(&str, &str)> = last["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["instance_type"].as_str().unwrap_or(""),
                o["availability_zone"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        !offered.contains(&(interrupted_type.as_str(), "us-east-1a")),
        "{last}"
    );
    assert_ne!(
        replacement["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        interrupted_type.as_str(),
        "{replacement}"
    );
    let start = Instant::now();
    while queued(&sqs, &url).await > 0 {
        assert!(
            start.elapsed() < PATIENCE,
            "the warning stayed on the queue"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = run.stdout();
    assert!(
        out.contains(&format!("{name} interrupted: spot_interrupted"))
            || (out.contains("\"Interrupted\"") && out.contains("spot_interrupted")),
        "stdout:\n{out}"
    );
    // Upstream's Events, on the NodeClaim (and its Node).
    for (reason, type_) in [
        ("SpotRebalanceRecommendation", "Normal"),
        ("SpotInterrupted", "Warning"),
        ("TerminatingOnInterruption", "Warning"),
    ] {
        let e = wait_for(reason, &run, || {
            kube.items(&["get", "events.v1.events.k8s.io", "-A"])
                .into_iter()
                .find(|e| {
                    e["reason"] == reason
                        && e["regarding"]["kind"] == "NodeClaim"
                        && e["regarding"]["name"] == name.as_str()
                })
        });
        assert_eq!(e["type"], type_, "{e}");
    }
    assert_eq!(run.terminate(), Some(0), "stderr:\n{}", run.stderr());
}

/// The value of the sample whose line starts with `series`.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

/// The headless controller (leader election on, as deployed) reads the queue once it leads
/// and serves upstream's interruption metrics: a state change for an instance no NodeClaim
/// owns is counted as received (`instance_stopped`) and deleted, a malformed message is
/// deleted without being counted as received, and the one handled message is timed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_reads_the_queue_as_leader_and_serves_upstreams_interruption_metrics() {
    let moto = MotoPeer::start();
    aws_setup(&moto).await;
    let sqs = moto.sqs();
    let url = create_queue(&sqs).await;
    let kube = KubePeer::start();
    kube.kubectl(&["apply", "-f", "-"], MANIFESTS);
    let kubeconfig = kube.kubeconfig_path();
    let mut flags = aws_flags(&moto);
    flags.extend(["--interruption-queue".to_string(), QUEUE.to_string()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let ctl = proc::controller_with(kubeconfig.to_str().unwrap(), &flags, &moto.env());
    let addr = proc::endpoints_of(&ctl);
    ctl.wait_stderr("the queue watched", |s| {
        s.contains("watching interruption queue")
    });
    send(
        &sqs,
        &url,
        &eventbridge(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            r#"{"instance-id":"i-0000000000000dead","state":"stopping"}"#,
        ),
    )
    .await;
    send(&sqs, &url, "[1, 2").await;
    let body = wait_for("both messages deleted", &ctl, || {
        let body = proc::scrape(&addr);
        (sample(&body, "karpenter_interruption_deleted_messages_total ") == Some(2.0))
            .then_some(body)
    });
    assert_eq!(
        sample(
            &body,
            r#"karpenter_interruption_received_messages_total{message_type="instance_stopped"} "#
        ),
        Some(1.0),
        "{body}"
    );
    assert!(
        !body.contains("karpenter_interruption_received_messages_total{message_type=\"no_op\"}"),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "karpenter_interruption_message_queue_duration_seconds_count "
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(queued(&sqs, &url).await, 0);
}
