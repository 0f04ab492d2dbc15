//! Tests of the EC2 peer itself (tests/peers/moto_server.py through moto_peer.rs), with the
//! AWS SDK the provider uses: CreateFleet walks the overrides in order and reports
//! injected ICE per override, spot prices are the catalog's, and throttling answers
//! RequestLimitExceeded exactly as often as asked.

#[path = "peers/moto_peer.rs"]
mod moto_peer;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceLifecycle, InstanceLifecycleType, InstanceType, LaunchTemplateHttpTokensState,
    LaunchTemplateInstanceMetadataOptionsRequest, RequestLaunchTemplateData, ResourceType,
    RiProductDescription, Tag, TagSpecification, TargetCapacitySpecificationRequest,
};
use moto_peer::{AL2023_X86_AMI, MotoPeer, PeerCall};

/// A VPC with one subnet in each of us-east-1a and us-east-1b; returns their ids.
async fn subnets(ec2: &Client) -> (String, String) {
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id");
    let mut ids = Vec::new();
    for (n, zone) in ["us-east-1a", "us-east-1b"].into_iter().enumerate() {
        let subnet = ec2
            .create_subnet()
            .vpc_id(vpc_id)
            .cidr_block(format!("10.0.{}.0/24", n + 1))
            .availability_zone(zone)
            .send()
            .await
            .expect("CreateSubnet");
        ids.push(
            subnet
                .subnet()
                .and_then(|s| s.subnet_id())
                .expect("subnet id")
                .to_string(),
        );
    }
    (ids[0].clone(), ids[1].clone())
}

/// A launch template on the seeded AL2023 x86_64 image; returns its id.
async fn launch_template(ec2: &Client) -> String {
    let data = RequestLaunchTemplateData::builder()
        .image_id(AL2023_X86_AMI)
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_tokens(LaunchTemplateHttpTokensState::Required)
                .http_put_response_hop_limit(1)
                .build(),
        )
        .build();
    ec2.create_launch_template()
        .launch_template_name("karpenter.k8s.aws/test")
        .launch_template_data(data)
        .send()
        .await
        .expect("CreateLaunchTemplate")
        .launch_template()
        .and_then(|t| t.launch_template_id())
        .expect("launch template id")
        .to_string()
}

/// An instant fleet of one instance with these (instance type, subnet) overrides, in
/// this order, tagged karpenter.sh/nodeclaim=`claim`.
async fn create_fleet(
    ec2: &Client,
    template: &str,
    capacity: DefaultTargetCapacityType,
    overrides: &[(InstanceType, &str)],
    claim: &str,
) -> aws_sdk_ec2::operation::create_fleet::CreateFleetOutput {
    let mut config = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(
        FleetLaunchTemplateSpecificationRequest::builder()
            .launch_template_id(template)
            .version("$Latest")
            .build(),
    );
    for (instance_type, subnet) in overrides {
        config = config.overrides(
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(instance_type.clone())
                .subnet_id(*subnet)
                .build(),
        );
    }
    ec2.create_fleet()
        .r#type(FleetType::Instant)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(capacity)
                .build(),
        )
        .launch_template_configs(config.build())
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(
                    Tag::builder()
                        .key("karpenter.sh/nodeclaim")
                        .value(claim)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("CreateFleet")
}

/// (instance type, zone) of each error's override, in the order answered.
fn error_pairs(
    out: &aws_sdk_ec2::operation::create_fleet::CreateFleetOutput,
) -> Vec<(String, String)> {
    out.errors()
        .iter()
        .map(|e| {
            let o = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides())
                .expect("the error's overrides");
            (
                o.instance_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                o.availability_zone().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn create_fleet_walks_the_overrides_in_order_and_reports_ice_per_override() {
    let peer = MotoPeer::start();
    let ec2 = peer.ec2(true);
    let (subnet_a, subnet_b) = subnets(&ec2).await;
    let template = launch_template(&ec2).await;
    peer.ice(&[
        ("m5.large", "us-east-1a", None),
        ("c5.large", "us-east-1b", Some("spot")),
    ]);

    // On-demand: the first override is ICE, the second launches, the third is not tried.
    let out = create_fleet(
        &ec2,
        &template,
        DefaultTargetCapacityType::OnDemand,
        &[
            (InstanceType::M5Large, subnet_a.as_str()),
            (InstanceType::M5Xlarge, subnet_a.as_str()),
            (InstanceType::M5Large, subnet_b.as_str()),
        ],
        "claim-1",
    )
    .await;
    assert_eq!(
        error_pairs(&out),
        [("m5.large".to_string(), "us-east-1a".to_string())]
    );
    let error = &out.errors()[0];
    assert_eq!(error.error_code(), Some("InsufficientInstanceCapacity"));
    assert_eq!(error.lifecycle(), Some(&InstanceLifecycle::OnDemand));
    assert_eq!(out.instances().len(), 1, "{out:?}");
    let launched = &out.instances()[0];
    assert_eq!(launched.instance_type(), Some(&InstanceType::M5Xlarge));
    assert_eq!(launched.instance_ids().len(), 1);
    let instance_id = launched.instance_ids()[0].clone();

    let described = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:karpenter.sh/nodeclaim")
                .values("claim-1")
                .build(),
        )
        .send()
        .await
        .expect("DescribeInstances");
    let instances: Vec<_> = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .collect();
    assert_eq!(instances.len(), 1);
    let instance = instances[0];
    assert_eq!(instance.instance_id(), Some(instance_id.as_str()));
    assert_eq!(instance.instance_type(), Some(&InstanceType::M5Xlarge));
    assert_eq!(instance.image_id(), Some(AL2023_X86_AMI));
    assert_eq!(instance.subnet_id(), Some(subnet_a.as_str()));
    assert_eq!(
        instance.placement().and_then(|p| p.availability_zone()),
        Some("us-east-1a")
    );
    assert_eq!(instance.instance_lifecycle(), None);
    let dns = instance.private_dns_name().expect("a private DNS name");
    assert!(
        dns.starts_with("ip-10-0-1-") && dns.ends_with(".ec2.internal"),
        "{dns}"
    );

    // Spot, with the ICE pair only for spot: every override ICE, nothing launched, HTTP 200.
    let out = create_fleet(
        &ec2,
        &template,
        DefaultTargetCapacityType::Spot,
        &[
            (InstanceType::C5Large, subnet_b.as_str()),
            (InstanceType::M5Large, subnet_a.as_str()),
        ],
        "claim-2",
    )
    .await;
    assert_eq!(
        error_pairs(&out),
        [
            ("c5.large".to_string(), "us-east-1b".to_string()),
            ("m5.large".to_string(), "us-east-1a".to_string())
        ]
    );
    assert!(
        out.errors()
            .iter()
            .all(|e| e.lifecycle() == Some(&InstanceLifecycle::Spot))
    );
    assert!(out.instances().is_empty(), "{out:?}");

    // Spot that launches: the instance is a spot instance.
    let out = create_fleet(
        &ec2,
        &template,
        DefaultTargetCapacityType::Spot,
        &[(InstanceType::M5Large, subnet_b.as_str())],
        "claim-3",
    )
    .await;
    assert!(out.errors().is_empty(), "{out:?}");
    let spot_id = out.instances()[0].instance_ids()[0].clone();
    let described = ec2
        .describe_instances()
        .instance_ids(&spot_id)
        .send()
        .await
        .expect("DescribeInstances");
    let spot = &described.reservations()[0].instances()[0];
    assert_eq!(
        spot.instance_lifecycle(),
        Some(&InstanceLifecycleType::Spot)
    );

    // The peer recorded each request's overrides in the order sent.
    let fleets = peer.fleets();
    let sent: Vec<Vec<String>> = fleets
        .as_array()
        .expect("an array of fleets")
        .iter()
        .map(|f| {
            f["overrides"]
                .as_array()
                .expect("overrides")
                .iter()
                .map(|o| {
                    format!(
                        "{}/{}",
                        o["instance_type"].as_str().unwrap_or_default(),
                        o["availability_zone"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        })
        .collect();
    assert_eq!(
        sent,
        [
            vec![
                "m5.large/us-east-1a",
                "m5.xlarge/us-east-1a",
                "m5.large/us-east-1b"
            ],
            vec!["c5.large/us-east-1b", "m5.large/us-east-1a"],
            vec!["m5.large/us-east-1b"],
        ]
    );
    assert_eq!(fleets[0]["capacity_type"], "on-demand");
    assert_eq!(fleets[1]["capacity_type"], "spot");
}

#[tokio::test]
async fn spot_price_history_is_the_catalogs() {
    let catalog: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/catalog/us-east-1.json"),
        )
        .expect("read the catalog"),
    )
    .expect("parse the catalog");
    let types = catalog["instance_types"]
        .as_array()
        .expect("instance types");
    let m5 = types
        .iter()
        .find(|t| t["name"] == "m5.large")
        .expect("m5.large in the catalog");
    let want = m5["spot"]["us-east-1a"]
        .as_f64()
        .expect("m5.large's price in us-east-1a");
    let records: usize = types
        .iter()
        .map(|t| t["spot"].as_object().map_or(0, |z| z.len()))
        .sum();

    let peer = MotoPeer::start();
    let ec2 = peer.ec2(true);
    let out = ec2
        .describe_spot_price_history()
        .instance_types(InstanceType::M5Large)
        .product_descriptions("Linux/UNIX")
        .filters(
            Filter::builder()
                .name("availability-zone")
                .values("us-east-1a")
                .build(),
        )
        .send()
        .await
        .expect("DescribeSpotPriceHistory");
    let prices = out.spot_price_history();
    assert_eq!(prices.len(), 1, "{prices:?}");
    let price: f64 = prices[0]
        .spot_price()
        .expect("a price")
        .parse()
        .expect("a number");
    assert!((price - want).abs() < 1e-9, "{price} != {want}");
    assert_eq!(prices[0].availability_zone(), Some("us-east-1a"));
    assert_eq!(
        prices[0].product_description(),
        Some(&RiProductDescription::LinuxUnix)
    );

    // Every type and zone, through the SDK's paginator (1000 a page).
    let mut pages = ec2.describe_spot_price_history().into_paginator().send();
    let (mut seen, mut count) = (0, 0);
    while let Some(page) = pages.next().await {
        seen += page.expect("a page").spot_price_history().len();
        count += 1;
    }
    assert_eq!(seen, records);
    assert!(count > 1, "{count} pages");
}

#[tokio::test]
async fn throttling_answers_request_limit_exceeded_exactly_count_times() {
    let peer = MotoPeer::start();
    let ec2 = peer.ec2(false);
    peer.clear_requests();
    peer.throttle("DescribeInstanceTypes", 2);
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let result = ec2
            .describe_instance_types()
            .instance_types(InstanceType::M5Large)
            .send()
            .await;
        outcomes.push(match result {
            Ok(out) => {
                assert_eq!(out.instance_types().len(), 1);
                "ok".to_string()
            }
            Err(err) => {
                let status = err.raw_response().map(|r| r.status().as_u16());
                format!("{:?} {status:?}", err.code())
            }
        });
    }
    assert_eq!(
        outcomes,
        [
            "Some(\"RequestLimitExceeded\") Some(503)",
            "Some(\"RequestLimitExceeded\") Some(503)",
            "ok"
        ]
    );
    let call = |throttled| PeerCall {
        service: Some("ec2".into()),
        action: Some("DescribeInstanceTypes".into()),
        throttled,
    };
    assert_eq!(peer.requests(), [call(true), call(true), call(false)]);

    // Instance types page (100 at most); the SDK's paginator follows NextToken.
    let mut pages = ec2.describe_instance_types().into_paginator().send();
    let (mut seen, mut count) = (0, 0);
    while let Some(page) = pages.next().await {
        let page = page.expect("a page");
        assert!(page.instance_types().len() <= 100);
        seen += page.instance_types().len();
        count += 1;
    }
    assert!(seen > 1000 && count > 10, "{seen} types in {count} pages");
}
