//! What a NodePool can launch, prepared once per solve: its requirements, taints, the
//! instance types it may use (with their requirements precomputed) and the DaemonSet
//! overhead every new node of the pool carries. Upstream: `NodeClaimTemplate` plus the
//! provisioner's instance-type filtering.

use std::sync::Arc;

use crate::api::labels;
use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::api::nodepool::NodePool;
use crate::engine::catalog::{InstanceType, Offering};
use crate::engine::pod::{Pod, Toleration};
use crate::engine::requirements::{
    Requirement, RequirementError, Requirements, allow_well_known_labels, pod_requirements,
};
use crate::engine::resources::Resources;

/// An instance type with what the scheduler asks of it on every check.
#[derive(Clone, Debug)]
pub struct TypeOption {
    pub it: Arc<InstanceType>,
    /// Labels plus `zone In [...]` and `capacity-type In [...]` of its available offerings
    /// (and their reservations and partitions, where they have any).
    pub requirements: Requirements,
    pub allocatable: Resources,
}

impl TypeOption {
    pub fn new(it: Arc<InstanceType>) -> TypeOption {
        let mut requirements = Requirements::from_labels(&it.labels);
        let available = || it.offerings.iter().filter(|o| o.available);
        requirements.add(Requirement::in_values(
            labels::ZONE,
            available().map(|o| o.zone.clone()),
        ));
        requirements.add(Requirement::in_values(
            labels::CAPACITY_TYPE,
            available().map(|o| o.capacity_type.as_str().to_string()),
        ));
        for r in crate::engine::reservation::type_requirements(&it) {
            requirements.add(r);
        }
        if let Some(r) = crate::engine::partition::type_requirement(&it) {
            requirements.add(r);
        }
        TypeOption {
            allocatable: it.allocatable(),
            requirements,
            it,
        }
    }

    /// True when some available offering lies inside the zone and capacity-type
    /// requirements of `reqs`.
    pub fn has_offering(&self, reqs: &Requirements) -> bool {
        self.it
            .offerings
            .iter()
            .any(|o| o.available && offering_allowed(o, reqs))
    }

    /// The cheapest available offering allowed by `reqs`.
    pub fn cheapest(&self, reqs: &Requirements) -> Option<&Offering> {
        self.it.cheapest_offering(|o| offering_allowed(o, reqs))
    }
}

/// True when the offering's zone, capacity type, reservation and placement group
/// partition satisfy the requirements.
pub fn offering_allowed(o: &Offering, reqs: &Requirements) -> bool {
    reqs.get(labels::ZONE).is_none_or(|r| r.has(&o.zone))
        && reqs
            .get(labels::CAPACITY_TYPE)
            .is_none_or(|r| r.has(o.capacity_type.as_str()))
        && crate::engine::reservation::allowed(o, reqs)
        && crate::engine::partition::allowed(o, reqs)
}

/// A NodePool ready for scheduling.
#[derive(Clone, Debug)]
pub struct Template {
    pub nodepool: String,
    pub weight: i32,
    pub requirements: Requirements,
    pub taints: Vec<Taint>,
    /// Instance types compatible with the pool and with an available offering.
    pub options: Vec<TypeOption>,
    /// Requests of the DaemonSet pods that would run on a new node of this pool.
    pub daemon_overhead: Resources,
    /// `spec.limits` in milli-units, if any; only the named resources are limited.
    pub limits: Option<Vec<(String, i64)>>,
    /// Whether an unmet `minValues` fails the pod (Strict) or is relaxed at the end.
    pub min_values_strict: bool,
}

impl Template {
    /// Prepares a pool. Fails only when the pool's own requirements do not parse (a
    /// manifest `validate` would reject).
    pub fn new(
        pool: &NodePool,
        instance_types: &[Arc<InstanceType>],
        daemonsets: &[Pod],
    ) -> Result<Template, RequirementError> {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let spec = &pool.spec.template.spec;
        let mut requirements = Requirements::from_karpenter(&spec.requirements)?;
        requirements.add_all(&Requirements::from_labels(
            &pool.spec.template.metadata.labels,
        ));
        requirements.add(Requirement::in_values(labels::NODEPOOL, [name.clone()]));
        let options = instance_types
            .iter()
            .map(|it| TypeOption::new(it.clone()))
            .filter(|o| {
                o.requirements.intersects(&requirements).is_ok() && o.has_offering(&requirements)
            })
            .collect();
        let limits = if pool.spec.limits.is_empty() {
            None
        } else {
            Some(
                pool.spec
                    .limits
                    .iter()
                    .map(|(k, v)| (k.clone(), crate::engine::resources::limit_milli(&v.0)))
                    .collect(),
            )
        };
        let mut t = Template {
            nodepool: name,
            weight: pool.spec.weight.unwrap_or(0),
            requirements,
            taints: spec.taints.clone(),
            options,
            daemon_overhead: Resources::default(),
            limits,
            min_values_strict: true,
        };
        for ds in daemonsets {
            if t.accepts_daemon(ds) {
                t.daemon_overhead.add(&ds.requests);
            }
        }
        Ok(t)
    }

    /// Upstream `getDaemonOverhead`: a DaemonSet counts when it tolerates the pool's taints
    /// and its node selection is compatible with the pool.
    fn accepts_daemon(&self, ds: &Pod) -> bool {
        if tolerates(&ds.tolerations, &self.taints, false).is_err() {
            return false;
        }
        match pod_requirements(&ds.node_selector, ds.node_affinity.as_ref()) {
            Ok(r) => self
                .requirements
                .is_compatible(&r, &allow_well_known_labels),
            Err(_) => false,
        }
    }
}

/// [`tolerates`] without the message, for checks whose failure is not reported.
pub fn tolerated(tolerations: &[Toleration], taints: &[Taint], tolerate_prefer: bool) -> bool {
    taints.iter().all(|t| {
        (t.effect == TaintEffect::PreferNoSchedule && tolerate_prefer)
            || tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

/// Checks taints against tolerations; PreferNoSchedule counts as NoSchedule until the
/// pod's preferences are relaxed (upstream treats preferences as requirements first).
pub fn tolerates(
    tolerations: &[Toleration],
    taints: &[Taint],
    tolerate_prefer: bool,
) -> Result<(), String> {
    for t in taints {
        if t.effect == TaintEffect::PreferNoSchedule && tolerate_prefer {
            continue;
        }
        if !tolerations.iter().any(|tol| tol.tolerates(t)) {
            return Err(format!(
                "did not tolerate taint {}={}:{}",
                t.key,
                t.value.as_deref().unwrap_or(""),
                t.effect.as_str()
            ));
        }
    }
    Ok(())
}
