//! Instances by tag (upstream `instance.Provider` Get/List/Delete): what this cluster
//! launched, as DescribeInstances reports it, and termination.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Instance as Ec2Instance, InstanceStateName};
use chrono::{DateTime, Utc};

use super::instance_types::filter;
use super::launch_template::has_code;
use super::{Clients, sdk_error};
use crate::api::labels;
use crate::cloud::{CloudError, Instance};
use crate::engine::catalog::CapacityType;

/// What drift compares about a running instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    pub image_id: Option<String>,
    pub subnet_id: Option<String>,
    pub security_groups: BTreeSet<String>,
    /// The capacity reservation it runs in: reported by EC2 only while the reservation
    /// lasts and the instance was launched into it alone (upstream's rule:
    /// `capacity-reservations-only`). When an ODCR ends the instance runs on as
    /// on-demand.
    pub reservation: Option<String>,
    /// The placement group it runs in (its id), and its partition in a partition group.
    pub placement_group: Option<String>,
    pub partition: Option<i32>,
}

/// An instance as DescribeInstances reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Described {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub spot: bool,
    pub hostname: String,
    pub launched: DateTime<Utc>,
    pub tags: BTreeMap<String, String>,
    pub facts: Facts,
}

impl Described {
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }

    pub fn capacity_type(&self) -> CapacityType {
        if self.spot {
            CapacityType::Spot
        } else if self.facts.reservation.is_some() {
            CapacityType::Reserved
        } else {
            CapacityType::OnDemand
        }
    }

    pub fn instance(&self, price: f64) -> Instance {
        Instance {
            provider_id: self.provider_id(),
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            capacity_type: self.capacity_type(),
            price,
            nodeclaim: self
                .tags
                .get(super::NODECLAIM_TAG)
                .cloned()
                .unwrap_or_default(),
            nodepool: self.tags.get(labels::NODEPOOL).cloned().unwrap_or_default(),
            hostname: self.hostname.clone(),
            launched: self.launched,
            image_id: self.facts.image_id.clone(),
        }
    }
}

fn described(i: &Ec2Instance) -> Option<Described> {
    let id = i.instance_id()?.to_string();
    let launched = i
        .launch_time()
        .and_then(|t| DateTime::from_timestamp(t.secs(), 0))
        .unwrap_or_else(Utc::now);
    Some(Described {
        id,
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string(),
        spot: i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot"),
        hostname: i.private_dns_name().unwrap_or_default().to_string(),
        launched,
        tags: i
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_string(),
                    t.value().unwrap_or_default().to_string(),
                ))
            })
            .collect(),
        facts: Facts {
            image_id: i.image_id().map(str::to_string),
            subnet_id: i.subnet_id().map(str::to_string),
            security_groups: i
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id().map(str::to_string))
                .collect(),
            reservation: i
                .capacity_reservation_id()
                .filter(|_| {
                    i.capacity_reservation_specification()
                        .and_then(|s| s.capacity_reservation_preference())
                        .is_some_and(|p| p.as_str() == "capacity-reservations-only")
                })
                .map(str::to_string),
            placement_group: i.placement().and_then(|p| p.group_id()).map(str::to_string),
            partition: i.placement().and_then(|p| p.partition_number()),
        },
    })
}

/// Instances that are (or are about to be) running: not shutting down or terminated.
fn live(i: &Ec2Instance) -> bool {
    !matches!(
        i.state().and_then(|s| s.name()),
        Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated)
    )
}

/// Every live instance this cluster's provider launched: tagged with the cluster and a
/// NodePool (upstream List's filters).
pub async fn list(clients: &Clients, cluster: &str) -> Result<Vec<Described>, CloudError> {
    let mut out = Vec::new();
    let mut pages = clients
        .ec2
        .describe_instances()
        .filters(filter(
            &format!("tag:kubernetes.io/cluster/{cluster}"),
            ["owned"],
        ))
        .filters(filter("tag-key", [labels::NODEPOOL]))
        .filters(filter(
            "instance-state-name",
            ["pending", "running", "stopping", "stopped"],
        ))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| sdk_error("DescribeInstances", e))?;
        for r in page.reservations() {
            out.extend(
                r.instances()
                    .iter()
                    .filter(|i| live(i))
                    .filter_map(described),
            );
        }
    }
    Ok(out)
}

/// The instances with these ids. EC2 is eventually consistent: an instance CreateFleet
/// just made may not be describable yet, so NotFound is retried a few times.
pub async fn get(clients: &Clients, ids: &[String]) -> Result<Vec<Described>, CloudError> {
    let mut wait = std::time::Duration::from_millis(100);
    for attempt in 0.. {
        match clients
            .ec2
            .describe_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await
        {
            Ok(out) => {
                return Ok(out
                    .reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(described)
                    .collect());
            }
            Err(e) if has_code(&e, "InvalidInstanceID.NotFound") && attempt < 5 => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(e) => return Err(sdk_error("DescribeInstances", e)),
        }
    }
    unreachable!("the loop returns")
}

/// Terminates an instance; one already gone (or unknown to EC2) is not an error.
pub async fn terminate(clients: &Clients, id: &str) -> Result<(), CloudError> {
    match clients
        .ec2
        .terminate_instances()
        .instance_ids(id)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if has_code(&e, "InvalidInstanceID.NotFound") => Ok(()),
        Err(e) => Err(sdk_error(&format!("TerminateInstances {id}"), e)),
    }
}

/// Tags instances with their NodeClaim (after a merged fleet call).
pub async fn tag(clients: &Clients, id: &str, tags: &[(&str, &str)]) -> Result<(), CloudError> {
    let mut req = clients.ec2.create_tags().resources(id);
    for (k, v) in tags {
        req = req.tags(aws_sdk_ec2::types::Tag::builder().key(*k).value(*v).build());
    }
    req.send()
        .await
        .map(drop)
        .map_err(|e| sdk_error(&format!("CreateTags {id}"), e))
}
