//! The last hour at one sample per minute of cluster time: cost per hour, nodes by
//! NodePool, pending pods and disruptions started. The overview draws its graphs from
//! it. The controller records a reading each time it publishes a snapshot; readings in
//! the same minute are folded into that minute's sample, minutes nothing was published
//! in are carried forward, and only the last [`WINDOW_MINUTES`] are kept.
//!
//! It rides in every [`Snapshot`](super::Snapshot), so cloning it must be cheap: the
//! closed minutes sit behind an `Arc` that changes once a minute (copy-on-write), and
//! only the open minute is copied with each snapshot.

use std::collections::VecDeque;
use std::sync::Arc;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

/// How many minutes the graphs look back.
pub const WINDOW_MINUTES: usize = 60;

/// One minute of the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// The start of the minute it covers (cluster time).
    pub minute: DateTime<Utc>,
    /// USD per hour of every node, as last seen in the minute.
    pub cost_per_hour: f64,
    /// Nodes (not being deleted) per NodePool, by pool name, as last seen in the minute.
    pub nodes: Vec<(String, usize)>,
    /// The most pods seen pending at once in the minute: a burst is not hidden by the
    /// minute's last reading.
    pub pending_pods: usize,
    /// Disruption commands that started executing in the minute.
    pub disruptions: usize,
}

impl Sample {
    /// All nodes of the minute, whatever their pool.
    pub fn total_nodes(&self) -> usize {
        self.nodes.iter().map(|(_, n)| n).sum()
    }

    /// Nodes of one pool in the minute (0 when it had none).
    pub fn pool_nodes(&self, pool: &str) -> usize {
        self.nodes
            .iter()
            .find(|(p, _)| p == pool)
            .map_or(0, |(_, n)| *n)
    }
}

/// What the controller sees at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    pub cost_per_hour: f64,
    /// Nodes per pool, sorted by pool name.
    pub nodes: Vec<(String, usize)>,
    pub pending_pods: usize,
    /// Commands that started since the previous reading.
    pub started: usize,
}

/// The ring buffer: at most [`WINDOW_MINUTES`] samples, oldest first, one per minute.
#[derive(Clone, Debug, Default)]
pub struct Trends {
    /// Minutes that are over, oldest first (at most `WINDOW_MINUTES - 1`).
    closed: Arc<VecDeque<Sample>>,
    /// The minute readings go into now.
    open: Option<Sample>,
    /// The last reading's pending pods: what a minute with no reading carries forward.
    last_pending: usize,
}

/// The start of the minute `at` falls in.
pub fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(at)
}

impl Trends {
    /// Folds a reading taken at `at` into its minute, closing the minutes before it.
    pub fn record(&mut self, at: DateTime<Utc>, r: Reading) {
        let minute = minute_of(at);
        let pending = r.pending_pods;
        match self.open.take() {
            // Same minute (or a clock that stepped back): the open minute takes it.
            Some(mut open) if minute <= open.minute => {
                open.cost_per_hour = r.cost_per_hour;
                open.nodes = r.nodes;
                open.pending_pods = open.pending_pods.max(r.pending_pods);
                open.disruptions += r.started;
                self.open = Some(open);
            }
            Some(open) => {
                let closed = Arc::make_mut(&mut self.closed);
                // Minutes without a reading looked like the last one, with nothing
                // started; only the window's worth of them is kept.
                let mut carried = Sample {
                    disruptions: 0,
                    pending_pods: self.last_pending,
                    ..open.clone()
                };
                let window = TimeDelta::minutes(WINDOW_MINUTES as i64);
                let mut m = (open.minute + TimeDelta::minutes(1)).max(minute - window);
                closed.push_back(open);
                while m < minute {
                    carried.minute = m;
                    closed.push_back(carried.clone());
                    m += TimeDelta::minutes(1);
                }
                while closed.len() >= WINDOW_MINUTES {
                    closed.pop_front();
                }
                self.open = Some(Sample::from_reading(minute, r));
            }
            None => self.open = Some(Sample::from_reading(minute, r)),
        }
        self.last_pending = pending;
    }

    /// Every sample, oldest first, the open minute last.
    pub fn samples(&self) -> impl DoubleEndedIterator<Item = &Sample> + Clone {
        self.closed.iter().chain(self.open.iter())
    }

    /// How many minutes it holds (at most [`WINDOW_MINUTES`]).
    pub fn len(&self) -> usize {
        self.closed.len() + usize::from(self.open.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_none()
    }

    /// The open minute.
    pub fn latest(&self) -> Option<&Sample> {
        self.open.as_ref()
    }
}

impl Sample {
    fn from_reading(minute: DateTime<Utc>, r: Reading) -> Sample {
        Sample {
            minute,
            cost_per_hour: r.cost_per_hour,
            nodes: r.nodes,
            pending_pods: r.pending_pods,
            disruptions: r.started,
        }
    }
}

/// The commands already counted as started, so each counts once however many snapshots
/// show it in flight. Bounded: only the latest ids are remembered.
#[derive(Clone, Debug, Default)]
pub struct SeenCommands {
    ids: VecDeque<u64>,
    primed: bool,
}

/// How many command ids `SeenCommands` remembers: far more than run in an hour.
const SEEN_KEPT: usize = 1024;

impl SeenCommands {
    /// How many of `ids` (commands in flight or finished) were not seen before. The
    /// first call only learns them: what a restarted or attaching controller finds in
    /// flight did not start in this minute.
    pub fn count_new(&mut self, ids: impl IntoIterator<Item = u64>) -> usize {
        let mut new = 0;
        for id in ids {
            if !self.ids.contains(&id) {
                self.ids.push_back(id);
                new += 1;
            }
        }
        while self.ids.len() > SEEN_KEPT {
            self.ids.pop_front();
        }
        if !self.primed {
            self.primed = true;
            return 0;
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_767_600_000 + secs, 0).unwrap()
    }

    fn reading(cost: f64, pending: usize, started: usize) -> Reading {
        Reading {
            cost_per_hour: cost,
            nodes: vec![("general".into(), 3)],
            pending_pods: pending,
            started,
        }
    }

    #[test]
    fn one_sample_per_minute_and_never_more_than_an_hour() {
        let mut t = Trends::default();
        // Three hours of readings every 10 s.
        for i in 0..(3 * 360) {
            t.record(at(i * 10), reading(i as f64, 0, 0));
        }
        assert_eq!(t.len(), WINDOW_MINUTES);
        let minutes: Vec<DateTime<Utc>> = t.samples().map(|s| s.minute).collect();
        for w in minutes.windows(2) {
            assert_eq!(w[1] - w[0], TimeDelta::minutes(1), "one sample per minute");
        }
        assert_eq!(minutes.last(), Some(&minute_of(at(3 * 3600 - 10))));
        // A minute's cost is its last reading.
        assert_eq!(t.latest().unwrap().cost_per_hour, (3 * 360 - 1) as f64);
    }

    #[test]
    fn a_minute_keeps_its_peak_pending_and_sums_what_started() {
        let mut t = Trends::default();
        let base = minute_of(at(0)) + TimeDelta::minutes(1);
        t.record(base, reading(1.0, 2, 1));
        t.record(base + TimeDelta::seconds(20), reading(1.5, 9, 2));
        t.record(base + TimeDelta::seconds(40), reading(2.0, 4, 0));
        let s = t.latest().unwrap();
        assert_eq!(
            (s.cost_per_hour, s.pending_pods, s.disruptions),
            (2.0, 9, 3)
        );
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn quiet_minutes_are_carried_forward_with_nothing_started() {
        let mut t = Trends::default();
        let base = minute_of(at(0));
        t.record(base, reading(1.0, 5, 2));
        t.record(base + TimeDelta::minutes(4), reading(3.0, 0, 1));
        let got: Vec<(i64, f64, usize, usize)> = t
            .samples()
            .map(|s| {
                (
                    (s.minute - base).num_minutes(),
                    s.cost_per_hour,
                    s.pending_pods,
                    s.disruptions,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, 1.0, 5, 2),
                (1, 1.0, 5, 0),
                (2, 1.0, 5, 0),
                (3, 1.0, 5, 0),
                (4, 3.0, 0, 1)
            ]
        );
        // A day of silence still leaves one hour, ending now.
        t.record(base + TimeDelta::days(1), reading(4.0, 0, 0));
        assert_eq!(t.len(), WINDOW_MINUTES);
        let minutes: Vec<DateTime<Utc>> = t.samples().map(|s| s.minute).collect();
        for w in minutes.windows(2) {
            assert_eq!(w[1] - w[0], TimeDelta::minutes(1));
        }
        assert_eq!(*minutes.last().unwrap(), base + TimeDelta::days(1));
    }

    #[test]
    fn a_command_counts_once_as_started() {
        let mut seen = SeenCommands::default();
        assert_eq!(seen.count_new([7]), 0, "found in flight at start: not new");
        assert_eq!(seen.count_new([7, 8]), 1);
        assert_eq!(seen.count_new([7, 8]), 0);
        assert_eq!(seen.count_new([8, 9, 10]), 2);
    }

    #[test]
    fn cloning_shares_the_closed_minutes() {
        let mut t = Trends::default();
        for i in 0..30 {
            t.record(at(i * 60), reading(1.0, 0, 0));
        }
        let copy = t.clone();
        assert!(Arc::ptr_eq(&t.closed, &copy.closed));
    }
}
