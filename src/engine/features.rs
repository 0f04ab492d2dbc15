//! Upstream Karpenter's settings that change what the controller decides
//! (`FEATURE_GATES`, `MIN_VALUES_POLICY`, `PREFERENCE_POLICY`, `BATCH_MAX_DURATION`,
//! `BATCH_IDLE_DURATION`), read the same way from the command line, the environment and
//! a scenario file (upstream `pkg/operator/options/options.go`), so the flags and
//! scenario files both read them here.

use chrono::TimeDelta;

use crate::engine::provisioning::{BATCH_IDLE, BATCH_MAX};
use crate::engine::scheduling::{MinValuesPolicy, PreferencePolicy};

/// The settings as text, wherever they were written; empty text is the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct SettingsText<'a> {
    pub feature_gates: &'a str,
    pub min_values_policy: &'a str,
    pub preference_policy: &'a str,
    pub batch_max_duration: &'a str,
    pub batch_idle_duration: &'a str,
}

/// The behaviour the settings switch on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Features {
    /// `SpotToSpotConsolidation`: a spot node may be replaced by a cheaper spot node.
    pub spot_to_spot: bool,
    /// `NodeRepair`: nodes unhealthy past their toleration are repaired (`engine::repair`).
    pub node_repair: bool,
    /// Split consolidation (ours, not an upstream setting): the least share of a node's
    /// price, in percent, a replacement by several cheaper nodes must save; `None` is
    /// off.
    pub split_percent: Option<f64>,
    pub min_values_policy: MinValuesPolicy,
    pub preference_policy: PreferencePolicy,
    /// A provisioning batch closes this long after the last pending pod arrived...
    pub batch_idle: TimeDelta,
    /// ...or this long after it opened, whichever comes first.
    pub batch_max: TimeDelta,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            spot_to_spot: false,
            node_repair: false,
            split_percent: None,
            min_values_policy: MinValuesPolicy::default(),
            preference_policy: PreferencePolicy::default(),
            batch_idle: BATCH_IDLE,
            batch_max: BATCH_MAX,
        }
    }
}

/// Upstream's gates that are accepted but change nothing here, so upstream's settings
/// carry over unchanged.
const INERT_GATES: [&str; 3] = ["ReservedCapacity", "NodeOverlay", "StaticCapacity"];

impl Features {
    /// Reads the gates (`Name=true,Other=false`; a bare name is true), the minValues
    /// policy (`Strict` or `BestEffort`), the preference policy (`Respect` or `Ignore`)
    /// and the batch windows (Go durations). The error names the setting that is wrong,
    /// for the caller to prefix with where it came from.
    pub fn parse(text: &SettingsText) -> Result<Features, (Setting, String)> {
        let mut f = Features::default();
        for gate in text
            .feature_gates
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
        {
            let (name, value) = gate.split_once('=').unwrap_or((gate, "true"));
            let (name, value) = (name.trim(), value.trim());
            let on = match value {
                "true" => true,
                "false" => false,
                v => {
                    return Err((
                        Setting::FeatureGates,
                        format!("{name}={v}: expected true or false"),
                    ));
                }
            };
            match name {
                "SpotToSpotConsolidation" => f.spot_to_spot = on,
                "NodeRepair" => f.node_repair = on,
                n if INERT_GATES.contains(&n) => {}
                other => {
                    return Err((
                        Setting::FeatureGates,
                        format!(
                            "unknown gate {other:?} (known: SpotToSpotConsolidation, NodeRepair, {})",
                            INERT_GATES.join(", ")
                        ),
                    ));
                }
            }
        }
        f.min_values_policy = match text.min_values_policy {
            "Strict" | "" => MinValuesPolicy::Strict,
            "BestEffort" => MinValuesPolicy::BestEffort,
            other => {
                return Err((
                    Setting::MinValuesPolicy,
                    format!("{other:?}: expected Strict or BestEffort"),
                ));
            }
        };
        f.preference_policy = match text.preference_policy {
            "Respect" | "" => PreferencePolicy::Respect,
            "Ignore" => PreferencePolicy::Ignore,
            other => {
                return Err((
                    Setting::PreferencePolicy,
                    format!("{other:?}: expected Respect or Ignore"),
                ));
            }
        };
        let window = |text: &str, default: TimeDelta, which: Setting| {
            if text.is_empty() {
                return Ok(default);
            }
            let d = crate::api::duration::GoDuration::parse(text)
                .ok()
                .and_then(|d| d.value())
                .and_then(|d| TimeDelta::from_std(d).ok())
                .filter(|d| *d > TimeDelta::zero() && *d <= TimeDelta::hours(1))
                .ok_or_else(|| {
                    (
                        which,
                        format!(
                            "{text:?}: expected a duration above 0s and at most 1h, as Go writes it (10s, 500ms)"
                        ),
                    )
                })?;
            Ok(d)
        };
        f.batch_max = window(
            text.batch_max_duration,
            BATCH_MAX,
            Setting::BatchMaxDuration,
        )?;
        f.batch_idle = window(
            text.batch_idle_duration,
            BATCH_IDLE,
            Setting::BatchIdleDuration,
        )?;
        Ok(f)
    }

    /// The settings in upstream's words (`FEATURE_GATES=... BATCH_MAX_DURATION=10s ...`),
    /// for the controller's first log line: what a Deployment's environment became.
    pub fn describe(&self) -> String {
        let go = |d: TimeDelta| crate::api::duration::format_go(d.to_std().unwrap_or_default());
        format!(
            "FEATURE_GATES=SpotToSpotConsolidation={},NodeRepair={} MIN_VALUES_POLICY={:?} \
             PREFERENCE_POLICY={:?} BATCH_MAX_DURATION={} BATCH_IDLE_DURATION={}",
            self.spot_to_spot,
            self.node_repair,
            self.min_values_policy,
            self.preference_policy,
            go(self.batch_max),
            go(self.batch_idle),
        )
    }

    /// How long a node nominated for pending pods is kept from disruption: twice the
    /// batch's maximum, at least 10 s (upstream `nominationWindow` in
    /// `pkg/controllers/state/statenode.go`).
    pub fn nomination_window(&self) -> TimeDelta {
        (self.batch_max * 2).max(TimeDelta::seconds(10))
    }
}

/// Checks a split consolidation share: a percentage above 0, at most 100.
pub fn split_percent(percent: f64) -> Result<f64, String> {
    if percent.is_finite() && percent > 0.0 && percent <= 100.0 {
        Ok(percent)
    } else {
        Err(format!(
            "{percent}: expected the share of a node's price a split must save, in percent (above 0, at most 100; e.g. 20)"
        ))
    }
}

/// Which setting a [`Features::parse`] error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    FeatureGates,
    MinValuesPolicy,
    PreferencePolicy,
    BatchMaxDuration,
    BatchIdleDuration,
}

impl Setting {
    /// The setting's names where users write it: its flag, upstream's environment
    /// variable, and its field in a scenario file, for errors that say where to look.
    pub fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Setting::FeatureGates => ("--feature-gates", "FEATURE_GATES", "spec.featureGates"),
            Setting::MinValuesPolicy => (
                "--min-values-policy",
                "MIN_VALUES_POLICY",
                "spec.minValuesPolicy",
            ),
            Setting::PreferencePolicy => (
                "--preference-policy",
                "PREFERENCE_POLICY",
                "spec.preferencePolicy",
            ),
            Setting::BatchMaxDuration => (
                "--batch-max-duration",
                "BATCH_MAX_DURATION",
                "spec.batchMaxDuration",
            ),
            Setting::BatchIdleDuration => (
                "--batch-idle-duration",
                "BATCH_IDLE_DURATION",
                "spec.batchIdleDuration",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_and_policy_read_as_upstream_writes_them() {
        let parse = |gates, min_values_policy| {
            Features::parse(&SettingsText {
                feature_gates: gates,
                min_values_policy,
                ..Default::default()
            })
        };
        let f = parse(
            "SpotToSpotConsolidation=true, NodeRepair=false",
            "BestEffort",
        )
        .unwrap();
        assert!(f.spot_to_spot);
        assert_eq!(f.min_values_policy, MinValuesPolicy::BestEffort);
        assert!(
            parse("SpotToSpotConsolidation", "Strict")
                .unwrap()
                .spot_to_spot
        );
        assert_eq!(parse("", "Strict").unwrap(), Features::default());
        let (which, why) = parse("Spot=yes", "Strict").unwrap_err();
        assert_eq!(which, Setting::FeatureGates);
        assert!(why.contains("Spot=yes: expected true or false"), "{why}");
        let (_, why) = parse("Bogus", "Strict").unwrap_err();
        assert!(why.contains("unknown gate \"Bogus\""), "{why}");
        let (which, _) = parse("", "Loose").unwrap_err();
        assert_eq!(which, Setting::MinValuesPolicy);
    }

    #[test]
    fn preference_policy_and_batch_windows_read_as_upstream_writes_them() {
        let f = Features::parse(&SettingsText {
            preference_policy: "Ignore",
            batch_max_duration: "30s",
            batch_idle_duration: "500ms",
            ..Default::default()
        })
        .unwrap();
        assert_eq!(f.preference_policy, PreferencePolicy::Ignore);
        assert_eq!(f.batch_max, TimeDelta::seconds(30));
        assert_eq!(f.batch_idle, TimeDelta::milliseconds(500));
        assert_eq!(f.nomination_window(), TimeDelta::seconds(60));
        assert_eq!(
            f.describe(),
            "FEATURE_GATES=SpotToSpotConsolidation=false,NodeRepair=false MIN_VALUES_POLICY=Strict \
             PREFERENCE_POLICY=Ignore BATCH_MAX_DURATION=30s BATCH_IDLE_DURATION=500ms"
        );
        let d = Features::default();
        assert_eq!((d.batch_idle, d.batch_max), (BATCH_IDLE, BATCH_MAX));
        assert_eq!(d.nomination_window(), TimeDelta::seconds(20));
        for (text, which) in [
            (
                SettingsText {
                    preference_policy: "ignore",
                    ..Default::default()
                },
                Setting::PreferencePolicy,
            ),
            (
                SettingsText {
                    batch_max_duration: "10",
                    ..Default::default()
                },
                Setting::BatchMaxDuration,
            ),
            (
                SettingsText {
                    batch_idle_duration: "0s",
                    ..Default::default()
                },
                Setting::BatchIdleDuration,
            ),
            (
                SettingsText {
                    batch_max_duration: "2h",
                    ..Default::default()
                },
                Setting::BatchMaxDuration,
            ),
        ] {
            assert_eq!(Features::parse(&text).unwrap_err().0, which, "{text:?}");
        }
    }
}
