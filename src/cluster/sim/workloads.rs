//! The workload controllers the simulated cluster runs: Deployments (with replica
//! schedules such as diurnal curves), Jobs (pods that run for a while and succeed), and
//! PodDisruptionBudgets as the eviction API evaluates them.

use std::f64::consts::PI;

use chrono::{DateTime, TimeDelta, Utc};

use crate::engine::pod::{Phase, Pod};
use crate::engine::selector::Selector;

/// How many replicas a Deployment wants over time (offsets from the scenario start).
#[derive(Clone, Debug, PartialEq)]
pub enum Replicas {
    Fixed(u32),
    /// Piecewise constant: the last step at or before the offset applies; `initial`
    /// before the first.
    Steps {
        initial: u32,
        steps: Vec<(TimeDelta, u32)>,
    },
    /// A daily curve: `min + (max - min) * (1 + cos(2π (t - peak) / period)) / 2`,
    /// re-evaluated every `step` (a HorizontalPodAutoscaler does not move continuously).
    Diurnal {
        min: u32,
        max: u32,
        period: TimeDelta,
        peak: TimeDelta,
        step: TimeDelta,
    },
}

impl Replicas {
    /// The most replicas the schedule ever asks for.
    pub fn most(&self) -> u32 {
        match self {
            Replicas::Fixed(n) => *n,
            Replicas::Steps { initial, steps } => {
                steps.iter().map(|(_, n)| *n).fold(*initial, u32::max)
            }
            Replicas::Diurnal { min, max, .. } => (*min).max(*max),
        }
    }

    /// The replica count at `offset` since the start.
    pub fn at(&self, offset: TimeDelta) -> u32 {
        match self {
            Replicas::Fixed(n) => *n,
            Replicas::Steps { initial, steps } => steps
                .iter()
                .rev()
                .find(|(at, _)| *at <= offset)
                .map_or(*initial, |(_, n)| *n),
            Replicas::Diurnal {
                min,
                max,
                period,
                peak,
                step,
            } => {
                let step_ms = step.num_milliseconds().max(1);
                let t = offset.num_milliseconds().div_euclid(step_ms) * step_ms;
                let phase =
                    (t - peak.num_milliseconds()) as f64 / period.num_milliseconds().max(1) as f64;
                let level = (1.0 + (2.0 * PI * phase).cos()) / 2.0;
                let (lo, hi) = (*min.min(max), *max.max(min));
                lo + ((hi - lo) as f64 * level).round() as u32
            }
        }
    }

    /// The next offset after `offset` at which the count may change.
    pub fn next_change(&self, offset: TimeDelta) -> Option<TimeDelta> {
        match self {
            Replicas::Fixed(_) => None,
            Replicas::Steps { steps, .. } => {
                steps.iter().map(|(at, _)| *at).find(|at| *at > offset)
            }
            Replicas::Diurnal { step, .. } => {
                let step_ms = step.num_milliseconds().max(1);
                let next = (offset.num_milliseconds().div_euclid(step_ms) + 1) * step_ms;
                Some(TimeDelta::milliseconds(next))
            }
        }
    }
}

/// A Deployment: a template and how many copies of it should exist.
#[derive(Clone, Debug)]
pub struct Deployment {
    pub namespace: String,
    pub name: String,
    pub template: Pod,
    pub replicas: Replicas,
}

/// A Job: `completions` pods that each run for `run_for`, at most `parallelism` at once.
#[derive(Clone, Debug)]
pub struct Job {
    pub namespace: String,
    pub name: String,
    pub template: Pod,
    pub completions: u32,
    pub parallelism: u32,
    pub run_for: TimeDelta,
    pub succeeded: u32,
    /// Created at this offset from the scenario start.
    pub start: TimeDelta,
}

/// `minAvailable` / `maxUnavailable` as an absolute number or a percentage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IntOrPercent {
    Int(i32),
    Percent(i32),
}

impl IntOrPercent {
    /// Parses Kubernetes IntOrString: `3` or `"50%"`.
    pub fn parse(v: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString) -> Option<Self> {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        match v {
            IntOrString::Int(n) => Some(IntOrPercent::Int(*n)),
            IntOrString::String(s) => match s.strip_suffix('%') {
                Some(p) => p.trim().parse().ok().map(IntOrPercent::Percent),
                None => s.trim().parse().ok().map(IntOrPercent::Int),
            },
        }
    }

    /// The absolute value against `total`; percentages round up, as the disruption
    /// controller's `GetScaledValueFromIntOrPercent(.., true)` does.
    pub fn scaled(self, total: i32) -> i32 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => {
                ((i64::from(total) * i64::from(p) + 99).div_euclid(100)) as i32
            }
        }
    }
}

/// A PodDisruptionBudget's spec.
#[derive(Clone, Debug)]
pub struct PdbSpec {
    pub namespace: String,
    pub name: String,
    pub selector: Selector,
    pub min_available: Option<IntOrPercent>,
    pub max_unavailable: Option<IntOrPercent>,
}

impl PdbSpec {
    pub fn selects(&self, p: &Pod) -> bool {
        p.key.namespace == self.namespace && self.selector.matches(&p.labels)
    }

    /// `status.disruptionsAllowed` over the pods the PDB selects: healthy (bound and
    /// running) pods above what must stay available. Mirrors the disruption controller:
    /// expected pods are the selected pods that are not terminating or finished.
    pub fn disruptions_allowed<'a>(&self, pods: impl Iterator<Item = &'a Pod>) -> i32 {
        let mut counted = PdbCounts::default();
        for p in pods {
            counted.add(self.counts(p), true);
        }
        self.allowed(counted)
    }

    /// What `p` adds to the PDB's expected and healthy pods: the simulated cluster keeps
    /// the sums as pods change instead of walking every pod at each change.
    pub fn counts(&self, p: &Pod) -> PdbCounts {
        if !self.selects(p) || p.deleting.is_some() || p.is_terminal() {
            return PdbCounts::default();
        }
        PdbCounts {
            expected: 1,
            healthy: i32::from(p.node_name.is_some() && p.phase == Phase::Running),
        }
    }

    /// `status.disruptionsAllowed` for these counts of its pods.
    pub fn allowed(&self, counts: PdbCounts) -> i32 {
        let PdbCounts { expected, healthy } = counts;
        let desired_healthy = match (self.min_available, self.max_unavailable) {
            (Some(min), _) => min.scaled(expected),
            (None, Some(max)) => expected - max.scaled(expected),
            (None, None) => expected,
        };
        (healthy - desired_healthy).max(0)
    }
}

/// A PDB's selected pods that count: expected (not terminating or finished) and, of
/// those, healthy (bound and running).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PdbCounts {
    pub expected: i32,
    pub healthy: i32,
}

impl PdbCounts {
    /// Adds (`up`) or takes out `other`.
    pub fn add(&mut self, other: PdbCounts, up: bool) {
        let sign = if up { 1 } else { -1 };
        self.expected += sign * other.expected;
        self.healthy += sign * other.healthy;
    }
}

/// The offset of `t` from `start`.
pub fn offset(start: DateTime<Utc>, t: DateTime<Utc>) -> TimeDelta {
    t - start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diurnal_curve_peaks_at_its_peak_and_bottoms_half_a_period_later() {
        let r = Replicas::Diurnal {
            min: 10,
            max: 100,
            period: TimeDelta::hours(24),
            peak: TimeDelta::hours(14),
            step: TimeDelta::minutes(10),
        };
        assert_eq!(r.at(TimeDelta::hours(14)), 100);
        assert_eq!(r.at(TimeDelta::hours(2)), 10);
        assert_eq!(r.at(TimeDelta::hours(8)), 55);
        assert_eq!(
            r.next_change(TimeDelta::minutes(3)),
            Some(TimeDelta::minutes(10))
        );
    }

    #[test]
    fn steps_apply_from_their_offset() {
        let r = Replicas::Steps {
            initial: 3,
            steps: vec![(TimeDelta::minutes(1), 8), (TimeDelta::minutes(5), 1)],
        };
        assert_eq!(r.at(TimeDelta::seconds(59)), 3);
        assert_eq!(r.at(TimeDelta::minutes(1)), 8);
        assert_eq!(r.at(TimeDelta::hours(1)), 1);
        assert_eq!(
            r.next_change(TimeDelta::minutes(1)),
            Some(TimeDelta::minutes(5))
        );
        assert_eq!(r.next_change(TimeDelta::minutes(5)), None);
    }

    #[test]
    fn pdb_percentages_round_up_and_only_healthy_pods_count() {
        let pdb = PdbSpec {
            namespace: "default".into(),
            name: "web".into(),
            selector: Selector::Match(Vec::new()),
            min_available: Some(IntOrPercent::Percent(50)),
            max_unavailable: None,
        };
        let mut pods: Vec<Pod> = (0..3)
            .map(|i| {
                let mut p = Pod::new("default", &format!("p{i}"), Default::default());
                p.node_name = Some("n".into());
                p.phase = Phase::Running;
                p
            })
            .collect();
        // 3 expected, 2 must stay (50% of 3 rounded up), 3 healthy: 1 allowed.
        assert_eq!(pdb.disruptions_allowed(pods.iter()), 1);
        pods[0].node_name = None;
        pods[0].phase = Phase::Pending;
        assert_eq!(pdb.disruptions_allowed(pods.iter()), 0);
    }
}
