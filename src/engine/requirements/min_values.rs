//! `minValues`: a NodePool's demand that a launch keep at least N distinct values of a key
//! open (N instance families, say), so spot capacity has room to choose. Upstream checks
//! it over a NodeClaim's instance-type options (`InstanceTypes.SatisfiesMinValues`).

use std::collections::BTreeMap;
use std::fmt;

use super::{Requirement, Requirements};

/// The values an instance-type option offers for a label key.
pub trait OptionValues {
    fn values_for<'s>(&'s self, key: &str) -> impl Iterator<Item = &'s str>;
}

/// An option described by its labels (one value per key).
impl OptionValues for BTreeMap<String, String> {
    fn values_for<'s>(&'s self, key: &str) -> impl Iterator<Item = &'s str> {
        self.get(key).map(String::as_str).into_iter()
    }
}

/// An option described by requirements, as upstream instance types are: a type offered in
/// three zones has `topology.kubernetes.io/zone In [a b c]`. Complements offer no
/// countable values.
impl OptionValues for Requirements {
    fn values_for<'s>(&'s self, key: &str) -> impl Iterator<Item = &'s str> {
        self.get(key)
            .filter(|r| !r.is_complement())
            .into_iter()
            .flat_map(|r| r.values().iter().map(String::as_str))
    }
}

impl<T: OptionValues + ?Sized> OptionValues for &T {
    fn values_for<'s>(&'s self, key: &str) -> impl Iterator<Item = &'s str> {
        (**self).values_for(key)
    }
}

/// A `minValues` requirement the options cannot meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinValuesShortfall {
    pub key: String,
    /// The `minValues` asked for.
    pub needed: usize,
    /// Distinct allowed values across all options.
    pub available: usize,
}

impl fmt::Display for MinValuesShortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "minValues requirement on {:?} needs {} distinct values, the compatible instance types offer {}",
            self.key, self.needed, self.available
        )
    }
}

impl Requirements {
    /// Keys with a `minValues` floor, and the floor.
    pub fn min_values(&self) -> impl Iterator<Item = (&str, usize)> {
        self.iter()
            .filter_map(|r| r.min_values().map(|n| (r.key(), n)))
    }

    pub fn has_min_values(&self) -> bool {
        self.min_values().next().is_some()
    }

    /// Checks `minValues` over options in preference order (cheapest first). `Ok(n)`: the
    /// first `n` options already satisfy every floor, so truncating the option list to no
    /// fewer than `n` keeps it satisfied (0 when nothing has a floor). `Err`: every floor
    /// still unmet after all options, with what is available.
    ///
    /// Only values the requirement allows are counted: an instance type offered in a zone
    /// the NodeClaim excludes adds no flexibility. (Upstream counts the option's values
    /// as they are, since its options are already filtered; ours need not be.)
    pub fn satisfies_min_values<T: OptionValues>(
        &self,
        options: &[T],
    ) -> Result<usize, Vec<MinValuesShortfall>> {
        let mut tracked: Vec<(&Requirement, usize, Vec<&str>)> = self
            .iter()
            .filter_map(|r| r.min_values().map(|n| (r, n, Vec::new())))
            .collect();
        if tracked.is_empty() {
            return Ok(0);
        }
        for (i, option) in options.iter().enumerate() {
            for (requirement, _, seen) in &mut tracked {
                for value in option.values_for(requirement.key()) {
                    if let Err(at) = seen.binary_search(&value)
                        && requirement.has(value)
                    {
                        seen.insert(at, value);
                    }
                }
            }
            if tracked
                .iter()
                .all(|(_, needed, seen)| seen.len() >= *needed)
            {
                return Ok(i + 1);
            }
        }
        Err(tracked
            .into_iter()
            .filter(|(_, needed, seen)| seen.len() < *needed)
            .map(|(r, needed, seen)| MinValuesShortfall {
                key: r.key().to_string(),
                needed,
                available: seen.len(),
            })
            .collect())
    }
}
