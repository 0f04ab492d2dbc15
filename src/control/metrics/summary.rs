//! Prometheus summaries, which `prometheus-client` does not offer: upstream reports
//! `karpenter_pods_startup_duration_seconds` and `karpenter_nodes_termination_duration_seconds`
//! as summaries with the quantiles 0, 0.5, 0.9, 0.99 and 1 (`metrics.SummaryObjectives` in
//! upstream's `pkg/metrics/constants.go`), and its performance dashboard reads them by
//! `quantile`. Quantiles are exact over the observations of the last 10 minutes (upstream's
//! summaries age observations out over the same window); `_sum` and `_count` cover every
//! observation.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};

/// The quantiles upstream's dashboards read.
pub const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];
/// How long an observation counts towards the quantiles.
pub const MAX_AGE: TimeDelta = TimeDelta::minutes(10);
/// At most this many recent observations per series are kept for the quantiles.
const MAX_SAMPLES: usize = 4096;

#[derive(Debug, Default)]
struct Series {
    recent: VecDeque<(DateTime<Utc>, f64)>,
    sum: f64,
    count: u64,
}

/// One summary family: series by their label values (in the order of `labels`).
#[derive(Clone, Debug)]
pub struct Summary {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    series: Arc<Mutex<BTreeMap<Vec<String>, Series>>>,
}

impl Summary {
    pub fn new(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Summary {
            name,
            help,
            labels,
            series: Arc::default(),
        }
    }

    /// Records one observation made at `at` (the controller's clock).
    pub fn observe(&self, values: &[&str], v: f64, at: DateTime<Utc>) {
        let key: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        let mut all = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let s = all.entry(key).or_default();
        s.sum += v;
        s.count += 1;
        s.recent.push_back((at, v));
        while s.recent.len() > MAX_SAMPLES
            || s.recent.front().is_some_and(|(t, _)| at - *t > MAX_AGE)
        {
            s.recent.pop_front();
        }
    }

    /// The family in the OpenMetrics text format (HELP, TYPE, quantiles, `_sum`,
    /// `_count`). A quantile with no recent observation is NaN, as upstream's.
    pub fn encode(&self, out: &mut String) {
        let all = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP {} {}.", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} summary", self.name);
        for (values, s) in all.iter() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .zip(values)
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let mut sorted: Vec<f64> = s.recent.iter().map(|(_, v)| *v).collect();
            sorted.sort_by(f64::total_cmp);
            for q in QUANTILES {
                let mut l = labels.clone();
                l.push(format!("quantile=\"{q}\""));
                let _ = writeln!(
                    out,
                    "{}{{{}}} {}",
                    self.name,
                    l.join(","),
                    number(quantile(&sorted, q))
                );
            }
            let braces = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", labels.join(","))
            };
            let _ = writeln!(out, "{}_sum{braces} {}", self.name, number(s.sum));
            let _ = writeln!(out, "{}_count{braces} {}", self.name, s.count);
        }
    }
}

/// The `q` quantile of sorted values (nearest rank); NaN when there are none.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// OpenMetrics label value escaping.
pub(super) fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_cover_the_last_ten_minutes_and_sum_and_count_everything() {
        let s = Summary::new("x_seconds", "X", &["nodepool"]);
        let t0 = DateTime::<Utc>::UNIX_EPOCH;
        s.observe(&["a"], 100.0, t0);
        for i in 1..=10 {
            s.observe(&["a"], i as f64, t0 + TimeDelta::minutes(20));
        }
        let mut out = String::new();
        s.encode(&mut out);
        assert!(out.contains("# TYPE x_seconds summary"), "{out}");
        // The 100 s observation is older than 10 minutes: out of the quantiles.
        assert!(
            out.contains("x_seconds{nodepool=\"a\",quantile=\"1\"} 10.0"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds{nodepool=\"a\",quantile=\"0\"} 1.0"),
            "{out}"
        );
        assert!(out.contains("x_seconds_sum{nodepool=\"a\"} 155.0"), "{out}");
        assert!(out.contains("x_seconds_count{nodepool=\"a\"} 11"), "{out}");
    }
}
