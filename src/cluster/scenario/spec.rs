//! The `Scenario` document's fields, as written in the file.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use serde::Deserialize;

use super::timeline::TimelineEntry;
use crate::api::duration::GoDuration;
use crate::api::nodeclaim::Taint;
use crate::cluster::sim::workloads::Replicas;

/// `spec` of a `karpenter-tui.dev/v1alpha1 Scenario`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioSpec {
    /// Seed of every random choice (`--seed` overrides it).
    pub seed: Option<u64>,
    /// How long `simulate` runs without `--until` (default 10m).
    pub duration: Option<String>,
    /// RFC 3339 virtual start time (default 2026-01-05T09:00:00Z, a Monday).
    pub start: Option<String>,
    pub cluster: Option<ClusterSpec>,
    pub cloud: Option<CloudSpec>,
    /// Approval policy rules, as `--approval` takes them (`auto`, `manual`,
    /// `Underutilized=manual`, `spot/Drifted=auto`).
    #[serde(default)]
    pub approval: Vec<String>,
    /// Upstream's `FEATURE_GATES`, as `--feature-gates` takes them
    /// (`SpotToSpotConsolidation=true`).
    pub feature_gates: Option<String>,
    /// Upstream's `MIN_VALUES_POLICY`: `Strict` (the default) or `BestEffort`.
    pub min_values_policy: Option<String>,
    /// Upstream's `PREFERENCE_POLICY`: `Respect` (the default) or `Ignore`.
    pub preference_policy: Option<String>,
    /// Upstream's `BATCH_MAX_DURATION` (default 10s).
    pub batch_max_duration: Option<String>,
    /// Upstream's `BATCH_IDLE_DURATION` (default 1s).
    pub batch_idle_duration: Option<String>,
    /// Split consolidation's share, in percent, as `--split-consolidation` takes it (not
    /// an upstream setting; off when absent).
    pub split_consolidation: Option<f64>,
    /// Replica schedules by Deployment name.
    #[serde(default)]
    pub replicas: BTreeMap<String, ReplicaSpec>,
    /// How long each Job's pods run, and when the Job is created.
    #[serde(default)]
    pub jobs: BTreeMap<String, JobRun>,
    #[serde(default)]
    pub timeline: Vec<TimelineEntry>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterSpec {
    pub registration_delay: Option<String>,
    pub ready_delay: Option<String>,
    pub startup_delay: Option<String>,
    /// How long the kube-scheduler takes to bind a pod it can place.
    pub bind_delay: Option<String>,
    /// How late watch events reach the controller.
    pub watch_latency: Option<String>,
    /// A taint every new node gets and never loses (nodes that never become usable).
    pub chaos_taint: Option<Taint>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudSpec {
    pub launch_latency: Option<String>,
    /// Only these instance types of the built-in catalog exist.
    #[serde(default)]
    pub instance_types: Vec<String>,
}

/// One Deployment's replica schedule: `steps` or `diurnal`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplicaSpec {
    pub steps: Option<Vec<Step>>,
    pub diurnal: Option<Diurnal>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    pub at: String,
    pub replicas: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Diurnal {
    pub min: u32,
    pub max: u32,
    /// Default 24h.
    pub period: Option<String>,
    /// Offset of the peak from the start (default 14h).
    pub peak: Option<String>,
    /// How often the count is re-evaluated (default 10m).
    pub step: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobRun {
    pub run_for: Option<String>,
    pub start: Option<String>,
}

/// Parses an optional Go duration ("90s", "5m", "1h30m"); "Never" is not a time here.
pub fn duration(text: Option<&str>) -> Result<Option<TimeDelta>, String> {
    let Some(text) = text else { return Ok(None) };
    let d = GoDuration::parse(text).map_err(|e| e.to_string())?;
    match d.value() {
        Some(v) => TimeDelta::from_std(v)
            .map(Some)
            .map_err(|_| format!("duration {text:?} is too long")),
        None => Err(format!(
            "expected a duration such as 90s or 5m, found {text:?}"
        )),
    }
}

/// A Monday morning, so budget schedules written for office hours have something to do.
pub fn default_start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 5, 9, 0, 0)
        .single()
        .unwrap_or_default()
}

impl ReplicaSpec {
    /// The schedule, or the field (relative to this entry) and what is wrong with it.
    pub fn to_replicas(&self) -> Result<Replicas, (String, String)> {
        match (&self.steps, &self.diurnal) {
            (Some(steps), None) => {
                let mut out = Vec::new();
                for (i, s) in steps.iter().enumerate() {
                    let at = duration(Some(&s.at))
                        .map_err(|m| (format!(".steps[{i}].at"), m))?
                        .unwrap_or_default();
                    if out.last().is_some_and(|(prev, _)| *prev > at) {
                        return Err((
                            format!(".steps[{i}].at"),
                            "steps must be in time order".into(),
                        ));
                    }
                    out.push((at, s.replicas));
                }
                let initial = out
                    .first()
                    .filter(|(at, _)| at.is_zero())
                    .map_or(0, |(_, n)| *n);
                Ok(Replicas::Steps {
                    initial,
                    steps: out,
                })
            }
            (None, Some(d)) => {
                let field = |name: &str, v: &Option<String>, default: TimeDelta| {
                    duration(v.as_deref())
                        .map(|d| d.unwrap_or(default))
                        .map_err(|m| (format!(".diurnal.{name}"), m))
                };
                let period = field("period", &d.period, TimeDelta::hours(24))?;
                if period <= TimeDelta::zero() {
                    return Err((".diurnal.period".into(), "must be longer than 0s".into()));
                }
                if d.min > d.max {
                    return Err((
                        ".diurnal.min".into(),
                        format!("min {} is above max {}", d.min, d.max),
                    ));
                }
                Ok(Replicas::Diurnal {
                    min: d.min,
                    max: d.max,
                    period,
                    peak: field("peak", &d.peak, TimeDelta::hours(14))?,
                    step: field("step", &d.step, TimeDelta::minutes(10))?
                        .max(TimeDelta::seconds(1)),
                })
            }
            (Some(_), Some(_)) => Err((String::new(), "give steps or diurnal, not both".into())),
            (None, None) => Err((String::new(), "give steps or diurnal".into())),
        }
    }
}
