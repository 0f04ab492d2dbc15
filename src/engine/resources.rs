//! Resource quantities with Kubernetes `resource.Quantity` semantics, as exact integers.
//!
//! Every quantity is held in milli-units (`i64`), the precision Kubernetes itself uses for
//! scheduling (`MilliValue`, rounded up). CPU "1500m", memory "1.5Gi" and pods "110" all
//! become integers, so adding, subtracting and comparing is exact and cheap: the scheduler
//! does this millions of times per solve.

use std::collections::BTreeMap;
use std::fmt;

/// Well-known resource names.
pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The pseudo-resource `spec.limits` and `status.resources` count nodes by, one (1000
/// milli) per node (upstream `pkg/utils/resources` `Node`).
pub const NODES: &str = "nodes";

/// Why a quantity did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "invalid quantity {0:?}: expected a number with an optional suffix (m, k, M, G, Ki, Mi, Gi, e3, ...)"
    )]
    Malformed(String),
    /// Well-formed, but more than this tool (and Kubernetes' own `MilliValue`, an int64
    /// of milli-units) can count: 7Ei of memory is 8 x 10^21 milli-bytes.
    #[error(
        "quantity {0:?} is out of range: it is more than 9223372036854775807 milli-units (2^63-1), the most this tool counts"
    )]
    OutOfRange(String),
}

/// A NodePool limit in milli-units. A limit too large to count is no limit at all (as
/// upstream, where it can never be reached); one that does not parse, which validation
/// refuses and the API server never stores, limits to zero rather than panicking.
pub fn limit_milli(text: &str) -> i64 {
    match parse_milli(text) {
        Ok(m) => m,
        Err(QuantityError::OutOfRange(_)) if !text.trim_start().starts_with('-') => i64::MAX,
        Err(QuantityError::OutOfRange(_)) => i64::MIN,
        Err(QuantityError::Malformed(_)) => 0,
    }
}

/// Digits of a mantissa kept exactly; further digits only round up.
const MANTISSA_DIGITS: usize = 30;

/// Parses a Kubernetes quantity into milli-units, rounding up like `MilliValue()`.
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    let err = || QuantityError::Malformed(s.to_string());
    let too_big = || QuantityError::OutOfRange(s.to_string());
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(num_end);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(err());
    }
    // mantissa * 10^dec_exp * 2^bin_exp
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    let mut dec_exp: i64 = -(frac_part.len() as i64);
    let (kept, dropped) = digits.split_at(digits.len().min(MANTISSA_DIGITS));
    let mut mantissa: i128 = if kept.is_empty() {
        0
    } else {
        kept.parse().map_err(|_| err())?
    };
    if !dropped.is_empty() {
        dec_exp += dropped.len() as i64;
        if dropped.bytes().any(|b| b != b'0') {
            mantissa += 1;
        }
    }
    let mut bin_exp: u32 = 0;
    match suffix {
        "" => {}
        "n" => dec_exp -= 9,
        "u" => dec_exp -= 6,
        "m" => dec_exp -= 3,
        "k" => dec_exp += 3,
        "M" => dec_exp += 6,
        "G" => dec_exp += 9,
        "T" => dec_exp += 12,
        "P" => dec_exp += 15,
        "E" => dec_exp += 18,
        "Ki" => bin_exp = 10,
        "Mi" => bin_exp = 20,
        "Gi" => bin_exp = 30,
        "Ti" => bin_exp = 40,
        "Pi" => bin_exp = 50,
        "Ei" => bin_exp = 60,
        other => {
            let e = other.strip_prefix(['e', 'E']).ok_or_else(err)?;
            let (sign, e) = match e.strip_prefix('-') {
                Some(r) => (-1, r),
                None => (1, e.strip_prefix('+').unwrap_or(e)),
            };
            if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            // Any exponent past a few hundred is out of range (or rounds to 1m) alike.
            let e: i64 = e
                .get(..e.len().min(6))
                .unwrap_or(e)
                .parse()
                .map_err(|_| err())?;
            dec_exp += sign * e;
        }
    }
    if mantissa == 0 {
        return Ok(0);
    }
    // To milli-units: multiply by 1000.
    dec_exp += 3;
    let mut value: i128 = mantissa.checked_shl(bin_exp).ok_or_else(too_big)?;
    if bin_exp > 0 && value >> bin_exp != mantissa {
        return Err(too_big());
    }
    if dec_exp >= 0 {
        for _ in 0..dec_exp {
            value = value.checked_mul(10).ok_or_else(too_big)?;
        }
    } else if let Some(div) = u32::try_from(-dec_exp)
        .ok()
        .and_then(|e| 10i128.checked_pow(e))
    {
        // Round up (away from zero for positives), as Kubernetes does for MilliValue.
        value = (value + div - 1) / div;
    } else {
        // Smaller than any milli-unit: rounds up to one.
        value = 1;
    }
    let value = i64::try_from(value).map_err(|_| too_big())?;
    Ok(if neg { -value } else { value })
}

/// Formats milli-units the way `kubectl` would show them for the resource.
pub fn format_milli(resource: &str, milli: i64) -> String {
    if resource == MEMORY || resource == EPHEMERAL_STORAGE {
        let bytes = milli / 1000;
        const UNITS: [(&str, i64); 4] = [
            ("Ti", 1 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ];
        for (suffix, size) in UNITS {
            if bytes >= size && bytes % size == 0 {
                return format!("{}{suffix}", bytes / size);
            }
        }
        for (suffix, size) in UNITS {
            if bytes >= size {
                return format!("{:.1}{suffix}", bytes as f64 / size as f64);
            }
        }
        return bytes.to_string();
    }
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// A list of resources in milli-units. The four resources every pod and node has are fields
/// (no hashing on the hot path); anything else (GPUs, hugepages, ...) goes in `extended`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu: i64,
    pub memory: i64,
    pub pods: i64,
    pub ephemeral_storage: i64,
    /// Extended resources by name, kept sorted and without zero entries.
    pub extended: Vec<(String, i64)>,
}

impl Resources {
    /// Builds a list from (name, quantity) pairs as they appear in manifests.
    pub fn parse<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, QuantityError> {
        let mut r = Resources::default();
        for (name, q) in items {
            r.add_named(name, parse_milli(q)?);
        }
        Ok(r)
    }

    /// Convenience for code and tests: cpu in millicores, memory in bytes.
    pub fn cpu_mem(cpu_millicores: i64, memory_bytes: i64) -> Self {
        Resources {
            cpu: cpu_millicores,
            memory: memory_bytes * 1000,
            ..Default::default()
        }
    }

    /// The milli-unit value of one resource.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            PODS => self.pods,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            _ => self
                .extended
                .binary_search_by(|(n, _)| n.as_str().cmp(name))
                .map(|i| self.extended[i].1)
                .unwrap_or(0),
        }
    }

    /// Adds `milli` to one resource.
    pub fn add_named(&mut self, name: &str, milli: i64) {
        match name {
            CPU => self.cpu += milli,
            MEMORY => self.memory += milli,
            PODS => self.pods += milli,
            EPHEMERAL_STORAGE => self.ephemeral_storage += milli,
            _ => match self
                .extended
                .binary_search_by(|(n, _)| n.as_str().cmp(name))
            {
                Ok(i) => {
                    self.extended[i].1 += milli;
                    if self.extended[i].1 == 0 {
                        self.extended.remove(i);
                    }
                }
                Err(i) if milli != 0 => self.extended.insert(i, (name.to_string(), milli)),
                Err(_) => {}
            },
        }
    }

    /// Element-wise sum.
    pub fn add(&mut self, other: &Resources) {
        self.cpu += other.cpu;
        self.memory += other.memory;
        self.pods += other.pods;
        self.ephemeral_storage += other.ephemeral_storage;
        for (n, v) in &other.extended {
            self.add_named(n, *v);
        }
    }

    /// Element-wise difference.
    pub fn sub(&mut self, other: &Resources) {
        self.cpu -= other.cpu;
        self.memory -= other.memory;
        self.pods -= other.pods;
        self.ephemeral_storage -= other.ephemeral_storage;
        for (n, v) in &other.extended {
            self.add_named(n, -v);
        }
    }

    /// Takes `other`'s value for every resource this one reports as zero: a Node whose
    /// kubelet has not reported a resource yet has the NodeClaim's expectation of it
    /// (upstream `StateNode.Allocatable` before initialization).
    pub fn fill_zeros_from(&mut self, other: &Resources) {
        let fill = |mine: &mut i64, theirs: i64| {
            if *mine == 0 {
                *mine = theirs;
            }
        };
        fill(&mut self.cpu, other.cpu);
        fill(&mut self.memory, other.memory);
        fill(&mut self.pods, other.pods);
        fill(&mut self.ephemeral_storage, other.ephemeral_storage);
        for (n, v) in &other.extended {
            if self.get(n) == 0 {
                self.add_named(n, *v);
            }
        }
    }

    /// Element-wise maximum (init containers vs the sum of app containers).
    pub fn max(&mut self, other: &Resources) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory = self.memory.max(other.memory);
        self.pods = self.pods.max(other.pods);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (n, v) in &other.extended {
            let cur = self.get(n);
            if *v > cur {
                self.add_named(n, v - cur);
            }
        }
    }

    /// True when every requested resource fits in `available`. A resource the node does
    /// not list counts as zero available, as in the kube-scheduler's fit check.
    pub fn fits_in(&self, available: &Resources) -> bool {
        self.cpu <= available.cpu
            && self.memory <= available.memory
            && self.pods <= available.pods
            && self.ephemeral_storage <= available.ephemeral_storage
            && self
                .extended
                .iter()
                .all(|(n, v)| *v <= 0 || *v <= available.get(n))
    }

    /// The first resource that does not fit, for explanations ("cpu: need 1500m, have 900m").
    pub fn first_shortfall(&self, available: &Resources) -> Option<(String, i64, i64)> {
        let base = [
            (CPU, self.cpu, available.cpu),
            (MEMORY, self.memory, available.memory),
            (PODS, self.pods, available.pods),
            (
                EPHEMERAL_STORAGE,
                self.ephemeral_storage,
                available.ephemeral_storage,
            ),
        ];
        if let Some((n, need, have)) = base.into_iter().find(|(_, need, have)| need > have) {
            return Some((n.to_string(), need, have));
        }
        self.extended
            .iter()
            .find(|(n, v)| *v > available.get(n))
            .map(|(n, v)| (n.clone(), *v, available.get(n)))
    }

    /// Converts from a manifest map (e.g. NodeClaim `resources.requests`).
    pub fn from_map(
        map: &BTreeMap<String, crate::api::quantity::Quantity>,
    ) -> Result<Self, QuantityError> {
        Resources::parse(map.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
    }

    /// Converts to a manifest map with kubectl-style quantities.
    pub fn to_map(&self) -> BTreeMap<String, crate::api::quantity::Quantity> {
        let mut m = BTreeMap::new();
        for (n, v) in [
            (CPU, self.cpu),
            (MEMORY, self.memory),
            (PODS, self.pods),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
        ] {
            if v != 0 {
                m.insert(
                    n.to_string(),
                    crate::api::quantity::Quantity(format_milli(n, v)),
                );
            }
        }
        for (n, v) in &self.extended {
            m.insert(
                n.clone(),
                crate::api::quantity::Quantity(format_milli(n, *v)),
            );
        }
        m
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .to_map()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_quantities_exactly() {
        assert_eq!(parse_milli("1"), Ok(1000));
        assert_eq!(parse_milli("100m"), Ok(100));
        assert_eq!(parse_milli("1.5"), Ok(1500));
        assert_eq!(parse_milli("1Ki"), Ok(1024 * 1000));
        assert_eq!(parse_milli("1.5Gi"), Ok(1_610_612_736 * 1000));
        assert_eq!(parse_milli("2G"), Ok(2_000_000_000 * 1000));
        assert_eq!(parse_milli("1e3"), Ok(1_000_000));
        assert_eq!(parse_milli("1E-3"), Ok(1));
        assert_eq!(parse_milli("128974848"), Ok(128_974_848_000));
        assert_eq!(parse_milli("-1"), Ok(-1000));
        assert_eq!(parse_milli(".5"), Ok(500));
    }

    #[test]
    fn rounds_sub_milli_values_up_like_kubernetes() {
        assert_eq!(parse_milli("1n"), Ok(1));
        assert_eq!(parse_milli("1500u"), Ok(2));
    }

    #[test]
    fn rejects_malformed_quantities() {
        for bad in [
            "",
            "Gi",
            "1.2.3",
            "4GB",
            "1e",
            "abc",
            "1ki",
            "99999999999999999999999Ei",
        ] {
            assert!(parse_milli(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn arithmetic_and_fit() {
        let node = Resources::parse([
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "1"),
        ])
        .unwrap();
        let mut used =
            Resources::parse([("cpu", "3500m"), ("memory", "1Gi"), ("pods", "1")]).unwrap();
        let pod = Resources::parse([("cpu", "500m"), ("nvidia.com/gpu", "1")]).unwrap();
        used.add(&pod);
        assert!(used.fits_in(&node));
        used.add(&pod);
        assert_eq!(
            used.first_shortfall(&node),
            Some(("cpu".into(), 4500, 4000))
        );
        used.sub(&pod);
        assert!(used.fits_in(&node));
        let gpu2 = Resources::parse([("nvidia.com/gpu", "2")]).unwrap();
        assert!(!gpu2.fits_in(&node));
    }

    #[test]
    fn formats_like_kubectl() {
        assert_eq!(format_milli(CPU, 1500), "1500m");
        assert_eq!(format_milli(CPU, 2000), "2");
        assert_eq!(format_milli(MEMORY, 8 * (1 << 30) * 1000), "8Gi");
        assert_eq!(format_milli(PODS, 110_000), "110");
    }
}
