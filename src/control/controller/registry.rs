//! The one index of the nodes the controller knows: one record per NodeClaim, from its
//! creation to its deletion, holding everything remembered about that node; the Node
//! object and the provider id are attributes that arrive later, and the maps from a Node
//! name or a provider id to the NodeClaim live here and nowhere else (upstream's
//! `state.Cluster` pairs NodeClaim and Node under one key the same way).
//!
//! Every write goes through methods that keep the maps consistent: a NodeClaim and its
//! Node are linked when both exist and share a provider id, and unlinked when either goes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use crate::api::labels::NODEPOOL_HASH_VERSION;
use crate::api::protocol as keys;
use crate::cluster::{Launched, NodeClaimObject, NodeObject};
use crate::engine::disruption::Block;
use crate::engine::disruption::drift::HASH_VERSION;

/// What the controller remembers of one node.
#[derive(Clone, Debug)]
pub(super) struct NodeRecord {
    /// The NodeClaim as the controller knows it: its own writes at once, the cluster's
    /// echo merged in (see [`NodeRegistry::apply_claim`]).
    pub claim: NodeClaimObject,
    /// Its Node's name, once one registered with its provider id.
    pub node: Option<String>,
    /// Its index in the state's node list (launched NodeClaims only).
    pub pos: Option<usize>,
    /// The last bind, removal or termination of a pod on it
    /// (upstream `status.lastPodEventTime`).
    pub last_pod_event: Option<DateTime<Utc>>,
    /// Provisioning placed pending pods on it until then (upstream `nominatedUntil`).
    pub nominated_until: Option<DateTime<Utc>>,
    /// When it was first seen initialized.
    pub initialized_at: Option<DateTime<Utc>>,
    /// When it was first seen drifted (cleared when it no longer is).
    pub drifted_since: Option<DateTime<Utc>>,
    /// Registration, initialization and deletion were announced (once each).
    pub announced_registered: bool,
    pub announced_initialized: bool,
    pub announced_deleting: bool,
    /// Why it is being deleted, for the events.
    pub delete_reason: Option<String>,
    /// Garbage collection found its instance gone.
    pub instance_gone: bool,
    /// The launch: attempts that failed, when the next may run, the last error.
    pub launch: LaunchState,
    /// When the last drain refusal was reported (upstream dedupes FailedDraining for
    /// 2 minutes), and what it said.
    pub drain_reported: Option<(DateTime<Utc>, String)>,
    /// The kind of block of the last `DisruptionBlocked` reported (reported again only
    /// when the kind changes).
    pub reported_block: Option<std::mem::Discriminant<Block>>,
    /// Registration's and initialization's Node writes succeeded (each is made once;
    /// a failed one is tried again next round).
    pub registration_written: bool,
    pub initialization_written: bool,
    /// The status last written to the cluster (or read from it), so a write happens
    /// only when something in it changed.
    pub status_written: Option<crate::api::nodeclaim::NodeClaimStatus>,
}

/// Where a NodeClaim's launch stands. A NodeClaim with a provider id never launches
/// again; one whose launch failed retries only after a backoff, and the instance a
/// launch made is kept here until the cluster has recorded it, so a failed status
/// write is retried with that instance instead of launching another (upstream
/// `lifecycle/launch.go` caches the created instance the same way).
#[derive(Clone, Debug, Default)]
pub(super) struct LaunchState {
    pub failures: u32,
    pub retry_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// Launched by the cloud, not yet recorded in the cluster.
    pub unrecorded: Option<Launched>,
}

impl NodeRecord {
    fn new(claim: NodeClaimObject) -> NodeRecord {
        NodeRecord {
            claim,
            node: None,
            pos: None,
            last_pod_event: None,
            nominated_until: None,
            initialized_at: None,
            drifted_since: None,
            announced_registered: false,
            announced_initialized: false,
            announced_deleting: false,
            delete_reason: None,
            instance_gone: false,
            launch: LaunchState::default(),
            drain_reported: None,
            reported_block: None,
            registration_written: false,
            initialization_written: false,
            status_written: None,
        }
    }

    #[cfg(test)]
    pub fn new_for_tests(claim: NodeClaimObject) -> NodeRecord {
        NodeRecord::new(claim)
    }

    /// The provider id, once launched.
    pub fn provider_id(&self) -> Option<&str> {
        self.claim.launched.as_ref().map(|l| l.provider_id.as_str())
    }
}

/// Every node the controller knows, by NodeClaim, and every Node object.
#[derive(Debug, Default)]
pub(super) struct NodeRegistry {
    records: BTreeMap<String, NodeRecord>,
    /// Every Node object by name, ours or not.
    nodes: BTreeMap<String, NodeObject>,
    /// Provider id -> NodeClaim.
    claim_by_provider: HashMap<String, String>,
    /// Provider id -> Node name.
    node_by_provider: HashMap<String, String>,
    /// Node name -> NodeClaim, for the Nodes linked to one.
    claim_by_node: HashMap<String, String>,
    /// The NodeClaims carrying a record (see [`carries_records`]), in name order: the
    /// controller's per-round scans of the records read only these (see
    /// [`NodeRegistry::with_records`]).
    with_records: BTreeSet<String>,
}

/// The annotations the controller reads back every round: decision records, approve and
/// reject requests, commands in flight, replacements and rejections. Few NodeClaims carry
/// any, and looking for them on every NodeClaim each round was 5.2% of 12 simulated hours
/// of `examples/diurnal-1000.yaml` (`perf`). A scan that reads another key every round
/// adds it here.
const SCANNED: [&str; 6] = [
    keys::DECISION,
    keys::APPROVE,
    keys::REJECT,
    keys::COMMAND,
    keys::REPLACEMENT_OF,
    keys::REJECTED_UNTIL,
];

/// Whether a NodeClaim carries a record the per-round scans act on: one of [`SCANNED`],
/// or a nodepool hash another controller stamped (another hash version, which
/// `restamp_hashes` redoes).
fn carries_records(claim: &NodeClaimObject) -> bool {
    SCANNED.iter().any(|k| claim.annotations.contains_key(*k))
        || claim
            .annotations
            .get(NODEPOOL_HASH_VERSION)
            .is_some_and(|v| v != HASH_VERSION)
}

impl NodeRegistry {
    pub fn get(&self, claim: &str) -> Option<&NodeRecord> {
        self.records.get(claim)
    }

    pub fn get_mut(&mut self, claim: &str) -> Option<&mut NodeRecord> {
        self.records.get_mut(claim)
    }

    pub fn contains(&self, claim: &str) -> bool {
        self.records.contains_key(claim)
    }

    pub fn records(&self) -> impl Iterator<Item = &NodeRecord> {
        self.records.values()
    }

    /// Every record, to change what the controller remembers (never the claim's identity:
    /// the maps stay as they are).
    pub fn records_mut(&mut self) -> impl Iterator<Item = &mut NodeRecord> {
        self.records.values_mut()
    }

    /// The records whose NodeClaim carries a decision record, a request, a command, a
    /// replacement, a rejection or another controller's nodepool hash (see
    /// [`carries_records`]), in name order as
    /// [`NodeRegistry::records`]. The set is kept by every write of a claim's annotations
    /// that goes through the registry; unit-test builds check it against a full look at
    /// every call, and [`NodeRegistry::audit_records`] does at one poll in 64.
    pub fn with_records(&self) -> impl Iterator<Item = &NodeRecord> {
        #[cfg(test)]
        assert_eq!(
            self.with_records,
            self.fresh_with_records(),
            "the NodeClaims with records differ from a full look"
        );
        self.with_records
            .iter()
            .filter_map(|name| self.records.get(name))
    }

    /// Sets (`Some`) or removes (`None`) annotations on the controller's copy of a
    /// NodeClaim, keeping [`NodeRegistry::with_records`] right.
    pub fn annotate(&mut self, claim: &str, set: BTreeMap<String, Option<String>>) {
        if let Some(r) = self.records.get_mut(claim) {
            for (k, v) in set {
                match v {
                    Some(v) => r.claim.annotations.insert(k, v),
                    None => r.claim.annotations.remove(&k),
                };
            }
        }
        self.note_records(claim);
    }

    /// Compares the kept set of NodeClaims with records with a full look, and replaces
    /// it when they differ: a write that went around the registry shows up here,
    /// counted, and is healed. Returns whether they differed.
    pub fn audit_records(&mut self) -> bool {
        let fresh = self.fresh_with_records();
        let differed = fresh != self.with_records;
        self.with_records = fresh;
        differed
    }

    fn fresh_with_records(&self) -> BTreeSet<String> {
        self.records
            .values()
            .filter(|r| carries_records(&r.claim))
            .map(|r| r.claim.name.clone())
            .collect()
    }

    /// Brings one NodeClaim's place in [`NodeRegistry::with_records`] up to date.
    fn note_records(&mut self, claim: &str) {
        let carries = self
            .records
            .get(claim)
            .is_some_and(|r| carries_records(&r.claim));
        if carries != self.with_records.contains(claim) {
            if carries {
                self.with_records.insert(claim.to_string());
            } else {
                self.with_records.remove(claim);
            }
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.records.keys().cloned().collect()
    }

    /// How many Node objects exist (the `karpenter_cluster_state_node_count` gauge).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The NodeClaim a Node name belongs to.
    pub fn claim_of_node(&self, node: &str) -> Option<&str> {
        self.claim_by_node.get(node).map(String::as_str)
    }

    /// The NodeClaim a provider id belongs to.
    pub fn claim_of_provider(&self, provider_id: &str) -> Option<&str> {
        self.claim_by_provider.get(provider_id).map(String::as_str)
    }

    /// The NodeClaim an instance belongs to, named by its provider id or by the provider
    /// id's last segment (the AWS interruption queue names instances by EC2 id only, as
    /// upstream's `status.instanceID` field index does). The second form walks the
    /// provider index: interruption notices are rare.
    pub fn claim_of_instance(&self, instance: &str) -> Option<&str> {
        self.claim_of_provider(instance).or_else(|| {
            self.claim_by_provider
                .iter()
                .find(|(p, _)| crate::cloud::instance_id(p) == instance)
                .map(|(_, c)| c.as_str())
        })
    }

    /// A NodeClaim's Node object, once registered.
    pub fn node_of(&self, claim: &str) -> Option<&NodeObject> {
        self.records
            .get(claim)
            .and_then(|r| r.node.as_ref())
            .and_then(|n| self.nodes.get(n))
    }

    /// A claim's name given a node's name or a claim's own name (a node not registered
    /// yet goes by its claim's name).
    pub fn resolve(&self, name: &str) -> Option<&str> {
        if let Some((k, _)) = self.records.get_key_value(name) {
            return Some(k.as_str());
        }
        self.claim_of_node(name)
    }

    /// A NodeClaim this controller just created: known at once, before the watch
    /// reports it back.
    pub fn created(&mut self, claim: NodeClaimObject) {
        let name = claim.name.clone();
        self.records.insert(name.clone(), NodeRecord::new(claim));
        self.note_records(&name);
    }

    /// A NodeClaim as the cluster reports it. The cluster's word wins, except where it
    /// lags this controller's own writes: status only moves forward (a provider id, once
    /// set, is never unset; a deletion is never taken back; a removed finalizer does not
    /// come back), so an echo older than the controller's own launch, delete or finalize
    /// does not undo it. Returns whether deletion started with this change.
    pub fn apply_claim(&mut self, mut claim: NodeClaimObject) -> bool {
        let name = claim.name.clone();
        let started_deleting;
        match self.records.get_mut(&name) {
            Some(r) => {
                if claim.launched.is_none()
                    && let Some(l) = r.claim.launched.clone()
                {
                    // Our launch status, not yet echoed (or the echo predates it).
                    claim.annotations.extend(l.annotations.clone());
                    claim.launched = Some(l);
                }
                if claim.deleting.is_none() {
                    claim.deleting = r.claim.deleting;
                }
                if !r.claim.finalizer {
                    claim.finalizer = false;
                }
                started_deleting = claim.deleting.is_some() && r.claim.deleting.is_none();
                if r.launch.unrecorded.is_some() && claim.launched.is_some() {
                    r.launch.unrecorded = None;
                }
                r.claim = claim;
            }
            None => {
                started_deleting = claim.deleting.is_some();
                let mut r = NodeRecord::new(claim);
                // A NodeClaim read back after a restart: consolidateAfter counts from
                // the last pod event the cluster recorded.
                r.last_pod_event = r.claim.last_pod_event;
                self.records.insert(name.clone(), r);
            }
        }
        self.link(&name);
        self.note_records(&name);
        started_deleting
    }

    /// Records a launch the cloud made: the provider id is known from now on.
    pub fn launched(&mut self, claim: &str, launched: Launched) {
        if let Some(r) = self.records.get_mut(claim) {
            r.claim.annotations.extend(launched.annotations.clone());
            r.claim.launched = Some(launched);
        }
        self.link(claim);
        self.note_records(claim);
    }

    /// Forgets a NodeClaim (it is gone from the cluster). Its Node, if any, stays known
    /// but unlinked.
    pub fn remove_claim(&mut self, claim: &str) -> Option<NodeRecord> {
        let r = self.records.remove(claim)?;
        self.with_records.remove(claim);
        if let Some(p) = r.provider_id() {
            self.claim_by_provider.remove(p);
        }
        if let Some(n) = &r.node {
            self.claim_by_node.remove(n);
        }
        Some(r)
    }

    /// A Node as the cluster reports it; returns the NodeClaim it belongs to, if any.
    pub fn apply_node(&mut self, node: NodeObject) -> Option<String> {
        let name = node.name.clone();
        let provider = node.provider_id.clone();
        if let Some(old) = self.nodes.get(&name)
            && old.provider_id != provider
        {
            self.node_by_provider.remove(&old.provider_id);
        }
        if !provider.is_empty() {
            self.node_by_provider.insert(provider.clone(), name.clone());
        }
        self.nodes.insert(name.clone(), node);
        let claim = self.claim_by_provider.get(&provider).cloned()?;
        self.link(&claim);
        Some(claim)
    }

    /// A Node went away; returns the NodeClaim it belonged to, if any.
    pub fn remove_node(&mut self, name: &str) -> Option<String> {
        if let Some(n) = self.nodes.remove(name) {
            self.node_by_provider.remove(&n.provider_id);
        }
        let claim = self.claim_by_node.remove(name)?;
        if let Some(r) = self.records.get_mut(&claim) {
            r.node = None;
        }
        Some(claim)
    }

    /// Links a NodeClaim with the Node sharing its provider id, if both exist.
    fn link(&mut self, claim: &str) {
        let Some(r) = self.records.get_mut(claim) else {
            return;
        };
        let Some(provider) = r.claim.launched.as_ref().map(|l| l.provider_id.clone()) else {
            return;
        };
        self.claim_by_provider
            .insert(provider.clone(), claim.to_string());
        let node = self.node_by_provider.get(&provider).cloned();
        if r.node != node {
            if let Some(old) = r.node.take() {
                self.claim_by_node.remove(&old);
            }
            r.node = node.clone();
        }
        if let Some(n) = node {
            self.claim_by_node.insert(n, claim.to_string());
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::engine::catalog::CapacityType;
    use crate::engine::requirements::Requirements;
    use crate::engine::resources::Resources;

    /// A NodeClaim of pool `default`, not launched.
    pub(crate) fn claim(name: &str) -> NodeClaimObject {
        NodeClaimObject {
            name: name.into(),
            nodepool: "default".into(),
            requirements: Requirements::default(),
            requests: Resources::default(),
            labels: Default::default(),
            annotations: Default::default(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            expire_after: None,
            termination_grace_period: None,
            created: DateTime::UNIX_EPOCH,
            deleting: None,
            finalizer: true,
            launched: None,
            initialized_at: None,
            conditions: Vec::new(),
            last_pod_event: None,
        }
    }

    /// What an m5.large launch in zone `z` reports.
    pub(crate) fn launched(provider: &str) -> Launched {
        Launched {
            provider_id: provider.into(),
            instance_type: "m5.large".into(),
            zone: "z".into(),
            capacity_type: CapacityType::OnDemand,
            price: 0.1,
            capacity: Resources::default(),
            allocatable: Resources::default(),
            labels: Default::default(),
            hostname: "ip-1".into(),
            at: DateTime::UNIX_EPOCH,
            image_id: None,
            annotations: Default::default(),
        }
    }

    fn node(name: &str, provider: &str) -> NodeObject {
        NodeObject {
            name: name.into(),
            provider_id: provider.into(),
            labels: Default::default(),
            annotations: Default::default(),
            taints: Vec::new(),
            allocatable: Resources::default(),
            ready: true,
            faults: Vec::new(),
            created: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_stale_echo_does_not_undo_a_launch_and_the_node_links_either_way() {
        let mut r = NodeRegistry::default();
        r.created(claim("a"));
        r.launched("a", launched("p1"));
        // The watch echoes the creation, from before the launch.
        r.apply_claim(claim("a"));
        assert_eq!(r.get("a").unwrap().provider_id(), Some("p1"));
        // The Node registers before or after: linked both ways.
        assert_eq!(r.apply_node(node("ip-1", "p1")).as_deref(), Some("a"));
        assert_eq!(r.claim_of_node("ip-1"), Some("a"));
        assert_eq!(r.resolve("ip-1"), Some("a"));
        assert_eq!(r.resolve("a"), Some("a"));

        let mut r = NodeRegistry::default();
        assert_eq!(r.apply_node(node("ip-2", "p2")), None);
        let mut c = claim("b");
        c.launched = Some(launched("p2"));
        r.apply_claim(c);
        assert_eq!(r.node_of("b").map(|n| n.name.as_str()), Some("ip-2"));
        assert_eq!(r.remove_node("ip-2").as_deref(), Some("b"));
        assert!(r.node_of("b").is_none());
        assert!(r.remove_claim("b").is_some());
        assert_eq!(r.claim_of_provider("p2"), None);
    }

    #[test]
    fn an_instance_is_found_by_its_provider_id_or_the_ec2_id_it_ends_with() {
        let mut r = NodeRegistry::default();
        r.created(claim("a"));
        r.launched("a", launched("aws:///us-east-1a/i-0abc"));
        r.created(claim("b"));
        r.launched("b", launched("aws:///us-east-1b/i-0abcd"));
        assert_eq!(r.claim_of_instance("aws:///us-east-1a/i-0abc"), Some("a"));
        assert_eq!(r.claim_of_instance("i-0abc"), Some("a"));
        assert_eq!(r.claim_of_instance("i-0abcd"), Some("b"));
        assert_eq!(r.claim_of_instance("i-0ab"), None);
        assert_eq!(r.claim_of_instance("us-east-1a"), None);
    }

    fn names_with_records(r: &NodeRegistry) -> Vec<&str> {
        r.with_records().map(|r| r.claim.name.as_str()).collect()
    }

    /// Every way a record reaches a NodeClaim puts it in the scanned set, and every way it
    /// leaves takes it out; annotations the scans do not read leave the set alone.
    #[test]
    fn the_claims_with_records_follow_every_write() {
        let mut r = NodeRegistry::default();
        let mut replacement = claim("b");
        replacement
            .annotations
            .insert(keys::REPLACEMENT_OF.into(), "7".into());
        r.created(claim("a"));
        r.created(replacement);
        r.created(claim("c"));
        assert_eq!(names_with_records(&r), ["b"]);

        // The controller's own writes.
        let set =
            |k: &str, v: Option<&str>| BTreeMap::from([(k.to_string(), v.map(str::to_string))]);
        r.annotate("c", set(keys::DECISION, Some("3")));
        r.annotate("a", set("example.com/other", Some("x")));
        assert_eq!(names_with_records(&r), ["b", "c"]);
        r.annotate("b", set(keys::REPLACEMENT_OF, None));
        assert_eq!(names_with_records(&r), ["c"]);

        // The cluster's word: an approve request written by a console, then a NodeClaim
        // echoed without the decision record.
        let mut approved = claim("a");
        approved
            .annotations
            .insert(keys::APPROVE.into(), "3".into());
        r.apply_claim(approved);
        r.apply_claim(claim("c"));
        assert_eq!(names_with_records(&r), ["a"]);

        // A NodeClaim that goes takes its place with it.
        r.remove_claim("a");
        assert_eq!(names_with_records(&r), Vec::<&str>::new());

        // Another controller's hash version is a record until re-stamped with ours.
        let mut foreign = claim("d");
        foreign
            .annotations
            .insert(NODEPOOL_HASH_VERSION.into(), "v3".into());
        r.apply_claim(foreign);
        assert_eq!(names_with_records(&r), ["d"]);
        r.annotate("d", set(NODEPOOL_HASH_VERSION, Some(HASH_VERSION)));
        assert_eq!(names_with_records(&r), Vec::<&str>::new());
    }

    /// A write that goes around the registry is found by the audit, which heals the set.
    #[test]
    fn the_audit_heals_a_write_around_the_registry() {
        let mut r = NodeRegistry::default();
        r.created(claim("a"));
        r.get_mut("a")
            .unwrap()
            .claim
            .annotations
            .insert(keys::COMMAND.into(), "1".into());
        assert!(r.audit_records());
        assert_eq!(names_with_records(&r), ["a"]);
        assert!(!r.audit_records());
    }
}
