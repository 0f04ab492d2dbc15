//! EC2 capacity reservations as the scheduler sees them. A reservation is an offering of
//! capacity type `reserved` that holds a count of instances; a solve must never plan
//! more NodeClaims into it than that count, and a NodeClaim planned into one is pinned to
//! it.
//!
//! Mirrors upstream core's `pkg/controllers/provisioning/scheduling/reservationmanager.go`
//! (the per-solve count of what each planned NodeClaim holds) and `nodeclaim.go`
//! (`offeringsToReserve`, `FinalizeScheduling`), and the AWS provider's
//! `pkg/providers/instancetype/offering/reserved_capacity_resolver.go` (what an offering
//! carries).

use std::sync::LazyLock;

use crate::api::labels;
use crate::engine::catalog::{CapacityType, InstanceType, Offering};
use crate::engine::fast_hash::FastMap;
use crate::engine::requirements::{HashedKey, Requirement, Requirements};

/// One capacity reservation, as an offering carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// `cr-...`
    pub id: String,
    pub kind: ReservationKind,
    /// EC2 may take the capacity back (interruptible ODCRs).
    pub interruptible: bool,
    /// Instances it can still take, as the provider last counted them.
    pub capacity: u32,
}

/// What kind of reservation (`karpenter.k8s.aws/capacity-reservation-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReservationKind {
    /// An on-demand capacity reservation (ODCR).
    Default,
    /// A capacity block (ML): ends at a fixed time, launched with market type
    /// `capacity-block`.
    CapacityBlock,
}

impl ReservationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::Default => "default",
            ReservationKind::CapacityBlock => "capacity-block",
        }
    }

    /// EC2's and the CRD's spelling; `None` for a kind this version does not know.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "default" => Some(ReservationKind::Default),
            "capacity-block" => Some(ReservationKind::CapacityBlock),
            _ => None,
        }
    }
}

/// The reservation label keys, hashed once: every offering check of every solve looks
/// them up.
static KEYS: LazyLock<[HashedKey<'static>; 3]> = LazyLock::new(|| {
    [
        HashedKey::new(labels::CAPACITY_RESERVATION_ID),
        HashedKey::new(labels::CAPACITY_RESERVATION_TYPE),
        HashedKey::new(labels::CAPACITY_RESERVATION_INTERRUPTIBLE),
    ]
});

/// Whether an offering satisfies the reservation keys of `reqs` (id, type,
/// interruptible). An offering outside any reservation satisfies a key only when the key
/// may be absent (NotIn, DoesNotExist), as a node without the label would.
pub fn allowed(o: &Offering, reqs: &Requirements) -> bool {
    let [id, kind, interruptible] = *KEYS;
    match &o.reservation {
        Some(r) => {
            let has = |key, value: &str| reqs.get_hashed(key).is_none_or(|q| q.has(value));
            has(id, &r.id)
                && has(kind, r.kind.as_str())
                && has(
                    interruptible,
                    if r.interruptible { "true" } else { "false" },
                )
        }
        None => [id, kind, interruptible]
            .into_iter()
            .all(|key| reqs.get_hashed(key).is_none_or(Requirement::admits_absent)),
    }
}

/// The requirements an instance type adds for its reservations: the ids, kinds and
/// interruptibility of its reserved offerings (upstream `computeRequirements`). Nothing
/// for a type without any, so the common case costs nothing.
pub fn type_requirements(it: &InstanceType) -> Vec<Requirement> {
    let reserved: Vec<&Reservation> = it
        .offerings
        .iter()
        .filter_map(|o| o.reservation.as_deref())
        .collect();
    if reserved.is_empty() {
        return Vec::new();
    }
    vec![
        Requirement::in_values(
            labels::CAPACITY_RESERVATION_ID,
            reserved.iter().map(|r| r.id.clone()),
        ),
        Requirement::in_values(
            labels::CAPACITY_RESERVATION_TYPE,
            reserved.iter().map(|r| r.kind.as_str().to_string()),
        ),
        Requirement::in_values(
            labels::CAPACITY_RESERVATION_INTERRUPTIBLE,
            reserved.iter().map(|r| r.interruptible.to_string()),
        ),
    ]
}

/// How a solve treats a NodeClaim that could use reserved capacity but finds it all held
/// (upstream `ReservedOfferingMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReservedMode {
    /// Provisioning: the pod is not added there. Next round, once the launches counted
    /// the reservation down, it falls back to spot or on-demand; no NodeClaim is packed
    /// past a reservation it could have had.
    #[default]
    Strict,
    /// Disruption simulations: the NodeClaim may fall back at once.
    Fallback,
}

/// What the NodeClaims planned in one solve hold of each reservation (upstream's
/// `ReservationManager`). Holding is per NodeClaim and idempotent; a NodeClaim holds one
/// unit of every reservation it could launch into, as upstream does, so a reservation is
/// never promised twice.
#[derive(Clone, Debug, Default)]
pub struct Holds {
    /// Units left per reservation id.
    left: FastMap<String, u32>,
    /// What each planned NodeClaim (by placeholder hostname) holds.
    held: FastMap<String, Vec<String>>,
    pub mode: ReservedMode,
}

impl Holds {
    /// The reservations of every pool's instance types, each counted at the smallest
    /// capacity any offering reports (two pools may see one reservation at two refreshes).
    pub fn new<'a>(types: impl IntoIterator<Item = &'a InstanceType>, mode: ReservedMode) -> Self {
        let mut left: FastMap<String, u32> = FastMap::default();
        for it in types {
            for r in it.offerings.iter().filter_map(|o| o.reservation.as_deref()) {
                left.entry(r.id.clone())
                    .and_modify(|c| *c = (*c).min(r.capacity))
                    .or_insert(r.capacity);
            }
        }
        Holds {
            left,
            held: FastMap::default(),
            mode,
        }
    }

    /// No reservation anywhere: the solve skips every step of this module.
    pub fn is_empty(&self) -> bool {
        self.left.is_empty()
    }

    fn holds(&self, host: &str, id: &str) -> bool {
        self.held
            .get(host)
            .is_some_and(|h| h.iter().any(|x| x == id))
    }

    /// The reservations a NodeClaim with these options and requirements would hold
    /// (upstream `offeringsToReserve`): every available reserved offering they allow that
    /// it holds already or that has a unit left. Strict mode refuses (with upstream's
    /// reason) when some offering was compatible but none could be held, or when the
    /// NodeClaim held some and would hold none.
    pub fn to_hold<'a>(
        &self,
        host: &str,
        options: impl IntoIterator<Item = &'a InstanceType>,
        reqs: &Requirements,
        held_before: bool,
    ) -> Result<Vec<String>, &'static str> {
        let mut compatible = false;
        let mut ids: Vec<String> = Vec::new();
        for it in options {
            for o in &it.offerings {
                let Some(r) = o.reservation.as_deref() else {
                    continue;
                };
                if !o.available || !offering_allowed(o, reqs) {
                    continue;
                }
                compatible = true;
                let free = self.holds(host, &r.id) || self.left.get(&r.id).is_some_and(|n| *n > 0);
                if free && !ids.contains(&r.id) {
                    ids.push(r.id.clone());
                }
            }
        }
        if self.mode == ReservedMode::Strict {
            if compatible && ids.is_empty() {
                return Err(
                    "one or more instance types with compatible reserved offerings are available, but could not be reserved",
                );
            }
            if held_before && ids.is_empty() {
                return Err(
                    "satisfying updated nodeclaim constraints would remove all compatible reserved offering options",
                );
            }
        }
        Ok(ids)
    }

    /// Makes `ids` what the NodeClaim holds: new ones take a unit, dropped ones give it
    /// back.
    pub fn hold(&mut self, host: &str, ids: &[String]) {
        let before = self.held.remove(host).unwrap_or_default();
        for id in &before {
            if !ids.contains(id) {
                *self.left.entry(id.clone()).or_default() += 1;
            }
        }
        for id in ids {
            if !before.contains(id)
                && let Some(n) = self.left.get_mut(id)
            {
                *n = n.saturating_sub(1);
            }
        }
        if !ids.is_empty() {
            self.held.insert(host.to_string(), ids.to_vec());
        }
    }
}

/// Pins a NodeClaim to the reservations it holds (upstream `FinalizeScheduling`):
/// capacity type `reserved` and the reservation ids, so it never launches into anything
/// else and a reservation is not launched into twice.
pub fn pin(requirements: &mut Requirements, ids: &[String]) {
    if ids.is_empty() {
        return;
    }
    requirements.remove(labels::CAPACITY_TYPE);
    requirements.add(Requirement::in_values(
        labels::CAPACITY_TYPE,
        [CapacityType::Reserved.as_str().to_string()],
    ));
    requirements.add(Requirement::in_values(
        labels::CAPACITY_RESERVATION_ID,
        ids.iter().cloned(),
    ));
}

fn offering_allowed(o: &Offering, reqs: &Requirements) -> bool {
    crate::engine::scheduling::offering_allowed(o, reqs)
}

/// A reserved offering for tests.
#[cfg(test)]
pub fn reserved_offering(zone: &str, price: f64, id: &str, capacity: u32) -> Offering {
    Offering {
        zone: zone.to_string(),
        capacity_type: CapacityType::Reserved,
        price,
        available: capacity > 0,
        reservation: Some(std::sync::Arc::new(Reservation {
            id: id.to_string(),
            kind: ReservationKind::Default,
            interruptible: false,
            capacity,
        })),
        partition: None,
    }
}

#[cfg(test)]
mod tests;
