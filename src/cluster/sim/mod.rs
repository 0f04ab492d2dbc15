//! The embedded cluster: Nodes, Pods, NodePools, NodeClaims, DaemonSets and PDBs in memory,
//! with the Kubernetes behaviour the controller depends on and nothing else:
//!
//! - a kubelet stand-in: an instance that is running registers its Node after
//!   `registration_delay`, becomes Ready after `ready_delay`, and its startup taints are
//!   removed `startup_delay` after that (what a CNI or an agent does in a real cluster);
//! - a kube-scheduler stand-in that binds pending pods to Ready nodes that fit, with the
//!   same constraint checks as the engine's scheduler (resources, taints, node and pod
//!   affinity, topology spread, host ports), and marks the rest `Unschedulable`;
//! - Deployments and Jobs that create pods, DaemonSets that put a pod on every matching
//!   node, an eviction API that honours PodDisruptionBudgets, and the termination
//!   finalizer: a deleted NodeClaim stays until the controller removes the finalizer, then
//!   its Node and the Node's pods go (the pod garbage collector).
//!
//! Everything is deterministic for a seed; the simulation driver decides when time moves.

mod api;
mod index;
mod kubelet;
mod scheduler;
pub mod workloads;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use super::{Change, DaemonSetObject, NodeClaimObject, NodeObject, Object, ObjectRef};
use crate::api::generate_name::generate_name;
use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::api::nodepool::NodePool;
use crate::engine::fast_hash::FastSet;
use crate::engine::pod::{Owner, Phase, Pod, PodKey};
use crate::engine::state::Pdb;
pub use kubelet::NodeTimeline;
use workloads::{Deployment, Job, PdbCounts, PdbSpec};

/// Pods by key (foldhash: keys are the cluster's own, nobody picks them to collide),
/// each shared with the index's sets (see [`index`]).
type PodMap = HashMap<PodKey, Arc<Pod>, foldhash::fast::FixedState>;

/// The taint the node lifecycle controller puts on a node whose kubelet stopped
/// reporting; pods without a toleration are evicted from it after
/// [`SimSettings::unreachable_eviction`].
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Timings and chaos switches of the simulated cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSettings {
    /// From instance running to Node registered.
    pub registration_delay: TimeDelta,
    /// From registration to Ready.
    pub ready_delay: TimeDelta,
    /// From Ready to startup taints removed.
    pub startup_delay: TimeDelta,
    /// From a pod becoming placeable to the kube-scheduler binding it (a real scheduler
    /// and kubelet take seconds; 0 binds in the same round).
    pub bind_delay: TimeDelta,
    /// How late the controller's watch sees a change (a real API server's watch lags
    /// the write that caused it; 0 delivers at once). The controller's own writes are
    /// known to it at once: what arrives late is the cluster echoing them back.
    pub watch_latency: TimeDelta,
    /// Taint-based eviction of pods from an unreachable node (default toleration 300 s).
    pub unreachable_eviction: TimeDelta,
    /// A taint every new Node gets at registration and never loses (the runaway
    /// scale-up chaos case: nodes that never become usable).
    pub chaos_taint: Option<Taint>,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            registration_delay: TimeDelta::seconds(20),
            ready_delay: TimeDelta::seconds(5),
            startup_delay: TimeDelta::seconds(3),
            bind_delay: TimeDelta::zero(),
            watch_latency: TimeDelta::zero(),
            unreachable_eviction: TimeDelta::seconds(300),
            chaos_taint: None,
        }
    }
}

/// A registered node and its kubelet's schedule.
#[derive(Clone, Debug)]
struct SimNode {
    object: NodeObject,
    timeline: NodeTimeline,
}

/// The simulated cluster. Cloneable so a what-if can fork the world at an instant
/// (`crate::whatif`): a clone is an independent cluster with the same objects, timings
/// and random state.
#[derive(Clone)]
pub struct SimCluster {
    pub settings: SimSettings,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
    nodepools: BTreeMap<String, NodePool>,
    nodeclaims: BTreeMap<String, NodeClaimObject>,
    nodes: BTreeMap<String, SimNode>,
    /// Every pod by key, hashed: the stand-ins look a pod up for each key their index
    /// gives them (every bound pod at each scheduling round), which an ordered map made a
    /// third of the scheduler's cost. Where order matters (a relist, [`SimCluster::pods`])
    /// it is sorted by key on the way out, the order the API server lists in.
    pods: PodMap,
    /// The pods by what the scheduler and the workload controllers ask of them; every
    /// change to `pods` goes through `store_pod`, `change_pod` or `delete_pod`.
    index: index::PodIndex,
    pdbs: BTreeMap<(String, String), PdbSpec>,
    /// Each PDB's expected and healthy pods, kept as pods change (every change goes
    /// through `store_pod`, `change_pod` or `delete_pod`, which count it out and in).
    pdb_counts: BTreeMap<(String, String), PdbCounts>,
    /// `status.disruptionsAllowed` as last computed (and reported).
    pdb_allowed: BTreeMap<(String, String), i32>,
    /// Evictions granted since then.
    pdb_spent: BTreeMap<(String, String), i32>,
    daemonsets: BTreeMap<(String, String), DaemonSetObject>,
    deployments: BTreeMap<(String, String), Deployment>,
    jobs: BTreeMap<(String, String), Job>,
    /// Instances whose kubelet has registered (or will never: reclaimed). Asked about
    /// every instance at every round, so hashed rather than ordered.
    registered: FastSet<String>,
    /// The latest "running since" a registration round has looked at: every instance
    /// running before it was looked at then (see `register_nodes`), so a round asks the
    /// set only about the instances that came since, not about all thousand.
    registration_seen: Option<DateTime<Utc>>,
    /// Changes not yet seen by the controller, with when they happened (the watch
    /// delivers each `watch_latency` later).
    queue: std::collections::VecDeque<(DateTime<Utc>, Change)>,
    resync: bool,
    /// Something the scheduler reads changed since its last attempt.
    schedule_dirty: bool,
    /// Pods the scheduler could place, since when (it binds them `bind_delay` later).
    bind_at: HashMap<PodKey, DateTime<Utc>>,
    pods_dirty: bool,
    /// The controller wrote something since the driver last asked.
    written: bool,
    /// Writes accepted so far, and after how many the API goes away (chaos).
    writes: usize,
    fail_after: Option<usize>,
    refused: usize,
    /// Annotations of the settings object (the pause of every pool).
    console_settings: BTreeMap<String, String>,
    /// Pools (`None`: every pool) whose new nodes' kubelets stop reporting this long
    /// after registering (zero: never Ready): a broken image (the scenario's `kubelet`).
    broken_kubelets: BTreeMap<Option<String>, chrono::TimeDelta>,
    rng: fastrand::Rng,
}

impl SimCluster {
    pub fn new(start: DateTime<Utc>, settings: SimSettings, seed: u64) -> SimCluster {
        SimCluster {
            settings,
            start,
            now: start,
            nodepools: BTreeMap::new(),
            nodeclaims: BTreeMap::new(),
            nodes: BTreeMap::new(),
            pods: PodMap::default(),
            index: index::PodIndex::default(),
            pdbs: BTreeMap::new(),
            pdb_counts: BTreeMap::new(),
            pdb_allowed: BTreeMap::new(),
            pdb_spent: BTreeMap::new(),
            daemonsets: BTreeMap::new(),
            deployments: BTreeMap::new(),
            jobs: BTreeMap::new(),
            registered: FastSet::default(),
            registration_seen: None,
            queue: std::collections::VecDeque::new(),
            resync: true,
            schedule_dirty: true,
            broken_kubelets: Default::default(),
            bind_at: HashMap::new(),
            pods_dirty: true,
            written: false,
            writes: 0,
            fail_after: None,
            refused: 0,
            console_settings: BTreeMap::new(),
            rng: fastrand::Rng::with_seed(seed ^ 0x005e_edc1_u64),
        }
    }

    pub(super) fn emit(&mut self, change: Change) {
        if self.resync {
            return;
        }
        // Under a lagging watch, changes made in the same instant arrive one API
        // round trip (1 ms) apart, as a real watch delivers them one by one: a
        // controller can see a NodeClaim's creation before its launch status.
        let mut at = self.now;
        if self.settings.watch_latency > TimeDelta::zero()
            && let Some((last, _)) = self.queue.back()
        {
            at = at.max(*last + TimeDelta::milliseconds(1));
        }
        self.queue.push_back((at, change));
    }

    pub(super) fn emit_pod(&mut self, key: &PodKey) {
        self.pods_dirty = true;
        if let Some(p) = self.pods.get(key) {
            let c = Change::Applied(Object::Pod(Box::new(Pod::clone(p))));
            self.emit(c);
        }
    }

    // ---- objects the scenario (or an operator) puts in ----

    /// A NodeClaim that exists, launched, when the run begins (a scenario's running
    /// node): in the cluster before the controller's first list, as an exported
    /// cluster's are.
    pub fn adopt_nodeclaim(&mut self, mut claim: NodeClaimObject) {
        claim.finalizer = true;
        self.nodeclaims.insert(claim.name.clone(), claim);
    }

    /// Creates or replaces a NodePool (a `kubectl apply`).
    pub fn apply_nodepool(&mut self, pool: NodePool) {
        let name = pool.metadata.name.clone().unwrap_or_default();
        self.nodepools.insert(name, pool.clone());
        self.emit(Change::Applied(Object::NodePool(Box::new(pool))));
    }

    pub fn nodepool(&self, name: &str) -> Option<&NodePool> {
        self.nodepools.get(name)
    }

    pub fn add_daemonset(&mut self, ds: DaemonSetObject) {
        let key = (ds.namespace.clone(), ds.name.clone());
        self.daemonsets.insert(key, ds.clone());
        self.emit(Change::Applied(Object::DaemonSet(Box::new(ds))));
        let nodes: Vec<String> = self.nodes.keys().cloned().collect();
        for n in nodes {
            self.place_daemons(&n);
        }
    }

    pub fn add_pdb(&mut self, pdb: PdbSpec) {
        let key = (pdb.namespace.clone(), pdb.name.clone());
        let mut counts = PdbCounts::default();
        for p in self.pods.values() {
            counts.add(pdb.counts(p), true);
        }
        self.pdb_counts.insert(key.clone(), counts);
        self.pdbs.insert(key, pdb);
        self.pods_dirty = true;
    }

    pub fn add_deployment(&mut self, d: Deployment) {
        self.deployments
            .insert((d.namespace.clone(), d.name.clone()), d);
    }

    pub fn add_job(&mut self, j: Job) {
        self.jobs.insert((j.namespace.clone(), j.name.clone()), j);
    }

    /// A bare pod: created once, never recreated.
    pub fn add_pod(&mut self, mut pod: Pod) {
        pod.created = self.now;
        pod.node_name = None;
        pod.phase = Phase::Pending;
        pod.unschedulable = false;
        let key = pod.key.clone();
        self.store_pod(pod);
        self.schedule_dirty = true;
        self.emit_pod(&key);
    }

    /// Stores a pod (new or replacing one of the same key) and indexes it.
    pub(super) fn store_pod(&mut self, pod: Pod) {
        if let Some(old) = self.pods.get(&pod.key) {
            self.index.remove(old);
            count_in_pdbs(&self.pdbs, &mut self.pdb_counts, old, false);
        }
        let pod = Arc::new(pod);
        self.index.insert(&pod);
        count_in_pdbs(&self.pdbs, &mut self.pdb_counts, &pod, true);
        self.pods.insert(pod.key.clone(), pod);
    }

    /// Changes a pod in place, keeping the index right. Returns false when there is no
    /// such pod.
    pub(super) fn change_pod(&mut self, key: &PodKey, change: impl FnOnce(&mut Pod)) -> bool {
        let Some(p) = self.pods.get_mut(key) else {
            return false;
        };
        self.index.remove(p);
        count_in_pdbs(&self.pdbs, &mut self.pdb_counts, p, false);
        // Out of the index, the map holds the only `Arc`: nothing is copied.
        change(Arc::make_mut(p));
        self.index.insert(p);
        count_in_pdbs(&self.pdbs, &mut self.pdb_counts, p, true);
        true
    }

    /// Sets a Deployment's replica schedule (`kubectl scale` sets a fixed count).
    /// Returns false when there is no such Deployment.
    pub fn set_replicas(
        &mut self,
        namespace: &str,
        name: &str,
        replicas: workloads::Replicas,
    ) -> bool {
        match self
            .deployments
            .get_mut(&(namespace.to_string(), name.to_string()))
        {
            Some(d) => {
                d.replicas = replicas;
                true
            }
            None => false,
        }
    }

    /// Sets (`Some`) or removes (`None`) an annotation on every pod in `namespace` whose
    /// labels match `selector`. Returns how many pods changed.
    pub fn annotate_pods(
        &mut self,
        namespace: &str,
        selector: &crate::engine::selector::Selector,
        key: &str,
        value: Option<&str>,
    ) -> usize {
        let keys: Vec<PodKey> = self
            .pods
            .values()
            .filter(|p| p.key.namespace == namespace && selector.matches(&p.labels))
            .map(|p| p.key.clone())
            .collect();
        for k in &keys {
            self.change_pod(k, |p| {
                match value {
                    Some(v) => p.annotations.insert(key.to_string(), v.to_string()),
                    None => p.annotations.remove(key),
                };
            });
            self.emit_pod(k);
        }
        keys.len()
    }

    /// From now on, nodes of `nodepool` (of every pool for `None`) that register stop
    /// reporting `fail_after` after registering (zero: they never become Ready), as with
    /// a broken image; `None` mends new nodes (nodes registered meanwhile keep failing).
    pub fn set_kubelet_failure(
        &mut self,
        nodepool: Option<String>,
        fail_after: Option<chrono::TimeDelta>,
    ) {
        match fail_after {
            Some(after) => self.broken_kubelets.insert(nodepool, after),
            None => self.broken_kubelets.remove(&nodepool),
        };
    }

    /// A node monitoring agent reports `condition` = `status` on the node from now on (a
    /// condition no repair policy names changes nothing). False when there is no such
    /// node.
    pub fn set_fault(&mut self, node: &str, condition: &str, status: &str) -> bool {
        let now = self.now;
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        n.object.faults.retain(|f| f.condition != condition);
        n.object
            .faults
            .extend(crate::engine::repair::NodeFault::of(condition, status, now));
        let obj = n.object.clone();
        self.emit(Change::Applied(Object::Node(Box::new(obj))));
        true
    }

    /// The kubelet of a node stops reporting: NotReady, tainted unreachable; pods are
    /// evicted after `unreachable_eviction`. Returns false when there is no such node.
    pub fn set_not_ready(&mut self, node: &str) -> bool {
        let now = self.now;
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        n.timeline.kubelet_lost = Some(now);
        n.object.ready = false;
        // The node lifecycle controller marks a silent kubelet's Ready Unknown.
        n.object.faults.retain(|f| f.condition != "Ready");
        n.object.faults.extend(crate::engine::repair::NodeFault::of(
            "Ready", "Unknown", now,
        ));
        for effect in [TaintEffect::NoSchedule, TaintEffect::NoExecute] {
            if !n
                .object
                .taints
                .iter()
                .any(|t| t.key == UNREACHABLE_TAINT && t.effect == effect)
            {
                n.object.taints.push(Taint {
                    key: UNREACHABLE_TAINT.into(),
                    value: None,
                    effect,
                    time_added: None,
                });
            }
        }
        let obj = n.object.clone();
        self.schedule_dirty = true;
        self.emit(Change::Applied(Object::Node(Box::new(obj))));
        true
    }

    /// The instance behind a node is gone (reclaimed or terminated outside the
    /// controller): its kubelet stops.
    pub fn instance_gone(&mut self, provider_id: &str) {
        self.registered.insert(provider_id.to_string());
        let node = self
            .nodes
            .values()
            .find(|n| n.object.provider_id == provider_id)
            .map(|n| n.object.name.clone());
        if let Some(n) = node {
            self.set_not_ready(&n);
        }
    }

    // ---- reading ----

    pub fn nodes(&self) -> impl Iterator<Item = &NodeObject> {
        self.nodes.values().map(|n| &n.object)
    }

    pub fn nodeclaims(&self) -> impl Iterator<Item = &NodeClaimObject> {
        self.nodeclaims.values()
    }

    /// Every pod, in key order.
    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods_in_order().into_iter()
    }

    /// Every pod, in key order (the API server's list order).
    fn pods_in_order(&self) -> Vec<&Pod> {
        let mut pods: Vec<&Pod> = self.pods.values().map(|p| &**p).collect();
        pods.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        pods
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    // ---- time ----

    /// Moves the cluster to `now`: kubelets register and become ready (for the running
    /// `instances`), workloads converge, the scheduler binds, PDB status is refreshed.
    pub fn advance<'a>(
        &mut self,
        now: DateTime<Utc>,
        instances: impl Iterator<Item = &'a crate::cloud::sim::SimInstance>,
    ) {
        self.now = self.now.max(now);
        self.register_nodes(instances);
        self.progress_nodes();
        self.run_workloads();
        self.schedule();
        self.refresh_pdbs();
    }

    /// The next moment something changes on its own, given the running instances.
    pub fn next_event<'a>(
        &self,
        instances: impl Iterator<Item = &'a crate::cloud::sim::SimInstance>,
    ) -> Option<DateTime<Utc>> {
        let now = self.now;
        let mut next: Vec<DateTime<Utc>> = Vec::new();
        // A registration due by now is no next event, registered or not: the set is asked
        // only about the instances still starting, and the delay is added only to theirs.
        let since = now - self.settings.registration_delay;
        for i in instances {
            if i.running_at > since && !self.registered.contains(&i.instance.provider_id) {
                next.push(i.running_at + self.settings.registration_delay);
            }
        }
        let horizon = kubelet::Horizon::new(&self.settings, now);
        for n in self.nodes.values() {
            next.extend(n.timeline.next_event(&self.settings, &horizon));
        }
        if let Some((at, _)) = self.queue.front() {
            next.push(*at + self.settings.watch_latency);
        }
        next.extend(self.bind_at.values().map(|t| *t + self.settings.bind_delay));
        let offset = now - self.start;
        for d in self.deployments.values() {
            if let Some(o) = d.replicas.next_change(offset) {
                next.push(self.start + o);
            }
        }
        for j in self.jobs.values() {
            if j.start > offset {
                next.push(self.start + j.start);
            }
        }
        for (namespace, name) in self.jobs.keys() {
            let owner = (namespace.clone(), "Job".to_string(), name.clone());
            for p in self.index.owned_by(&owner) {
                if let Some(t) = self.job_pod_done_at(p) {
                    next.push(t);
                }
            }
        }
        next.into_iter().filter(|t| *t > now).min()
    }

    fn run_workloads(&mut self) {
        let offset = self.now - self.start;
        // Job pods whose run is over, in key order (the order of a walk over every pod).
        // The index holds live pods only; the simulated cluster never marks a pod
        // deleting (it deletes at once), so every job pod is in it.
        let mut done: Vec<PodKey> = Vec::new();
        for (namespace, name) in self.jobs.keys() {
            let owner = (namespace.clone(), "Job".to_string(), name.clone());
            for p in self.index.owned_by(&owner) {
                if self.job_pod_done_at(p).is_some_and(|t| t <= self.now) {
                    done.push(p.key.clone());
                }
            }
        }
        done.sort();
        // Jobs: finished pods succeed and go; missing pods are created.
        for k in done {
            if let Some(owner) = self.pods.get(&k).and_then(|p| p.owner.clone())
                && let Some(j) = self.jobs.get_mut(&(k.namespace.clone(), owner.name))
            {
                j.succeeded += 1;
            }
            self.delete_pod(&k);
        }
        let jobs: Vec<(String, String)> = self.jobs.keys().cloned().collect();
        for key in jobs {
            let j = &self.jobs[&key];
            if j.start > offset {
                continue;
            }
            let active = self
                .index
                .owned_count(&(key.0.clone(), "Job".to_string(), key.1.clone()))
                as u32;
            let left = j.completions.saturating_sub(j.succeeded + active);
            let want = j.parallelism.saturating_sub(active).min(left);
            let template = j.template.clone();
            for _ in 0..want {
                self.create_owned(&template, "Job", &key.1);
            }
        }
        // Deployments: converge on the schedule's count; scale-down removes pending pods
        // first, then the newest (the ReplicaSet controller's ranking, simplified).
        let deployments: Vec<(String, String)> = self.deployments.keys().cloned().collect();
        for key in deployments {
            let d = &self.deployments[&key];
            let want = d.replicas.at(offset) as usize;
            let template = d.template.clone();
            let owner = (key.0.clone(), "Deployment".to_string(), key.1.clone());
            let live = self.index.owned_count(&owner);
            if live < want {
                for _ in live..want {
                    self.create_owned(&template, "Deployment", &key.1);
                }
            } else if live > want {
                // (bound, created, pod) of each live pod.
                let mut pods: Vec<(bool, DateTime<Utc>, PodKey)> = self
                    .index
                    .owned_by(&owner)
                    .map(|p| (p.node_name.is_some(), p.created, p.key.clone()))
                    .collect();
                pods.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
                let excess = pods.len() - want;
                for (_, _, k) in pods.into_iter().take(excess) {
                    self.delete_pod(&k);
                }
            }
        }
    }

    fn job_pod_done_at(&self, p: &Pod) -> Option<DateTime<Utc>> {
        let owner = p.owner.as_ref().filter(|o| o.kind == "Job")?;
        let j = self
            .jobs
            .get(&(p.key.namespace.clone(), owner.name.clone()))?;
        let started = p.annotations.get(STARTED)?.parse::<DateTime<Utc>>().ok()?;
        Some(started + j.run_for)
    }

    fn create_owned(&mut self, template: &Pod, kind: &str, owner: &str) {
        let mut p = template.clone();
        let namespace = p.key.namespace.clone();
        let pods = &self.pods;
        p.key.name = generate_name(&mut self.rng, owner, |name| {
            pods.contains_key(&PodKey {
                namespace: namespace.clone(),
                name: name.to_string(),
            })
        });
        p.uid = p.key.to_string();
        p.owner = Some(Owner {
            kind: kind.to_string(),
            name: owner.to_string(),
        });
        self.add_pod(p);
    }

    pub(super) fn delete_pod(&mut self, key: &PodKey) {
        if let Some(p) = self.pods.remove(key) {
            self.index.remove(&p);
            count_in_pdbs(&self.pdbs, &mut self.pdb_counts, &p, false);
            self.schedule_dirty |= p.node_name.is_some();
            self.pods_dirty = true;
            self.emit(Change::Deleted(ObjectRef::Pod(key.clone())));
        }
    }

    /// A PDB's `status.disruptionsAllowed` from its kept counts (unit builds check them
    /// against a walk over every pod).
    fn pdb_allowed_now(&self, spec: &PdbSpec) -> i32 {
        let key = (spec.namespace.clone(), spec.name.clone());
        let counts = self.pdb_counts.get(&key).copied().unwrap_or_default();
        #[cfg(test)]
        {
            let mut walked = PdbCounts::default();
            for p in self.pods.values() {
                walked.add(spec.counts(p), true);
            }
            assert_eq!(counts, walked, "kept counts of PDB {key:?}");
        }
        spec.allowed(counts)
    }

    pub(super) fn refresh_pdbs(&mut self) {
        if !self.pods_dirty {
            return;
        }
        self.pods_dirty = false;
        self.pdb_spent.clear();
        let updates: Vec<Pdb> = self
            .pdbs
            .values()
            .map(|spec| Pdb {
                namespace: spec.namespace.clone(),
                name: spec.name.clone(),
                selector: spec.selector.clone(),
                disruptions_allowed: self.pdb_allowed_now(spec),
            })
            .collect();
        for pdb in updates {
            let key = (pdb.namespace.clone(), pdb.name.clone());
            if self.pdb_allowed.get(&key) != Some(&pdb.disruptions_allowed) {
                self.pdb_allowed.insert(key, pdb.disruptions_allowed);
                self.emit(Change::Applied(Object::Pdb(Box::new(pdb))));
            }
        }
    }
}

/// Counts `p` into (`up`) or out of every PDB's kept counts.
fn count_in_pdbs(
    pdbs: &BTreeMap<(String, String), PdbSpec>,
    counts: &mut BTreeMap<(String, String), PdbCounts>,
    p: &Pod,
    up: bool,
) {
    for (key, spec) in pdbs {
        let c = spec.counts(p);
        if c != PdbCounts::default()
            && let Some(kept) = counts.get_mut(key)
        {
            kept.add(c, up);
        }
    }
}

/// Where the simulated kubelet records when a job pod started running.
const STARTED: &str = "sim.karpenter-tui.dev/started";

#[cfg(test)]
mod tests;
