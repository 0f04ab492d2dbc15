//! Launch templates keyed by their content (upstream `pkg/providers/launchtemplate`): a
//! launch needs the template whose AMI, network interfaces (with the security groups),
//! user data, metadata options, block devices, CPU options, instance profile and tags it
//! wants; the name is a hash of all of them, so an existing template is reused and any
//! change makes a new one.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget,
    ConnectionTrackingSpecificationRequest, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateCpuOptionsRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest,
    LaunchTemplatesMonitoringRequest, MarketType, NestedVirtualizationSpecification,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use base64::Engine;
use serde::Serialize;

use super::{Clients, sdk_error};
use crate::api::ec2nodeclass::{BlockDeviceMapping, EC2NodeClassSpec, MetadataOptions};
use crate::api::instance_options::ConnectionTracking;
use crate::cloud::CloudError;
use crate::engine::disruption::drift::fnv1a;

/// The tag every template Karpenter makes carries (upstream `karpenter.k8s.aws/cluster`).
pub const CLUSTER_TAG: &str = "karpenter.k8s.aws/cluster";

/// Everything a template holds; its hash is the template's name.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    pub image_id: String,
    /// The interfaces, each with the NodeClass's security groups (EC2 refuses groups on
    /// both the instance and its interfaces, so they are only here, as upstream does).
    pub network_interfaces: Vec<Interface>,
    pub user_data: String,
    pub metadata_options: MetadataOptions,
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    pub instance_profile: String,
    pub detailed_monitoring: bool,
    /// `cpuOptions.nestedVirtualization`, when the NodeClass sets it.
    pub nested_virtualization: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// Which capacity reservation the launch may use (upstream's targeted launch mode).
    pub capacity_reservation: ReservationTarget,
    /// The placement group (id) and partition the instance goes into.
    pub placement: Option<Placement>,
}

/// Where in a placement group an instance launches (upstream `buildPlacement`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub group_id: String,
    /// A partition the NodeClaim asked for; EC2 picks one when unset.
    pub partition: Option<i32>,
}

/// One network interface of a template (upstream `generateNetworkInterfaces`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// Unset for the single default interface.
    pub network_card_index: Option<i32>,
    pub device_index: i32,
    /// `interface` or `efa-only` from the NodeClass's layout, `efa` for an EFA launch,
    /// unset for the default interface.
    pub interface_type: Option<String>,
    pub groups: Vec<String>,
    pub associate_public_ip_address: Option<bool>,
    pub ipv4_prefix_count: Option<i32>,
    /// IPv6 clusters: prefixes, a primary IPv6 address and one IPv6 address.
    pub ipv6_prefix_count: Option<i32>,
    pub primary_ipv6: Option<bool>,
    pub ipv6_address_count: Option<i32>,
    pub connection_tracking: Option<ConnectionTracking>,
}

/// The interfaces a launch gets (upstream `generateNetworkInterfaces`): the NodeClass's
/// `networkInterfaces` layout when it has one; else one EFA interface per network card
/// when the pods ask for `vpc.amazonaws.com/efa` (`efa` is how many the type has); else
/// one interface. Each carries the groups, the public-address setting, `ipPrefixCount`
/// (IPv4 prefixes, or IPv6 prefixes with a primary IPv6 address in an IPv6 cluster) and
/// the connection tracking timeouts, except an EFA-only interface, on which EC2 refuses
/// all of these but the groups.
pub fn interfaces(
    spec: &EC2NodeClassSpec,
    groups: &[String],
    efa: i32,
    ipv6: bool,
) -> Vec<Interface> {
    let conntrack = spec.connection_tracking.clone().filter(|c| {
        c.tcp_established_timeout.is_some()
            || c.udp_stream_timeout.is_some()
            || c.udp_timeout.is_some()
    });
    let prefixes = spec.ip_prefix_count;
    let bare = |card: Option<i32>, device: i32, kind: Option<&str>| Interface {
        network_card_index: card,
        device_index: device,
        interface_type: kind.map(str::to_string),
        groups: groups.to_vec(),
        associate_public_ip_address: None,
        ipv4_prefix_count: None,
        ipv6_prefix_count: None,
        primary_ipv6: None,
        ipv6_address_count: None,
        connection_tracking: None,
    };
    let full = |card: Option<i32>, device: i32, kind: Option<&str>| Interface {
        associate_public_ip_address: spec.associate_public_ip_address,
        ipv4_prefix_count: prefixes.filter(|_| !ipv6),
        ipv6_prefix_count: prefixes.filter(|_| ipv6),
        primary_ipv6: ipv6.then_some(true),
        ipv6_address_count: ipv6.then_some(1),
        connection_tracking: conntrack.clone(),
        ..bare(card, device, kind)
    };
    if let Some(layout) = spec.network_interfaces.as_ref().filter(|l| !l.is_empty()) {
        return layout
            .iter()
            .map(|n| {
                let at = (Some(n.network_card_index), n.device_index);
                let kind = Some(n.interface_type.as_str());
                if n.interface_type == "efa-only" {
                    bare(at.0, at.1, kind)
                } else {
                    full(at.0, at.1, kind)
                }
            })
            .collect();
    }
    if efa > 0 {
        // One card ranks above the others, so a public address needs no Elastic IP on
        // every card (upstream's device index 0, then 1).
        return (0..efa)
            .map(|card| full(Some(card), if card == 0 { 0 } else { 1 }, Some("efa")))
            .collect();
    }
    vec![full(None, 0, None)]
}

impl Interface {
    fn request(&self) -> LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
        LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
            .set_network_card_index(self.network_card_index)
            .device_index(self.device_index)
            .set_interface_type(self.interface_type.clone())
            .set_groups(Some(self.groups.clone()))
            .set_associate_public_ip_address(self.associate_public_ip_address)
            .set_ipv4_prefix_count(self.ipv4_prefix_count)
            .set_ipv6_prefix_count(self.ipv6_prefix_count)
            .set_primary_ipv6(self.primary_ipv6)
            .set_ipv6_address_count(self.ipv6_address_count)
            .set_connection_tracking_specification(self.connection_tracking.as_ref().map(|c| {
                ConnectionTrackingSpecificationRequest::builder()
                    .set_tcp_established_timeout(c.tcp_established_timeout)
                    .set_udp_stream_timeout(c.udp_stream_timeout)
                    .set_udp_timeout(c.udp_timeout)
                    .build()
            }))
            .build()
    }
}

/// A template's capacity reservation setting (upstream `launchtemplate/types.go` with the
/// ReservedCapacity gate on): a reserved launch targets its one reservation and may use
/// nothing else; every other launch opts out of open reservations, so a spot or
/// on-demand node never silently takes a slot a reserved launch was counting on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReservationTarget {
    /// `CapacityReservationPreference: none`.
    OptOut,
    /// `capacity-reservations-only` with the reservation as target; capacity blocks and
    /// interruptible reservations also set their market type.
    Only {
        id: String,
        capacity_block: bool,
        interruptible: bool,
    },
}
impl Content {
    /// `karpenter.k8s.aws/<hash of the content>`.
    pub fn name(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("karpenter.k8s.aws/{}", fnv1a(&json))
    }

    fn data(&self) -> Result<RequestLaunchTemplateData, CloudError> {
        let m = &self.metadata_options;
        let metadata = LaunchTemplateInstanceMetadataOptionsRequest::builder()
            .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(
                m.http_endpoint.as_str(),
            ))
            .http_tokens(LaunchTemplateHttpTokensState::from(m.http_tokens.as_str()))
            .http_put_response_hop_limit(m.http_put_response_hop_limit as i32)
            .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
                m.http_protocol_ipv6.as_str(),
            ))
            .build();
        let mut d = RequestLaunchTemplateData::builder()
            .image_id(&self.image_id)
            .user_data(base64::engine::general_purpose::STANDARD.encode(&self.user_data))
            .metadata_options(metadata)
            .iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(&self.instance_profile)
                    .build(),
            )
            .monitoring(
                LaunchTemplatesMonitoringRequest::builder()
                    .enabled(self.detailed_monitoring)
                    .build(),
            );
        d = d.set_network_interfaces(Some(
            self.network_interfaces
                .iter()
                .map(Interface::request)
                .collect(),
        ));
        if let Some(n) = &self.nested_virtualization {
            d = d.cpu_options(
                LaunchTemplateCpuOptionsRequest::builder()
                    .nested_virtualization(NestedVirtualizationSpecification::from(n.as_str()))
                    .build(),
            );
        }
        for b in &self.block_device_mappings {
            d = d.block_device_mappings(block_device(b)?);
        }
        if let Some(p) = &self.placement {
            d = d.placement(
                LaunchTemplatePlacementRequest::builder()
                    .group_id(&p.group_id)
                    .set_partition_number(p.partition)
                    .build(),
            );
        }
        let spec = LaunchTemplateCapacityReservationSpecificationRequest::builder();
        d = match &self.capacity_reservation {
            ReservationTarget::OptOut => d.capacity_reservation_specification(
                spec.capacity_reservation_preference(CapacityReservationPreference::None)
                    .build(),
            ),
            ReservationTarget::Only {
                id,
                capacity_block,
                interruptible,
            } => {
                d = d.capacity_reservation_specification(
                    spec.capacity_reservation_preference(
                        CapacityReservationPreference::CapacityReservationsOnly,
                    )
                    .capacity_reservation_target(
                        CapacityReservationTarget::builder()
                            .capacity_reservation_id(id)
                            .build(),
                    )
                    .build(),
                );
                let market = if *capacity_block {
                    Some(MarketType::CapacityBlock)
                } else if *interruptible {
                    Some(MarketType::InterruptibleCapacityReservation)
                } else {
                    None
                };
                match market {
                    Some(m) => d.instance_market_options(
                        LaunchTemplateInstanceMarketOptionsRequest::builder()
                            .market_type(m)
                            .build(),
                    ),
                    None => d,
                }
            }
        };
        Ok(d.build())
    }
}

fn block_device(
    b: &BlockDeviceMapping,
) -> Result<LaunchTemplateBlockDeviceMappingRequest, CloudError> {
    let mut m =
        LaunchTemplateBlockDeviceMappingRequest::builder().set_device_name(b.device_name.clone());
    if let Some(ebs) = &b.ebs {
        let size = match &ebs.volume_size {
            Some(q) => {
                let milli = crate::engine::resources::parse_milli(&q.0).map_err(|e| {
                    CloudError(format!("blockDeviceMappings volumeSize {:?}: {e}", q.0))
                })?;
                // GiB, rounded up, as upstream converts.
                Some(((milli / 1000 + (1 << 30) - 1) >> 30) as i32)
            }
            None => None,
        };
        m = m.ebs(
            LaunchTemplateEbsBlockDeviceRequest::builder()
                .set_volume_size(size)
                .set_volume_type(ebs.volume_type.map(|t| {
                    VolumeType::from(
                        serde_json::to_value(t)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                            .as_str(),
                    )
                }))
                .set_encrypted(ebs.encrypted)
                .set_delete_on_termination(Some(ebs.delete_on_termination.unwrap_or(true)))
                .set_iops(ebs.iops.map(|i| i as i32))
                .set_throughput(ebs.throughput.map(|t| t as i32))
                .set_kms_key_id(ebs.kms_key_id.clone())
                .set_snapshot_id(ebs.snapshot_id.clone())
                .set_volume_initialization_rate(ebs.volume_initialization_rate)
                .build(),
        );
    }
    Ok(m.build())
}

/// Templates known to exist, by name (name -> id).
#[derive(Default)]
pub struct Templates {
    known: HashMap<String, String>,
}

impl Templates {
    /// The template for `content`, created when it does not exist yet. Returns its name.
    pub async fn ensure(
        &mut self,
        clients: &Clients,
        content: &Content,
        cluster: &str,
    ) -> Result<String, CloudError> {
        let name = content.name();
        if self.known.contains_key(&name) {
            return Ok(name);
        }
        let found = clients
            .ec2
            .describe_launch_templates()
            .launch_template_names(&name)
            .send()
            .await;
        match found {
            Ok(out) => {
                if let Some(t) = out.launch_templates().first() {
                    let id = t.launch_template_id().unwrap_or_default().to_string();
                    self.known.insert(name.clone(), id);
                    return Ok(name);
                }
            }
            Err(e) if has_code(&e, "InvalidLaunchTemplateName.NotFoundException") => {}
            Err(e) => return Err(sdk_error("DescribeLaunchTemplates", e)),
        }
        let mut tags = content.tags.clone();
        tags.insert(CLUSTER_TAG.into(), cluster.into());
        let mut spec = TagSpecification::builder().resource_type(ResourceType::LaunchTemplate);
        for (k, v) in &tags {
            spec = spec.tags(Tag::builder().key(k).value(v).build());
        }
        let created = clients
            .ec2
            .create_launch_template()
            .launch_template_name(&name)
            .launch_template_data(content.data()?)
            .tag_specifications(spec.build())
            .send()
            .await;
        match created {
            Ok(out) => {
                let id = out
                    .launch_template()
                    .and_then(|t| t.launch_template_id())
                    .unwrap_or_default()
                    .to_string();
                self.known.insert(name.clone(), id);
                Ok(name)
            }
            // Another replica (or an earlier attempt) made it first: same content.
            Err(e) if has_code(&e, "InvalidLaunchTemplateName.AlreadyExistsException") => {
                self.known.insert(name.clone(), String::new());
                Ok(name)
            }
            Err(e) => Err(sdk_error("CreateLaunchTemplate", e)),
        }
    }

    /// Forgets a template (a launch found it gone), so the next launch makes it again.
    pub fn forget(&mut self, name: &str) {
        self.known.remove(name);
    }
}

/// Whether an SDK error carries the EC2 error code.
pub fn has_code<E: aws_sdk_ec2::error::ProvideErrorMetadata, R>(
    e: &aws_sdk_ec2::error::SdkError<E, R>,
    code: &str,
) -> bool {
    e.as_service_error().and_then(|s| s.code()) == Some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> EC2NodeClassSpec {
        serde_norway::from_str(&format!(
            "amiSelectorTerms: [{{alias: al2023@latest}}]\nrole: r\nsubnetSelectorTerms: [{{id: subnet-1}}]\nsecurityGroupSelectorTerms: [{{id: sg-1}}]\n{extra}"
        ))
        .unwrap()
    }

    /// Upstream's IP settings per cluster family: IPv4 prefixes in an IPv4 cluster; IPv6
    /// prefixes, a primary IPv6 address and one IPv6 address in an IPv6 one; none of
    /// them on an EFA-only interface.
    #[test]
    fn interfaces_follow_the_clusters_ip_family() {
        let groups = ["sg-1".to_string()];
        let s = spec(
            "ipPrefixCount: 2\nnetworkInterfaces:\n- {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}\n- {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}\n",
        );
        let v4 = interfaces(&s, &groups, 0, false);
        assert_eq!(v4[0].ipv4_prefix_count, Some(2));
        assert_eq!((v4[0].ipv6_prefix_count, v4[0].primary_ipv6), (None, None));
        let v6 = interfaces(&s, &groups, 0, true);
        assert_eq!(v6[0].ipv4_prefix_count, None);
        assert_eq!(v6[0].ipv6_prefix_count, Some(2));
        assert_eq!(v6[0].primary_ipv6, Some(true));
        assert_eq!(v6[0].ipv6_address_count, Some(1));
        for efa_only in [&v4[1], &v6[1]] {
            assert_eq!(efa_only.groups, groups);
            assert_eq!(
                (efa_only.ipv4_prefix_count, efa_only.ipv6_prefix_count),
                (None, None)
            );
            assert_eq!(efa_only.primary_ipv6, None);
        }
        let plain = interfaces(&spec(""), &groups, 0, true);
        assert_eq!(plain.len(), 1);
        assert_eq!(plain[0].ipv6_address_count, Some(1));
        let efa = interfaces(&spec(""), &groups, 4, false);
        let at: Vec<_> = efa
            .iter()
            .map(|i| (i.network_card_index, i.device_index))
            .collect();
        assert_eq!(at, [(Some(0), 0), (Some(1), 1), (Some(2), 1), (Some(3), 1)]);
    }
}
