//! Cron schedules of disruption budgets, read exactly as upstream Karpenter reads them.
//!
//! Upstream parses `budgets[].schedule` with robfig/cron's standard parser after prefixing
//! `TZ=UTC`: five fields (minute hour day-of-month month day-of-week) or one of the
//! descriptors `@yearly @annually @monthly @weekly @daily @midnight @hourly`, always in UTC.
//! Ours reads them in UTC too, unless the NodePool names a zone in
//! `karpenter-tui.dev/budget-timezone` (`api::pool_settings`): then the fields are that
//! zone's wall-clock time, across daylight-saving changes (`*_in` methods).
//!
//! This is a small hand-written parser rather than the `croner` crate because croner's
//! dialect differs from robfig's in ways a user would notice: it has no `@midnight`; it
//! accepts seconds and year fields and the `L`, `W` and `#` extensions (robfig rejects them,
//! so upstream cannot evaluate such a budget); it takes 7 for Sunday (robfig's day of
//! week is 0-6); it substitutes names such as MON in any field; and it treats day-of-month
//! or day-of-week as unrestricted only when written literally as `*`, whereas robfig also
//! treats `*/1` and lists containing `*` that way, which decides between AND and OR
//! semantics when both day fields are given.

use std::fmt;

use chrono::offset::LocalResult;
use chrono::{
    DateTime, Datelike, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc,
};
use chrono_tz::Tz;

/// How many years a search for the next or previous hit may span. The rarest satisfiable
/// schedule is a leap day, whose hits can be eight years apart (2096-02-29, 2104-02-29);
/// schedules that can never fire (`0 0 30 2 *`) give up after this horizon.
const SEARCH_YEARS: i32 = 9;

/// A budget schedule parsed once, so budget evaluation on every disruption poll is only
/// bit tests; see the module docs for the accepted syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    text: String,
    minutes: u64,
    hours: u64,
    days_of_month: u64,
    months: u64,
    days_of_week: u64,
    /// Day-of-month or day-of-week written as `*` (or `?`, or a `*` range with step 1):
    /// robfig then requires both day fields to match; otherwise either one suffices.
    day_star: bool,
}

/// Why a schedule did not parse. Messages name the field and what it accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("empty schedule (expected five cron fields such as \"0 9 * * 1-5\", or @daily)")]
    Empty,
    #[error(
        "a {0} prefix is not accepted (upstream evaluates budget schedules in UTC): remove it and name the zone in the NodePool annotation karpenter-tui.dev/budget-timezone"
    )]
    TimeZone(String),
    #[error(
        "unknown descriptor {0:?} (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)"
    )]
    UnknownDescriptor(String),
    #[error("expected exactly 5 fields (minute hour day-of-month month day-of-week), found {0}")]
    FieldCount(usize),
    #[error("{field} field {text:?}: {why}")]
    Field {
        field: &'static str,
        text: String,
        why: String,
    },
}

/// One cron field's name, bounds and (for month and day of week) its three-letter names.
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// Bits `lo..=hi` of a field mask.
fn span(lo: u32, hi: u32) -> u64 {
    (lo..=hi).fold(0, |bits, i| bits | (1 << i))
}

/// The lowest set bit at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let m = mask & (u64::MAX << from);
    (m != 0).then_some(m.trailing_zeros())
}

/// The highest set bit at or below `from`.
fn prev_bit(mask: u64, from: u32) -> Option<u32> {
    let m = if from >= 63 {
        mask
    } else {
        mask & ((1u64 << (from + 1)) - 1)
    };
    (m != 0).then(|| 63 - m.leading_zeros())
}

fn has_bit(mask: u64, i: u32) -> bool {
    i < 64 && (mask & (1 << i)) != 0
}

impl FieldSpec {
    fn error(&self, text: &str, why: impl Into<String>) -> ScheduleError {
        ScheduleError::Field {
            field: self.name,
            text: text.to_string(),
            why: why.into(),
        }
    }

    /// A number or (case-insensitive) name within this field.
    fn value(&self, field: &str, s: &str) -> Result<u32, ScheduleError> {
        if let Some(i) = self.names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            // Names are listed from the field's minimum upwards; the list is at most 12 long.
            return Ok(self.min + i as u32);
        }
        let expected = || {
            let names = match self.names.first().zip(self.names.last()) {
                Some((a, b)) => format!(" or a name {}-{}", a.to_uppercase(), b.to_uppercase()),
                None => String::new(),
            };
            format!(
                "{s:?} is not a number from {} to {}{names}",
                self.min, self.max
            )
        };
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.error(field, expected()));
        }
        match s.parse::<u32>() {
            Ok(v) if (self.min..=self.max).contains(&v) => Ok(v),
            _ => Err(self.error(field, expected())),
        }
    }

    /// Parses a comma-separated field into its bit mask and whether it counts as `*`.
    fn parse(&self, field: &str) -> Result<(u64, bool), ScheduleError> {
        let mut bits = 0;
        let mut star = false;
        for part in field.split(',') {
            if part.is_empty() {
                return Err(self.error(field, "empty list item"));
            }
            let (b, s) = self.parse_range(field, part)?;
            bits |= b;
            star |= s;
        }
        Ok((bits, star))
    }

    /// `*`, `?`, `N`, `N-M`, each optionally followed by `/step` (`N/step` means N-max).
    fn parse_range(&self, field: &str, part: &str) -> Result<(u64, bool), ScheduleError> {
        let (range, step) = match part.split_once('/') {
            Some((_, step)) if step.contains('/') => {
                return Err(self.error(field, "too many slashes"));
            }
            Some((range, step)) => (range, Some(step)),
            None => (part, None),
        };
        let (mut lo, mut hi, single, mut star) = match range {
            "*" | "?" => (self.min, self.max, false, true),
            _ => match range.split_once('-') {
                Some((_, b)) if b.contains('-') => {
                    return Err(self.error(field, "too many hyphens"));
                }
                Some((a, b)) => (self.value(field, a)?, self.value(field, b)?, false, false),
                None => {
                    let v = self.value(field, range)?;
                    (v, v, true, false)
                }
            },
        };
        let step = match step {
            None => 1,
            Some(s) => {
                let n = s
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0 && s.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| {
                        self.error(field, format!("step {s:?} is not a positive number"))
                    })?;
                if single {
                    hi = self.max;
                }
                if n > 1 {
                    // robfig: a stepped `*` no longer counts as unrestricted.
                    star = false;
                }
                n
            }
        };
        if lo > hi {
            return Err(self.error(
                field,
                format!("range {lo}-{hi} runs backwards (ranges do not wrap around)"),
            ));
        }
        let mut bits = 0;
        while lo <= hi {
            bits |= 1 << lo;
            lo = lo.saturating_add(step);
        }
        Ok((bits, star))
    }
}

impl Schedule {
    /// Parses a budget schedule the way upstream's `cron.ParseStandard` does (in UTC).
    pub fn parse(s: &str) -> Result<Schedule, ScheduleError> {
        let text = s.trim();
        if text.is_empty() {
            return Err(ScheduleError::Empty);
        }
        if let Some((prefix, _)) = text.split_once('=')
            && (prefix == "TZ" || prefix == "CRON_TZ")
        {
            return Err(ScheduleError::TimeZone(format!("{prefix}=")));
        }
        if text.starts_with('@') {
            return Self::descriptor(text);
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            return Err(ScheduleError::FieldCount(fields.len()));
        };
        let (minutes, _) = MINUTE.parse(minute)?;
        let (hours, _) = HOUR.parse(hour)?;
        let (days_of_month, dom_star) = DAY_OF_MONTH.parse(dom)?;
        let (months, _) = MONTH.parse(month)?;
        let (days_of_week, dow_star) = DAY_OF_WEEK.parse(dow)?;
        Ok(Schedule {
            text: text.to_string(),
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
            day_star: dom_star || dow_star,
        })
    }

    /// robfig's descriptors; they are case-sensitive there too. `@every` is not accepted:
    /// upstream's CRD pattern rejects it.
    fn descriptor(text: &str) -> Result<Schedule, ScheduleError> {
        let (hours, dom, months, dow) = match text {
            "@yearly" | "@annually" => (1, 1 << 1, 1 << 1, span(0, 6)),
            "@monthly" => (1, 1 << 1, span(1, 12), span(0, 6)),
            "@weekly" => (1, span(1, 31), span(1, 12), 1),
            "@daily" | "@midnight" => (1, span(1, 31), span(1, 12), span(0, 6)),
            "@hourly" => (span(0, 23), span(1, 31), span(1, 12), span(0, 6)),
            _ => return Err(ScheduleError::UnknownDescriptor(text.to_string())),
        };
        Ok(Schedule {
            text: text.to_string(),
            minutes: 1,
            hours,
            days_of_month: dom,
            months,
            days_of_week: dow,
            // Every descriptor leaves at least one day field unrestricted.
            day_star: true,
        })
    }

    /// The schedule as the user wrote it (trimmed), for budget views and messages.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// robfig's day rule: both day fields must match when either is `*`, otherwise either.
    fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = has_bit(self.days_of_month, date.day());
        let dow = has_bit(self.days_of_week, date.weekday().num_days_from_sunday());
        if self.day_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// True for a schedule robfig/cron accepts that names no real date (`0 0 30 2 *`): a
    /// budget on it would never apply, and upstream would not say so.
    pub fn never_fires(&self) -> bool {
        // Nine years from a leap year's start hold every date a schedule can name.
        let start = NaiveDate::from_ymd_opt(2000, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc());
        start.is_some_and(|t| self.next_after(t).is_none())
    }

    /// The first hit strictly after `t` (hits are whole minutes), or `None` when the
    /// schedule cannot fire within the search horizon (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(self.next_wall_after(t.naive_utc())?.and_utc())
    }

    /// The most recent hit at or before `t`, or `None` when there is none within the search
    /// horizon. Budget windows use it: a budget is active while `t` is less than its
    /// duration past this hit.
    pub fn last_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(self.last_wall_at_or_before(t.naive_utc())?.and_utc())
    }

    /// [`Schedule::next_after`] with the fields read as wall-clock time in `zone` (a
    /// NodePool's `karpenter-tui.dev/budget-timezone`; upstream has only UTC). See
    /// [`instant_of`] for the times a daylight-saving change skips or repeats.
    pub fn next_after_in(&self, zone: Tz, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Around a change, wall-clock order and time order differ by up to the change: a
        // hit written before `t`'s wall-clock time may happen after `t` and vice versa.
        // So the search starts a slack earlier and, once a hit after `t` is found, looks a
        // slack further for an earlier one.
        let mut wall = t
            .with_timezone(&zone)
            .naive_local()
            .checked_sub_signed(ZONE_SLACK)?;
        let mut found: Option<(NaiveDateTime, DateTime<Utc>)> = None;
        while let Some(hit) = self.next_wall_after(wall) {
            if found.is_some_and(|(first, _)| hit > first + ZONE_SLACK) {
                break;
            }
            wall = hit;
            let at = instant_of(zone, hit)?;
            if at > t {
                match &mut found {
                    None => found = Some((hit, at)),
                    Some((_, best)) => *best = (*best).min(at),
                }
            }
        }
        found.map(|(_, at)| at)
    }

    /// [`Schedule::last_at_or_before`] with the fields read as wall-clock time in `zone`;
    /// the mirror image of [`Schedule::next_after_in`].
    pub fn last_at_or_before_in(&self, zone: Tz, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut wall = t
            .with_timezone(&zone)
            .naive_local()
            .checked_add_signed(ZONE_SLACK)?;
        let mut found: Option<(NaiveDateTime, DateTime<Utc>)> = None;
        while let Some(hit) = self.last_wall_at_or_before(wall) {
            if found.is_some_and(|(first, _)| hit < first - ZONE_SLACK) {
                break;
            }
            let at = instant_of(zone, hit)?;
            if at <= t {
                match &mut found {
                    None => found = Some((hit, at)),
                    Some((_, best)) => *best = (*best).max(at),
                }
            }
            wall = hit.checked_sub_signed(TimeDelta::minutes(1))?;
        }
        found.map(|(_, at)| at)
    }

    /// The first wall-clock hit strictly after `t`.
    fn next_wall_after(&self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let start = t
            .with_second(0)?
            .with_nanosecond(0)?
            .checked_add_signed(TimeDelta::minutes(1))?;
        let mut date = start.date();
        let (mut hour, mut minute) = (start.hour(), start.minute());
        let horizon = date.year().checked_add(SEARCH_YEARS)?;
        // Each step moves forward by at least a minute and skips whole months, days and
        // hours that cannot match, so a search costs at most a few hundred steps a year.
        while date.year() <= horizon {
            if !has_bit(self.months, date.month()) {
                date = first_of_next_month(date)?;
                (hour, minute) = (0, 0);
                continue;
            }
            if !self.day_matches(date) {
                date = date.succ_opt()?;
                (hour, minute) = (0, 0);
                continue;
            }
            let Some(h) = next_bit(self.hours, hour) else {
                date = date.succ_opt()?;
                (hour, minute) = (0, 0);
                continue;
            };
            if h != hour {
                (hour, minute) = (h, 0);
            }
            match next_bit(self.minutes, minute) {
                Some(m) => return date.and_hms_opt(hour, m, 0),
                None => (hour, minute) = (hour + 1, 0),
            }
        }
        None
    }

    /// The most recent wall-clock hit at or before `t`.
    fn last_wall_at_or_before(&self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let start = t.with_second(0)?.with_nanosecond(0)?;
        let mut date = start.date();
        let (mut hour, mut minute) = (start.hour(), start.minute());
        let horizon = date.year().checked_sub(SEARCH_YEARS)?;
        // The mirror image of `next_wall_after`: step backwards over what cannot match.
        while date.year() >= horizon {
            if !has_bit(self.months, date.month()) {
                date = date.with_day(1)?.pred_opt()?;
                (hour, minute) = (23, 59);
                continue;
            }
            if !self.day_matches(date) {
                date = date.pred_opt()?;
                (hour, minute) = (23, 59);
                continue;
            }
            let Some(h) = prev_bit(self.hours, hour) else {
                date = date.pred_opt()?;
                (hour, minute) = (23, 59);
                continue;
            };
            if h != hour {
                (hour, minute) = (h, 59);
            }
            match prev_bit(self.minutes, minute) {
                Some(m) => return date.and_hms_opt(hour, m, 0),
                None if hour == 0 => {
                    date = date.pred_opt()?;
                    (hour, minute) = (23, 59);
                }
                None => (hour, minute) = (hour - 1, 59),
            }
        }
        None
    }
}

/// How far a zone's offset change can move a wall-clock time (the tz database's largest
/// current daylight-saving shift is two hours).
const ZONE_SLACK: TimeDelta = TimeDelta::hours(3);

/// When a wall-clock time happens in `zone`. A time that a clock going back shows twice
/// happens the first time (a budget opens once, as Go's `time.Date` and robfig read it).
/// A time a clock going forward skips happens as far after the change as it was meant to
/// be after the hour the change removed (02:30 on the spring-forward day in Berlin is
/// 03:30), which is how Go's `time.Date` normalises it. Unlike robfig, whose search steps
/// over the skipped hour, the budget still opens that day rather than not at all.
fn instant_of(zone: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    match zone.from_local_datetime(&wall) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => {
            // The offset in force before the change: a day earlier (zones change offset
            // at most twice a year).
            let before = zone
                .offset_from_utc_datetime(&wall.checked_sub_signed(TimeDelta::days(1))?)
                .fix();
            Some(
                wall.checked_sub_signed(TimeDelta::seconds(i64::from(before.local_minus_utc())))?
                    .and_utc(),
            )
        }
    }
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    if date.month() == 12 {
        NaiveDate::from_ymd_opt(date.year().checked_add(1)?, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Schedule {
    type Err = ScheduleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Schedule::parse(s)
    }
}

#[cfg(test)]
mod tests;
