//! The EC2NodeClass settings that shape an instance beyond its AMI and user data, against
//! the EC2 emulator (tests/peers/moto_server.py checks each interface layout against the
//! instance type as EC2 does): network interface layouts with EFA, EFA interfaces for
//! pods that ask for them, IPv4 prefixes, connection tracking, nested virtualization,
//! placement groups, and which instance types each of these leaves.

#[path = "peers/aws_fixtures.rs"]
mod aws_fixtures;
#[path = "peers/moto_peer.rs"]
mod moto_peer;

use aws_fixtures::*;
use karpenter_tui::api::labels::{PLACEMENT_GROUP_ID, PLACEMENT_GROUP_PARTITION};
use karpenter_tui::cloud::aws::{AwsCloud, AwsHandle};
use karpenter_tui::cloud::{CloudProvider, LaunchError, LaunchRequest};
use karpenter_tui::engine::catalog::{CapacityType, RESOURCE_EFA};
use moto_peer::MotoPeer;

/// A provider whose `default` NodeClass is the discovery one plus `extra` spec lines.
async fn cloud_with(peer: &MotoPeer, extra: &str) -> (AwsCloud, AwsHandle, Network) {
    let (cloud, handle, net) = ready_cloud(peer).await;
    set_extra(&handle, extra).await;
    (cloud, handle, net)
}

/// Makes the `default` NodeClass the discovery one plus `extra` spec lines, resolved.
async fn set_extra(handle: &AwsHandle, extra: &str) {
    set_nodeclass_only(handle, extra).await;
    handle.resolve_all().await;
    assert!(
        matches!(handle.resolved("default"), Some(Ok(_))),
        "{:?}",
        handle.resolved("default")
    );
}

fn offered(cloud: &AwsCloud, name: &str) -> bool {
    cloud.instance_types(&pool()).iter().any(|t| t.name == name)
}

/// The interfaces of a launched instance as EC2 describes them: (card, device, type).
async fn instance_interfaces(peer: &MotoPeer, provider_id: &str) -> Vec<(i32, i32, String)> {
    let mut nics: Vec<(i32, i32, String)> = describe_instance(peer, provider_id)
        .await
        .network_interfaces()
        .iter()
        .map(|n| {
            let a = n.attachment().expect("attachment");
            (
                a.network_card_index().unwrap_or(0),
                a.device_index().unwrap_or(0),
                n.interface_type().unwrap_or_default().to_string(),
            )
        })
        .collect();
    nics.sort();
    nics
}

/// A NodeClass with an EFA layout (the primary interface, an EFA-only interface on card
/// 1), two IPv4 prefixes and a TCP connection tracking timeout: only types with a second
/// card and an EFA are offered; the template carries the layout with prefixes and
/// tracking on the primary interface only (EC2 refuses both on an EFA-only one); the
/// instance boots with both interfaces. Before, the layout was kept and ignored: every
/// type was offered and the instance had one interface.
#[tokio::test]
async fn an_efa_layout_with_prefixes_and_tracking_reaches_the_instance_on_types_that_have_it() {
    let peer = MotoPeer::start();
    let (mut cloud, _, net) = cloud_with(
        &peer,
        "  networkInterfaces:\n  - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}\n  - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}\n  ipPrefixCount: 2\n  connectionTracking: {tcpEstablishedTimeout: 300}\n",
    )
    .await;
    assert!(offered(&cloud, "p4d.24xlarge"), "four cards, four EFAs");
    assert!(!offered(&cloud, "m5.large"), "one card, no EFA");
    assert!(!offered(&cloud, "c5n.18xlarge"), "an EFA, but one card");

    let req = request(
        &cloud,
        "gpu-abcde",
        &["p4d.24xlarge"],
        CapacityType::OnDemand,
    );
    let launched = cloud.create(req).await.expect("launched");
    let fleets = peer.fleets();
    let data = template_data(&peer, &fleets.as_array().unwrap()[0]).await;
    assert!(data.security_group_ids().is_empty(), "{data:?}");
    let mut nics: Vec<_> = data.network_interfaces().to_vec();
    nics.sort_by_key(|n| n.network_card_index());
    assert_eq!(nics.len(), 2, "{nics:?}");
    let (primary, efa) = (&nics[0], &nics[1]);
    assert_eq!(
        (primary.network_card_index(), primary.device_index()),
        (Some(0), Some(0))
    );
    assert_eq!(primary.interface_type(), Some("interface"));
    assert_eq!(primary.ipv4_prefix_count(), Some(2));
    assert_eq!(
        primary
            .connection_tracking_specification()
            .and_then(|c| c.tcp_established_timeout()),
        Some(300)
    );
    assert_eq!(primary.groups(), [net.group.as_str()]);
    assert_eq!(efa.interface_type(), Some("efa-only"));
    assert_eq!(efa.network_card_index(), Some(1));
    assert_eq!(efa.ipv4_prefix_count(), None);
    assert!(efa.connection_tracking_specification().is_none());
    assert_eq!(
        instance_interfaces(&peer, &launched.instance.provider_id).await,
        [(0, 0, "interface".into()), (1, 0, "efa-only".into())]
    );
}

/// Pods asking for `vpc.amazonaws.com/efa` get one EFA interface per EFA the type has
/// (upstream's EFA count), each type in a template of its own count; pods that do not
/// ask get the one default interface on the same types.
#[tokio::test]
async fn pods_asking_for_efa_get_an_efa_interface_per_device_of_the_type() {
    let peer = MotoPeer::start();
    let (mut cloud, _, _) = ready_cloud(&peer).await;
    let mut req = request(
        &cloud,
        "hpc-abcde",
        &["c5n.18xlarge"],
        CapacityType::OnDemand,
    );
    req.requests.add_named(RESOURCE_EFA, 1000);
    let launched = cloud.create(req.clone()).await.expect("EFA launch");
    let fleets = peer.fleets();
    let data = template_data(&peer, &fleets.as_array().unwrap()[0]).await;
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 1, "c5n.18xlarge has one EFA: {nics:?}");
    assert_eq!(nics[0].interface_type(), Some("efa"));
    assert_eq!(nics[0].network_card_index(), Some(0));
    assert_eq!(
        instance_interfaces(&peer, &launched.instance.provider_id).await,
        [(0, 0, "efa".into())]
    );

    let plain = LaunchRequest {
        nodeclaim: "hpc-fghij".into(),
        requests: Default::default(),
        ..req
    };
    cloud.create(plain).await.expect("plain launch");
    let fleets = peer.fleets();
    let data = template_data(&peer, &fleets.as_array().unwrap()[1]).await;
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 1, "{nics:?}");
    assert_eq!(nics[0].interface_type(), None, "the default interface");
}

/// Connection tracking is Nitro-only and nested virtualization needs the processor
/// feature: a NodeClass setting either is offered only the types that have them, and the
/// template asks for nested virtualization.
#[tokio::test]
async fn tracking_and_nested_virtualization_leave_only_the_types_that_support_them() {
    let peer = MotoPeer::start();
    let (mut cloud, handle, _) = ready_cloud(&peer).await;
    assert!(offered(&cloud, "t2.micro") && offered(&cloud, "m5.large"));
    set_extra(&handle, "  connectionTracking: {udpTimeout: 30}\n").await;
    assert!(!offered(&cloud, "t2.micro"), "Xen");
    assert!(offered(&cloud, "m5.large"), "Nitro");
    set_extra(&handle, "  cpuOptions: {nestedVirtualization: enabled}\n").await;
    assert!(!offered(&cloud, "m5.large"), "no nested virtualization");
    assert!(offered(&cloud, "c7i.large"));
    let req = request(&cloud, "vm-abcde", &["c7i.large"], CapacityType::OnDemand);
    cloud.create(req).await.expect("launched");
    let fleets = peer.fleets();
    let data = template_data(&peer, &fleets.as_array().unwrap()[0]).await;
    assert_eq!(
        data.cpu_options()
            .and_then(|c| c.nested_virtualization())
            .map(|n| n.as_str()),
        Some("enabled")
    );
    set_extra(&handle, "  cpuOptions: {nestedVirtualization: disabled}\n").await;
    assert!(offered(&cloud, "m5.large"));
}

/// Makes a placement group; returns its id.
async fn placement_group(peer: &MotoPeer, name: &str, strategy: &str, partitions: i32) -> String {
    let mut req = peer
        .ec2(true)
        .create_placement_group()
        .group_name(name)
        .strategy(aws_sdk_ec2::types::PlacementStrategy::from(strategy));
    if strategy == "partition" {
        req = req.partition_count(partitions);
    }
    let out = req.send().await.expect("CreatePlacementGroup");
    out.placement_group()
        .and_then(|g| g.group_id())
        .expect("group id")
        .to_string()
}

/// The PlacementGroupReady condition of the NodeClass: (status, reason, message).
async fn placement_condition(handle: &AwsHandle) -> (String, String, String) {
    let statuses = handle.resolve_all().await;
    let c = statuses[0]
        .1
        .conditions
        .iter()
        .find(|c| c.type_ == "PlacementGroupReady")
        .expect("PlacementGroupReady")
        .clone();
    (c.status, c.reason, c.message)
}

/// A NodeClass selecting a placement group (upstream v1.14.1): resolved by name or id
/// among available groups into PlacementGroupReady; only types supporting its strategy
/// are offered, once per partition in a partition group; instances launch into it and their NodeClaims carry the group id (and
/// the partition EC2 chose, or the one the NodeClaim asked for); a spread group's
/// seven-per-zone limit sends launches to the other zone; a node outside the group its
/// NodeClass resolves to has drifted. Before, such a NodeClass was never Ready and launched nothing.
#[tokio::test]
async fn a_placement_group_is_resolved_launched_into_labelled_and_drifts_nodes_outside_it() {
    let peer = MotoPeer::start();
    let (mut cloud, handle, _) = ready_cloud(&peer).await;
    let spread = placement_group(&peer, "web-spread", "spread", 0).await;
    let cluster = placement_group(&peer, "web-cluster", "cluster", 0).await;
    let partition = placement_group(&peer, "web-partition", "partition", 3).await;

    // Missing, or not available: not Ready, and nothing is offered.
    set_nodeclass_only(&handle, "  placementGroupSelector: {name: nowhere}\n").await;
    let (status, reason, message) = placement_condition(&handle).await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "PlacementGroupNotFound")
    );
    assert!(message.contains("nowhere"), "{message}");
    assert!(cloud.instance_types(&pool()).is_empty());
    peer.set_placement_group_state("us-east-1", "web-cluster", "deleting");
    set_nodeclass_only(&handle, "  placementGroupSelector: {name: web-cluster}\n").await;
    assert_eq!(
        placement_condition(&handle).await.1,
        "PlacementGroupNotFound"
    );
    peer.set_placement_group_state("us-east-1", "web-cluster", "available");
    assert_eq!(placement_condition(&handle).await.0, "True");
    assert!(!offered(&cloud, "t2.micro"), "t2 has no cluster placement");
    assert!(offered(&cloud, "m5.large"));
    let req = request(&cloud, "hpc-c0001", &["m5.large"], CapacityType::OnDemand);
    let launched = cloud.create(req).await.expect("cluster launch");
    assert_eq!(
        launched.labels.get(PLACEMENT_GROUP_ID),
        Some(&cluster),
        "{:?}",
        launched.labels
    );
    let fleets = peer.fleets();
    let data = template_data(&peer, &fleets.as_array().unwrap()[0]).await;
    assert_eq!(
        data.placement().and_then(|p| p.group_id()),
        Some(cluster.as_str())
    );
    let in_cluster = claim("hpc-c0001", &launched);
    assert_eq!(cloud.drifted(&in_cluster, &pool()), None);

    // The name comes to mean another group (deleted and made again): the selector is
    // unchanged, the node is outside the NodeClass's group now.
    peer.set_placement_group_state("us-east-1", "web-cluster", "deleted");
    let again = placement_group(&peer, "web-cluster", "cluster", 0).await;
    assert_ne!(again, cluster);
    handle.resolve_all().await;
    assert_eq!(
        cloud.drifted(&in_cluster, &pool()).as_deref(),
        Some("PlacementGroupDrift")
    );

    // A spread group by id: seven per zone, then the other zone.
    set_extra(
        &handle,
        &format!("  placementGroupSelector: {{id: {spread}}}\n"),
    )
    .await;
    assert!(offered(&cloud, "t2.micro"), "t2 can spread");
    let mut in_a = request(&cloud, "web-s", &["m5.large"], CapacityType::OnDemand);
    in_a.offerings.retain(|o| o.zone == "us-east-1a");
    let zone_a = |name: &str| LaunchRequest {
        nodeclaim: name.into(),
        ..in_a.clone()
    };
    for n in 0..7 {
        let l = cloud
            .create(zone_a(&format!("web-s{n}")))
            .await
            .expect("spread launch");
        assert_eq!(l.labels.get(PLACEMENT_GROUP_ID), Some(&spread));
    }
    match cloud.create(zone_a("web-s7")).await {
        Err(LaunchError::InsufficientCapacity { offerings, .. }) => {
            assert!(
                offerings.iter().all(|o| o.zone == "us-east-1a"),
                "{offerings:?}"
            );
        }
        other => panic!("the eighth in us-east-1a must be refused: {other:?}"),
    }
    let both = request(&cloud, "web-s8", &["m5.large"], CapacityType::OnDemand);
    let b = cloud.create(both).await.expect("into us-east-1b");
    assert_eq!(b.instance.zone, "us-east-1b");

    // A partition group: every offering once per partition (a topology domain for the
    // scheduler); EC2 picks the least-used partition, or takes the one asked for.
    set_extra(&handle, "  placementGroupSelector: {name: web-partition}\n").await;
    let m5 = cloud
        .instance_types(&pool())
        .into_iter()
        .find(|t| t.name == "m5.large")
        .unwrap();
    let mut partitions: Vec<Option<u32>> = m5
        .offerings
        .iter()
        .filter(|o| o.zone == "us-east-1a" && o.capacity_type == CapacityType::OnDemand)
        .map(|o| o.partition)
        .collect();
    partitions.sort();
    assert_eq!(partitions, [Some(1), Some(2), Some(3)]);
    // Capacity refused inside the group keeps the offering out for this group only.
    assert_eq!(cloud.offering_scope(&pool()), Some(partition.clone()));
    let mut seen = Vec::new();
    for n in 0..2 {
        let l = cloud
            .create(request(
                &cloud,
                &format!("db-p{n}"),
                &["m5.large"],
                CapacityType::OnDemand,
            ))
            .await
            .expect("partition launch");
        assert_eq!(l.labels.get(PLACEMENT_GROUP_ID), Some(&partition));
        seen.push(
            l.labels
                .get(PLACEMENT_GROUP_PARTITION)
                .cloned()
                .unwrap_or_default(),
        );
    }
    assert_eq!(seen, ["1", "2"]);
    let mut third = request(&cloud, "db-p2", &["m5.large"], CapacityType::OnDemand);
    third
        .labels
        .insert(PLACEMENT_GROUP_PARTITION.into(), "3".into());
    let l = cloud.create(third).await.expect("partition 3");
    assert_eq!(
        l.labels.get(PLACEMENT_GROUP_PARTITION).map(String::as_str),
        Some("3")
    );
    let fleets = peer.fleets();
    let last = fleets.as_array().unwrap().last().unwrap().clone();
    let data = template_data(&peer, &last).await;
    assert_eq!(data.placement().and_then(|p| p.partition_number()), Some(3));

    // The selector removed: nodes in a group drift (the selector is part of the
    // NodeClass's hash, as upstream's), nodes outside do not.
    set_extra(&handle, "").await;
    assert_eq!(
        cloud.drifted(&in_cluster, &pool()).as_deref(),
        Some("NodeClassDrift")
    );
    let outside = cloud
        .create(request(
            &cloud,
            "web-o0001",
            &["m5.large"],
            CapacityType::OnDemand,
        ))
        .await
        .expect("outside any group");
    assert!(!outside.labels.contains_key(PLACEMENT_GROUP_ID));
    assert_eq!(cloud.drifted(&claim("web-o0001", &outside), &pool()), None);
}

/// Like [`set_extra`], without asserting the NodeClass resolves.
async fn set_nodeclass_only(handle: &AwsHandle, extra: &str) {
    let base = serde_norway::to_string(&discovery_nodeclass().spec).unwrap();
    let indented: String = base.lines().map(|l| format!("  {l}\n")).collect();
    handle.set_nodeclass(&nodeclass(&format!("{indented}{extra}")));
}
