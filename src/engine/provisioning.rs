//! Provisioning around the scheduler: which pods count, when a batch closes, which
//! offerings an insufficient-capacity error took out, nominations, and the launch choice
//! for a planned NodeClaim. Pure: every function takes the time it should use.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::labels;
use crate::engine::catalog::{CapacityType, InstanceType, Offering};
use crate::engine::requirements::Requirements;
use crate::engine::scheduling::{NewNodeClaim, offering_allowed};
use crate::engine::state::is_reschedulable;

/// Upstream batching defaults: a batch closes after 1 s without a new pod, or 10 s after
/// it opened, whichever comes first (`BATCH_IDLE_DURATION`, `BATCH_MAX_DURATION`).
pub const BATCH_IDLE: TimeDelta = TimeDelta::seconds(1);
pub const BATCH_MAX: TimeDelta = TimeDelta::seconds(10);
/// How long an insufficient-capacity error keeps an offering out (upstream: 3 minutes).
pub const UNAVAILABLE_OFFERING_TTL: TimeDelta = TimeDelta::minutes(3);

/// The pods a provisioning round must find room for: pending pods the kube-scheduler gave
/// up on (`Pod::is_provisionable`), plus pods bound to nodes that are being deleted, which
/// will need a new home once evicted (upstream counts them as reschedulable so replacement
/// capacity is launched before the drain, not after). DaemonSet, static and terminal pods
/// never count: they go away with their node.
pub fn pods_to_schedule<'a>(
    pods: impl IntoIterator<Item = &'a crate::engine::pod::Pod>,
    node_is_deleting: impl Fn(&str) -> bool,
) -> Vec<&'a crate::engine::pod::Pod> {
    pods.into_iter()
        .filter(|p| {
            if p.is_provisionable() {
                return true;
            }
            p.node_name
                .as_deref()
                .is_some_and(|node| node_is_deleting(node) && is_reschedulable(p))
        })
        .collect()
}

/// Groups pod arrivals into batches so one solve sees a whole scale-up.
#[derive(Clone, Debug)]
pub struct Batcher {
    pub idle: TimeDelta,
    pub max: TimeDelta,
    opened: Option<DateTime<Utc>>,
    last: Option<DateTime<Utc>>,
}

impl Default for Batcher {
    fn default() -> Self {
        Batcher::new(BATCH_IDLE, BATCH_MAX)
    }
}

impl Batcher {
    pub fn new(idle: TimeDelta, max: TimeDelta) -> Batcher {
        Batcher {
            idle,
            max,
            opened: None,
            last: None,
        }
    }

    /// A provisionable pod was seen at `now`.
    pub fn trigger(&mut self, now: DateTime<Utc>) {
        self.opened.get_or_insert(now);
        self.last = Some(now);
    }

    /// When the open batch will close, if one is open.
    pub fn closes_at(&self) -> Option<DateTime<Utc>> {
        let (opened, last) = (self.opened?, self.last?);
        Some((last + self.idle).min(opened + self.max))
    }

    /// True (and the batch is reset) when the open batch has closed at `now`.
    pub fn take_if_closed(&mut self, now: DateTime<Utc>) -> bool {
        match self.closes_at() {
            Some(at) if now >= at => {
                self.opened = None;
                self.last = None;
                true
            }
            _ => false,
        }
    }
}

/// Offerings recently refused with insufficient capacity: (instance type, zone, capacity
/// type, scope) -> until when they stay out (upstream's unavailable-offerings cache). A
/// scope (an AWS placement group) holds a refusal that only launches into it met: the
/// same offering outside the group is still tried (upstream `WithPlacementGroup`).
#[derive(Clone, Debug, Default)]
pub struct UnavailableOfferings {
    until: HashMap<OfferingKey, DateTime<Utc>>,
}

type OfferingKey = (String, String, CapacityType, Option<String>);

impl UnavailableOfferings {
    /// Records an ICE for the offering at `now`, for launches in `scope` only when given.
    pub fn mark(
        &mut self,
        instance_type: &str,
        zone: &str,
        ct: CapacityType,
        scope: Option<&str>,
        now: DateTime<Utc>,
    ) {
        self.until.insert(
            (
                instance_type.to_string(),
                zone.to_string(),
                ct,
                scope.map(str::to_string),
            ),
            now + UNAVAILABLE_OFFERING_TTL,
        );
    }

    /// True while the offering is out for launches in `scope`: refused everywhere, or
    /// refused in that scope.
    pub fn is_unavailable(
        &self,
        instance_type: &str,
        zone: &str,
        ct: CapacityType,
        scope: Option<&str>,
        now: DateTime<Utc>,
    ) -> bool {
        if self.until.is_empty() {
            return false;
        }
        let mut key = (instance_type.to_string(), zone.to_string(), ct, None);
        if self.until.get(&key).is_some_and(|t| now < *t) {
            return true;
        }
        let Some(scope) = scope else {
            return false;
        };
        key.3 = Some(scope.to_string());
        self.until.get(&key).is_some_and(|t| now < *t)
    }

    /// Drops expired entries; true when any did (the offerings are back).
    pub fn expire(&mut self, now: DateTime<Utc>) -> bool {
        let before = self.until.len();
        self.until.retain(|_, t| now < *t);
        self.until.len() != before
    }

    /// The instance types with unavailable offerings (for launches in `scope`) marked
    /// `available: false`; types without entries are shared, not copied.
    pub fn apply(
        &self,
        types: &[Arc<InstanceType>],
        scope: Option<&str>,
        now: DateTime<Utc>,
    ) -> Vec<Arc<InstanceType>> {
        types
            .iter()
            .map(|it| {
                let hit = |o: &Offering| {
                    self.is_unavailable(&it.name, &o.zone, o.capacity_type, scope, now)
                };
                if !it.offerings.iter().any(|o| o.available && hit(o)) {
                    return it.clone();
                }
                let mut copy = (**it).clone();
                for o in &mut copy.offerings {
                    if hit(o) {
                        o.available = false;
                    }
                }
                Arc::new(copy)
            })
            .collect()
    }
}

/// The offering a planned NodeClaim launches with.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Launch {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// The reservation a `reserved` launch goes into (serialized as its id).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "reservation_id"
    )]
    pub reservation: Option<Arc<crate::engine::reservation::Reservation>>,
}

fn reservation_id<S: serde::Serializer>(
    r: &Option<Arc<crate::engine::reservation::Reservation>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => s.serialize_str(&r.id),
        None => s.serialize_none(),
    }
}

/// Picks the launch for a NodeClaim as the AWS provider does: the first of
/// [`launch_order`].
pub fn choose_launch(claim: &NewNodeClaim) -> Option<Launch> {
    launch_order(&claim.requirements, &claim.instance_types)
        .into_iter()
        .next()
}

/// Every offering a NodeClaim may launch on, in the order the AWS provider tries them
/// (upstream `getCapacityType` and `CapacityReservationTypeFilter`): reserved first when
/// the requirements allow it, cheapest first and, at one price, ODCRs before capacity
/// blocks before interruptible ODCRs; then spot, but only spot offerings no pricier than
/// the cheapest on-demand offering (cheapest first); then on-demand (cheapest first).
/// Ties keep the option order. The cloud provider takes the first it can get, as
/// CreateFleet does with prioritized overrides.
pub fn launch_order(requirements: &Requirements, types: &[Arc<InstanceType>]) -> Vec<Launch> {
    let allowed = |o: &Offering| o.available && offering_allowed(o, requirements);
    let of = |ct: CapacityType, cap: f64| -> Vec<Launch> {
        let mut out: Vec<Launch> = types
            .iter()
            .flat_map(|it| {
                it.offerings
                    .iter()
                    .filter(move |o| o.capacity_type == ct && allowed(o) && o.price <= cap)
                    .map(|o| Launch {
                        instance_type: it.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: ct,
                        price: o.price,
                        reservation: o.reservation.clone(),
                    })
            })
            .collect();
        out.sort_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| reservation_rank(a).cmp(&reservation_rank(b)))
        });
        out
    };
    let allows = |ct: CapacityType| {
        requirements
            .get(labels::CAPACITY_TYPE)
            .is_none_or(|r| r.has(ct.as_str()))
    };
    let mut order = Vec::new();
    if allows(CapacityType::Reserved) {
        order.extend(of(CapacityType::Reserved, f64::INFINITY));
    }
    let on_demand = of(CapacityType::OnDemand, f64::INFINITY);
    if allows(CapacityType::Spot) {
        let cap = on_demand.first().map_or(f64::INFINITY, |l| l.price);
        order.extend(of(CapacityType::Spot, cap));
    }
    order.extend(on_demand);
    order
}

/// Upstream's partition priority among reservations of one price.
fn reservation_rank(l: &Launch) -> u8 {
    match l.reservation.as_deref() {
        None => 0,
        Some(r) if r.interruptible => 2,
        Some(r) => match r.kind {
            crate::engine::reservation::ReservationKind::Default => 0,
            crate::engine::reservation::ReservationKind::CapacityBlock => 1,
        },
    }
}

#[cfg(test)]
mod tests;
