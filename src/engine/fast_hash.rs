//! Hash maps for the hot paths: keys are names the controller looks up for every node or
//! pod of every pass (NodeClaim names, pool names, pod keys, topology groups), and the
//! standard library's SipHash spent more time hashing them than the lookups saved.
//! foldhash is several times faster on short strings and still seeds per process, so
//! iteration order stays as unspecified as with the standard hasher: code that depends on
//! it was already wrong, and none does.

/// The hasher of [`FastMap`] and [`FastSet`].
pub type Fast = foldhash::fast::RandomState;

/// A `HashMap` hashing with foldhash (see the module's note).
pub type FastMap<K, V> = std::collections::HashMap<K, V, Fast>;

/// A `HashSet` hashing with foldhash (see the module's note).
pub type FastSet<T> = std::collections::HashSet<T, Fast>;
