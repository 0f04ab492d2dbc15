//! Kubernetes resource quantities as they appear in manifests ("100m", "4Gi", 1000).
//!
//! The API layer keeps the text exactly as written (so round trips and messages show what
//! the user typed) and checks it against the API server's Quantity grammar; arithmetic
//! lives in the engine.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The API server's Quantity regular expression (`resource.Quantity`), as emitted in CRDs.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A resource quantity; YAML integers and floats are accepted as Kubernetes does.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Quantity(pub String);

impl Quantity {
    /// True when the text is a quantity the API server would accept.
    pub fn is_valid(&self) -> bool {
        is_valid_quantity(&self.0)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity(s.to_string())
    }
}

/// Checks `s` the way the API server reads a quantity: sign, digits with an optional
/// fraction, then a binary suffix, a decimal suffix or an exponent of whole digits.
/// [`QUANTITY_PATTERN`] (the CRD's) lets `1e10.5` through, but `resource.ParseQuantity`
/// (apimachinery's pkg/api/resource/quantity.go) refuses a fractional exponent, so the
/// object would never be stored.
pub fn is_valid_quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (num, rest) = split_number(s);
    if !num_ok(num) {
        return false;
    }
    match rest {
        "" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        _ => {
            let Some(exp) = rest.strip_prefix(['e', 'E']) else {
                return false;
            };
            let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            !exp.is_empty() && exp.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

/// True when a well-formed quantity's magnitude is above 2^63-1, the largest number a
/// Kubernetes `resource.Quantity` represents (the API server caps larger ones there, so
/// the object stored is not the one written).
pub fn exceeds_kubernetes_max(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (num, rest) = split_number(s);
    let int = num.split('.').next().unwrap_or("").trim_start_matches('0');
    // Integer digits times 10^exp times 2^bin, compared by size first, then exactly.
    let (dec, bin): (i64, u32) = match rest {
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        r => match r.strip_prefix(['e', 'E']) {
            Some(e) => {
                let e = e.strip_prefix('+').unwrap_or(e);
                let len = e.len();
                match e.get(..len.min(6)).and_then(|e| e.parse::<i64>().ok()) {
                    Some(e) => (e, 0),
                    None => (0, 0),
                }
            }
            None => (0, 0),
        },
    };
    if int.is_empty() {
        // Below one before scaling: only an exponent can make it large.
        return dec > 19;
    }
    if int.len() as i64 + dec > 40 {
        return true;
    }
    let Ok(mut v) = int.get(..int.len().min(38)).unwrap_or(int).parse::<i128>() else {
        return true;
    };
    let mut dec = dec;
    if int.len() > 38 {
        return true;
    }
    while dec > 0 {
        let Some(n) = v.checked_mul(10) else {
            return true;
        };
        v = n;
        dec -= 1;
    }
    while dec < 0 {
        v /= 10;
        dec += 1;
    }
    match v.checked_shl(bin) {
        Some(n) if n >> bin == v => n > i64::MAX as i128,
        _ => true,
    }
}

fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s.split_at(end)
}

fn num_ok(n: &str) -> bool {
    match n.split_once('.') {
        None => !n.is_empty(),
        Some((int, frac)) => {
            !frac.contains('.') && (!int.is_empty() || !frac.is_empty()) && !n.eq(".")
        }
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity such as 100m, 4Gi or 1000")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_caps_quantities_at_two_to_the_63() {
        for big in [
            "1e100",
            "9223372036854775807Ki",
            "8Ei",
            "9223372036854775808",
            "10E",
        ] {
            assert!(exceeds_kubernetes_max(big), "{big}");
        }
        for ok in [
            "7Ei",
            "9223372036854775807",
            "9E",
            "1e18",
            "0.5e19",
            "-5",
            "100m",
            "4Gi",
            "1e-100",
        ] {
            assert!(!exceeds_kubernetes_max(ok), "{ok}");
        }
    }

    #[test]
    fn accepts_the_api_servers_quantities() {
        for ok in [
            "1",
            "100m",
            "1.5",
            ".5",
            "4Gi",
            "10M",
            "1e3",
            "1E-3",
            "+2",
            "-1",
            "5.",
            "128974848",
        ] {
            assert!(is_valid_quantity(ok), "{ok}");
        }
    }

    #[test]
    fn rejects_malformed_quantities() {
        // A fractional exponent fits the CRD's pattern but not ParseQuantity (a fuzzer
        // found the engine and the validator disagreeing on "1e10.500").
        for bad in [
            "", "Gi", "1.2.3", "4GB", "1e", "abc", ".", "1 Gi", "1ki", "1e10.500", "1e.5", "1e+",
        ] {
            assert!(!is_valid_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn integers_in_yaml_become_quantities() {
        let q: Quantity = serde_json::from_value(serde_json::json!(1000)).unwrap();
        assert_eq!(q.0, "1000");
    }
}
