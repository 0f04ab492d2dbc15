//! Wiring for the embedded world: a scenario's simulated cluster and cloud, the real
//! controller over them, and the clock that moves time, either virtual (`simulate`: as
//! fast as the CPU allows) or scaled wall-clock time (the demo at `--speed`). Between
//! controller rounds the driver plays the scenario's timeline and lets the cluster and the
//! cloud move on their own (instances boot, kubelets register, workloads converge).

use std::collections::VecDeque;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::mpsc;

use crate::cloud::sim::SimCloud;
use crate::cluster::Launched;
use crate::cluster::scenario::timeline::{OperatorAction, patch_nodepool};
use crate::cluster::scenario::{Action, RunningNode, Scenario, TimedAction};
use crate::cluster::sim::SimCluster;
use crate::cluster::sim::workloads::Replicas;
use crate::cluster::template::nodeclaim_for;
use crate::control::approvals::PolicyTable;
use crate::control::clock::{Clock, ScaledClock, VirtualClock};
use crate::control::controller::{Controller, Settings};
use crate::control::disruption::ActionError;
use crate::control::events::{Event, EventKind};
use crate::control::journal::Journal;
use crate::control::requests::{self, Envelope};
use crate::engine::approval::Rule;
use crate::engine::catalog::Catalog;
use crate::engine::selector::Selector;

/// How long after the start the scenario has scripted events: its timeline's last entry
/// and its Deployments' last replica step. None when a replica curve never ends.
fn scripted_until(scenario: &Scenario) -> Option<TimeDelta> {
    let mut end = scenario
        .timeline
        .iter()
        .map(|t| t.at)
        .max()
        .unwrap_or_else(TimeDelta::zero);
    for d in &scenario.deployments {
        match &d.replicas {
            Replicas::Fixed(_) => {}
            Replicas::Steps { steps, .. } => {
                if let Some(last) = steps.iter().map(|(at, _)| *at).max() {
                    end = end.max(last);
                }
            }
            Replicas::Diurnal { .. } => return None,
        }
    }
    Some(end)
}

/// The actor name scenario timeline operator actions are journaled under.
pub const SCENARIO_OPERATOR: &str = "scenario";

/// How time moves.
#[derive(Clone, Debug)]
pub enum Pace {
    /// Jump from one event to the next.
    Virtual,
    /// Wall-clock time, `speed` times faster.
    RealTime { speed: f64 },
}

/// Knobs the command line adds to a scenario.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub seed: Option<u64>,
    /// Approval rules replacing the scenario's (`auto`, `manual`, ...).
    pub approval: Option<Vec<String>>,
    pub journal: Option<std::path::PathBuf>,
}

enum Timekeeper {
    Virtual(VirtualClock),
    Scaled(ScaledClock),
}

/// A running simulation.
pub struct Simulation {
    pub controller: Controller<SimCluster, SimCloud>,
    clock: Timekeeper,
    shared_clock: Arc<dyn Clock>,
    start: DateTime<Utc>,
    timeline: VecDeque<TimedAction>,
    policy: PolicyTable,
    seed: u64,
    journal: Option<std::path::PathBuf>,
    features: crate::engine::features::Features,
    /// Scripted operator actions refused because the journal could not record them.
    unjournaled: Vec<String>,
    /// What setting up found and mended (a journal's torn last line), for the user.
    pub warnings: Vec<String>,
}

/// Puts a scenario's running node in place: its instance, running long enough that its
/// kubelet registers in the first round, and its NodeClaim, launched, as the controller
/// would have made it from the pool's template (scenario parsing checked the pool and
/// the offering).
fn adopt(
    cluster: &mut SimCluster,
    cloud: &mut SimCloud,
    scenario: &Scenario,
    node: &RunningNode,
    catalog: &Catalog,
) {
    let start = scenario.start;
    let (Some(pool), Some(it)) = (
        scenario
            .nodepools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(node.nodepool.as_str())),
        catalog.get(&node.instance_type),
    ) else {
        return;
    };
    let since = start - scenario.settings.registration_delay;
    let Some(instance) = cloud.adopt(
        &node.instance_type,
        &node.zone,
        node.capacity_type,
        &node.name,
        &node.nodepool,
        since,
    ) else {
        return;
    };
    let it = Arc::new(it.clone());
    let requirements = crate::engine::static_pools::claim_shape(pool, &[Arc::clone(&it)], &[])
        .map(|(r, _, _)| r)
        .unwrap_or_default();
    let mut claim = nodeclaim_for(
        &node.name,
        pool,
        &requirements,
        std::slice::from_ref(&node.instance_type),
        Default::default(),
        since,
    );
    claim.launched = Some(Launched {
        provider_id: instance.provider_id.clone(),
        instance_type: instance.instance_type.clone(),
        zone: instance.zone.clone(),
        capacity_type: instance.capacity_type,
        price: instance.price,
        capacity: it.capacity.clone(),
        allocatable: it.allocatable(),
        labels: it.labels.clone(),
        hostname: instance.hostname.clone(),
        at: since,
        image_id: None,
        annotations: Default::default(),
    });
    cluster.adopt_nodeclaim(claim);
}

/// The simulated cloud reads the same clock the controller does.
fn cloud_now(clock: &Arc<dyn Clock>) -> crate::cloud::sim::Now {
    let clock = Arc::clone(clock);
    Arc::new(move || clock.now())
}

impl Simulation {
    /// Builds the world a scenario describes. Fails on bad options (approval rules, an
    /// unwritable journal), never on the scenario, which `scenario::parse` checked.
    pub fn new(scenario: &Scenario, options: &Options, pace: Pace) -> Result<Simulation, String> {
        let seed = options.seed.unwrap_or(scenario.seed);
        let start = scenario.start;
        let (clock, shared): (Timekeeper, Arc<dyn Clock>) = match pace {
            Pace::Virtual => {
                let c = VirtualClock::new(start);
                (Timekeeper::Virtual(c.clone()), Arc::new(c))
            }
            Pace::RealTime { speed } => {
                let c = ScaledClock::new(start, speed);
                (Timekeeper::Scaled(c.clone()), Arc::new(c))
            }
        };
        // The embedded catalog is read in place; a copy is made only to narrow it (each
        // full copy of its ~800 types is several MB of a small run's peak memory).
        let builtin = Catalog::builtin_shared();
        let narrowed;
        let catalog: &Catalog = if scenario.instance_types.is_empty() {
            &builtin
        } else {
            let mut c = Catalog::clone(&builtin);
            c.instance_types
                .retain(|t| scenario.instance_types.contains(&t.name));
            narrowed = c;
            &narrowed
        };
        let mut cloud = SimCloud::new(catalog, cloud_now(&shared), seed);
        cloud.launch_latency = scenario.launch_latency;
        let mut cluster = SimCluster::new(start, scenario.settings.clone(), seed);
        for p in &scenario.nodepools {
            cluster.apply_nodepool(p.clone());
        }
        for n in &scenario.nodes {
            adopt(&mut cluster, &mut cloud, scenario, n, catalog);
        }
        for d in &scenario.daemonsets {
            cluster.add_daemonset(d.clone());
        }
        for p in &scenario.pdbs {
            cluster.add_pdb(p.clone());
        }
        for d in &scenario.deployments {
            cluster.add_deployment(d.clone());
        }
        for j in &scenario.jobs {
            cluster.add_job(j.clone());
        }
        for p in &scenario.pods {
            cluster.add_pod(p.clone());
        }
        let rules = options.approval.as_ref().unwrap_or(&scenario.approval);
        let rules = rules
            .iter()
            .map(|r| Rule::parse(r).map_err(|e| format!("approval rule {r:?}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let journal = match &options.journal {
            Some(p) => Some(Journal::open(p).map_err(|e| e.to_string())?),
            None => None,
        };
        let warnings = journal
            .as_ref()
            .and_then(Journal::repaired)
            .map(str::to_string)
            .into_iter()
            .collect();
        let policy = PolicyTable {
            rules,
            ..PolicyTable::default()
        };
        let mut controller = Controller::new(
            cluster,
            cloud,
            Arc::clone(&shared),
            Settings {
                policy: policy.clone(),
                features: scenario.features,
                journal,
                start,
                seed,
            },
        );
        controller.set_scenario_end(scripted_until(scenario).map(|d| start + d));
        Ok(Simulation {
            controller,
            clock,
            shared_clock: shared,
            start,
            timeline: scenario.timeline.iter().cloned().collect(),
            policy,
            seed,
            journal: options.journal.clone(),
            features: scenario.features,
            unjournaled: Vec::new(),
            warnings,
        })
    }

    /// Stops the controller and starts a new one from what the cluster and the cloud
    /// hold, as a crashed or redeployed controller process would: everything it kept
    /// only in memory (pending decisions, commands in flight, caches) is gone.
    pub fn restart_controller(&mut self) -> Result<(), String> {
        let journal = match &self.journal {
            Some(p) => Some(Journal::open(p).map_err(|e| e.to_string())?),
            None => None,
        };
        let settings = Settings {
            policy: self.policy.clone(),
            features: self.features,
            journal,
            start: self.start,
            seed: self.seed.wrapping_add(1),
        };
        // The new process needs the cluster and the cloud; a placeholder takes the old
        // controller's place for the instant in between.
        let placeholder = Controller::new(
            SimCluster::new(self.start, Default::default(), 0),
            SimCloud::new(&Catalog::default(), cloud_now(&self.shared_clock), 0),
            Arc::clone(&self.shared_clock),
            Settings {
                policy: PolicyTable::default(),
                features: Default::default(),
                journal: None,
                start: self.start,
                seed: 0,
            },
        );
        let old = std::mem::replace(&mut self.controller, placeholder);
        let old_end = old.snapshot().scenario_end;
        let (mut cluster, cloud) = old.into_parts();
        cluster.resync();
        let end = old_end;
        self.controller = Controller::new(cluster, cloud, Arc::clone(&self.shared_clock), settings);
        self.controller.set_scenario_end(end);
        Ok(())
    }

    /// An independent copy of the world now, for a what-if (`crate::whatif`): the same
    /// cluster, cloud and remaining timeline on a virtual clock of its own, under a
    /// restarted controller (as `restart_controller`: nothing it held in memory carries
    /// over) that approves every decision and journals and notifies nothing.
    pub fn fork(&self) -> Simulation {
        let now = self.now();
        let clock = VirtualClock::new(now);
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let (cluster, cloud) = self.controller.parts();
        let mut cluster = cluster.clone();
        cluster.resync();
        let cloud = cloud.fork(cloud_now(&shared));
        let policy = PolicyTable {
            rules: vec![Rule::parse("auto").expect("auto is a policy")],
            ..PolicyTable::default()
        };
        let mut controller = Controller::new(
            cluster,
            cloud,
            Arc::clone(&shared),
            Settings {
                policy: policy.clone(),
                features: self.features,
                journal: None,
                start: self.start,
                seed: self.seed.wrapping_add(1),
            },
        );
        controller.set_scenario_end(self.controller.scenario_end());
        Simulation {
            controller,
            clock: Timekeeper::Virtual(clock),
            shared_clock: shared,
            start: self.start,
            timeline: self.timeline.clone(),
            policy,
            seed: self.seed,
            journal: None,
            features: self.features,
            unjournaled: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        match &self.clock {
            Timekeeper::Virtual(c) => c.now(),
            Timekeeper::Scaled(c) => c.now(),
        }
    }

    pub fn start(&self) -> DateTime<Utc> {
        self.start
    }

    /// How many seconds of simulated time pass per second of wall time (the `--speed`);
    /// 0 on a virtual clock, which moves only when the driver moves it.
    pub fn rate(&self) -> f64 {
        match &self.clock {
            Timekeeper::Virtual(_) => 0.0,
            Timekeeper::Scaled(c) => c.speed(),
        }
    }

    /// One round at the current time: timeline entries that are due, the cloud and the
    /// cluster moving on, then the controller. Returns the events of the round.
    pub async fn step(&mut self) -> Vec<Event> {
        let now = self.now();
        while self
            .timeline
            .front()
            .is_some_and(|t| self.start + t.at <= now)
        {
            if let Some(t) = self.timeline.pop_front() {
                self.play(t.action).await;
            }
        }
        let (cluster, cloud) = self.controller.parts_mut();
        for gone in cloud.reclaim(now) {
            cluster.instance_gone(&gone.provider_id);
        }
        cluster.advance(now, cloud.instances());
        self.controller.reconcile().await;
        self.controller.take_events()
    }

    /// When the next round has something to do. At least 1 s ahead: the cluster reacts
    /// to the controller's writes in the next round, as a real one does a moment later.
    pub fn next_time(&mut self) -> DateTime<Utc> {
        let now = self.now();
        let mut t = self.controller.next_wake();
        let (cluster, cloud) = self.controller.parts_mut();
        if let Some(c) = cluster.next_event(cloud.instances()) {
            t = t.min(c);
        }
        if let Some(c) = cloud.next_event(now) {
            t = t.min(c);
        }
        if cluster.take_written() {
            t = t.min(now);
        }
        if let Some(a) = self.timeline.front() {
            t = t.min(self.start + a.at);
        }
        t.max(now + TimeDelta::seconds(1))
    }

    /// Moves a virtual clock to `t` (a scaled clock moves by itself: this waits instead).
    pub async fn wait_until(&self, t: DateTime<Utc>) {
        match &self.clock {
            Timekeeper::Virtual(c) => c.set(t),
            Timekeeper::Scaled(c) => tokio::time::sleep(c.real_until(t)).await,
        }
    }

    /// `wait_until` as a future that does not borrow the simulation, so a driver can
    /// select between it and requests that need the simulation mutably.
    pub fn waiter(&self, t: DateTime<Utc>) -> tokio::time::Sleep {
        match &self.clock {
            Timekeeper::Virtual(c) => {
                c.set(t);
                tokio::time::sleep(std::time::Duration::ZERO)
            }
            Timekeeper::Scaled(c) => tokio::time::sleep(c.real_until(t)),
        }
    }

    /// Runs until `until` (virtual time), handing every event to `sink`.
    pub async fn run_until(&mut self, until: DateTime<Utc>, mut sink: impl FnMut(&Event)) {
        loop {
            for e in self.step().await {
                sink(&e);
            }
            let next = self.next_time();
            if next > until {
                break;
            }
            self.wait_until(next).await;
        }
        self.wait_until(until).await;
        for e in self.step().await {
            sink(&e);
        }
    }

    /// Runs in real time (scaled) and carries out operator requests between rounds: the
    /// embedded world as a console's backend. Ends, returning the simulation, when every
    /// sender of `requests` is gone.
    pub async fn serve(
        mut self,
        mut requests: mpsc::UnboundedReceiver<Envelope>,
        actor: String,
    ) -> Simulation {
        // Test hook for the console's end-to-end test (tests/console_signals_tmux.rs): a
        // controller that panics this many simulated seconds in must end the console with
        // a message and a failing exit status, the terminal restored.
        let panic_at = std::env::var("KARPENTER_TUI_TEST_PANIC_AT_SECONDS")
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .map(|s| self.start + chrono::TimeDelta::seconds(s.clamp(0, 86_400)));
        loop {
            if panic_at.is_some_and(|at| self.now() >= at) {
                panic!("KARPENTER_TUI_TEST_PANIC_AT_SECONDS: the simulated controller stops here");
            }
            self.step().await;
            let next = self.next_time();
            tokio::select! {
                _ = self.waiter(next) => {}
                envelope = requests.recv() => match envelope {
                    None => break,
                    Some((requests::Request::WhatIf(query), reply)) => self.what_if(&query, reply),
                    Some((request, reply)) => {
                        let answer = requests::apply(&mut self.controller, request, &actor).await;
                        let _ = reply.send(answer);
                    }
                }
            }
        }
        self
    }

    /// Answers a what-if: forks the world now and plays both copies on a thread of
    /// their own, so the live run (and the console) go on meanwhile. The answer is the
    /// comparison's title and lines, one per line of text.
    fn what_if(
        &self,
        query: &crate::control::whatif::Query,
        reply: tokio::sync::oneshot::Sender<requests::Reply>,
    ) {
        let forks = match crate::whatif::Forks::prepare(self, query) {
            Ok(f) => f,
            Err(e) => {
                let _ = reply.send(Err(format!("what-if: {e}")));
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("what-if".into())
            .spawn(move || {
                let _ = reply.send(Ok(forks.run().text()));
            });
        if let Err(e) = spawned {
            tracing::warn!("what-if: cannot start its thread: {e}");
        }
    }

    /// The closing figures of a run.
    pub fn summary(&self) -> Event {
        let state = self.controller.state();
        let pods = state.pods.iter().filter(|p| !p.is_daemonset()).count();
        let pending = state.pods.iter().filter(|p| p.node_name.is_none()).count();
        let nodes = state.nodes.iter().filter(|n| !n.deleting).count();
        let cost: f64 = state.nodes.iter().map(|n| n.price).sum();
        let stats = self.controller.stats();
        Event {
            t: (self.now() - self.start).num_milliseconds() as f64 / 1000.0,
            kind: EventKind::Summary {
                nodes,
                pods,
                pods_pending: pending,
                // `+ 0.0`: an empty sum is -0.0, which would print as "$-0.0000/h".
                cost_per_hour: (cost * 10_000.0).round() / 10_000.0 + 0.0,
                cost: (stats.cost * 100.0).round() / 100.0,
                disruptions: stats.disruptions.clone(),
                nodeclaims_created: stats.nodeclaims_created,
                nodeclaims_deleted: stats.nodeclaims_deleted,
                evictions: stats.evictions,
                evictions_by_reason: stats.evictions_by_reason.clone(),
            },
        }
    }

    async fn play(&mut self, action: Action) {
        let result = match action {
            Action::Operator(op) => self.operate(op).await,
            other => self.world(other),
        };
        if let Err(message) = result {
            self.controller.record_error(format!("timeline: {message}"));
        }
    }

    /// Scales a Deployment now, as the timeline's `scale` step does (a test or a driver
    /// acting at a moment it picks).
    pub fn scale(
        &mut self,
        namespace: &str,
        deployment: &str,
        replicas: u32,
    ) -> Result<(), String> {
        self.world(Action::Scale {
            namespace: namespace.to_string(),
            deployment: deployment.to_string(),
            replicas,
        })
    }

    /// Timeline entries that act on the cluster or the cloud.
    fn world(&mut self, action: Action) -> Result<(), String> {
        let (cluster, cloud) = self.controller.parts_mut();
        match action {
            Action::Scale {
                namespace,
                deployment,
                replicas,
            } => {
                if !cluster.set_replicas(&namespace, &deployment, Replicas::Fixed(replicas)) {
                    return Err(format!("no Deployment {namespace}/{deployment}"));
                }
            }
            Action::PatchNodePool { name, patch } => {
                let pool = cluster
                    .nodepool(&name)
                    .ok_or_else(|| format!("no NodePool {name}"))?;
                let patched = patch_nodepool(pool, &patch)?;
                cluster.apply_nodepool(patched);
            }
            Action::AnnotatePods {
                namespace,
                selector,
                annotations,
            } => {
                let sel = Selector::from_labels(&selector);
                for (k, v) in &annotations {
                    cluster.annotate_pods(&namespace, &sel, k, v.as_deref());
                }
            }
            Action::Capacity { outage, available } => cloud.set_outage(outage, !available),
            Action::InterruptSpot { nodepool } => {
                let target = cloud
                    .instances()
                    .filter(|i| i.reclaim_at.is_none())
                    .filter(|i| {
                        i.instance.capacity_type == crate::engine::catalog::CapacityType::Spot
                    })
                    .filter(|i| nodepool.as_ref().is_none_or(|p| &i.instance.nodepool == p))
                    .min_by_key(|i| (i.instance.launched, i.instance.provider_id.clone()))
                    .map(|i| i.instance.provider_id.clone())
                    .ok_or("interruptSpot: no running spot instance to interrupt")?;
                cloud.interrupt(&target);
            }
            Action::NodeNotReady { nodepool } => {
                let target = cluster
                    .nodes()
                    .filter(|n| n.ready)
                    .filter(|n| {
                        nodepool
                            .as_ref()
                            .is_none_or(|p| n.labels.get(crate::api::labels::NODEPOOL) == Some(p))
                    })
                    .min_by_key(|n| (n.created, n.name.clone()))
                    .map(|n| n.name.clone())
                    .ok_or("nodeNotReady: no Ready node to take down")?;
                cluster.set_not_ready(&target);
            }
            Action::NodeCondition {
                nodepool,
                condition,
                status,
            } => {
                let target = cluster
                    .nodes()
                    .filter(|n| !n.faults.iter().any(|f| f.condition == condition))
                    .filter(|n| {
                        nodepool
                            .as_ref()
                            .is_none_or(|p| n.labels.get(crate::api::labels::NODEPOOL) == Some(p))
                    })
                    .min_by_key(|n| (n.created, n.name.clone()))
                    .map(|n| n.name.clone())
                    .ok_or("nodeCondition: no node without that fault")?;
                cluster.set_fault(&target, &condition, &status);
            }
            Action::Kubelet {
                nodepool,
                fail_after,
            } => cluster.set_kubelet_failure(nodepool, fail_after),
            Action::Operator(_) => {}
        }
        Ok(())
    }

    /// A scripted operator step. One that names no decision acts on the oldest one
    /// waiting, like a person clearing the queue; when nothing waits (the approval mode
    /// approved it already, or the cluster settled differently) there is nothing to do,
    /// which is logged, not an error: the timeline cannot know what will be pending. A
    /// step naming a decision that is not pending is an error.
    async fn operate(&mut self, op: OperatorAction) -> Result<(), String> {
        let oldest = |c: &Controller<SimCluster, SimCloud>| c.pending_decisions().first().copied();
        let (what, result) = match op {
            OperatorAction::Approve { decision } => {
                let Some(id) = decision.or_else(|| oldest(&self.controller)) else {
                    tracing::info!("timeline: approve: nothing is waiting for approval");
                    return Ok(());
                };
                let r = self.controller.approve(id, SCENARIO_OPERATOR).await;
                (format!("approve #{id}: "), r)
            }
            OperatorAction::Reject { decision, reason } => {
                let Some(id) = decision.or_else(|| oldest(&self.controller)) else {
                    tracing::info!("timeline: reject: nothing is waiting for approval");
                    return Ok(());
                };
                let r = self.controller.reject(id, &reason, SCENARIO_OPERATOR).await;
                (format!("reject #{id}: "), r)
            }
            OperatorAction::Pause { scope } => {
                let r = self.controller.pause(scope, None, SCENARIO_OPERATOR).await;
                (String::new(), r)
            }
            OperatorAction::Resume { scope } => {
                let r = self.controller.resume(&scope, SCENARIO_OPERATOR).await;
                (String::new(), r.map(|_| ()))
            }
        };
        result.map_err(|e| {
            let message = format!("{what}{e}");
            if matches!(e, ActionError::Journal(_)) {
                self.unjournaled.push(message.clone());
            }
            message
        })
    }

    /// What the journal failed to record: scripted operator actions it refused (so they
    /// were not done) and controller steps missing from it. Not empty means the journal
    /// is incomplete and `simulate` exits non-zero.
    pub fn journal_failures(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .unjournaled
            .iter()
            .map(|m| format!("operator action not done: {m}"))
            .collect();
        out.extend(
            self.controller
                .journal_errors()
                .iter()
                .map(|m| format!("controller step not journaled: {m}")),
        );
        out
    }
}
