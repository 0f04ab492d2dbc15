//! karpenter-tui's own per-NodePool settings, which upstream Karpenter does not have.
//!
//! They are annotations under `karpenter-tui.dev/` rather than spec fields so that the
//! same NodePool applies unchanged to upstream's CRD (whose schema rejects unknown fields)
//! and upstream ignores them. The engine reads them through the typed accessors here;
//! `validate` reports a value that does not parse, with the annotation as its path.

use std::str::FromStr;

use chrono_tz::Tz;

use super::nodepool::NodePool;

/// The IANA time zone (`Europe/Berlin`) in which the pool's budget schedules are read,
/// across daylight-saving changes. Upstream reads every schedule in UTC.
pub const BUDGET_TIMEZONE: &str = "karpenter-tui.dev/budget-timezone";

/// The least a consolidation must save, in USD per hour, for it to be proposed.
pub const MIN_SAVINGS_PER_HOUR: &str = "karpenter-tui.dev/min-savings-per-hour";

/// The least share (percent) of its candidates' price a consolidation must save for it to
/// be proposed.
pub const MIN_SAVINGS_PERCENT: &str = "karpenter-tui.dev/min-savings-percent";

/// When the pool's circuit breaker trips: `N/M` (N of the last M replacement NodeClaims
/// failed), or `off`. Default [`BreakerSettings::DEFAULT`].
pub const CIRCUIT_BREAKER: &str = "karpenter-tui.dev/circuit-breaker";

/// `"true"` on a NodePool, a NodeClaim or a Node: do not repair it (or any node of the
/// pool), however long it stays unhealthy. An operator's veto for when the health signal
/// itself is wrong (a monitoring agent reporting false faults during an incident).
pub const DO_NOT_REPAIR: &str = "karpenter-tui.dev/do-not-repair";

/// Whether the pool vetoes repair of its nodes.
pub fn do_not_repair(pool: &NodePool) -> Result<bool, SettingError> {
    match annotation(pool, DO_NOT_REPAIR) {
        None => Ok(false),
        Some(v) => match v.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(SettingError {
                annotation: DO_NOT_REPAIR,
                message: format!("{other:?} is not true or false"),
            }),
        },
    }
}

/// Whether a node's (or its NodeClaim's) annotations veto its repair. Anything but
/// `"true"` does not, as with `karpenter.sh/do-not-disrupt`.
pub fn node_vetoes_repair(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations.get(DO_NOT_REPAIR).is_some_and(|v| v == "true")
}

/// How many failed replacements, of how many recent ones, pause a pool's voluntary
/// disruption (kubernetes-sigs/karpenter#2497: a bad image rolled out by drift should
/// stop after a few failed nodes, not replace the whole pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerSettings {
    pub failures: usize,
    pub window: usize,
}

impl BreakerSettings {
    /// Three failures among the last five replacements.
    pub const DEFAULT: BreakerSettings = BreakerSettings {
        failures: 3,
        window: 5,
    };
    /// The longest window a pool may ask for.
    pub const MAX_WINDOW: usize = 100;
}

/// The pool's breaker; `None` when it is `off`.
pub fn circuit_breaker(pool: &NodePool) -> Result<Option<BreakerSettings>, SettingError> {
    let Some(text) = annotation(pool, CIRCUIT_BREAKER) else {
        return Ok(Some(BreakerSettings::DEFAULT));
    };
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let parsed = text.split_once('/').and_then(|(n, m)| {
        let (n, m) = (
            n.trim().parse::<usize>().ok()?,
            m.trim().parse::<usize>().ok()?,
        );
        (n >= 1 && n <= m && m <= BreakerSettings::MAX_WINDOW).then_some(BreakerSettings {
            failures: n,
            window: m,
        })
    });
    parsed.map(Some).ok_or_else(|| SettingError {
        annotation: CIRCUIT_BREAKER,
        message: format!(
            "{text:?} is not N/M (N failed of the last M replacements, 1 <= N <= M <= {}) or off",
            BreakerSettings::MAX_WINDOW
        ),
    })
}

/// A pool's setting whose value does not parse: which annotation and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    pub annotation: &'static str,
    pub message: String,
}

impl std::fmt::Display for SettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "annotation {}: {}", self.annotation, self.message)
    }
}

fn annotation<'a>(pool: &'a NodePool, key: &str) -> Option<&'a str> {
    pool.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(|v| v.trim())
}

/// The zone the pool's budget schedules are read in; `None` means UTC.
pub fn budget_timezone(pool: &NodePool) -> Result<Option<Tz>, SettingError> {
    let Some(text) = annotation(pool, BUDGET_TIMEZONE) else {
        return Ok(None);
    };
    Tz::from_str(text).map(Some).map_err(|_| SettingError {
        annotation: BUDGET_TIMEZONE,
        message: format!(
            "{text:?} is not an IANA time zone (expected a name such as Europe/Berlin or America/New_York)"
        ),
    })
}

/// The least a pool's consolidations must save to be proposed. Both parts apply when
/// both are set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MinSavings {
    /// USD per hour.
    pub per_hour: Option<f64>,
    /// Percent of the candidates' price.
    pub percent: Option<f64>,
}

impl MinSavings {
    pub fn is_set(&self) -> bool {
        self.per_hour.is_some() || self.percent.is_some()
    }

    /// The stricter of two thresholds, part by part: a move across pools must satisfy
    /// every pool it disrupts.
    pub fn strictest(self, other: MinSavings) -> MinSavings {
        let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        MinSavings {
            per_hour: max(self.per_hour, other.per_hour),
            percent: max(self.percent, other.percent),
        }
    }

    /// Whether saving `savings` USD/h out of the candidates' `price` USD/h is enough.
    pub fn admits(&self, savings: f64, price: f64) -> bool {
        let share = if price > 0.0 {
            savings / price * 100.0
        } else {
            0.0
        };
        // A rounding hair below the threshold still meets it.
        const EPS: f64 = 1e-9;
        self.per_hour.is_none_or(|m| savings + EPS >= m)
            && self.percent.is_none_or(|m| share + EPS >= m)
    }
}

/// The pool's minimum savings; an annotation that does not parse is an error (the engine
/// then proposes no consolidation in the pool and says why).
pub fn min_savings(pool: &NodePool) -> Result<MinSavings, SettingError> {
    Ok(MinSavings {
        per_hour: min_per_hour(pool)?,
        percent: min_percent(pool)?,
    })
}

fn min_per_hour(pool: &NodePool) -> Result<Option<f64>, SettingError> {
    number(pool, MIN_SAVINGS_PER_HOUR, 1e6, "USD per hour, e.g. 0.05")
}

fn min_percent(pool: &NodePool) -> Result<Option<f64>, SettingError> {
    number(
        pool,
        MIN_SAVINGS_PERCENT,
        100.0,
        "percent of the nodes' price, e.g. 20",
    )
}

/// A number from 0 to `max` (a trailing `%` is allowed), or nothing when unset.
fn number(
    pool: &NodePool,
    key: &'static str,
    max: f64,
    unit: &str,
) -> Result<Option<f64>, SettingError> {
    let Some(text) = annotation(pool, key) else {
        return Ok(None);
    };
    let digits = text.trim_end_matches('%').trim();
    match digits.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=max).contains(&v) => Ok(Some(v)),
        _ => Err(SettingError {
            annotation: key,
            message: format!("{text:?} is not a number from 0 to {max} ({unit})"),
        }),
    }
}

/// Every setting of the pool that does not parse, for `validate`.
pub fn problems(pool: &NodePool) -> Vec<SettingError> {
    [
        budget_timezone(pool).err(),
        min_per_hour(pool).err(),
        min_percent(pool).err(),
        circuit_breaker(pool).err(),
        do_not_repair(pool).err(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(annotations: &[(&str, &str)]) -> NodePool {
        let mut p = NodePool::unconstrained("p");
        p.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        p
    }

    #[test]
    fn a_zone_is_an_iana_name_and_a_typo_says_so() {
        assert_eq!(budget_timezone(&pool(&[])), Ok(None));
        assert_eq!(
            budget_timezone(&pool(&[(BUDGET_TIMEZONE, "Europe/Berlin")])),
            Ok(Some(chrono_tz::Europe::Berlin))
        );
        let e = budget_timezone(&pool(&[(BUDGET_TIMEZONE, "Europe/Berlín")])).unwrap_err();
        assert!(e.to_string().contains("budget-timezone"), "{e}");
        assert!(e.to_string().contains("Europe/Berlín"), "{e}");
    }

    #[test]
    fn minimum_savings_need_both_parts_and_the_strictest_pool_wins() {
        let m = min_savings(&pool(&[
            (MIN_SAVINGS_PER_HOUR, "0.05"),
            (MIN_SAVINGS_PERCENT, "20%"),
        ]))
        .unwrap();
        assert!(m.admits(0.05, 0.25), "exactly 20% and $0.05/h");
        assert!(!m.admits(0.04, 0.1), "40% but under $0.05/h");
        assert!(!m.admits(0.06, 1.0), "$0.06/h but 6%");
        let other = MinSavings {
            per_hour: None,
            percent: Some(50.0),
        };
        let both = m.strictest(other);
        assert_eq!(both.per_hour, Some(0.05));
        assert_eq!(both.percent, Some(50.0));
        assert!(!MinSavings::default().is_set());
        assert!(MinSavings::default().admits(0.0, 1.0));
    }

    #[test]
    fn the_breaker_is_n_of_m_or_off_with_a_default() {
        assert_eq!(
            circuit_breaker(&pool(&[])),
            Ok(Some(BreakerSettings::DEFAULT))
        );
        assert_eq!(
            circuit_breaker(&pool(&[(CIRCUIT_BREAKER, "1/2")])),
            Ok(Some(BreakerSettings {
                failures: 1,
                window: 2
            }))
        );
        assert_eq!(
            circuit_breaker(&pool(&[(CIRCUIT_BREAKER, "OFF")])),
            Ok(None)
        );
        for bad in ["3", "0/5", "6/5", "1/101", "three/five"] {
            let e = circuit_breaker(&pool(&[(CIRCUIT_BREAKER, bad)])).unwrap_err();
            assert!(e.message.contains("is not N/M"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_bad_value_is_reported() {
        let p = pool(&[
            (BUDGET_TIMEZONE, "CET+1"),
            (MIN_SAVINGS_PER_HOUR, "cheap"),
            (MIN_SAVINGS_PERCENT, "120"),
        ]);
        let found: Vec<&str> = problems(&p).iter().map(|e| e.annotation).collect();
        assert_eq!(
            found,
            [BUDGET_TIMEZONE, MIN_SAVINGS_PER_HOUR, MIN_SAVINGS_PERCENT]
        );
    }
}
