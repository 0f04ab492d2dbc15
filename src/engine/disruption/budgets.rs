//! Disruption budgets: how many of a NodePool's nodes may be voluntarily disrupted at once,
//! per reason, and when that changes.
//!
//! Mirrors upstream `NodePool.GetAllowedDisruptionsByReason` and
//! `BuildDisruptionBudgetMapping`: `nodes` is an integer or a percentage of the pool's
//! managed, initialized nodes (rounded up); a budget with `schedule` and `duration` is
//! active in `[hit, hit + duration)`; the allowed count for a reason is the minimum over
//! the active budgets that list it (or list no reasons); a reason no active budget covers
//! is unbounded; an unparseable schedule allows 0; nodes that are NotReady or already
//! being deleted are subtracted.
//!
//! Ours, beyond upstream: a pool's `karpenter-tui.dev/budget-timezone` annotation reads its
//! schedules in that zone's wall-clock time (`api::pool_settings`); a zone that does not
//! parse blocks like an unparseable schedule, on the scheduled budgets only.

use crate::engine::fast_hash::{FastMap, FastSet};

use chrono::{DateTime, TimeDelta, Utc};

use crate::api::nodepool::{Budget, DisruptionReason, NodePool};
use crate::api::pool_settings::{self, SettingError};
use crate::api::schedule::Schedule;
use crate::engine::state::ClusterState;
use chrono_tz::Tz;

/// One budget of a pool as it stands at a given time.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetWindow {
    /// Position in `spec.disruption.budgets`.
    pub index: usize,
    /// `nodes` as written ("10%", "0").
    pub nodes: String,
    /// What `nodes` comes to for the pool's current size.
    pub limit: usize,
    /// Reasons it limits; empty means all.
    pub reasons: Vec<DisruptionReason>,
    pub schedule: Option<String>,
    pub active: bool,
    /// For an active scheduled budget: when the current window closes.
    pub closes_at: Option<DateTime<Utc>>,
    /// For an inactive scheduled budget: when it next opens.
    pub opens_at: Option<DateTime<Utc>>,
    /// Why the budget blocks everything (invalid schedule or nodes value).
    pub error: Option<String>,
}

impl BudgetWindow {
    fn applies_to(&self, reason: DisruptionReason) -> bool {
        self.reasons.is_empty() || self.reasons.contains(&reason)
    }
}

/// What one reason may still disrupt in one pool.
#[derive(Clone, Debug, PartialEq)]
pub struct ReasonBudget {
    pub reason: DisruptionReason,
    /// The minimum over the active budgets that cover the reason; None = unbounded.
    pub limit: Option<usize>,
    /// `limit` minus the pool's disrupting nodes, floored at 0 (usize::MAX if unbounded).
    pub allowed: usize,
    /// When a scheduled budget covering this reason next opens or closes, which may change
    /// `allowed`.
    pub next_change: Option<DateTime<Utc>>,
}

/// A pool's budgets at one time: the console's budget view and the disruption pass read it.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolBudgets {
    pub nodepool: String,
    /// Managed, initialized nodes of the pool: what percentages are taken of.
    pub total: usize,
    /// Of those, NotReady, being deleted, in a command in flight or in a decision waiting
    /// for approval or validation: already counted against every budget.
    pub disrupting: usize,
    /// Of `disrupting`, the nodes of decisions that wait (for an operator or for
    /// validation): they hold budget as a command in flight does, so everything waiting
    /// can run at once.
    pub reserved: usize,
    /// Of `disrupting`, the nodes that only count because they are NotReady (no
    /// decision, no deletion): the repair budget does not count them, as they are what
    /// repair mends (upstream PR #3311 subtracts them for its Unhealthy budget too).
    pub not_ready: usize,
    pub windows: Vec<BudgetWindow>,
    /// The zone the schedules are read in (`karpenter-tui.dev/budget-timezone`); `None`
    /// is UTC, as upstream.
    pub timezone: Option<Tz>,
    /// One per reason, in `DisruptionReason::ALL` order.
    pub reasons: Vec<ReasonBudget>,
}

impl PoolBudgets {
    /// Evaluates every budget of the pool at `now`.
    pub fn evaluate(pool: &NodePool, total: usize, disrupting: usize, now: DateTime<Utc>) -> Self {
        Self::evaluate_counted(pool, total, disrupting, 0, now)
    }

    /// [`PoolBudgets::evaluate`], with `not_ready` of the `disrupting` nodes only
    /// NotReady (see [`PoolBudgets::not_ready`]).
    pub fn evaluate_counted(
        pool: &NodePool,
        total: usize,
        disrupting: usize,
        not_ready: usize,
        now: DateTime<Utc>,
    ) -> Self {
        let zone = pool_settings::budget_timezone(pool);
        let windows: Vec<BudgetWindow> = pool
            .spec
            .disruption
            .budgets
            .iter()
            .enumerate()
            .map(|(i, b)| window(i, b, total, now, &zone))
            .collect();
        let reasons = DisruptionReason::ALL
            .iter()
            .map(|&reason| {
                let limit = windows
                    .iter()
                    .filter(|w| w.active && w.applies_to(reason))
                    .map(|w| w.limit)
                    .min();
                let counted = if reason == DisruptionReason::Unhealthy {
                    disrupting.saturating_sub(not_ready)
                } else {
                    disrupting
                };
                let allowed = match limit {
                    Some(l) => l.saturating_sub(counted),
                    None => usize::MAX,
                };
                let next_change = windows
                    .iter()
                    .filter(|w| w.applies_to(reason))
                    .filter_map(|w| w.closes_at.or(w.opens_at))
                    .min();
                ReasonBudget {
                    reason,
                    limit,
                    allowed,
                    next_change,
                }
            })
            .collect();
        PoolBudgets {
            nodepool: pool.metadata.name.clone().unwrap_or_default(),
            total,
            disrupting,
            reserved: 0,
            not_ready,
            windows,
            timezone: zone.ok().flatten(),
            reasons,
        }
    }

    /// The budget for one reason.
    pub fn reason(&self, reason: DisruptionReason) -> &ReasonBudget {
        // `reasons` holds every reason, in ALL order.
        &self.reasons[DisruptionReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0)]
    }

    /// How many more nodes `reason` may disrupt now.
    pub fn allowed(&self, reason: DisruptionReason) -> usize {
        self.reason(reason).allowed
    }
}

/// A pool's node counts for its budgets.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    /// Managed, initialized nodes.
    total: usize,
    /// Of those, NotReady, deleting or held (`reserved`).
    disrupting: usize,
    /// Of `disrupting`, the ready reserved ones.
    reserved: usize,
    /// Of `disrupting`, the NotReady ones neither deleting nor reserved.
    not_ready: usize,
}

/// Counts per pool.
fn pool_counts<'a>(
    state: &'a ClusterState,
    reserved: &FastSet<String>,
) -> FastMap<&'a str, Counts> {
    let mut counts: FastMap<&str, Counts> = FastMap::default();
    for n in &state.nodes {
        if !n.initialized {
            continue;
        }
        let c = counts.entry(n.nodepool.as_str()).or_default();
        c.total += 1;
        if !n.ready || n.going_away() {
            c.disrupting += 1;
            if !n.going_away() && !reserved.contains(&n.nodeclaim) {
                c.not_ready += 1;
            }
        } else if reserved.contains(&n.nodeclaim) {
            c.disrupting += 1;
            c.reserved += 1;
        }
    }
    counts
}

/// Every pool's budgets at `now`, with the `reserved` NodeClaims counted as disrupting
/// (upstream `BuildDisruptionBudgetMapping`).
pub fn evaluate_budgets(
    state: &ClusterState,
    now: DateTime<Utc>,
    reserved: &FastSet<String>,
) -> Vec<PoolBudgets> {
    let counts = pool_counts(state, reserved);
    state
        .nodepools
        .iter()
        .map(|(name, pool)| {
            let c = counts.get(name.as_str()).copied().unwrap_or_default();
            let mut b =
                PoolBudgets::evaluate_counted(pool, c.total, c.disrupting, c.not_ready, now);
            b.reserved = c.reserved;
            b
        })
        .collect()
}

/// Scales `nodes` ("5" or "20%") against the pool size, rounding percentages up.
pub fn scaled_nodes(nodes: &str, total: usize) -> Result<usize, String> {
    let text = nodes.trim();
    if let Some(pct) = text.strip_suffix('%') {
        let p: usize = pct
            .parse()
            .map_err(|_| format!("nodes {nodes:?} is not a percentage"))?;
        if p > 100 {
            return Err(format!("nodes {nodes:?} is over 100%"));
        }
        Ok((total * p).div_ceil(100))
    } else {
        text.parse()
            .map_err(|_| format!("nodes {nodes:?} is not an integer or a percentage"))
    }
}

fn window(
    index: usize,
    b: &Budget,
    total: usize,
    now: DateTime<Utc>,
    zone: &Result<Option<Tz>, SettingError>,
) -> BudgetWindow {
    let mut w = BudgetWindow {
        index,
        nodes: b.nodes.clone(),
        limit: 0,
        reasons: b.reasons.clone(),
        schedule: b.schedule.clone(),
        active: true,
        closes_at: None,
        opens_at: None,
        error: None,
    };
    match scaled_nodes(&b.nodes, total) {
        Ok(n) => w.limit = n,
        Err(e) => w.error = Some(e),
    }
    if let Some(text) = &b.schedule {
        let duration = b
            .duration
            .as_ref()
            .and_then(|d| d.value())
            .and_then(|d| TimeDelta::from_std(d).ok())
            .unwrap_or_default();
        match (Schedule::parse(text), zone) {
            (Ok(s), Ok(zone)) => {
                let last = match zone {
                    None => s.last_at_or_before(now),
                    Some(z) => s.last_at_or_before_in(*z, now),
                };
                match last {
                    Some(hit) if now < hit + duration => {
                        w.active = true;
                        w.closes_at = Some(hit + duration);
                    }
                    _ => {
                        w.active = false;
                        w.opens_at = match zone {
                            None => s.next_after(now),
                            Some(z) => s.next_after_in(*z, now),
                        };
                    }
                }
            }
            (Err(e), _) => {
                // Upstream: an unparseable schedule makes the budget allow 0, always.
                w.error = Some(format!("schedule {text:?}: {e}"));
            }
            (Ok(_), Err(e)) => {
                // Which hours the schedule means is unknown: as an unparseable schedule.
                w.error = Some(e.to_string());
            }
        }
    }
    if w.error.is_some() {
        w.active = true;
        w.limit = 0;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::duration::GoDuration;
    use chrono::TimeZone;

    fn pool(budgets: Vec<Budget>) -> NodePool {
        let mut p = NodePool::unconstrained("default");
        p.spec.disruption.budgets = budgets;
        p
    }

    fn budget(nodes: &str) -> Budget {
        Budget {
            nodes: nodes.into(),
            schedule: None,
            duration: None,
            reasons: vec![],
        }
    }

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, h, m, 0).unwrap()
    }

    #[test]
    fn percentages_round_up_and_disrupting_nodes_are_subtracted() {
        let p = pool(vec![budget("20%")]);
        let b = PoolBudgets::evaluate(&p, 19, 0, at(12, 0));
        assert_eq!(b.allowed(DisruptionReason::Underutilized), 4);
        let b = PoolBudgets::evaluate(&p, 19, 2, at(12, 0));
        assert_eq!(b.allowed(DisruptionReason::Empty), 2);
        let b = PoolBudgets::evaluate(&p, 10, 0, at(12, 0));
        assert_eq!(b.allowed(DisruptionReason::Empty), 2);
        let b = PoolBudgets::evaluate(&p, 10, 7, at(12, 0));
        assert_eq!(b.allowed(DisruptionReason::Empty), 0, "floored at 0");
    }

    #[test]
    fn a_scheduled_budget_is_active_from_its_hit_for_its_duration() {
        let mut nightly = budget("0");
        nightly.schedule = Some("@daily".into());
        nightly.duration = Some(GoDuration::parse("10m").unwrap());
        nightly.reasons = vec![DisruptionReason::Underutilized];
        let p = pool(vec![budget("10%"), nightly]);

        let b = PoolBudgets::evaluate(&p, 30, 0, at(0, 5));
        assert_eq!(b.allowed(DisruptionReason::Underutilized), 0);
        assert_eq!(b.allowed(DisruptionReason::Empty), 3);
        assert_eq!(b.allowed(DisruptionReason::Drifted), 3);
        assert_eq!(b.windows[1].closes_at, Some(at(0, 10)));
        assert_eq!(
            b.reason(DisruptionReason::Underutilized).next_change,
            Some(at(0, 10))
        );

        let b = PoolBudgets::evaluate(&p, 30, 0, at(0, 10));
        assert!(!b.windows[1].active);
        assert_eq!(b.allowed(DisruptionReason::Underutilized), 3);
        assert_eq!(
            b.windows[1].opens_at,
            Some(Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap())
        );
    }

    #[test]
    fn a_reason_no_budget_covers_is_unbounded() {
        let mut drift_only = budget("1");
        drift_only.reasons = vec![DisruptionReason::Drifted];
        let p = pool(vec![drift_only]);
        let b = PoolBudgets::evaluate(&p, 50, 3, at(12, 0));
        assert_eq!(b.allowed(DisruptionReason::Drifted), 0);
        assert_eq!(b.allowed(DisruptionReason::Empty), usize::MAX);
        assert_eq!(b.reason(DisruptionReason::Empty).limit, None);
    }

    #[test]
    fn an_invalid_schedule_allows_nothing_and_says_why() {
        let mut bad = budget("100%");
        bad.schedule = Some("61 * * * *".into());
        bad.duration = Some(GoDuration::parse("1h").unwrap());
        let p = pool(vec![bad]);
        let b = PoolBudgets::evaluate(&p, 10, 0, at(12, 0));
        assert_eq!(b.allowed(DisruptionReason::Empty), 0);
        assert!(
            b.windows[0]
                .error
                .as_deref()
                .unwrap()
                .contains("61 * * * *")
        );
    }

    #[test]
    fn a_pool_zone_moves_its_windows_with_daylight_saving_and_a_bad_zone_blocks_them() {
        let mut office = budget("0");
        office.schedule = Some("0 9 * * 1-5".into());
        office.duration = Some(GoDuration::parse("8h").unwrap());
        let mut p = pool(vec![budget("100%"), office]);
        p.metadata.annotations = Some(
            [(
                pool_settings::BUDGET_TIMEZONE.to_string(),
                "Europe/Berlin".to_string(),
            )]
            .into(),
        );
        let utc = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        // Friday before the change (CET): 07:30 UTC is 08:30 in Berlin.
        let b = PoolBudgets::evaluate(&p, 10, 0, utc("2026-03-27T07:30:00Z"));
        assert_eq!(b.timezone, Some(chrono_tz::Europe::Berlin));
        assert_eq!(b.allowed(DisruptionReason::Drifted), 10);
        assert_eq!(b.windows[1].opens_at, Some(utc("2026-03-27T08:00:00Z")));
        // Monday after the change (CEST): 07:30 UTC is 09:30, inside 09:00-17:00.
        let b = PoolBudgets::evaluate(&p, 10, 0, utc("2026-03-30T07:30:00Z"));
        assert_eq!(b.allowed(DisruptionReason::Drifted), 0);
        assert_eq!(b.windows[1].closes_at, Some(utc("2026-03-30T15:00:00Z")));

        p.metadata.annotations = Some(
            [(
                pool_settings::BUDGET_TIMEZONE.to_string(),
                "Berlin".to_string(),
            )]
            .into(),
        );
        let b = PoolBudgets::evaluate(&p, 10, 0, utc("2026-03-28T12:00:00Z"));
        assert_eq!(
            b.allowed(DisruptionReason::Drifted),
            0,
            "a bad zone allows 0"
        );
        assert!(
            b.windows[0].error.is_none(),
            "unscheduled budgets are unaffected"
        );
        let e = b.windows[1].error.as_deref().unwrap();
        assert!(
            e.contains("budget-timezone") && e.contains("\"Berlin\""),
            "{e}"
        );
    }

    #[test]
    fn the_most_restrictive_active_budget_wins() {
        let p = pool(vec![budget("50%"), budget("2"), budget("30%")]);
        let b = PoolBudgets::evaluate(&p, 10, 0, at(12, 0));
        assert_eq!(b.allowed(DisruptionReason::Underutilized), 2);
    }
}
