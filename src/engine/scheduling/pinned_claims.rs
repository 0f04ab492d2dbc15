//! Open planned NodeClaims by the domain they are pinned to, per topology key: a zonal
//! spread or zonal affinity pod visits only the claims already in a zone it may use, plus
//! the claims whose zone is still open, instead of every claim of the round.
//!
//! A claim is pinned on a key once its requirements allow exactly one value there
//! (`In [z]`). Requirements only narrow as pods are added, so a pinned claim keeps its
//! value; an unpinned one may become pinned after an add. For a claim pinned to `d`,
//! [`super::Topology::admits_pinned`] false means `PlannedClaim::try_add` would fail
//! (the topology requirement it computes excludes `d`), so skipping it changes nothing:
//! the claims visited are the same claims in the same order, minus certain failures.

use std::collections::BTreeMap;

use crate::engine::fast_hash::FastMap;

use super::PlannedClaim;

/// One key's partition of the open claims, each list ascending by claim index.
#[derive(Default)]
pub(super) struct ByDomain {
    pinned: BTreeMap<String, Vec<usize>>,
    unpinned: Vec<usize>,
}

/// The open claims indexed by pinned domain, for the keys pods have asked about.
#[derive(Default)]
pub(super) struct PinnedClaims {
    pub(super) by_key: FastMap<String, ByDomain>,
    /// Tests turn the index off (and the hostname-limit cursors and skips with it) to
    /// compare with the plain scan of every open claim.
    pub(super) disabled: bool,
}

/// The value a claim's requirements pin `key` to, if exactly one.
fn pinned_value<'c>(claim: &'c PlannedClaim, key: &str) -> Option<&'c str> {
    match claim.requirements.get(key) {
        Some(r) if !r.is_complement() && r.values().len() == 1 => Some(r.values()[0].as_str()),
        _ => None,
    }
}

fn insert_sorted(list: &mut Vec<usize>, c: usize) {
    if let Err(pos) = list.binary_search(&c) {
        list.insert(pos, c);
    }
}

fn remove_sorted(list: &mut Vec<usize>, c: usize) {
    if let Ok(pos) = list.binary_search(&c) {
        list.remove(pos);
    }
}

impl PinnedClaims {
    /// Builds the partition for `key` from the open claims the first time it is asked for.
    fn key_index(&mut self, key: &str, claims: &[PlannedClaim], open: &[usize]) -> &ByDomain {
        self.by_key.entry(key.to_string()).or_insert_with(|| {
            let mut idx = ByDomain::default();
            for &c in open {
                match pinned_value(&claims[c], key) {
                    Some(v) => idx.pinned.entry(v.to_string()).or_default().push(c),
                    None => idx.unpinned.push(c),
                }
            }
            idx
        })
    }

    /// Open claims at or after `start` that are unpinned on `key` or pinned to a domain
    /// `admits` accepts, ascending. Lazily merged: a pod usually stops at the first.
    pub(super) fn candidates<'s>(
        &'s mut self,
        key: &str,
        claims: &[PlannedClaim],
        open: &[usize],
        start: usize,
        admits: impl Fn(&str) -> bool,
    ) -> Merged<'s> {
        let idx = self.key_index(key, claims, open);
        let mut lists: Vec<&[usize]> = Vec::new();
        let from = |l: &[usize]| l.partition_point(|&c| c < start);
        let u = &idx.unpinned[from(&idx.unpinned)..];
        if !u.is_empty() {
            lists.push(u);
        }
        for (v, l) in &idx.pinned {
            let l = &l[from(l)..];
            if !l.is_empty() && admits(v) {
                lists.push(l);
            }
        }
        Merged { lists }
    }

    /// A claim was created (it is open and has the highest index so far).
    pub(super) fn created(&mut self, c: usize, claim: &PlannedClaim) {
        for (key, idx) in self.by_key.iter_mut() {
            match pinned_value(claim, key) {
                Some(v) => insert_sorted(idx.pinned.entry(v.to_string()).or_default(), c),
                None => idx.unpinned.push(c),
            }
        }
    }

    /// A pod was added to an open claim: it may have become pinned.
    pub(super) fn changed(&mut self, c: usize, claim: &PlannedClaim) {
        for (key, idx) in self.by_key.iter_mut() {
            if let Some(v) = pinned_value(claim, key)
                && idx.unpinned.binary_search(&c).is_ok()
            {
                remove_sorted(&mut idx.unpinned, c);
                insert_sorted(idx.pinned.entry(v.to_string()).or_default(), c);
            }
        }
    }

    /// A claim closed (no pod of the batch fits it any more).
    pub(super) fn closed(&mut self, c: usize, claim: &PlannedClaim) {
        for (key, idx) in self.by_key.iter_mut() {
            match pinned_value(claim, key) {
                Some(v) => {
                    if let Some(l) = idx.pinned.get_mut(v) {
                        remove_sorted(l, c);
                    }
                }
                None => remove_sorted(&mut idx.unpinned, c),
            }
        }
    }
}

/// The ascending union of disjoint ascending lists, produced one claim at a time.
pub(super) struct Merged<'s> {
    lists: Vec<&'s [usize]>,
}

impl Iterator for Merged<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let (i, &c) = self
            .lists
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.first().map(|c| (i, c)))
            .min_by_key(|&(_, c)| *c)?;
        self.lists[i] = &self.lists[i][1..];
        Some(c)
    }
}
