//! Conversions between Kubernetes timestamps (k8s-openapi's `Time`, a `jiff::Timestamp`)
//! and the `chrono` times the engine and controller compute with.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A Kubernetes `Time` as a chrono UTC time; out-of-range values clamp to the epoch.
pub fn to_chrono(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// A chrono time as a Kubernetes `Time` (second precision is what the API server keeps).
pub fn from_chrono(t: DateTime<Utc>) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(t.timestamp()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_second_precision() {
        let t = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        assert_eq!(to_chrono(&from_chrono(t)), t);
    }
}
