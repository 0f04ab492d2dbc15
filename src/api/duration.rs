//! Durations as Karpenter's API writes them: Go `time.Duration` strings ("720h", "1h30m",
//! "30s") and the word "Never" where a field is nillable (expireAfter, consolidateAfter).
//!
//! The text is kept next to the parsed value: validation checks the text against each
//! field's CRD pattern (upstream is stricter than Go's parser, e.g. no "1.5h" or "300ms"),
//! and messages quote what the user wrote.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The literal that disables a nillable duration.
pub const NEVER: &str = "Never";

/// A Go-style duration or "Never" (value `None`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GoDuration {
    text: String,
    value: Option<Duration>,
}

/// Go holds a duration in an int64 of nanoseconds; Karpenter cannot read a longer one.
const TOO_LONG: &str = "longer than Go's longest duration, 2562047h47m16.854775807s (an int64 of nanoseconds), so Karpenter could not read it";

/// Why a duration string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {why} (expected e.g. 720h, 1h30m, 30s or Never)")]
pub struct DurationError {
    text: String,
    why: &'static str,
}

impl GoDuration {
    /// Parses Go's `time.ParseDuration` syntax (units ns, us, µs, ms, s, m, h; fractions;
    /// a lone "0") plus "Never". Negative durations are rejected: no Karpenter field takes one.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let err = |why| DurationError {
            text: text.to_string(),
            why,
        };
        if text == NEVER {
            return Ok(GoDuration {
                text: text.to_string(),
                value: None,
            });
        }
        if text.starts_with('-') {
            return Err(err("negative durations are not allowed"));
        }
        let s = text.strip_prefix('+').unwrap_or(text);
        if s == "0" {
            return Ok(Self::from_parts(text, Duration::ZERO));
        }
        if s.is_empty() {
            return Err(err("empty"));
        }
        // Exact nanoseconds, as Go accumulates them (time/format.go ParseDuration), so
        // the bound is Go's own: an int64 of nanoseconds.
        let mut total: u128 = 0;
        let mut rest = s;
        while !rest.is_empty() {
            let num_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| err("missing unit"))?;
            let (num, tail) = rest.split_at(num_end);
            if num.is_empty() || num == "." || num.matches('.').count() > 1 {
                return Err(err("expected a number before each unit"));
            }
            let unit_end = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, next) = tail.split_at(unit_end);
            let unit_ns: u128 = match unit {
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                "" => return Err(err("missing unit")),
                _ => return Err(err("unknown unit")),
            };
            let (int, frac) = num.split_once('.').unwrap_or((num, ""));
            let int = int.trim_start_matches('0');
            // More digits than an int64 holds is past the bound whatever the unit.
            if int.len() > 19 {
                return Err(err(TOO_LONG));
            }
            let whole: u128 = if int.is_empty() {
                0
            } else {
                int.parse().map_err(|_| err("bad number"))?
            };
            // Go drops fraction digits past what it can hold; nanoseconds need at most 18
            // digits after the point for any unit up to hours.
            let frac = &frac[..frac.len().min(18)];
            let frac_ns = if frac.is_empty() {
                0
            } else {
                let f: u128 = frac.parse().map_err(|_| err("bad number"))?;
                f * unit_ns / 10u128.pow(frac.len() as u32)
            };
            total = total
                .saturating_add(whole.saturating_mul(unit_ns))
                .saturating_add(frac_ns);
            if total > i64::MAX as u128 {
                return Err(err(TOO_LONG));
            }
            rest = next;
        }
        Ok(Self::from_parts(text, Duration::from_nanos(total as u64)))
    }

    fn from_parts(text: &str, d: Duration) -> Self {
        GoDuration {
            text: text.to_string(),
            value: Some(d),
        }
    }

    /// A duration written in the compact Go form ("720h", "1h30m", "0s").
    pub fn from_std(d: Duration) -> Self {
        GoDuration {
            text: format_go(d),
            value: Some(d),
        }
    }

    /// The "Never" value.
    pub fn never() -> Self {
        GoDuration {
            text: NEVER.to_string(),
            value: None,
        }
    }

    /// The parsed value; `None` means "Never".
    pub fn value(&self) -> Option<Duration> {
        self.value
    }

    /// True for "Never".
    pub fn is_never(&self) -> bool {
        self.value.is_none()
    }

    /// The text as written in the manifest.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True when the text is whole numbers of the given units in order, e.g. "1h30m" for
    /// units "hms". This is the shape every Karpenter CRD pattern asks for.
    pub fn is_whole_units(&self, units: &str) -> bool {
        if self.is_never() {
            return false;
        }
        let mut rest = self.text.as_str();
        if rest.is_empty() {
            return false;
        }
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 || digits == rest.len() {
                return false;
            }
            let unit = &rest[digits..digits + 1];
            if !units.contains(unit) {
                return false;
            }
            // "ms" would otherwise read as "m" followed by garbage.
            rest = &rest[digits + 1..];
            if rest.starts_with('s') && unit == "m" {
                return false;
            }
        }
        true
    }
}

/// Formats a duration the way Go's `Duration.String` would, minus the trailing zero units
/// ("720h" rather than "720h0m0s").
pub fn format_go(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return if d.is_zero() {
            "0s".to_string()
        } else {
            format!("{}ms", d.as_millis())
        };
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        GoDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> Option<u64> {
        GoDuration::parse(s).unwrap().value().map(|d| d.as_secs())
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(secs("720h"), Some(720 * 3600));
        assert_eq!(secs("1h30m"), Some(5400));
        assert_eq!(secs("30s"), Some(30));
        assert_eq!(secs("0s"), Some(0));
        assert_eq!(secs("0"), Some(0));
        assert_eq!(secs("1.5h"), Some(5400));
        assert_eq!(secs("2h45m0s"), Some(9900));
        assert_eq!(
            GoDuration::parse("300ms").unwrap().value(),
            Some(Duration::from_millis(300))
        );
        assert_eq!(secs("Never"), None);
    }

    #[test]
    fn the_longest_duration_is_go_s() {
        assert_eq!(
            GoDuration::parse("2562047h47m16.854775807s")
                .unwrap()
                .value()
                .map(|d| d.as_nanos()),
            Some(i64::MAX as u128)
        );
        for too_long in [
            "2562048h",
            "2562047h47m16.854775808s",
            "99999999999999999999h",
        ] {
            assert_eq!(
                GoDuration::parse(too_long).unwrap_err().to_string(),
                format!(
                    "invalid duration {too_long:?}: longer than Go's longest duration, 2562047h47m16.854775807s (an int64 of nanoseconds), so Karpenter could not read it (expected e.g. 720h, 1h30m, 30s or Never)"
                )
            );
        }
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "72x", "h", "1h30", "-5m", "never", "1..5h", "5 m"] {
            assert!(GoDuration::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn whole_units_follow_the_crd_patterns() {
        let d = |s| GoDuration::parse(s).unwrap();
        assert!(d("720h").is_whole_units("hms"));
        assert!(d("1h30m").is_whole_units("hms"));
        assert!(d("1h30m").is_whole_units("hm"));
        assert!(!d("30s").is_whole_units("hm"));
        assert!(!d("1.5h").is_whole_units("hms"));
        assert!(!d("300ms").is_whole_units("hms"));
        assert!(!d("Never").is_whole_units("hms"));
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_go(Duration::from_secs(720 * 3600)), "720h");
        assert_eq!(format_go(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_go(Duration::ZERO), "0s");
    }
}
