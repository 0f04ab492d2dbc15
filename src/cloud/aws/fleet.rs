//! Launching with CreateFleet (upstream `pkg/providers/instance`): one `instant` fleet per
//! launch shape, with an override per offering (≤ 60 cheapest instance types, each zone's
//! subnet with the most free addresses), price-capacity-optimized for spot and
//! lowest-price for on-demand. Requests of one provisioning round with the same shape are
//! merged into one call for as many instances (upstream batches CreateFleet calls of the
//! same input within a short window), and each instance is then tagged with its NodeClaim.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetReservationType, FleetType, OnDemandOptionsRequest,
    ReservedCapacityOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag,
    TagSpecification, TargetCapacitySpecificationRequest,
};

use super::{Clients, sdk_error};
use crate::cloud::CloudError;
use crate::engine::catalog::{CapacityType, ReservationKind};
use crate::engine::provisioning::Launch;

/// At most this many instance types go into one fleet (upstream `maxInstanceTypes`).
pub const MAX_INSTANCE_TYPES: usize = 60;

/// EC2 error codes that mean "no capacity for this offering right now" (upstream
/// `unfulfillableCapacityErrorCodes`): the offering goes into the unavailable cache.
pub const UNFULFILLABLE: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "ReservationCapacityExceeded",
];

/// One override: an offering in one subnet, under one launch template.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Override {
    pub template: String,
    pub instance_type: String,
    pub subnet: String,
    pub zone: String,
    /// The capacity reservation its template targets.
    pub reservation: Option<String>,
}

/// Everything that makes two launches the same CreateFleet call (all but the count).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    pub capacity_type: CapacityType,
    /// For a reserved launch: the reservations' kind (CreateFleet takes one market type
    /// per call) and whether they are interruptible.
    pub reservation_kind: Option<(ReservationKind, bool)>,
    pub overrides: Vec<Override>,
    pub tags: BTreeMap<String, String>,
}

/// What one CreateFleet call gave: instances, and per-override errors.
#[derive(Clone, Debug, Default)]
pub struct FleetResult {
    /// The ids of the instances launched; DescribeInstances tells the rest.
    pub instances: Vec<String>,
    /// Offerings EC2 had no capacity for.
    pub unavailable: Vec<Launch>,
    /// Reservations EC2 had no room left in (never marked as unavailable offerings:
    /// the count says so until the next resolution, as upstream's `MarkUnavailable`).
    pub exhausted: Vec<String>,
    /// Other per-override errors, as `code: message`.
    pub errors: Vec<String>,
}

/// The offerings a fleet tries: those of the first offering's capacity type (the
/// controller orders reserved, then spot, then on-demand), truncated to the cheapest
/// `MAX_INSTANCE_TYPES` types, each in its zone's best subnet. A reserved fleet keeps
/// the first offering's reservation kind only, and one reservation per type and zone
/// (upstream `CapacityReservationTypeFilter` and the single reservation per zone its
/// Create ensures).
pub fn overrides(
    offerings: &[Launch],
    subnet_for_zone: impl Fn(&str) -> Option<String>,
    template_for: impl Fn(&Launch) -> Option<String>,
) -> (Option<CapacityType>, Vec<Override>) {
    let Some(first) = offerings.first() else {
        return (None, Vec::new());
    };
    let ct = first.capacity_type;
    let mut types: Vec<&str> = Vec::new();
    let mut out: Vec<Override> = Vec::new();
    for o in in_fleet(offerings) {
        if !types.contains(&o.instance_type.as_str()) {
            if types.len() == MAX_INSTANCE_TYPES {
                continue;
            }
            types.push(&o.instance_type);
        }
        if o.reservation.is_some()
            && out
                .iter()
                .any(|v| v.instance_type == o.instance_type && v.zone == o.zone)
        {
            continue;
        }
        let (Some(subnet), Some(template)) = (subnet_for_zone(&o.zone), template_for(o)) else {
            continue;
        };
        let ov = Override {
            template,
            instance_type: o.instance_type.clone(),
            subnet,
            zone: o.zone.clone(),
            reservation: o.reservation.as_ref().map(|r| r.id.clone()),
        };
        if !out.contains(&ov) {
            out.push(ov);
        }
    }
    (Some(ct), out)
}

/// The offerings one fleet takes: the first offering's capacity type and, for a reserved
/// fleet, its reservation kind (CreateFleet takes one market type per call).
pub fn in_fleet(offerings: &[Launch]) -> impl Iterator<Item = &Launch> {
    let kind = |o: &Launch| o.reservation.as_ref().map(|r| (r.kind, r.interruptible));
    let first = offerings.first().map(|f| (f.capacity_type, kind(f)));
    offerings
        .iter()
        .filter(move |o| Some((o.capacity_type, kind(o))) == first)
}

fn tags(resource: ResourceType, tags: &BTreeMap<String, String>) -> TagSpecification {
    let mut spec = TagSpecification::builder().resource_type(resource);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(v).build());
    }
    spec.build()
}

/// The zone an override in an error names, or that of the subnet it names.
fn zone_of(
    ov: Option<&aws_sdk_ec2::types::FleetLaunchTemplateOverrides>,
    shape: &Shape,
) -> Option<String> {
    let ov = ov?;
    if let Some(z) = ov.availability_zone() {
        return Some(z.to_string());
    }
    let subnet = ov.subnet_id()?;
    shape
        .overrides
        .iter()
        .find(|o| o.subnet == subnet)
        .map(|o| o.zone.clone())
}

/// One CreateFleet call for `count` instances of `shape`. `prices` gives each override's
/// price for the unavailable offerings it reports.
pub async fn create(
    clients: &Clients,
    shape: &Shape,
    count: i32,
    price: impl Fn(&str, &str) -> f64,
) -> Result<FleetResult, CloudError> {
    let spot = shape.capacity_type == CapacityType::Spot;
    let block = shape.reservation_kind == Some((ReservationKind::CapacityBlock, false));
    let interruptible = shape.reservation_kind.is_some_and(|(_, i)| i);
    // Upstream `CreateFleetInputBuilder`: a capacity block is its own market, an
    // interruptible reservation is reserved capacity, any other reservation on-demand.
    let target = if spot {
        DefaultTargetCapacityType::Spot
    } else if block {
        DefaultTargetCapacityType::CapacityBlock
    } else if interruptible {
        DefaultTargetCapacityType::ReservedCapacity
    } else {
        DefaultTargetCapacityType::OnDemand
    };
    let mut by_template: BTreeMap<&str, Vec<&Override>> = BTreeMap::new();
    for o in &shape.overrides {
        by_template.entry(&o.template).or_default().push(o);
    }
    let mut req = clients
        .ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(count)
                .default_target_capacity_type(target)
                .build(),
        )
        .tag_specifications(tags(ResourceType::Instance, &shape.tags))
        .tag_specifications(tags(ResourceType::Volume, &shape.tags))
        .tag_specifications(tags(ResourceType::Fleet, &shape.tags));
    req = if spot {
        req.spot_options(
            SpotOptionsRequest::builder()
                .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                .build(),
        )
    } else if interruptible {
        req.reserved_capacity_options(
            ReservedCapacityOptionsRequest::builder()
                .reservation_types(FleetReservationType::InterruptibleCapacityReservation)
                .build(),
        )
    } else if block {
        req
    } else {
        req.on_demand_options(
            OnDemandOptionsRequest::builder()
                .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                .build(),
        )
    };
    for (template, overrides) in &by_template {
        let mut config = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_name(*template)
                .version("$Latest")
                .build(),
        );
        for o in overrides {
            config = config.overrides(
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(aws_sdk_ec2::types::InstanceType::from(
                        o.instance_type.as_str(),
                    ))
                    .subnet_id(&o.subnet)
                    .availability_zone(&o.zone)
                    .build(),
            );
        }
        req = req.launch_template_configs(config.build());
    }
    let out = req.send().await.map_err(|e| sdk_error("CreateFleet", e))?;
    let mut result = FleetResult::default();
    for i in out.instances() {
        result.instances.extend(i.instance_ids().iter().cloned());
    }
    for e in out.errors() {
        let code = e.error_code().unwrap_or_default();
        let ov = e
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        let instance_type = ov
            .and_then(|o| o.instance_type())
            .map(|t| t.as_str().to_string());
        let zone = zone_of(ov, shape);
        let reservation = shape
            .overrides
            .iter()
            .find(|o| {
                Some(&o.instance_type) == instance_type.as_ref() && Some(&o.zone) == zone.as_ref()
            })
            .and_then(|o| o.reservation.clone());
        match (UNFULFILLABLE.contains(&code), instance_type, zone) {
            (true, Some(_), Some(_)) if reservation.is_some() => {
                let id = reservation.unwrap_or_default();
                if !result.exhausted.contains(&id) {
                    result.exhausted.push(id);
                }
            }
            (true, Some(t), Some(z)) => {
                // A spread group full in a zone is full for every type (upstream marks them
                // all at once rather than learning it one fleet error at a time).
                let spread_full = e
                    .error_message()
                    .is_some_and(|m| m.contains(super::placement_group::SPREAD_LIMIT_MESSAGE));
                let types: Vec<String> = if spread_full {
                    shape
                        .overrides
                        .iter()
                        .filter(|o| o.zone == z)
                        .map(|o| o.instance_type.clone())
                        .collect()
                } else {
                    vec![t]
                };
                for t in types {
                    let l = Launch {
                        price: price(&t, &z),
                        instance_type: t,
                        zone: z.clone(),
                        capacity_type: shape.capacity_type,
                        reservation: None,
                    };
                    if !result.unavailable.contains(&l) {
                        result.unavailable.push(l);
                    }
                }
            }
            _ => result
                .errors
                .push(format!("{code}: {}", e.error_message().unwrap_or_default())),
        }
    }
    Ok(result)
}
