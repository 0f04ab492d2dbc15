//! What-if: the question an operator asks ("the next 6 hours, with NodePool `default`'s
//! consolidateAfter at 10m?") and the answer's figures, side by side. Pure data: the
//! question is parsed here (the console's `:whatif` and the `whatif` subcommand read the
//! same words), the answer is rendered here (the console's popup and the subcommand's
//! table are the same lines). Running the two futures is the embedded world's job
//! (`crate::whatif`), since only it can fork a cluster.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use serde::Serialize;
use serde_json::{Map, Value};

/// How far ahead a what-if looks when the question does not say.
pub const DEFAULT_HORIZON: TimeDelta = TimeDelta::hours(6);

/// The longest horizon asked: a week of simulated time is minutes of CPU on a large
/// scenario, and the answer of a longer one would come after the operator stopped waiting.
pub const MAX_HORIZON: TimeDelta = TimeDelta::days(7);

/// A change to one NodePool, as a JSON merge patch of the whole object.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    pub nodepool: String,
    pub patch: Value,
    /// The words the operator typed for the patch, to show the answer under.
    pub text: String,
}

/// A what-if question.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub horizon: TimeDelta,
    pub edit: Edit,
}

/// The usage line, for every message that refuses a question.
pub const USAGE: &str = "whatif [DURATION] NODEPOOL FIELD=VALUE... (or a JSON merge patch), \
     e.g. whatif 6h default disruption.consolidateAfter=10m";

impl Query {
    /// Reads `[DURATION] NODEPOOL EDIT`: the horizon (a Go duration, default 6h), the
    /// NodePool, and the edit (see [`Edit::parse`]).
    pub fn parse(words: &str) -> Result<Query, String> {
        let words = words.trim();
        let (first, rest) = split_word(words);
        if first.is_empty() {
            return Err(format!("nothing to ask: {USAGE}"));
        }
        let duration = crate::api::duration::GoDuration::parse(first)
            .ok()
            .and_then(|d| d.value())
            .and_then(|d| TimeDelta::from_std(d).ok());
        let (horizon, words) = match duration {
            Some(d) => (d, rest),
            // A number followed by two words before the edit: it was meant as the
            // horizon.
            None if first.starts_with(|c: char| c.is_ascii_digit())
                && !split_word(rest).0.is_empty()
                && !is_edit(split_word(rest).0) =>
            {
                return Err(format!(
                    "{first:?} is not a duration (Go's syntax: 90m, 6h, 168h): {USAGE}"
                ));
            }
            None => (DEFAULT_HORIZON, words),
        };
        if horizon <= TimeDelta::zero() || horizon > MAX_HORIZON {
            return Err(format!(
                "a what-if looks ahead more than 0s and at most {}h, not {first}",
                MAX_HORIZON.num_hours()
            ));
        }
        let (nodepool, edit) = split_word(words);
        if nodepool.is_empty() || edit.is_empty() {
            return Err(format!("which NodePool, changed how? {USAGE}"));
        }
        Ok(Query {
            horizon,
            edit: Edit::parse(nodepool, edit)?,
        })
    }
}

/// Whether a word starts an edit: a pair or a JSON patch.
fn is_edit(word: &str) -> bool {
    word.contains('=') || word.starts_with('{')
}

/// The first whitespace-separated word and the rest (trimmed).
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, ""),
    }
}

impl Edit {
    /// An edit of `nodepool`: a JSON merge patch of the NodePool (`{"spec": ...}`, as
    /// `kubectl patch --type merge` takes it), or `FIELD=VALUE` pairs, each a dotted path
    /// under `spec` (`disruption.consolidateAfter=10m`, `limits.cpu=200`; a path starting
    /// with `spec.` or `metadata.` is taken as it is). A value that reads as JSON
    /// (numbers, `true`, `null` to remove, arrays, objects) is that; anything else is
    /// text.
    pub fn parse(nodepool: &str, text: &str) -> Result<Edit, String> {
        let text = text.trim();
        let patch = if text.starts_with('{') {
            let v: Value = serde_json::from_str(text)
                .map_err(|e| format!("the merge patch is not JSON: {e}"))?;
            v
        } else {
            let mut patch = Value::Object(Map::new());
            for pair in text.split_whitespace() {
                let (path, value) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("{pair:?} is not FIELD=VALUE: {USAGE}"))?;
                set_path(&mut patch, path, value)?;
            }
            patch
        };
        if !patch.is_object() || patch.as_object().is_some_and(Map::is_empty) {
            return Err(format!("the edit changes nothing: {USAGE}"));
        }
        Ok(Edit {
            nodepool: nodepool.to_string(),
            patch,
            text: text.to_string(),
        })
    }
}

/// Sets a dotted path (under `spec` unless it names `spec.` or `metadata.`) in a patch.
fn set_path(patch: &mut Value, path: &str, value: &str) -> Result<(), String> {
    let mut keys: Vec<&str> = path.split('.').collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(format!("{path:?}: an empty field name"));
    }
    if keys[0] != "spec" && keys[0] != "metadata" {
        keys.insert(0, "spec");
    }
    let value =
        serde_json::from_str::<Value>(value).unwrap_or_else(|_| Value::String(value.into()));
    let mut at = patch;
    let (last, parents) = keys.split_last().expect("at least spec and one field");
    for k in parents {
        let Value::Object(m) = at else {
            return Err(format!(
                "{path:?} sets a field inside a value set by another pair"
            ));
        };
        at = m
            .entry(k.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    let Value::Object(m) = at else {
        return Err(format!(
            "{path:?} sets a field inside a value set by another pair"
        ));
    };
    m.insert(last.to_string(), value);
    Ok(())
}

/// What one run did over the horizon: what it cost and how much it moved.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// USD spent on instances over the horizon (price × time, deleting nodes too).
    pub cost: f64,
    /// USD per hour of the nodes running at the end.
    pub cost_per_hour: f64,
    /// Nodes at the end (not deleting).
    pub nodes: usize,
    /// NodeClaims launched and NodeClaims whose termination finished.
    pub launched: usize,
    pub deleted: usize,
    /// Executed disruption decisions, per method.
    pub disruptions: BTreeMap<String, usize>,
    /// Pods evicted or deleted by node termination.
    pub evictions: usize,
    /// Pods waiting for a node, integrated over time (a pod pending for 30 minutes is
    /// half a pod-hour): the availability an edit trades for cost.
    pub pending_pod_hours: f64,
    /// The most pods pending at once, and at the end.
    pub peak_pending: usize,
    pub pending_at_end: usize,
}

impl Figures {
    /// Every executed disruption, whatever its method.
    pub fn disruption_count(&self) -> usize {
        self.disruptions.values().sum()
    }
}

/// The answer: the same world run twice from the same instant, once as it is and once
/// with the edit.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// Seconds from the scenario's start to the fork.
    pub from_seconds: f64,
    pub horizon_seconds: f64,
    pub nodepool: String,
    pub edit: String,
    pub unchanged: Figures,
    pub edited: Figures,
}

/// How a figure reads: money, a count or a fraction.
#[derive(Clone, Copy)]
enum Unit {
    Dollars,
    DollarsPerHour,
    Count,
    Hours,
}

impl Unit {
    fn show(self, v: f64) -> String {
        match self {
            Unit::Dollars => format!("${v:.2}"),
            Unit::DollarsPerHour => format!("${v:.4}/h"),
            Unit::Count => format!("{v:.0}"),
            Unit::Hours => format!("{v:.2}"),
        }
    }

    fn change(self, a: f64, b: f64) -> String {
        let d = b - a;
        let tiny = match self {
            Unit::Dollars | Unit::Hours => 0.005,
            Unit::DollarsPerHour => 0.000_05,
            Unit::Count => 0.5,
        };
        if d.abs() < tiny {
            return "same".into();
        }
        let sign = if d > 0.0 { "+" } else { "-" };
        let abs = match self {
            Unit::Dollars => format!("${:.2}", d.abs()),
            Unit::DollarsPerHour => format!("${:.4}/h", d.abs()),
            Unit::Count => format!("{:.0}", d.abs()),
            Unit::Hours => format!("{:.2}", d.abs()),
        };
        if matches!(self, Unit::Dollars | Unit::DollarsPerHour) && a.abs() > 1e-9 {
            format!("{sign}{abs} ({sign}{:.1}%)", (d.abs() / a.abs()) * 100.0)
        } else {
            format!("{sign}{abs}")
        }
    }
}

/// A duration as the console writes it ("6h", "1h30m", "45s").
pub fn span(seconds: f64) -> String {
    let s = seconds.round() as i64;
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if m > 0 {
        out += &format!("{m}m");
    }
    if sec > 0 || out.is_empty() {
        out += &format!("{sec}s");
    }
    out
}

impl Comparison {
    /// The title of the answer.
    pub fn title(&self) -> String {
        format!(
            "what-if: NodePool {}, the next {}",
            self.nodepool,
            span(self.horizon_seconds)
        )
    }

    /// The title and the lines, one per line of text: the console's popup and the
    /// `whatif` subcommand's table.
    pub fn text(&self) -> String {
        let mut text = self.title();
        for l in self.lines() {
            text.push('\n');
            text.push_str(&l);
        }
        text
    }

    /// The answer as text: what was asked, then one row per figure with both runs and
    /// the change. Section headings start with "── ".
    pub fn lines(&self) -> Vec<String> {
        let (a, b) = (&self.unchanged, &self.edited);
        let mut rows: Vec<(String, Unit, f64, f64)> = vec![
            (
                format!("cost over {}", span(self.horizon_seconds)),
                Unit::Dollars,
                a.cost,
                b.cost,
            ),
            (
                "cost at the end".into(),
                Unit::DollarsPerHour,
                a.cost_per_hour,
                b.cost_per_hour,
            ),
            (
                "nodes at the end".into(),
                Unit::Count,
                a.nodes as f64,
                b.nodes as f64,
            ),
            (
                "NodeClaims launched".into(),
                Unit::Count,
                a.launched as f64,
                b.launched as f64,
            ),
            (
                "NodeClaims deleted".into(),
                Unit::Count,
                a.deleted as f64,
                b.deleted as f64,
            ),
            (
                "disruptions".into(),
                Unit::Count,
                a.disruption_count() as f64,
                b.disruption_count() as f64,
            ),
        ];
        let methods: std::collections::BTreeSet<&String> =
            a.disruptions.keys().chain(b.disruptions.keys()).collect();
        for m in methods {
            let count = |f: &Figures| f.disruptions.get(m).copied().unwrap_or(0) as f64;
            rows.push((format!("  {m}"), Unit::Count, count(a), count(b)));
        }
        rows.extend([
            (
                "pods evicted".into(),
                Unit::Count,
                a.evictions as f64,
                b.evictions as f64,
            ),
            (
                "pending pod-hours".into(),
                Unit::Hours,
                a.pending_pod_hours,
                b.pending_pod_hours,
            ),
            (
                "most pods pending".into(),
                Unit::Count,
                a.peak_pending as f64,
                b.peak_pending as f64,
            ),
            (
                "pending at the end".into(),
                Unit::Count,
                a.pending_at_end as f64,
                b.pending_at_end as f64,
            ),
        ]);
        let mut out = vec![
            "── the question".to_string(),
            format!("NodePool {}: {}", self.nodepool, self.edit),
            format!(
                "from {} in, for {}: both runs from the same cluster, the controller \
                 restarted, every decision approved",
                span(self.from_seconds),
                span(self.horizon_seconds)
            ),
            String::new(),
            "── the answer".to_string(),
        ];
        let w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
        out.push(format!(
            "{:<w$} {:>12} {:>12}   {}",
            "", "unchanged", "edited", "change"
        ));
        for (name, unit, x, y) in rows {
            out.push(format!(
                "{name:<w$} {:>12} {:>12}   {}",
                unit.show(x),
                unit.show(y),
                unit.change(x, y)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_question_reads_its_horizon_pool_and_field_pairs_under_spec() {
        let q = Query::parse("2h web disruption.consolidateAfter=10m weight=5").unwrap();
        assert_eq!(q.horizon, TimeDelta::hours(2));
        assert_eq!(q.edit.nodepool, "web");
        assert_eq!(
            q.edit.patch,
            json!({"spec": {"disruption": {"consolidateAfter": "10m"}, "weight": 5}})
        );
        let q = Query::parse("web {\"spec\":{\"limits\":{\"cpu\":\"100\"}}}").unwrap();
        assert_eq!(q.horizon, DEFAULT_HORIZON);
        assert_eq!(q.edit.patch, json!({"spec": {"limits": {"cpu": "100"}}}));
        let q = Query::parse(
            "1h web metadata.labels.team=a spec.disruption.budgets=[{\"nodes\":\"0\"}]",
        )
        .unwrap();
        assert_eq!(
            q.edit.patch,
            json!({"metadata": {"labels": {"team": "a"}},
                   "spec": {"disruption": {"budgets": [{"nodes": "0"}]}}})
        );
    }

    #[test]
    fn a_question_it_cannot_answer_says_what_is_missing() {
        for (words, says) in [
            ("", "nothing to ask"),
            ("6h", "which NodePool"),
            ("6h web", "which NodePool"),
            ("200h web weight=1", "at most 168h"),
            ("8d web weight=1", "\"8d\" is not a duration"),
            ("web weight", "is not FIELD=VALUE"),
            ("web {\"spec\":", "not JSON"),
            ("web {}", "changes nothing"),
            ("web weight=1 weight.x=2", "inside a value"),
            ("web .x=1", "empty field name"),
        ] {
            let e = Query::parse(words).unwrap_err();
            assert!(e.contains(says), "{words:?}: {e}");
        }
    }

    #[test]
    fn the_answer_shows_both_runs_and_the_change_per_figure() {
        let a = Figures {
            cost: 10.0,
            cost_per_hour: 2.0,
            nodes: 5,
            launched: 2,
            deleted: 1,
            disruptions: [("drift".to_string(), 1)].into(),
            ..Figures::default()
        };
        let b = Figures {
            cost: 8.0,
            cost_per_hour: 1.5,
            nodes: 4,
            launched: 2,
            deleted: 3,
            disruptions: [("drift".to_string(), 1), ("single-node".to_string(), 2)].into(),
            pending_pod_hours: 0.25,
            ..Figures::default()
        };
        let c = Comparison {
            from_seconds: 70.0,
            horizon_seconds: 5400.0,
            nodepool: "web".into(),
            edit: "disruption.consolidateAfter=10m".into(),
            unchanged: a,
            edited: b,
        };
        assert_eq!(c.title(), "what-if: NodePool web, the next 1h30m");
        let text = c.lines().join("\n");
        for row in [
            "cost over 1h30m",
            "$10.00        $8.00   -$2.00 (-20.0%)",
            "$2.0000/h    $1.5000/h   -$0.5000/h (-25.0%)",
            "NodeClaims launched            2            2   same",
            "NodeClaims deleted             1            3   +2",
            "  single-node                  0            2   +2",
            "pending pod-hours           0.00         0.25   +0.25",
            "from 1m10s in, for 1h30m: both runs from the same cluster",
        ] {
            assert!(text.contains(row), "{row:?} missing from\n{text}");
        }
    }
}
