//! A launch from request to instance (upstream `instance.Provider.Create`): the fleet shape
//! of each request (templates ensured, offerings filtered and chosen, tags), one
//! CreateFleet per shape, and the instances described and tagged.

use super::*;
use crate::engine::catalog::RESOURCE_EFA;

impl AwsCloud {
    /// Launches every request of one shape with one CreateFleet call.
    pub(super) async fn launch_group(
        &mut self,
        shape: &Shape,
        requests: &[&LaunchRequest],
        annotations: &BTreeMap<String, String>,
    ) -> Vec<Result<Launched, LaunchError>> {
        let clients = self.handle.clients.clone();
        let single = requests.len() == 1;
        let mut shape = shape.clone();
        if single {
            // One NodeClaim: its tag goes on at launch, so no instance is ever without it.
            shape
                .tags
                .insert(NODECLAIM_TAG.into(), requests[0].nodeclaim.clone());
        }
        let handle = self.handle.clone();
        let result = fleet::create(&clients, &shape, requests.len() as i32, |t, z| {
            handle.price(t, z, shape.capacity_type).unwrap_or(0.0)
        })
        .await;
        let fail = |r: &LaunchRequest, message: String| LaunchError::Other {
            nodeclaim: r.nodeclaim.clone(),
            message,
        };
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                // A template deleted behind our back is made again on the next attempt.
                if e.0.contains("InvalidLaunchTemplateName") {
                    for o in &shape.overrides {
                        self.templates.forget(&o.template);
                    }
                }
                return requests.iter().map(|r| Err(fail(r, e.0.clone()))).collect();
            }
        };
        if !result.exhausted.is_empty() {
            let mut counts = self.handle.reservations();
            for id in &result.exhausted {
                tracing::info!(
                    "capacity reservation {id} has no room left; not offered until the next resolution"
                );
                counts.exhausted(id);
            }
            drop(counts);
            self.handle.bump();
        }
        let ids = result.instances.clone();
        let described = if ids.is_empty() {
            Ok(Vec::new())
        } else {
            instances::get(&clients, &ids).await
        };
        let described = match described {
            Ok(d) => d,
            Err(e) => {
                // The instances exist but cannot be read: garbage collection takes them.
                return requests.iter().map(|r| Err(fail(r, e.0.clone()))).collect();
            }
        };
        let mut out = Vec::with_capacity(requests.len());
        let mut launched = result.instances.iter();
        for r in requests {
            let Some(id) = launched.next() else {
                out.push(Err(if result.errors.is_empty() {
                    LaunchError::InsufficientCapacity {
                        nodeclaim: r.nodeclaim.clone(),
                        offerings: result.unavailable.clone(),
                    }
                } else {
                    fail(r, result.errors.join("; "))
                }));
                continue;
            };
            if !single
                && let Err(e) = instances::tag(&clients, id, &[(NODECLAIM_TAG, &r.nodeclaim)]).await
            {
                tracing::warn!("{e}");
            }
            let Some(d) = described.iter().find(|d| d.id == *id) else {
                // Without its zone and DNS name the instance cannot be recorded; garbage
                // collection terminates it.
                out.push(Err(fail(
                    r,
                    format!("instance {id} was launched but DescribeInstances does not show it"),
                )));
                continue;
            };
            self.handle.facts().insert(d.provider_id(), d.facts.clone());
            let mut instance = self.handle.priced(d);
            instance.nodeclaim = r.nodeclaim.clone();
            instance.nodepool = r.nodepool.clone();
            let mut labels = match &d.facts.reservation {
                Some(id) => {
                    self.handle.reservations().launched(id);
                    self.handle.bump();
                    reservation_labels(id, &r.offerings)
                }
                None => BTreeMap::new(),
            };
            labels.extend(placement_labels(&d.facts));
            out.push(Ok(Launched {
                instance,
                unavailable: result.unavailable.clone(),
                annotations: annotations.clone(),
                labels,
            }));
        }
        out
    }

    /// The fleet shape of a request: templates ensured, overrides chosen, tags set.
    pub(super) async fn shape(
        &mut self,
        r: &LaunchRequest,
    ) -> Result<(Shape, BTreeMap<String, String>), LaunchError> {
        let fail = |message: String| LaunchError::Other {
            nodeclaim: r.nodeclaim.clone(),
            message,
        };
        let name = r
            .nodeclass
            .clone()
            .ok_or_else(|| fail("the NodePool has no nodeClassRef".into()))?;
        let state = self
            .handle
            .nodeclass(&name)
            .ok_or_else(|| fail(format!("EC2NodeClass {name} does not exist")))?;
        let resolved = state
            .resolved
            .clone()
            .map_err(|e| fail(format!("EC2NodeClass {name} is not ready: {e}")))?;
        let family = state
            .spec
            .effective_ami_family()
            .unwrap_or(AMIFamily::Custom);
        let user_data = user_data::render(
            family,
            &user_data::Bootstrap {
                cluster: &self.handle.opts.cluster,
                kubelet: state.spec.kubelet.as_ref(),
                labels: &r.labels,
                taints: &r.taints,
                custom: state.spec.user_data.as_deref(),
                instance_store_policy: state.spec.instance_store_policy,
            },
        )
        .map_err(|e| fail(format!("EC2NodeClass {name}: {e}")))?;
        let cluster = self.handle.opts.cluster.name.clone();
        let mut tags = state.spec.tags.clone();
        tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
        tags.insert(crate::api::labels::NODEPOOL.into(), r.nodepool.clone());
        tags.insert(EKS_CLUSTER_TAG.into(), cluster.clone());
        tags.insert(NODECLASS_TAG.into(), name.clone());
        let catalog = self.handle.catalog();
        let offerings = generic_offerings(&r.offerings, &catalog);
        // One template per AMI, reservation target and EFA interface count the fleet's
        // offerings need (upstream resolves one per group of types alike in these).
        let mut template_of: BTreeMap<TemplateKey, String> = BTreeMap::new();
        let mut ami_of_type: BTreeMap<String, String> = BTreeMap::new();
        let groups: Vec<String> = resolved
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        let wants_efa = r.requests.get(RESOURCE_EFA) > 0;
        // Upstream `EnsureAll`: the group, and the partition the NodeClaim asks for.
        let placement = resolved
            .placement_group
            .as_ref()
            .map(|g| launch_template::Placement {
                group_id: g.id.clone(),
                partition: r
                    .labels
                    .get(crate::api::labels::PLACEMENT_GROUP_PARTITION)
                    .and_then(|p| p.parse().ok())
                    .filter(|_| g.strategy == "partition"),
            });
        let efa_of = |t: &str| {
            if wants_efa {
                catalog
                    .get(t)
                    .map_or(0, |it| (it.capacity.get(RESOURCE_EFA) / 1000) as i32)
            } else {
                0
            }
        };
        for o in fleet::in_fleet(&offerings) {
            let ami = match ami_of_type.get(&o.instance_type) {
                Some(a) => a.clone(),
                None => {
                    let Some(it) = catalog.get(&o.instance_type) else {
                        continue;
                    };
                    let Some(ami) = resolved.amis.iter().find(|a| ami_serves(a, it)) else {
                        continue;
                    };
                    ami_of_type.insert(o.instance_type.clone(), ami.id.clone());
                    ami.id.clone()
                }
            };
            let target = target_of(o);
            let efa = efa_of(&o.instance_type);
            let key = (ami.clone(), target.clone(), efa);
            if template_of.contains_key(&key) {
                continue;
            }
            let content = Content {
                image_id: ami.clone(),
                network_interfaces: launch_template::interfaces(
                    &state.spec,
                    &groups,
                    efa,
                    self.handle.opts.cluster.ipv6(),
                ),
                user_data: user_data.clone(),
                metadata_options: state.spec.metadata_options.clone(),
                block_device_mappings: state.spec.effective_block_device_mappings(),
                instance_profile: resolved.instance_profile.clone(),
                detailed_monitoring: state.spec.detailed_monitoring.unwrap_or(false),
                nested_virtualization: state
                    .spec
                    .cpu_options
                    .as_ref()
                    .and_then(|c| c.nested_virtualization.clone()),
                tags: tags.clone(),
                capacity_reservation: target.clone(),
                placement: placement.clone(),
            };
            let t = self
                .templates
                .ensure(&self.handle.clients, &content, &cluster)
                .await
                .map_err(|e| fail(e.0))?;
            template_of.insert(key, t);
        }
        let subnets = &resolved.subnets;
        let (ct, overrides) = fleet::overrides(
            &offerings,
            |zone| {
                subnets
                    .iter()
                    .find(|s| s.zone == zone)
                    .map(|s| s.id.clone())
            },
            |o| {
                ami_of_type
                    .get(&o.instance_type)
                    .and_then(|a| {
                        template_of.get(&(a.clone(), target_of(o), efa_of(&o.instance_type)))
                    })
                    .cloned()
            },
        );
        let Some(capacity_type) = ct.filter(|_| !overrides.is_empty()) else {
            return Err(fail(format!(
                "no offering of {} can launch with EC2NodeClass {name} (no subnet in its \
                 zones, or no AMI for its instance types)",
                r.nodeclaim
            )));
        };
        let annotations = BTreeMap::from([
            (nodeclass::HASH_ANNOTATION.to_string(), state.hash.clone()),
            (
                nodeclass::HASH_VERSION_ANNOTATION.to_string(),
                nodeclass::HASH_VERSION.to_string(),
            ),
        ]);
        let reservation_kind = offerings
            .first()
            .and_then(|o| o.reservation.as_ref())
            .map(|r| (r.kind, r.interruptible));
        Ok((
            Shape {
                capacity_type,
                reservation_kind,
                overrides,
                tags,
            },
            annotations,
        ))
    }
}

/// What tells two templates of one launch apart: the AMI, the reservation target and
/// how many EFA interfaces.
type TemplateKey = (String, ReservationTarget, i32);

/// The labels of a node in reservation `id` (upstream `instanceToNodeClaim`): the id, its
/// kind and whether it is interruptible, as the offering that launched said.
fn reservation_labels(id: &str, offerings: &[Launch]) -> BTreeMap<String, String> {
    use crate::api::labels;
    let mut out = BTreeMap::from([(labels::CAPACITY_RESERVATION_ID.to_string(), id.to_string())]);
    if let Some(r) = offerings
        .iter()
        .filter_map(|o| o.reservation.as_deref())
        .find(|r| r.id == id)
    {
        out.insert(
            labels::CAPACITY_RESERVATION_TYPE.into(),
            r.kind.as_str().into(),
        );
        out.insert(
            labels::CAPACITY_RESERVATION_INTERRUPTIBLE.into(),
            r.interruptible.to_string(),
        );
    }
    out
}

/// The labels of a node in a placement group (upstream `instanceToNodeClaim`): the
/// group's id and, in a partition group, the partition EC2 put it in (upstream learns it
/// in a registration hook; DescribeInstances already tells it here).
fn placement_labels(facts: &instances::Facts) -> BTreeMap<String, String> {
    use crate::api::labels;
    let mut out = BTreeMap::new();
    if let Some(g) = &facts.placement_group {
        out.insert(labels::PLACEMENT_GROUP_ID.to_string(), g.clone());
        if let Some(p) = facts.partition {
            out.insert(labels::PLACEMENT_GROUP_PARTITION.to_string(), p.to_string());
        }
    }
    out
}

/// The launch template setting an offering needs: its reservation alone, or no
/// reservation at all.
fn target_of(o: &Launch) -> ReservationTarget {
    match &o.reservation {
        Some(r) => ReservationTarget::Only {
            id: r.id.clone(),
            capacity_block: r.kind == crate::engine::reservation::ReservationKind::CapacityBlock,
            interruptible: r.interruptible,
        },
        None => ReservationTarget::OptOut,
    }
}

/// The offerings without exotic instance types (metal sizes, GPUs, Neuron, Gaudi) when
/// any remain: a pod that does not ask for an accelerator should not get one because it
/// happened to be the cheapest spot offering. Mirrors upstream's
/// `filterExoticInstanceTypes`, applied at launch as there.
pub(super) fn generic_offerings(offerings: &[Launch], catalog: &Catalog) -> Vec<Launch> {
    use crate::engine::catalog::{
        RESOURCE_AMD_GPU, RESOURCE_AWS_NEURON, RESOURCE_HABANA_GAUDI, RESOURCE_NVIDIA_GPU,
    };
    let exotic = |name: &str| {
        catalog.get(name).is_some_and(|it| {
            it.label(crate::api::labels::INSTANCE_SIZE)
                .is_some_and(|s| s.contains("metal"))
                || [
                    RESOURCE_AWS_NEURON,
                    RESOURCE_AMD_GPU,
                    RESOURCE_NVIDIA_GPU,
                    RESOURCE_HABANA_GAUDI,
                ]
                .iter()
                .any(|r| it.capacity.get(r) > 0)
        })
    };
    let generic: Vec<Launch> = offerings
        .iter()
        .filter(|o| !exotic(&o.instance_type))
        .cloned()
        .collect();
    if generic.is_empty() {
        offerings.to_vec()
    } else {
        generic
    }
}

/// Whether an AMI's requirements admit an instance type (arch, GPU/accelerator variant).
pub(super) fn ami_serves(ami: &crate::api::ec2nodeclass::AMI, it: &InstanceType) -> bool {
    ami.requirements.iter().all(|r| {
        let v = it.labels.get(&r.key);
        match r.operator {
            Operator::In => v.is_some_and(|v| r.values.contains(v)),
            Operator::NotIn => v.is_none_or(|v| !r.values.contains(v)),
            Operator::Exists => v.is_some(),
            Operator::DoesNotExist => v.is_none(),
            // Numeric bounds are not used by AMI requirements.
            _ => true,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(t: &str) -> Launch {
        Launch {
            instance_type: t.into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price: 0.1,
            reservation: None,
        }
    }

    #[test]
    fn accelerated_and_metal_types_only_when_nothing_else_fits() {
        let catalog = Catalog::builtin();
        let mixed = [
            launch("inf1.xlarge"),
            launch("g4dn.xlarge"),
            launch("m5.metal"),
            launch("m5.large"),
        ];
        assert_eq!(generic_offerings(&mixed, &catalog), [launch("m5.large")]);
        let only = [launch("g4dn.xlarge")];
        assert_eq!(generic_offerings(&only, &catalog), only);
    }
}
