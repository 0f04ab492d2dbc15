//! EC2 capacity reservations (ODCRs and capacity blocks): resolving a NodeClass's
//! `capacityReservationSelectorTerms` into its status (upstream
//! `pkg/providers/capacityreservation/{provider,types}.go` and
//! `pkg/controllers/nodeclass/capacityreservation.go`), counting what each can still take
//! between resolutions (upstream's availability cache), and the `reserved` offerings a
//! NodeClass's instance types get from them
//! (`pkg/providers/instancetype/offering/reserved_capacity_resolver.go`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_ec2::types::{CapacityReservationState, Filter};
use chrono::{DateTime, Utc};

use super::instance_types::filter;
use super::{Clients, sdk_error};
use crate::api::capacity_reservation::{CapacityReservation, CapacityReservationSelectorTerm};
use crate::engine::catalog::{CapacityType, Offering};
use crate::engine::reservation::{Reservation, ReservationKind};

/// A capacity block whose end is nearer than this is `expiring`: nothing new launches
/// into it and its nodes are drained (upstream `capacityReservationExpirationPeriod`).
pub const EXPIRING_WITHIN: chrono::TimeDelta = chrono::TimeDelta::minutes(40);

/// A reserved offering costs the on-demand price divided by this: nearly free, so it is
/// always tried first, while keeping the types' relative order for consolidation
/// (upstream's constant).
pub const PRICE_DIVISOR: f64 = 10_000_000.0;

/// One DescribeCapacityReservations query per term part, as upstream splits them: an id
/// alone, or tags, owner and match criteria together.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Query {
    id: Option<String>,
    owner: Option<String>,
    tags: BTreeMap<String, String>,
    match_criteria: Option<String>,
}

fn queries(terms: &[CapacityReservationSelectorTerm]) -> Vec<Query> {
    let mut out = Vec::new();
    for t in terms {
        if let Some(id) = &t.id {
            out.push(Query {
                id: Some(id.clone()),
                owner: None,
                tags: BTreeMap::new(),
                match_criteria: None,
            });
        }
        let tags = t.tags.clone().unwrap_or_default();
        if !tags.is_empty() || t.instance_match_criteria.is_some() {
            out.push(Query {
                id: None,
                owner: t.owner_id.clone(),
                tags,
                match_criteria: t.instance_match_criteria.clone(),
            });
        }
    }
    out
}

fn filters(q: &Query) -> Vec<Filter> {
    let mut f = vec![filter("state", ["active".to_string()])];
    if q.id.is_some() {
        return f;
    }
    if let Some(o) = &q.owner {
        f.push(filter("owner-id", [o.clone()]));
    }
    for (k, v) in &q.tags {
        f.push(if v == "*" {
            filter("tag-key", [k.clone()])
        } else {
            filter(&format!("tag:{k}"), [v.clone()])
        });
    }
    if let Some(m) = &q.match_criteria {
        f.push(filter("instance-match-criteria", [m.clone()]));
    }
    f
}

/// A reservation as resolved, with what EC2 said it can still take.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub status: CapacityReservation,
    pub available: u32,
}

/// Every active reservation the terms select that has not ended, by id. An id that does
/// not exist selects nothing (EC2 answers NotFound), as upstream treats it.
pub async fn list(
    clients: &Clients,
    terms: &[CapacityReservationSelectorTerm],
    now: DateTime<Utc>,
) -> Result<Vec<Found>, String> {
    let mut by_id: BTreeMap<String, Found> = BTreeMap::new();
    for q in queries(terms) {
        let mut token: Option<String> = None;
        loop {
            let mut req = clients
                .ec2
                .describe_capacity_reservations()
                .set_filters(Some(filters(&q)))
                .set_next_token(token.clone());
            req = match &q.id {
                Some(id) => req.capacity_reservation_ids(id),
                None => req.max_results(1000),
            };
            let page = match req.send().await {
                Ok(p) => p,
                Err(e)
                    if e.as_service_error()
                        .and_then(aws_sdk_ec2::error::ProvideErrorMetadata::code)
                        .is_some_and(|c| c.ends_with("NotFound")) =>
                {
                    break;
                }
                Err(e) => return Err(sdk_error("DescribeCapacityReservations", e).0),
            };
            for cr in page.capacity_reservations() {
                match from_ec2(cr, now) {
                    Ok(Some(found)) => {
                        by_id.insert(found.status.id.clone(), found);
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!("capacity reservation: {e}"),
                }
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    Ok(by_id.into_values().collect())
}

/// A reservation from EC2 (upstream `CapacityReservationFromEC2`): `None` once it has
/// ended; an error for an instance match criteria or type this version does not know.
fn from_ec2(
    cr: &aws_sdk_ec2::types::CapacityReservation,
    now: DateTime<Utc>,
) -> Result<Option<Found>, String> {
    let id = cr.capacity_reservation_id().unwrap_or_default().to_string();
    if cr
        .state()
        .is_some_and(|s| *s != CapacityReservationState::Active)
    {
        return Ok(None);
    }
    let end = cr
        .end_date()
        .and_then(|t| DateTime::from_timestamp(t.secs(), 0));
    if end.is_some_and(|e| e <= now) {
        return Ok(None);
    }
    let criteria = cr
        .instance_match_criteria()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    if criteria != "open" && criteria != "targeted" {
        return Err(format!(
            "{id}: instance match criteria {criteria:?} is not supported"
        ));
    }
    let kind_text = cr
        .reservation_type()
        .map(|t| t.as_str().to_string())
        .unwrap_or_else(|| "default".into());
    let kind = ReservationKind::parse(&kind_text)
        .ok_or_else(|| format!("{id}: reservation type {kind_text:?} is not supported"))?;
    let expiring =
        kind == ReservationKind::CapacityBlock && end.is_some_and(|e| now >= e - EXPIRING_WITHIN);
    Ok(Some(Found {
        status: CapacityReservation {
            availability_zone: cr.availability_zone().unwrap_or_default().to_string(),
            end_time: end.map(|e| e.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            id,
            instance_match_criteria: criteria,
            instance_type: cr.instance_type().unwrap_or_default().to_string(),
            interruptible: Some(cr.interruptible().unwrap_or(false)),
            owner_id: cr.owner_id().unwrap_or_default().to_string(),
            reservation_type: Some(kind.as_str().to_string()),
            state: Some(if expiring { "expiring" } else { "active" }.to_string()),
        },
        available: cr.available_instance_count().unwrap_or(0).max(0) as u32,
    }))
}

/// What each reservation can still take: EC2's count at the last resolution, less the
/// launches since, plus the terminations (upstream's availability cache). A count is only
/// as fresh as the last DescribeCapacityReservations; a launch EC2 refuses sets it to 0
/// until the next one.
#[derive(Debug, Default)]
pub struct Availability {
    counts: HashMap<String, (u32, Instant)>,
}

impl Availability {
    /// EC2's counts, as just read.
    pub fn sync(&mut self, found: &[Found]) {
        let now = Instant::now();
        for f in found {
            self.counts.insert(f.status.id.clone(), (f.available, now));
        }
    }

    pub fn count(&self, id: &str) -> u32 {
        self.counts.get(id).map_or(0, |c| c.0)
    }

    /// An instance launched into it.
    pub fn launched(&mut self, id: &str) {
        if let Some(c) = self.counts.get_mut(id) {
            c.0 = c.0.saturating_sub(1);
        }
    }

    /// An instance in it was terminated: its slot is free again (an overestimate until
    /// EC2 agrees, which upstream prefers to an underestimate).
    pub fn terminated(&mut self, id: &str) {
        if let Some(c) = self.counts.get_mut(id) {
            c.0 += 1;
        }
    }

    /// EC2 refused a launch into it for capacity.
    pub fn exhausted(&mut self, id: &str) {
        if let Some(c) = self.counts.get_mut(id) {
            c.0 = 0;
        }
    }
}

/// The `reserved` offering a reservation gives its instance type. Without an on-demand
/// price to derive its price from it is offered at 0, as upstream does, so capacity
/// already paid for is still used. Unavailable while the count is 0, outside the
/// NodeClass's zones, or expiring.
pub fn offering(
    r: &CapacityReservation,
    on_demand_price: Option<f64>,
    count: u32,
    zones: &[&str],
) -> Offering {
    let kind = r
        .reservation_type
        .as_deref()
        .and_then(ReservationKind::parse)
        .unwrap_or(ReservationKind::Default);
    Offering {
        zone: r.availability_zone.clone(),
        capacity_type: CapacityType::Reserved,
        price: on_demand_price.map_or(0.0, |p| p / PRICE_DIVISOR),
        available: count > 0
            && zones.contains(&r.availability_zone.as_str())
            && r.state.as_deref() != Some("expiring"),
        reservation: Some(Arc::new(Reservation {
            id: r.id.clone(),
            kind,
            interruptible: r.interruptible.unwrap_or(false),
            capacity: count,
        })),
        partition: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(id: Option<&str>, tags: &[(&str, &str)]) -> CapacityReservationSelectorTerm {
        CapacityReservationSelectorTerm {
            id: id.map(str::to_string),
            tags: (!tags.is_empty()).then(|| {
                tags.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_term_with_an_id_and_tags_is_two_queries_and_only_the_id_query_has_no_other_filter() {
        let q = queries(&[term(Some("cr-1"), &[("team", "ml")])]);
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].id.as_deref(), Some("cr-1"));
        let names = |q: &Query| -> Vec<String> {
            filters(q)
                .iter()
                .map(|f| f.name().unwrap_or_default().to_string())
                .collect()
        };
        assert_eq!(names(&q[0]), ["state"]);
        assert_eq!(names(&q[1]), ["state", "tag:team"]);
        let wildcard = queries(&[term(None, &[("team", "*")])]);
        assert_eq!(names(&wildcard[0]), ["state", "tag-key"]);
    }

    fn ec2(kind: &str, end: Option<DateTime<Utc>>) -> aws_sdk_ec2::types::CapacityReservation {
        aws_sdk_ec2::types::CapacityReservation::builder()
            .capacity_reservation_id("cr-0a1")
            .availability_zone("us-east-1a")
            .instance_type("m5.large")
            .owner_id("123456789012")
            .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
            .reservation_type(aws_sdk_ec2::types::CapacityReservationType::from(kind))
            .state(CapacityReservationState::Active)
            .available_instance_count(2)
            .set_end_date(end.map(|e| aws_sdk_ec2::primitives::DateTime::from_secs(e.timestamp())))
            .build()
    }

    #[test]
    fn a_capacity_block_is_expiring_in_its_last_forty_minutes_and_gone_after_its_end() {
        let now = Utc::now();
        let block = |end| from_ec2(&ec2("capacity-block", Some(end)), now).unwrap();
        let far = block(now + chrono::TimeDelta::minutes(41)).unwrap();
        assert_eq!(far.status.state.as_deref(), Some("active"));
        let near = block(now + chrono::TimeDelta::minutes(39)).unwrap();
        assert_eq!(near.status.state.as_deref(), Some("expiring"));
        assert!(block(now - chrono::TimeDelta::minutes(1)).is_none());
        // An ODCR with an end date is never "expiring": only capacity blocks are.
        let odcr = from_ec2(
            &ec2("default", Some(now + chrono::TimeDelta::minutes(5))),
            now,
        )
        .unwrap()
        .unwrap();
        assert_eq!(odcr.status.state.as_deref(), Some("active"));
        assert_eq!(odcr.available, 2);
    }

    #[test]
    fn an_unknown_reservation_type_is_refused_with_its_id() {
        let e = from_ec2(&ec2("future-kind", None), Utc::now()).unwrap_err();
        assert!(e.contains("cr-0a1") && e.contains("future-kind"), "{e}");
    }

    #[test]
    fn the_offering_is_nearly_free_and_unavailable_when_counted_out_or_expiring() {
        let found = from_ec2(&ec2("default", None), Utc::now())
            .unwrap()
            .unwrap();
        let o = offering(&found.status, Some(0.096), 2, &["us-east-1a"]);
        assert!(o.available);
        assert!((o.price - 0.096 / PRICE_DIVISOR).abs() < 1e-15);
        assert_eq!(o.reservation.as_ref().unwrap().capacity, 2);
        assert!(!offering(&found.status, Some(0.096), 0, &["us-east-1a"]).available);
        assert!(!offering(&found.status, Some(0.096), 2, &["us-east-1b"]).available);
        let mut expiring = found.status.clone();
        expiring.state = Some("expiring".into());
        assert!(!offering(&expiring, Some(0.096), 2, &["us-east-1a"]).available);
    }

    #[test]
    fn launches_count_a_reservation_down_and_terminations_give_it_back() {
        let found = from_ec2(&ec2("default", None), Utc::now())
            .unwrap()
            .unwrap();
        let mut a = Availability::default();
        a.sync(std::slice::from_ref(&found));
        a.launched("cr-0a1");
        assert_eq!(a.count("cr-0a1"), 1);
        a.terminated("cr-0a1");
        assert_eq!(a.count("cr-0a1"), 2);
        a.exhausted("cr-0a1");
        assert_eq!(a.count("cr-0a1"), 0);
        assert_eq!(a.count("cr-unknown"), 0);
    }
}
