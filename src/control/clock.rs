//! Where the controller reads time. The control loop never calls `Utc::now()` itself, so
//! the same code runs at wall-clock time against a real cluster, accelerated for the demo
//! (`--speed`), and on a virtual clock that `simulate` advances as fast as the CPU allows.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// Wall-clock time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Time that moves only when told to; clones share one time. Millisecond resolution.
#[derive(Clone, Debug)]
pub struct VirtualClock(Arc<AtomicI64>);

impl VirtualClock {
    pub fn new(start: DateTime<Utc>) -> VirtualClock {
        VirtualClock(Arc::new(AtomicI64::new(start.timestamp_millis())))
    }

    /// Moves to `t`; the clock never goes backwards.
    pub fn set(&self, t: DateTime<Utc>) {
        self.0.fetch_max(t.timestamp_millis(), Ordering::SeqCst);
    }

    pub fn advance(&self, d: TimeDelta) {
        self.0.fetch_add(d.num_milliseconds(), Ordering::SeqCst);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.0.load(Ordering::SeqCst)).unwrap_or_default()
    }
}

/// Wall-clock time sped up `speed` times from a starting instant: the demo at `--speed`.
#[derive(Clone, Debug)]
pub struct ScaledClock {
    real_start: Instant,
    start: DateTime<Utc>,
    speed: f64,
}

impl ScaledClock {
    pub fn new(start: DateTime<Utc>, speed: f64) -> ScaledClock {
        ScaledClock {
            real_start: Instant::now(),
            start,
            speed: if speed.is_finite() && speed > 0.0 {
                speed
            } else {
                1.0
            },
        }
    }

    /// Simulated seconds per wall second.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// How long to sleep in real time until virtual time `t`.
    pub fn real_until(&self, t: DateTime<Utc>) -> std::time::Duration {
        let virtual_left = (t - self.now()).num_milliseconds().max(0) as f64;
        std::time::Duration::from_millis((virtual_left / self.speed) as u64)
    }
}

impl Clock for ScaledClock {
    /// Saturates at the end of representable time rather than overflowing, whatever
    /// the speed and however long the process runs.
    fn now(&self) -> DateTime<Utc> {
        let real = self.real_start.elapsed().as_secs_f64() * self.speed;
        TimeDelta::try_milliseconds((real * 1000.0) as i64)
            .and_then(|d| self.start.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--speed 1e15` panicked with "`DateTime + TimeDelta` overflowed" on the first
    /// tick; a clock far past the end of time reads as that end.
    #[test]
    fn a_scaled_clock_past_the_end_of_time_saturates() {
        let start = DateTime::from_timestamp(1_000_000, 0).unwrap();
        let c = ScaledClock::new(start, 1e15);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(c.now(), DateTime::<Utc>::MAX_UTC);
        assert_eq!(c.real_until(start), std::time::Duration::ZERO);
        let slow = ScaledClock::new(start, 1.0);
        assert!(slow.now() >= start && slow.now() < start + TimeDelta::seconds(60));
    }

    #[test]
    fn a_virtual_clock_moves_only_forward_and_clones_share_it() {
        let start = DateTime::from_timestamp(1_000_000, 0).unwrap();
        let c = VirtualClock::new(start);
        let other = c.clone();
        c.advance(TimeDelta::seconds(5));
        assert_eq!(other.now(), start + TimeDelta::seconds(5));
        c.set(start);
        assert_eq!(
            other.now(),
            start + TimeDelta::seconds(5),
            "never backwards"
        );
    }
}
