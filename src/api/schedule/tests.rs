//! Schedule tests: hand-computed hits, robfig parity, and a property test against a
//! minute-by-minute scan.

use super::*;
use proptest::prelude::*;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("test time")
        .with_timezone(&Utc)
}

fn sched(s: &str) -> Schedule {
    Schedule::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Minute-by-minute oracle for the property tests: the fields checked one by one.
fn matches(s: &Schedule, t: DateTime<Utc>) -> bool {
    t.second() == 0
        && has_bit(s.minutes, t.minute())
        && has_bit(s.hours, t.hour())
        && has_bit(s.months, t.month())
        && s.day_matches(t.date_naive())
}

/// (schedule, t, next hit after t, last hit at or before t), computed by hand.
#[rustfmt::skip]
const CASES: &[(&str, &str, &str, &str)] = &[
    ("@daily", "2024-03-10T12:34:56Z", "2024-03-11T00:00:00Z", "2024-03-10T00:00:00Z"),
    ("@daily", "2024-03-10T00:00:00Z", "2024-03-11T00:00:00Z", "2024-03-10T00:00:00Z"),
    ("@midnight", "2024-12-31T23:59:59Z", "2025-01-01T00:00:00Z", "2024-12-31T00:00:00Z"),
    ("@hourly", "2024-03-10T12:34:56Z", "2024-03-10T13:00:00Z", "2024-03-10T12:00:00Z"),
    // 2024-03-10 is a Sunday.
    ("@weekly", "2024-03-12T08:00:00Z", "2024-03-17T00:00:00Z", "2024-03-10T00:00:00Z"),
    ("@monthly", "2024-02-15T00:00:00Z", "2024-03-01T00:00:00Z", "2024-02-01T00:00:00Z"),
    ("@yearly", "2024-06-01T00:00:00Z", "2025-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
    ("@annually", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
    // Weekdays at nine: Friday 2024-03-08 to Monday 2024-03-11.
    ("0 9 * * 1-5", "2024-03-08T09:00:00Z", "2024-03-11T09:00:00Z", "2024-03-08T09:00:00Z"),
    ("0 9 * * 1-5", "2024-03-10T12:00:00Z", "2024-03-11T09:00:00Z", "2024-03-08T09:00:00Z"),
    ("0 9 * * 1-5", "2024-03-11T08:59:59Z", "2024-03-11T09:00:00Z", "2024-03-08T09:00:00Z"),
    ("0 9 * * MON-fri", "2024-03-11T09:00:30Z", "2024-03-12T09:00:00Z", "2024-03-11T09:00:00Z"),
    ("*/15 * * * *", "2024-03-10T10:07:00Z", "2024-03-10T10:15:00Z", "2024-03-10T10:00:00Z"),
    ("*/15 * * * *", "2024-03-10T10:45:00Z", "2024-03-10T11:00:00Z", "2024-03-10T10:45:00Z"),
    ("*/15 * * * *", "2024-12-31T23:59:00Z", "2025-01-01T00:00:00Z", "2024-12-31T23:45:00Z"),
    // Both day fields restricted: the 13th OR a Friday. 2024-10-13 is a Sunday.
    ("0 0 13 * 5", "2024-10-12T00:00:00Z", "2024-10-13T00:00:00Z", "2024-10-11T00:00:00Z"),
    // Days 1-7 OR Mondays: after Monday the 8th comes Monday the 15th.
    ("0 0 1-7 * 1", "2024-07-08T00:00:00Z", "2024-07-15T00:00:00Z", "2024-07-08T00:00:00Z"),
    ("0 0 1-7 * 1", "2024-07-14T00:00:00Z", "2024-07-15T00:00:00Z", "2024-07-08T00:00:00Z"),
    // `*/1` is a star for robfig, so only the weekday counts (Mondays).
    ("0 0 */1 * 1", "2024-07-01T00:00:00Z", "2024-07-08T00:00:00Z", "2024-07-01T00:00:00Z"),
    // ... but `*/2` is not: odd days OR Mondays.
    ("0 0 */2 * 1", "2024-07-01T00:00:00Z", "2024-07-03T00:00:00Z", "2024-07-01T00:00:00Z"),
    // Month boundaries: April has no 31st.
    ("0 0 31 * *", "2024-04-01T00:00:00Z", "2024-05-31T00:00:00Z", "2024-03-31T00:00:00Z"),
    ("30 23 * * *", "2024-02-29T23:31:00Z", "2024-03-01T23:30:00Z", "2024-02-29T23:30:00Z"),
    ("0 0 1 JAN,jul *", "2024-03-01T00:00:00Z", "2024-07-01T00:00:00Z", "2024-01-01T00:00:00Z"),
    ("5 4 * 12 *", "2024-01-01T00:00:00Z", "2024-12-01T04:05:00Z", "2023-12-31T04:05:00Z"),
    // Leap day, including the 2100 gap (not a leap year).
    ("0 0 29 2 *", "2024-03-01T00:00:00Z", "2028-02-29T00:00:00Z", "2024-02-29T00:00:00Z"),
    ("0 0 29 2 *", "2027-06-01T00:00:00Z", "2028-02-29T00:00:00Z", "2024-02-29T00:00:00Z"),
    ("0 0 29 2 *", "2097-01-01T00:00:00Z", "2104-02-29T00:00:00Z", "2096-02-29T00:00:00Z"),
    // `N/step` runs from N to the maximum.
    ("10/20 * * * *", "2024-03-10T10:51:00Z", "2024-03-10T11:10:00Z", "2024-03-10T10:50:00Z"),
    // Surrounding whitespace is trimmed, as upstream does.
    ("  0 0 * * 0  ", "2024-03-10T00:00:00Z", "2024-03-17T00:00:00Z", "2024-03-10T00:00:00Z"),
];

#[test]
fn hits_match_hand_computed_times() {
    for (s, t, next, last) in CASES {
        let sc = sched(s);
        assert_eq!(
            sc.next_after(at(t)),
            Some(at(next)),
            "next_after({t}) of {s:?}"
        );
        assert_eq!(
            sc.last_at_or_before(at(t)),
            Some(at(last)),
            "last_at_or_before({t}) of {s:?}"
        );
    }
}

#[test]
fn schedules_that_never_fire_give_none() {
    for s in ["0 0 30 2 *", "0 0 31 4,6,9,11 *"] {
        let sc = sched(s);
        assert_eq!(sc.next_after(at("2024-01-01T00:00:00Z")), None, "{s}");
        assert_eq!(
            sc.last_at_or_before(at("2024-01-01T00:00:00Z")),
            None,
            "{s}"
        );
    }
}

#[test]
fn extreme_times_do_not_panic() {
    let every_minute = sched("* * * * *");
    assert_eq!(every_minute.next_after(DateTime::<Utc>::MAX_UTC), None);
    // The earliest representable time is itself a hit of `* * * * *`...
    let min = DateTime::<Utc>::MIN_UTC;
    assert_eq!(every_minute.last_at_or_before(min), Some(min));
    // ... but nothing earlier exists for a noon schedule.
    assert_eq!(sched("0 12 * * *").last_at_or_before(min), None);
}

#[test]
fn rejects_what_robfig_rejects() {
    let bad: &[(&str, &str)] = &[
        ("", "empty schedule"),
        ("   ", "empty schedule"),
        ("TZ=UTC 0 0 * * *", "karpenter-tui.dev/budget-timezone"),
        (
            "CRON_TZ=Europe/Berlin 0 0 * * *",
            "a CRON_TZ= prefix is not accepted",
        ),
        ("@every 1h", "unknown descriptor"),
        ("@Daily", "unknown descriptor"),
        ("@reboot", "unknown descriptor"),
        ("0 0 * *", "expected exactly 5 fields"),
        ("0 0 0 * * *", "found 6"),
        ("60 * * * *", "minute field \"60\""),
        ("0 24 * * *", "hour field"),
        ("0 0 0 * *", "day-of-month field"),
        ("0 0 32 * *", "day-of-month field"),
        ("0 0 * 13 *", "month field"),
        (
            "0 0 * * 7",
            "day-of-week field \"7\": \"7\" is not a number from 0 to 6 or a name SUN-SAT",
        ),
        ("0 0 * * MON-SUN", "runs backwards"),
        ("5-2 * * * *", "runs backwards"),
        ("*/0 * * * *", "not a positive number"),
        ("1/2/3 * * * *", "too many slashes"),
        ("1-2-3 * * * *", "too many hyphens"),
        ("a * * * *", "is not a number from 0 to 59"),
        ("0 0 * JANUARY *", "or a name JAN-DEC"),
        ("0 0 * * L", "day-of-week field"),
        ("0 0 1W * *", "day-of-month field"),
        ("0 0 * * 5#3", "day-of-week field"),
        ("1,,2 * * * *", "empty list item"),
        ("-1 * * * *", "minute field"),
    ];
    for (s, want) in bad {
        match Schedule::parse(s) {
            Ok(_) => panic!("{s:?} parsed"),
            Err(e) => assert!(e.to_string().contains(want), "{s:?}: {e}"),
        }
    }
}

#[test]
fn accepts_robfig_syntax() {
    for s in [
        "? * * * ?",
        "0,30 8-18/2 1,15 */3 SUN,sat",
        "0 0 * * 0-6",
        "0 0 1-31 1-12 *",
    ] {
        assert!(Schedule::parse(s).is_ok(), "{s}");
    }
    assert_eq!(sched(" @daily ").as_str(), "@daily");
    assert_eq!(sched("@daily"), sched("@midnight").with_text("@daily"));
}

impl Schedule {
    fn with_text(mut self, t: &str) -> Self {
        t.clone_into(&mut self.text);
        self
    }
}

fn field(options: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    proptest::sample::select(options)
}

fn schedules() -> impl Strategy<Value = Schedule> {
    (
        field(&["*", "*/15", "0", "5,35", "10-20/5"]),
        field(&["*", "9", "0-6", "*/6"]),
        field(&["*", "1", "13", "1-7", "*/10", "31", "*/1"]),
        field(&["*", "2", "1-3", "*/4"]),
        field(&["*", "1-5", "5", "0,6", "*/1"]),
    )
        // February has no 31st; keep every generated schedule satisfiable.
        .prop_map(|(a, b, c, d, e)| {
            let d = if c == "31" && d == "2" { "1-3" } else { d };
            sched(&format!("{a} {b} {c} {d} {e}"))
        })
}

proptest! {
    #[test]
    fn next_and_last_agree_with_a_minute_by_minute_scan(
        s in schedules(),
        secs in 946_684_800i64..4_102_444_800i64,
    ) {
        let t = DateTime::from_timestamp(secs, 0).expect("in range");
        let next = s.next_after(t).expect("every generated schedule fires within a year");
        let last = s.last_at_or_before(t).expect("every generated schedule fired within a year");
        prop_assert!(next > t && matches(&s, next));
        prop_assert!(last <= t && matches(&s, last));
        // Nothing fires in between (scanned up to two days on each side).
        let mut m = last + chrono::Duration::minutes(1);
        while m < next && m < last + chrono::Duration::days(2) {
            prop_assert!(!matches(&s, m), "{} also fires at {m}", s);
            m += chrono::Duration::minutes(1);
        }
        let mut m = next - chrono::Duration::minutes(1);
        while m > last && m > next - chrono::Duration::days(2) {
            prop_assert!(!matches(&s, m), "{} also fires at {m}", s);
            m -= chrono::Duration::minutes(1);
        }
        // The two searches agree with each other.
        prop_assert_eq!(s.next_after(last), Some(next));
        prop_assert_eq!(s.last_at_or_before(next - chrono::Duration::seconds(1)), Some(last));
    }
}

/// Berlin's clocks went forward at 2026-03-29 01:00 UTC (02:00 CET -> 03:00 CEST) and go
/// back at 2026-10-25 01:00 UTC (03:00 CEST -> 02:00 CET).
const BERLIN: Tz = chrono_tz::Europe::Berlin;

#[test]
fn a_zone_reads_the_fields_as_its_wall_clock_on_both_sides_of_a_change() {
    let weekdays = sched("0 9 * * 1-5");
    // Friday before the change: 09:00 CET is 08:00 UTC; Monday after: 09:00 CEST is 07:00.
    assert_eq!(
        weekdays.last_at_or_before_in(BERLIN, at("2026-03-27T12:00:00Z")),
        Some(at("2026-03-27T08:00:00Z"))
    );
    assert_eq!(
        weekdays.next_after_in(BERLIN, at("2026-03-28T12:00:00Z")),
        Some(at("2026-03-30T07:00:00Z"))
    );
    // UTC as a zone is the plain search.
    let t = at("2026-03-28T12:00:00Z");
    assert_eq!(
        weekdays.next_after_in(chrono_tz::UTC, t),
        weekdays.next_after(t)
    );
}

#[test]
fn a_skipped_time_happens_after_the_change_and_a_repeated_one_happens_once() {
    let half_two = sched("30 2 * * *");
    // 02:30 does not exist on 2026-03-29 in Berlin: it happens at 03:30 CEST (01:30 UTC).
    assert_eq!(
        half_two.next_after_in(BERLIN, at("2026-03-29T00:00:00Z")),
        Some(at("2026-03-29T01:30:00Z"))
    );
    // At 03:15 CEST the wall clock is past 02:30, but that hit has not happened yet.
    assert_eq!(
        half_two.last_at_or_before_in(BERLIN, at("2026-03-29T01:15:00Z")),
        Some(at("2026-03-28T01:30:00Z"))
    );
    // A hit written before the wall-clock time of `t` may still be the next one.
    let two_and_three = sched("45 2 * * *");
    assert_eq!(
        two_and_three.next_after_in(BERLIN, at("2026-03-29T01:20:00Z")),
        Some(at("2026-03-29T01:45:00Z"))
    );
    // 02:30 happens twice on 2026-10-25: the budget opens the first time only.
    assert_eq!(
        half_two.next_after_in(BERLIN, at("2026-10-25T00:00:00Z")),
        Some(at("2026-10-25T00:30:00Z"))
    );
    assert_eq!(
        half_two.next_after_in(BERLIN, at("2026-10-25T00:45:00Z")),
        Some(at("2026-10-26T01:30:00Z"))
    );
    // During the second 02:30 (01:30 UTC) the last hit is the first one.
    assert_eq!(
        half_two.last_at_or_before_in(BERLIN, at("2026-10-25T01:40:00Z")),
        Some(at("2026-10-25T00:30:00Z"))
    );
}

/// The zoned searches against a scan of every wall-clock minute near `t`: the hits'
/// instants (by `instant_of`), the least after `t` and the greatest at or before it.
fn zoned_oracle(
    s: &Schedule,
    zone: Tz,
    t: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    let wall = t.with_timezone(&zone).naive_local();
    let start = wall.with_second(0).unwrap() - TimeDelta::days(2);
    let (mut next, mut last) = (None, None);
    for m in 0..(4 * 24 * 60) {
        let w = start + TimeDelta::minutes(m);
        let as_utc = w.and_utc();
        if !matches(s, as_utc) {
            continue;
        }
        let i = instant_of(zone, w).unwrap();
        if i > t && next.is_none_or(|n| i < n) {
            next = Some(i);
        }
        if i <= t && last.is_none_or(|l| i > l) {
            last = Some(i);
        }
    }
    (next, last)
}

fn hourly_schedules() -> impl Strategy<Value = Schedule> {
    (
        prop::sample::select(vec!["*", "0", "30", "15,45", "*/20", "59"]),
        prop::sample::select(vec!["*", "2", "1-3", "2,3", "*/2", "3"]),
    )
        .prop_map(|(m, h)| sched(&format!("{m} {h} * * *")))
}

proptest! {
    #[test]
    fn zoned_searches_agree_with_a_scan_across_daylight_saving_changes(
        s in hourly_schedules(),
        zone in prop::sample::select(vec![BERLIN, chrono_tz::America::New_York, chrono_tz::Australia::Lord_Howe]),
        change in prop::sample::select(vec![
            "2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z", "2026-03-08T07:00:00Z",
            "2026-11-01T06:00:00Z", "2026-04-04T15:00:00Z", "2026-10-03T15:30:00Z",
        ]),
        offset_minutes in -360i64..360,
    ) {
        let t = at(change) + TimeDelta::minutes(offset_minutes) + TimeDelta::seconds(offset_minutes.rem_euclid(7));
        let (next, last) = zoned_oracle(&s, zone, t);
        prop_assert_eq!(s.next_after_in(zone, t), next, "next after {} in {}", t, zone);
        prop_assert_eq!(s.last_at_or_before_in(zone, t), last, "last at or before {} in {}", t, zone);
    }
}
