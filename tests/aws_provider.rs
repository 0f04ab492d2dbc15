//! The AWS provider (`cloud::aws`) against the EC2 emulator (tests/peers/moto_server.py):
//! NodeClass resolution (selectors, aliases, instance profile), the live catalog, launch
//! templates, CreateFleet launches and their ICE fall-over, batching, termination,
//! listing, drift and throttling.

#[path = "peers/aws_fixtures.rs"]
mod aws_fixtures;
#[path = "peers/moto_peer.rs"]
mod moto_peer;

use std::collections::BTreeMap;

use aws_fixtures::*;
use base64::Engine;
use karpenter_tui::api::labels;
use karpenter_tui::cloud::aws::{AwsCloud, AwsHandle};
use karpenter_tui::cloud::{CloudProvider, LaunchRequest, Launched};
use karpenter_tui::engine::catalog::{CapacityType, Catalog};
use karpenter_tui::engine::provisioning::launch_order;
use karpenter_tui::engine::requirements::Requirements;
use moto_peer::{
    AL2023_ARM_AMI, AL2023_NVIDIA_AMI, AL2023_X86_AMI, AL2023_X86_PARAM, MotoPeer, tag_spec,
};

#[tokio::test]
async fn nodeclass_selectors_alias_and_role_resolve_into_a_ready_status() {
    let peer = MotoPeer::start();
    let net = network(&peer).await;
    let cloud = AwsCloud::connect(options(&peer)).await.expect("connect");
    let h = cloud.handle();
    // A pool whose NodeClass does not exist launches nothing, and says why.
    h.mark_listed();
    assert!(cloud.instance_types(&pool()).is_empty());
    assert_eq!(
        cloud.unlaunchable(&pool()).as_deref(),
        Some("EC2NodeClass default does not exist")
    );
    // Before resolution the pool launches nothing either (resolution is under way).
    h.set_nodeclass(&discovery_nodeclass());
    assert!(cloud.instance_types(&pool()).is_empty());

    let statuses = h.resolve_all().await;
    let (name, status) = &statuses[0];
    assert_eq!(name, "default");
    let mut subnets: Vec<(&str, &str)> = status
        .subnets
        .iter()
        .map(|s| (s.id.as_str(), s.zone.as_str()))
        .collect();
    subnets.sort();
    let mut want = vec![
        (net.subnet_a.as_str(), "us-east-1a"),
        (net.subnet_b.as_str(), "us-east-1b"),
    ];
    want.sort();
    assert_eq!(subnets, want, "the tagged subnets, not {}", net.subnet_c);
    let groups: Vec<&str> = status
        .security_groups
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    assert_eq!(
        groups,
        [net.group.as_str()],
        "a \"*\" tag value matches any value, not {}",
        net.other_group
    );
    // The alias reads the AL2023 parameters: standard x86_64 and arm64, nvidia, neuron.
    let mut amis: Vec<&str> = status.amis.iter().map(|a| a.id.as_str()).collect();
    amis.sort();
    let mut want_amis = vec![
        AL2023_X86_AMI,
        AL2023_ARM_AMI,
        AL2023_NVIDIA_AMI,
        moto_peer::AL2023_NEURON_AMI,
    ];
    want_amis.sort();
    assert_eq!(amis, want_amis);
    let arm = status.amis.iter().find(|a| a.id == AL2023_ARM_AMI).unwrap();
    assert!(
        arm.requirements
            .iter()
            .any(|r| r.key == labels::ARCH && r.values == ["arm64"])
    );
    let ready: Vec<(&str, &str)> = status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert!(ready.contains(&("Ready", "True")), "{ready:?}");
    // Every condition upstream v1.14.1's EC2NodeClass carries.
    for c in [
        "AMIsReady",
        "SubnetsReady",
        "SecurityGroupsReady",
        "InstanceProfileReady",
        "PlacementGroupReady",
        "CapacityReservationsReady",
        "ValidationSucceeded",
    ] {
        assert!(ready.contains(&(c, "True")), "{c}: {ready:?}");
    }
    // The role became an instance profile holding it.
    let profile = status.instance_profile.clone().expect("instance profile");
    assert!(profile.starts_with(&format!("{CLUSTER}_")), "{profile}");
    let p = peer
        .iam()
        .get_instance_profile()
        .instance_profile_name(&profile)
        .send()
        .await
        .expect("the profile exists");
    let roles: Vec<&str> = p
        .instance_profile()
        .unwrap()
        .roles()
        .iter()
        .map(|r| r.role_name())
        .collect();
    assert_eq!(roles, ["KarpenterNodeRole"]);

    // Ready: the pool's instance types are offered only in the subnets' zones, and the
    // GPU types only because the nvidia AMI serves them.
    let types = cloud.instance_types(&pool());
    assert!(!types.is_empty());
    assert!(types.iter().all(|t| {
        t.offerings
            .iter()
            .all(|o| o.zone == "us-east-1a" || o.zone == "us-east-1b")
    }));
    assert!(types.iter().any(|t| t.name == "m5.large"));
    assert!(
        types.iter().any(|t| t.name == "m6g.large"),
        "arm64 types, for the arm64 AMI"
    );
    assert_eq!(cloud.unlaunchable(&pool()), None);
    // A second resolution with nothing changed writes nothing.
    assert!(h.resolve_all().await.is_empty());
}

#[tokio::test]
async fn ami_terms_by_name_owner_id_tags_and_ssm_parameter() {
    let peer = MotoPeer::start();
    network(&peer).await;
    let older = peer.register_ami("custom-x86-v1", "x86_64", "2024-01-01T00:00:00.000Z");
    let newer = peer.register_ami("custom-x86-v2", "x86_64", "2024-06-01T00:00:00.000Z");
    let cloud = AwsCloud::connect(options(&peer)).await.expect("connect");
    let h = cloud.handle();
    h.mark_listed();
    let spec = |ami_terms: &str| {
        nodeclass(&format!(
            "  role: KarpenterNodeRole\n  amiFamily: AL2023\n  amiSelectorTerms:\n{ami_terms}  subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: {CLUSTER}\n  securityGroupSelectorTerms:\n  - name: nodes\n"
        ))
    };
    let amis = |h: &AwsHandle| -> Vec<String> {
        match h.resolved("default") {
            Some(Ok(r)) => r.amis.iter().map(|a| a.id.clone()).collect(),
            other => panic!("not resolved: {other:?}"),
        }
    };
    // name with a wildcard: the newest image per architecture wins.
    h.set_nodeclass(&spec(
        "  - name: custom-x86-*\n    owner: \"602401143452\"\n",
    ));
    h.resolve_all().await;
    assert_eq!(amis(&h), [newer]);
    // id.
    h.set_nodeclass(&spec(&format!("  - id: {older}\n")));
    h.resolve_all().await;
    assert_eq!(amis(&h), [older.as_str()]);
    // tags.
    peer.ec2(true)
        .create_tags()
        .resources(&older)
        .tags(tag("release", "pinned"))
        .send()
        .await
        .expect("CreateTags");
    h.set_nodeclass(&spec("  - tags:\n      release: pinned\n"));
    h.resolve_all().await;
    assert_eq!(amis(&h), [older.as_str()]);
    // ssmParameter: the image the parameter names.
    h.set_nodeclass(&spec(&format!("  - ssmParameter: {AL2023_X86_PARAM}\n")));
    h.resolve_all().await;
    assert_eq!(amis(&h), [AL2023_X86_AMI.to_string()]);
    // Nothing matches: NotReady with the reason, and the pool launches nothing.
    h.set_nodeclass(&spec("  - name: no-such-image-*\n"));
    let statuses = h.resolve_all().await;
    let ready = statuses[0]
        .1
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    assert!(ready.message.contains("AMINotFound"), "{}", ready.message);
    assert!(cloud.instance_types(&pool()).is_empty());
    assert!(
        cloud
            .unlaunchable(&pool())
            .is_some_and(|w| w.contains("AMI")),
        "{:?}",
        cloud.unlaunchable(&pool())
    );
    // A placement group EC2 does not have: the NodeClass says so and is not Ready,
    // rather than launching outside the group it asked for.
    h.set_nodeclass(&spec(&format!(
        "  - id: {}\n  placementGroupSelector: {{name: analytics}}\n",
        older
    )));
    let statuses = h.resolve_all().await;
    let of = |t: &str| {
        statuses[0]
            .1
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    assert_eq!(
        of("PlacementGroupReady"),
        Some(("False".into(), "PlacementGroupNotFound".into()))
    );
    assert_eq!(
        of("ValidationSucceeded"),
        Some(("False".into(), "DependenciesNotReady".into()))
    );
    assert_eq!(of("Ready").map(|r| r.0), Some("False".into()));
    assert!(cloud.instance_types(&pool()).is_empty());
}

#[tokio::test]
async fn the_live_catalog_matches_the_built_in_one_and_uses_ec2_spot_prices() {
    let peer = MotoPeer::start();
    let (cloud, _, _) = ready_cloud(&peer).await;
    let live = cloud.instance_types(&pool());
    let builtin = Catalog::builtin();
    for name in ["m5.large", "c6g.xlarge", "g4dn.xlarge"] {
        let l = live.iter().find(|t| t.name == name).expect(name);
        let b = builtin.get(name).expect(name);
        assert_eq!(l.labels, b.labels, "{name}: labels");
        assert_eq!(l.capacity, b.capacity, "{name}: capacity");
        assert_eq!(l.overhead, b.overhead, "{name}: overhead");
        for o in &l.offerings {
            let want = b
                .offerings
                .iter()
                .find(|x| x.zone == o.zone && x.capacity_type == o.capacity_type)
                .expect("the same offering");
            assert!((o.price - want.price).abs() < 1e-9, "{name} {o:?}");
        }
    }
}

#[tokio::test]
async fn a_fleet_launch_uses_a_content_keyed_template_with_imdsv2_and_tags_the_instance() {
    let peer = MotoPeer::start();
    let (mut cloud, _, net) = ready_cloud(&peer).await;
    let req = request(&cloud, "web-abcde", &["m5.large"], CapacityType::OnDemand);
    let launched = cloud.create(req.clone()).await.expect("launched");
    let i = &launched.instance;
    assert!(
        i.provider_id.starts_with("aws:///us-east-1"),
        "{}",
        i.provider_id
    );
    assert_eq!(i.instance_type, "m5.large");
    assert_eq!(i.capacity_type, CapacityType::OnDemand);
    assert_eq!(i.image_id.as_deref(), Some(AL2023_X86_AMI));
    assert!(i.hostname.ends_with(".ec2.internal"), "{}", i.hostname);
    assert!(
        launched
            .annotations
            .contains_key("karpenter.k8s.aws/ec2nodeclass-hash")
    );

    let tags = instance_tags(&peer, &i.provider_id).await;
    for (k, v) in [
        ("karpenter.sh/nodepool", "web"),
        ("karpenter.sh/nodeclaim", "web-abcde"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("kubernetes.io/cluster/test-cluster", "owned"),
        ("eks:eks-cluster-name", CLUSTER),
        ("team", "platform"),
    ] {
        assert_eq!(
            tags.get(k).map(String::as_str),
            Some(v),
            "tag {k}: {tags:?}"
        );
    }

    // The fleet: instant, lowest-price for on-demand, overrides in the tagged subnets.
    let fleets = peer.fleets();
    let f = &fleets.as_array().unwrap()[0];
    assert_eq!(f["on_demand_allocation_strategy"], "lowest-price", "{f}");
    let subnets: Vec<&str> = f["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            o["SubnetId"]
                .as_str()
                .or(o["subnet_id"].as_str())
                .unwrap_or_default()
        })
        .collect();
    assert!(
        subnets
            .iter()
            .all(|s| *s == net.subnet_a || *s == net.subnet_b),
        "{subnets:?}"
    );

    // The template: IMDSv2 required, hop limit 1, the AMI, the group, nodeadm user data.
    let ec2 = peer.ec2(true);
    let templates = ec2.describe_launch_templates().send().await.unwrap();
    let t = &templates.launch_templates()[0];
    let name = t.launch_template_name().unwrap().to_string();
    assert!(name.starts_with("karpenter.k8s.aws/"), "{name}");
    let versions = ec2
        .describe_launch_template_versions()
        .launch_template_name(&name)
        .send()
        .await
        .unwrap();
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap();
    let md = data.metadata_options().unwrap();
    assert_eq!(md.http_tokens().map(|t| t.as_str()), Some("required"));
    assert_eq!(md.http_put_response_hop_limit(), Some(1));
    assert_eq!(md.http_endpoint().map(|e| e.as_str()), Some("enabled"));
    assert_eq!(data.image_id(), Some(AL2023_X86_AMI));
    // The groups go on the one interface, never on the instance (EC2 refuses both).
    assert!(data.security_group_ids().is_empty(), "{data:?}");
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 1, "{nics:?}");
    assert_eq!(nics[0].device_index(), Some(0));
    assert_eq!(nics[0].groups(), [net.group.as_str()]);
    let bdm = &data.block_device_mappings()[0];
    assert_eq!(bdm.device_name(), Some("/dev/xvda"));
    assert_eq!(bdm.ebs().and_then(|e| e.volume_size()), Some(20));
    let user_data = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data.user_data().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert!(
        user_data.contains("Content-Type: application/node.eks.aws"),
        "{user_data}"
    );
    assert!(user_data.contains("kind: NodeConfig"), "{user_data}");
    assert!(
        user_data.contains("apiServerEndpoint: https://api.test-cluster.example"),
        "{user_data}"
    );
    assert!(
        user_data.contains("--node-labels=karpenter.sh/nodepool=web"),
        "{user_data}"
    );

    // Same content, same template: a second launch makes no new one.
    cloud
        .create(LaunchRequest {
            nodeclaim: "web-fghij".into(),
            ..req
        })
        .await
        .expect("second launch");
    let templates = ec2.describe_launch_templates().send().await.unwrap();
    assert_eq!(templates.launch_templates().len(), 1);
}

#[tokio::test]
async fn ice_on_the_first_offering_falls_over_to_the_next_and_is_reported() {
    let peer = MotoPeer::start();
    let (mut cloud, _, _) = ready_cloud(&peer).await;
    let req = request(
        &cloud,
        "web-ice01",
        &["m5.large", "m5.xlarge"],
        CapacityType::Spot,
    );
    let first = req.offerings[0].clone();
    peer.ice(&[(
        first.instance_type.as_str(),
        first.zone.as_str(),
        Some("spot"),
    )]);
    let launched = cloud
        .create(req.clone())
        .await
        .expect("the next offering launches");
    let i = &launched.instance;
    assert_eq!(i.capacity_type, CapacityType::Spot);
    assert_ne!(
        (i.instance_type.as_str(), i.zone.as_str()),
        (first.instance_type.as_str(), first.zone.as_str())
    );
    assert_eq!(launched.unavailable.len(), 1, "{:?}", launched.unavailable);
    let u = &launched.unavailable[0];
    assert_eq!(
        (u.instance_type.as_str(), u.zone.as_str(), u.capacity_type),
        (
            first.instance_type.as_str(),
            first.zone.as_str(),
            CapacityType::Spot
        )
    );
    let fleets = peer.fleets();
    let f = fleets.as_array().unwrap().last().unwrap();
    assert_eq!(
        f["spot_allocation_strategy"], "price-capacity-optimized",
        "{f}"
    );

    // Every offering out of capacity: an InsufficientCapacity error naming them all.
    let pairs: Vec<(String, String)> = req
        .offerings
        .iter()
        .map(|o| (o.instance_type.clone(), o.zone.clone()))
        .collect();
    let pairs: Vec<(&str, &str, Option<&str>)> = pairs
        .iter()
        .map(|(t, z)| (t.as_str(), z.as_str(), None))
        .collect();
    peer.ice(&pairs);
    match cloud
        .create(LaunchRequest {
            nodeclaim: "web-ice02".into(),
            ..req.clone()
        })
        .await
    {
        Err(karpenter_tui::cloud::LaunchError::InsufficientCapacity { offerings, .. }) => {
            assert_eq!(offerings.len(), req.offerings.len());
        }
        other => panic!("expected InsufficientCapacity, got {other:?}"),
    }
}

#[tokio::test]
async fn launches_of_one_shape_in_a_round_share_one_fleet_call() {
    let peer = MotoPeer::start();
    let (mut cloud, _, _) = ready_cloud(&peer).await;
    let names = ["web-b0001", "web-b0002", "web-b0003"];
    let requests: Vec<LaunchRequest> = names
        .iter()
        .map(|n| request(&cloud, n, &["m5.large"], CapacityType::OnDemand))
        .collect();
    let before = peer.fleets().as_array().unwrap().len();
    let results = cloud.create_all(requests).await;
    let fleets = peer.fleets();
    let fleets = fleets.as_array().unwrap();
    assert_eq!(fleets.len() - before, 1, "one CreateFleet call: {fleets:?}");
    assert_eq!(fleets.last().unwrap()["total_target_capacity"], 3);
    let mut ids = Vec::new();
    for (name, r) in names.iter().zip(results) {
        let l = r.expect("launched");
        let tags = instance_tags(&peer, &l.instance.provider_id).await;
        assert_eq!(
            tags.get("karpenter.sh/nodeclaim").map(String::as_str),
            Some(*name)
        );
        ids.push(l.instance.provider_id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 3, "three instances");
}

#[tokio::test]
async fn terminate_is_idempotent_and_list_finds_the_clusters_instances_by_tag() {
    let peer = MotoPeer::start();
    let (mut cloud, _, net) = ready_cloud(&peer).await;
    let launched = cloud
        .create(request(
            &cloud,
            "web-t0001",
            &["m5.large"],
            CapacityType::OnDemand,
        ))
        .await
        .expect("launched");
    // An instance of this cluster no NodeClaim launched (garbage collection's orphan).
    let ec2 = peer.ec2(true);
    let orphan = ec2
        .run_instances()
        .image_id(AL2023_X86_AMI)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .subnet_id(&net.subnet_a)
        .tag_specifications(tag_spec(
            aws_sdk_ec2::types::ResourceType::Instance,
            &[
                ("kubernetes.io/cluster/test-cluster", "owned"),
                ("karpenter.sh/nodepool", "web"),
            ],
        ))
        .send()
        .await
        .unwrap();
    let orphan_id = orphan.instances()[0].instance_id().unwrap().to_string();
    // And one of another cluster.
    ec2.run_instances()
        .image_id(AL2023_X86_AMI)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .tag_specifications(tag_spec(
            aws_sdk_ec2::types::ResourceType::Instance,
            &[
                ("kubernetes.io/cluster/other", "owned"),
                ("karpenter.sh/nodepool", "web"),
            ],
        ))
        .send()
        .await
        .unwrap();

    let listed = cloud.list().await.expect("list");
    let mut found: Vec<(&str, &str)> = listed
        .iter()
        .map(|i| {
            (
                i.provider_id.rsplit('/').next().unwrap(),
                i.nodeclaim.as_str(),
            )
        })
        .collect();
    found.sort();
    let launched_id = launched.instance.provider_id.rsplit('/').next().unwrap();
    let mut want = vec![(launched_id, "web-t0001"), (orphan_id.as_str(), "")];
    want.sort();
    assert_eq!(found, want);

    cloud
        .delete(&launched.instance.provider_id)
        .await
        .expect("terminate");
    cloud
        .delete(&launched.instance.provider_id)
        .await
        .expect("terminating again is fine");
    cloud
        .delete("aws:///us-east-1a/i-0000000000000dead")
        .await
        .expect("an unknown instance is gone");
    let listed = cloud.list().await.expect("list");
    assert!(
        listed.iter().all(|i| !i.provider_id.ends_with(launched_id)),
        "terminated instances are not listed"
    );
}

#[tokio::test]
async fn a_new_ami_behind_the_alias_drifts_the_node_and_a_nodeclass_edit_too() {
    let peer = MotoPeer::start();
    let (mut cloud, h, _) = ready_cloud(&peer).await;
    let launched = cloud
        .create(request(
            &cloud,
            "web-d0001",
            &["m5.large"],
            CapacityType::OnDemand,
        ))
        .await
        .expect("launched");
    let claim = claim("web-d0001", &launched);
    assert_eq!(cloud.drifted(&claim, &pool()), None);
    cloud.list().await.expect("list (instance facts)");
    assert_eq!(cloud.drifted(&claim, &pool()), None);

    // A new AL2023 release: the recommended parameter names a newer image.
    let newer = peer.register_ami(
        "amazon-eks-node-al2023-x86_64-standard-1.33-v20241201",
        "x86_64",
        "2024-12-01T00:00:00.000Z",
    );
    peer.set_ssm(AL2023_X86_PARAM, &newer);
    let before = cloud.generation();
    h.resolve_all().await;
    assert!(
        cloud.generation() > before,
        "the controller is told to look again"
    );
    assert_eq!(cloud.drifted(&claim, &pool()).as_deref(), Some("AMIDrift"));

    // The parameter goes back; then the security group selector picks another group:
    // SecurityGroupDrift (selector terms are not in the hash, so not NodeClassDrift).
    peer.set_ssm(AL2023_X86_PARAM, AL2023_X86_AMI);
    h.resolve_all().await;
    assert_eq!(cloud.drifted(&claim, &pool()), None);
    let mut other_groups = discovery_nodeclass();
    other_groups.spec.security_group_selector_terms[0].tags =
        Some(BTreeMap::from([("team".to_string(), "other".to_string())]));
    h.set_nodeclass(&other_groups);
    h.resolve_all().await;
    assert_eq!(
        cloud.drifted(&claim, &pool()).as_deref(),
        Some("SecurityGroupDrift")
    );
    // Subnets that no longer include the instance's: SubnetDrift.
    let mut other_subnets = discovery_nodeclass();
    other_subnets.spec.subnet_selector_terms[0].tags =
        Some(BTreeMap::from([("team".to_string(), "other".to_string())]));
    h.set_nodeclass(&other_subnets);
    h.resolve_all().await;
    assert_eq!(
        cloud.drifted(&claim, &pool()).as_deref(),
        Some("SubnetDrift")
    );

    // A static field of the NodeClass (its tags) changes: NodeClassDrift comes first.
    let mut edited = discovery_nodeclass();
    edited.spec.tags.insert("team".into(), "payments".into());
    h.set_nodeclass(&edited);
    assert_eq!(
        cloud.drifted(&claim, &pool()).as_deref(),
        Some("NodeClassDrift")
    );
}

#[tokio::test]
async fn throttled_describe_calls_are_retried_with_backoff() {
    let peer = MotoPeer::start();
    let cloud = AwsCloud::connect(options(&peer)).await.expect("connect");
    peer.clear_requests();
    peer.throttle("DescribeInstanceTypes", 2);
    let n = cloud
        .handle()
        .refresh_catalog()
        .await
        .expect("retried until it passes");
    assert!(n > 500, "{n} types");
    let calls: Vec<bool> = peer
        .requests()
        .into_iter()
        .filter(|c| c.action.as_deref() == Some("DescribeInstanceTypes"))
        .map(|c| c.throttled)
        .collect();
    assert_eq!(&calls[..3], [true, true, false], "{calls:?}");
}

/// The template a fleet request used: its user data (decoded) and its block devices
/// (name, GiB, initialization rate).
async fn template_of_fleet(
    peer: &MotoPeer,
    fleet: &serde_json::Value,
) -> (String, Vec<(String, i32, Option<i32>)>) {
    let data = template_data(peer, fleet).await;
    let user_data = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data.user_data().unwrap())
            .unwrap(),
    )
    .unwrap();
    let volumes = data
        .block_device_mappings()
        .iter()
        .map(|b| {
            (
                b.device_name().unwrap_or_default().to_string(),
                b.ebs().and_then(|e| e.volume_size()).unwrap_or_default(),
                b.ebs().and_then(|e| e.volume_initialization_rate()),
            )
        })
        .collect();
    (user_data, volumes)
}

/// Each AMI family launches with its own bootstrap: bootstrap.sh for AL2, Bottlerocket's
/// TOML (the user's settings kept under Karpenter's), Windows' PowerShell, each with the
/// NodeClaim's labels, the unregistered taint, the cluster's endpoint and CA, RAID0 for the
/// instance store where the NodeClass asks; and with the family's default volumes. Before,
/// every family but AL2023 and Custom failed its launches.
#[tokio::test]
async fn every_ami_family_launches_with_its_own_bootstrap_and_default_volumes() {
    let peer = MotoPeer::start();
    let (mut cloud, handle, _) = ready_cloud(&peer).await;
    let cases = [
        (
            "AL2",
            "#!/bin/bash\necho hello",
            vec![
                "/etc/eks/bootstrap.sh 'test-cluster' --apiserver-endpoint 'https://api.test-cluster.example' --b64-cluster-ca 'Q0E='",
                "--node-labels=\"karpenter.sh/nodepool=web\"",
                "karpenter.sh/unregistered:NoExecute",
                "--local-disks raid0",
                "echo hello",
            ],
            vec![("/dev/xvda", 20)],
        ),
        (
            "Bottlerocket",
            "[settings.host-containers.admin]\nenabled = true\n",
            vec![
                "api-server = \"https://api.test-cluster.example\"",
                "cluster-certificate = \"Q0E=\"",
                "\"karpenter.sh/nodepool\" = \"web\"",
                "\"karpenter.sh/unregistered\" = [\":NoExecute\"]",
                "ephemeral-storage",
                "[settings.host-containers.admin]",
            ],
            vec![("/dev/xvda", 4), ("/dev/xvdb", 20)],
        ),
        (
            "Windows2022",
            "Write-Host hello",
            vec![
                "<powershell>\nWrite-Host hello\n",
                "-EKSClusterName 'test-cluster'",
                "-Base64ClusterCA 'Q0E='",
                "karpenter.sh/unregistered:NoExecute",
            ],
            vec![("/dev/sda1", 50)],
        ),
    ];
    for (i, (family, custom, markers, volumes)) in cases.into_iter().enumerate() {
        let custom_yaml = custom.replace('\n', "\n    ");
        handle.set_nodeclass(&nodeclass(&format!(
            "  amiFamily: {family}\n  role: KarpenterNodeRole\n  instanceStorePolicy: RAID0\n  userData: |\n    {custom_yaml}\n  amiSelectorTerms:\n  - id: {AL2023_X86_AMI}\n  subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: {CLUSTER}\n  securityGroupSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: \"*\"\n"
        )));
        handle.resolve_all().await;
        let req = request(
            &cloud,
            &format!("web-{i}"),
            &["m5.large"],
            CapacityType::OnDemand,
        );
        cloud
            .create(req)
            .await
            .unwrap_or_else(|e| panic!("{family}: {e}"));
        let fleets = peer.fleets();
        let last = fleets.as_array().unwrap().last().unwrap().clone();
        let (user_data, got_volumes) = template_of_fleet(&peer, &last).await;
        for m in markers {
            assert!(user_data.contains(m), "{family}: {m:?} not in\n{user_data}");
        }
        let want: Vec<(String, i32, Option<i32>)> = volumes
            .iter()
            .map(|(d, s)| (d.to_string(), *s, None))
            .collect();
        assert_eq!(got_volumes, want, "{family}");
    }
    // A volume filled from a snapshot at a set rate.
    let ec2 = peer.ec2(true);
    let volume = ec2
        .create_volume()
        .availability_zone("us-east-1a")
        .size(40)
        .send()
        .await
        .unwrap();
    let snapshot = ec2
        .create_snapshot()
        .volume_id(volume.volume_id().unwrap())
        .send()
        .await
        .unwrap();
    let snapshot = snapshot.snapshot_id().unwrap();
    handle.set_nodeclass(&nodeclass(&format!(
        "  role: KarpenterNodeRole\n  blockDeviceMappings:\n  - deviceName: /dev/xvda\n    rootVolume: true\n    ebs: {{volumeSize: 40Gi, volumeType: gp3, snapshotID: {snapshot}, volumeInitializationRate: 150}}\n  amiSelectorTerms:\n  - alias: al2023@latest\n  subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: {CLUSTER}\n  securityGroupSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: \"*\"\n"
    )));
    handle.resolve_all().await;
    let req = request(&cloud, "web-rate", &["m5.large"], CapacityType::OnDemand);
    cloud
        .create(req)
        .await
        .expect("launch with a volume initialization rate");
    let fleets = peer.fleets();
    let last = fleets.as_array().unwrap().last().unwrap().clone();
    let (_, volumes) = template_of_fleet(&peer, &last).await;
    assert_eq!(volumes, [("/dev/xvda".to_string(), 40, Some(150))]);
    // A Bottlerocket userData that is not TOML fails the launch and says why.
    handle.set_nodeclass(&nodeclass(&format!(
        "  amiFamily: Bottlerocket\n  role: KarpenterNodeRole\n  userData: \"settings = [\"\n  amiSelectorTerms:\n  - id: {AL2023_X86_AMI}\n  subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: {CLUSTER}\n  securityGroupSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: \"*\"\n"
    )));
    handle.resolve_all().await;
    let req = request(&cloud, "web-bad", &["m5.large"], CapacityType::OnDemand);
    let e = cloud.create(req).await.unwrap_err().to_string();
    assert!(
        e.contains("EC2NodeClass default") && e.contains("not Bottlerocket TOML"),
        "{e}"
    );
}

/// `instanceStorePolicy: RAID0`: a type with an instance store offers it as ephemeral
/// storage (m5d.large: 75 GB of NVMe, from DescribeInstanceTypes); one without keeps the
/// root volume, which a NodeClass's `rootVolume` mapping sizes. Before, every type had
/// 20Gi whatever the NodeClass said.
#[tokio::test]
async fn ephemeral_storage_follows_the_instance_store_under_raid0_and_the_root_volume() {
    let peer = MotoPeer::start();
    let (cloud, handle, _) = ready_cloud(&peer).await;
    let storage = |name: &str| {
        cloud
            .instance_types(&pool())
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| {
                (
                    t.capacity.ephemeral_storage / 1000,
                    t.allocatable().ephemeral_storage / 1000,
                )
            })
            .unwrap_or_else(|| panic!("{name} offered"))
    };
    const GI: i64 = 1 << 30;
    assert_eq!(storage("m5d.large").0, 20 * GI);
    let spec = |extra: &str| {
        nodeclass(&format!(
            "  role: KarpenterNodeRole\n{extra}  amiSelectorTerms:\n  - alias: al2023@latest\n  subnetSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: {CLUSTER}\n  securityGroupSelectorTerms:\n  - tags:\n      karpenter.sh/discovery: \"*\"\n"
        ))
    };
    handle.set_nodeclass(&spec(
        "  instanceStorePolicy: RAID0\n  blockDeviceMappings:\n  - deviceName: /dev/xvda\n    rootVolume: true\n    ebs: {volumeSize: 100Gi, volumeType: gp3}\n",
    ));
    handle.resolve_all().await;
    let (capacity, allocatable) = storage("m5d.large");
    assert_eq!(capacity, 75_000_000_000);
    assert_eq!(allocatable, 75_000_000_000 - GI - 7_500_000_000);
    assert_eq!(
        storage("m5.large").0,
        100 * GI,
        "no instance store: the root volume"
    );
}

/// On-demand prices are the region's own, read from the Pricing API (GetProducts); until
/// it answers, and in a region it has no prices for, the built-in us-east-1 table stands
/// in and the provider says so. A refresh that fails keeps the prices last read. Before,
/// every region was priced from the us-east-1 table, silently.
#[tokio::test]
async fn on_demand_prices_are_the_regions_own_and_the_fallback_says_so() {
    let peer = MotoPeer::start();
    peer.pricing(
        "eu-west-1",
        &[
            ("m5.large", 0.107),
            ("m5.xlarge", 0.214),
            ("c5.large", 0.096),
        ],
    );
    let mut opts = options(&peer);
    opts.region = Some("eu-west-1".into());
    let cloud = AwsCloud::connect(opts).await.expect("connect");
    let h = cloud.handle();
    let note = h
        .prices_note()
        .expect("built-in prices until the API answers");
    assert!(
        note.contains("us-east-1") && note.contains("not answered"),
        "{note}"
    );
    assert!(
        h.refresh_prices().await,
        "the region's prices differ from us-east-1's"
    );
    h.refresh_catalog().await.expect("catalog");
    assert_eq!(h.prices_note(), None);
    assert_eq!(
        h.price("m5.large", "eu-west-1a", CapacityType::OnDemand),
        Some(0.107)
    );
    assert_eq!(
        h.price("m5.xlarge", "eu-west-1b", CapacityType::OnDemand),
        Some(0.214)
    );
    // A type the region's price list does not have is not offered on demand.
    assert_eq!(
        h.price("r5.large", "eu-west-1a", CapacityType::OnDemand),
        None
    );

    // The API failing (more throttled answers than the SDK retries) keeps what was read.
    peer.throttle("GetProducts", 6);
    assert!(!h.refresh_prices().await);
    assert_eq!(h.prices_note(), None);
    assert_eq!(
        h.price("m5.large", "eu-west-1a", CapacityType::OnDemand),
        Some(0.107)
    );

    // A region the API has no prices for: the built-in table, and why.
    let mut opts = options(&peer);
    opts.region = Some("ap-southeast-2".into());
    let cloud = AwsCloud::connect(opts).await.expect("connect");
    let h = cloud.handle();
    assert!(!h.refresh_prices().await);
    let note = h.prices_note().expect("fallback");
    assert!(
        note.contains("no on-demand prices for region ap-southeast-2"),
        "{note}"
    );
    assert_eq!(
        h.price("m5.large", "ap-southeast-2a", CapacityType::OnDemand),
        Some(0.096),
        "us-east-1's price"
    );
}

/// A launch request for `types` in the controller's full launch order (reserved first).
fn ordered_request(cloud: &AwsCloud, name: &str, types: &[&str]) -> LaunchRequest {
    let its: Vec<_> = cloud
        .instance_types(&pool())
        .into_iter()
        .filter(|t| types.contains(&t.name.as_str()))
        .collect();
    LaunchRequest {
        offerings: launch_order(&Requirements::new(), &its),
        ..request(cloud, name, types, CapacityType::OnDemand)
    }
}

/// The reserved offering of `cr` on `instance_type`, as the NodeClass's types carry it.
fn reserved_offering(
    cloud: &AwsCloud,
    instance_type: &str,
    cr: &str,
) -> Option<karpenter_tui::engine::catalog::Offering> {
    cloud
        .instance_types(&pool())
        .iter()
        .find(|t| t.name == instance_type)?
        .offerings
        .iter()
        .find(|o| o.reservation.as_ref().is_some_and(|r| r.id == cr))
        .cloned()
}

/// The capacity reservation part of a fleet's launch template: (preference, target id,
/// market type).
async fn reservation_of_template(
    peer: &MotoPeer,
    fleet: &serde_json::Value,
) -> (Option<String>, Option<String>, Option<String>) {
    let data = template_data(peer, fleet).await;
    let spec = data.capacity_reservation_specification();
    (
        spec.and_then(|s| s.capacity_reservation_preference())
            .map(|p| p.as_str().to_string()),
        spec.and_then(|s| s.capacity_reservation_target())
            .and_then(|t| t.capacity_reservation_id())
            .map(str::to_string),
        data.instance_market_options()
            .and_then(|m| m.market_type())
            .map(|m| m.as_str().to_string()),
    )
}

/// Capacity reservations (upstream's `capacityreservation` provider and reserved
/// offerings): the selector terms resolve into the NodeClass's status; a reservation is
/// offered as `reserved` capacity at the on-demand price over 10^7 and launched into
/// first, by a template that targets it alone (a capacity block with its market type);
/// every launch counts it down and a termination gives the slot back, so it is never
/// launched into past its count; a launch EC2 refuses for capacity counts it out; spot
/// and on-demand templates opt out of open reservations; and when an ODCR ends its
/// instances run on as on-demand. Before, a NodeClass with capacityReservationSelectorTerms
/// was never Ready.
#[tokio::test]
async fn capacity_reservations_resolve_launch_first_and_are_never_launched_past_their_count() {
    let peer = MotoPeer::start();
    let _net = network(&peer).await;
    let end = (chrono::Utc::now() + chrono::TimeDelta::hours(3)).to_rfc3339();
    peer.capacity_reservations(
        "us-east-1",
        serde_json::json!([
            {"id": "cr-0a1", "instance_type": "m5.large", "availability_zone": "us-east-1a",
             "total": 2, "tags": {"team": "ml"}},
            {"id": "cr-0b2", "instance_type": "m5.xlarge", "availability_zone": "us-east-1b",
             "total": 1, "reservation_type": "capacity-block", "end_date": end},
            {"id": "cr-0c3", "instance_type": "m5.large", "availability_zone": "us-east-1a",
             "total": 5, "tags": {"team": "other"}},
        ]),
    );
    let mut cloud = AwsCloud::connect(options(&peer)).await.expect("connect");
    let handle = cloud.handle();
    let mut nc = discovery_nodeclass();
    nc.spec.capacity_reservation_selector_terms = Some(
        serde_json::from_value(serde_json::json!([
            {"tags": {"team": "ml"}},
            {"id": "cr-0b2"},
            {"id": "cr-0ffff"},
        ]))
        .unwrap(),
    );
    handle.set_nodeclass(&nc);
    let statuses = handle.resolve_all().await;
    let status = &statuses.first().expect("a status").1;
    let ready = |t: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| c.status.clone())
    };
    assert_eq!(ready("Ready").as_deref(), Some("True"), "{status:?}");
    assert_eq!(ready("CapacityReservationsReady").as_deref(), Some("True"));
    let found: Vec<(&str, Option<&str>, Option<&str>)> = status
        .capacity_reservations
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.reservation_type.as_deref(),
                r.state.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("cr-0a1", Some("default"), Some("active")),
            ("cr-0b2", Some("capacity-block"), Some("active"))
        ],
        "the tag term, the id term; a missing id selects nothing"
    );
    assert!(status.capacity_reservations[1].end_time.is_some());

    // Offered nearly free, first in the launch order.
    let od = handle
        .price("m5.large", "us-east-1a", CapacityType::OnDemand)
        .unwrap();
    let o = reserved_offering(&cloud, "m5.large", "cr-0a1").expect("a reserved offering");
    assert!(o.available);
    assert!((o.price - od / 1e7).abs() < 1e-12, "{}", o.price);
    assert_eq!(o.reservation.as_ref().unwrap().capacity, 2);
    let two: Vec<LaunchRequest> = ["web-r0001", "web-r0002"]
        .iter()
        .map(|n| ordered_request(&cloud, n, &["m5.large"]))
        .collect();
    assert_eq!(two[0].offerings[0].capacity_type, CapacityType::Reserved);
    let before = peer.fleets().as_array().unwrap().len();
    let launched: Vec<Launched> = cloud
        .create_all(two)
        .await
        .into_iter()
        .map(|r| r.expect("launched into the reservation"))
        .collect();
    let fleets = peer.fleets();
    let fleets = fleets.as_array().unwrap();
    assert_eq!(fleets.len() - before, 1, "one fleet for both: {fleets:?}");
    let fleet = fleets.last().unwrap();
    assert_eq!(fleet["capacity_type"], "reserved", "{fleet}");
    assert_eq!(
        reservation_of_template(&peer, fleet).await,
        (
            Some("capacity-reservations-only".into()),
            Some("cr-0a1".into()),
            None
        )
    );
    for l in &launched {
        assert_eq!(l.instance.capacity_type, CapacityType::Reserved);
        assert!((l.instance.price - od / 1e7).abs() < 1e-12);
        assert_eq!(
            l.labels
                .get(labels::CAPACITY_RESERVATION_ID)
                .map(String::as_str),
            Some("cr-0a1")
        );
        assert_eq!(
            l.labels
                .get(labels::CAPACITY_RESERVATION_TYPE)
                .map(String::as_str),
            Some("default")
        );
    }
    assert_eq!(
        peer.capacity_reservations_now("us-east-1")[0]["available"],
        0
    );

    // Counted out: the next m5.large launches on spot/on-demand, by a template that opts
    // out of open reservations.
    let o = reserved_offering(&cloud, "m5.large", "cr-0a1").unwrap();
    assert!(!o.available, "{o:?}");
    let next = ordered_request(&cloud, "web-r0003", &["m5.large"]);
    assert_ne!(next.offerings[0].capacity_type, CapacityType::Reserved);
    let third = cloud.create(next).await.expect("launched outside");
    assert_ne!(third.instance.capacity_type, CapacityType::Reserved);
    assert!(third.labels.is_empty());
    let fleet = peer.fleets().as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        reservation_of_template(&peer, &fleet).await.0.as_deref(),
        Some("none")
    );

    // A termination gives the slot back.
    cloud
        .delete(&launched[0].instance.provider_id)
        .await
        .expect("terminate");
    let o = reserved_offering(&cloud, "m5.large", "cr-0a1").unwrap();
    assert!(o.available);
    assert_eq!(o.reservation.as_ref().unwrap().capacity, 1);

    // The capacity block launches with its own market type.
    let block = cloud
        .create(ordered_request(&cloud, "web-r0004", &["m5.xlarge"]))
        .await
        .expect("launched into the capacity block");
    assert_eq!(block.instance.capacity_type, CapacityType::Reserved);
    assert_eq!(
        block
            .labels
            .get(labels::CAPACITY_RESERVATION_TYPE)
            .map(String::as_str),
        Some("capacity-block")
    );
    let fleet = peer.fleets().as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        reservation_of_template(&peer, &fleet).await,
        (
            Some("capacity-reservations-only".into()),
            Some("cr-0b2".into()),
            Some("capacity-block".into())
        )
    );

    // The block nears its end: in its last 40 minutes it is `expiring`, nothing launches
    // into it, and its instance is reported for draining.
    assert!(cloud.expiring().is_empty());
    let soon = (chrono::Utc::now() + chrono::TimeDelta::minutes(30)).to_rfc3339();
    peer.capacity_reservations(
        "us-east-1",
        serde_json::json!([
            {"id": "cr-0a1", "instance_type": "m5.large", "availability_zone": "us-east-1a",
             "total": 2, "available": 1, "tags": {"team": "ml"}},
            {"id": "cr-0b2", "instance_type": "m5.xlarge", "availability_zone": "us-east-1b",
             "total": 1, "available": 0, "reservation_type": "capacity-block", "end_date": soon},
        ]),
    );
    handle.resolve_all().await;
    assert_eq!(cloud.expiring(), vec![block.instance.provider_id.clone()]);
    assert!(
        !reserved_offering(&cloud, "m5.xlarge", "cr-0b2")
            .unwrap()
            .available
    );

    // EC2 has no room left though our count says 1 (someone else launched into it): the
    // launch fails and the reservation is counted out until the next resolution.
    peer.capacity_reservations(
        "us-east-1",
        serde_json::json!([
            {"id": "cr-0a1", "instance_type": "m5.large", "availability_zone": "us-east-1a",
             "total": 2, "available": 0, "tags": {"team": "ml"}},
        ]),
    );
    let refused = cloud
        .create(ordered_request(&cloud, "web-r0005", &["m5.large"]))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(
        !reserved_offering(&cloud, "m5.large", "cr-0a1")
            .unwrap()
            .available
    );

    // The ODCR ends: its instance runs on as on-demand, and the status drops it.
    peer.expire_capacity_reservation("us-east-1", "cr-0a1");
    let listed = cloud.list().await.expect("list");
    let survivor = listed
        .iter()
        .find(|i| i.provider_id == launched[1].instance.provider_id)
        .expect("still running");
    assert_eq!(survivor.capacity_type, CapacityType::OnDemand);
    let statuses = handle.resolve_all().await;
    let status = &statuses.last().expect("a changed status").1;
    assert!(
        status
            .capacity_reservations
            .iter()
            .all(|r| r.id != "cr-0a1"),
        "{:?}",
        status.capacity_reservations
    );
}

/// Upstream's `RESERVED_ENIS`, `VM_MEMORY_OVERHEAD_PERCENT` and `ISOLATED_VPC`, as
/// `--cloud aws` passes them: an m5.large (3 ENIs of 10 addresses, 8 GiB) with one ENI
/// reserved takes 20 pods, not 29, and keeps 10% of its memory, not 7.5%; with an
/// isolated VPC the Pricing API is never asked (though it would answer), the built-in
/// prices stand, and the note says why.
#[tokio::test]
async fn reserved_enis_vm_overhead_and_an_isolated_vpc_shape_the_catalog() {
    use karpenter_tui::engine::catalog::overhead::{CapacityOptions, mib_to_milli};
    let peer = MotoPeer::start();
    peer.pricing("us-east-1", &[("m5.large", 0.5)]);
    let mut opts = options(&peer);
    opts.capacity = CapacityOptions {
        vm_memory_overhead_percent: 0.1,
        reserved_enis: 1,
    };
    opts.isolated_vpc = true;
    let cloud = AwsCloud::connect(opts).await.expect("connect");
    let h = cloud.handle();
    peer.clear_requests();
    assert!(!h.refresh_prices().await, "nothing was read");
    assert_eq!(peer.actions("pricing"), Vec::<String>::new());
    let note = h.prices_note().expect("built-in prices, and why");
    assert!(note.contains("ISOLATED_VPC"), "{note}");
    h.refresh_catalog().await.expect("catalog");
    assert_eq!(
        h.price("m5.large", "us-east-1a", CapacityType::OnDemand),
        Some(0.096),
        "the built-in price, not the API's 0.5"
    );
    let _net = network(&peer).await;
    h.set_nodeclass(&discovery_nodeclass());
    h.resolve_all().await;
    let types = cloud.instance_types(&pool());
    let m5 = types
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    let builtin = Catalog::builtin();
    let b = builtin.get("m5.large").expect("built-in m5.large");
    assert_eq!(b.capacity.pods, 29_000, "the default: 3 ENIs x 9 + 2");
    assert_eq!(m5.capacity.pods, 20_000, "2 usable ENIs x 9 + 2");
    assert_eq!(m5.capacity.memory, mib_to_milli(8192 - 820));
    assert!(
        m5.overhead.memory < b.overhead.memory,
        "kube-reserved follows max pods"
    );
}
