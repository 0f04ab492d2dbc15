//! The kubelet stand-in: registration, readiness, startup taints, DaemonSet pods, and the
//! node lifecycle controller's unreachable eviction.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{STARTED, SimCluster, SimNode, SimSettings};
use crate::api::labels;
use crate::api::nodeclaim::TaintEffect;
use crate::cloud::sim::SimInstance;
use crate::cluster::{Change, NodeObject, Object};
use crate::engine::pod::{Owner, Phase, PodKey};

/// When a registered node's kubelet reaches each stage.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeTimeline {
    pub registered: DateTime<Utc>,
    pub startup_taints_removed: bool,
    /// Set when the kubelet stopped reporting.
    pub kubelet_lost: Option<DateTime<Utc>>,
    /// Startup taint keys to remove once Ready (copied from the NodeClaim).
    pub startup_taints: Vec<String>,
    /// The node's image is broken: its kubelet stops reporting at this moment (at
    /// registration: it never reports Ready).
    pub fails_at: Option<DateTime<Utc>>,
}

/// `now` less each of the kubelet's delays, taken once per round. A node's times compared
/// with these answer "has this stage come?" exactly as adding the delay to each node's
/// time and comparing with `now` would, without chrono's calendar arithmetic for every
/// node at every round (adding delays to times was a tenth of a simulated day's
/// instructions).
pub(super) struct Horizon {
    /// Registered at or before this: Ready.
    ready: DateTime<Utc>,
    /// Registered at or before this: startup taints gone.
    startup: DateTime<Utc>,
    /// Kubelet lost at or before this: its pods are evicted.
    eviction: DateTime<Utc>,
    now: DateTime<Utc>,
}

impl Horizon {
    pub(super) fn new(s: &SimSettings, now: DateTime<Utc>) -> Horizon {
        let ready = now - s.ready_delay;
        Horizon {
            ready,
            startup: ready - s.startup_delay,
            eviction: now - s.unreachable_eviction,
            now,
        }
    }
}

impl NodeTimeline {
    fn ready_at(&self, s: &SimSettings) -> DateTime<Utc> {
        self.registered + s.ready_delay
    }

    fn startup_done_at(&self, s: &SimSettings) -> DateTime<Utc> {
        self.ready_at(s) + s.startup_delay
    }

    /// The next moment this node changes on its own, after the `h`orizon's now.
    pub(super) fn next_event(&self, s: &SimSettings, h: &Horizon) -> Option<DateTime<Utc>> {
        if let Some(lost) = self.kubelet_lost {
            return (lost > h.eviction).then(|| lost + s.unreachable_eviction);
        }
        let fails = self.fails_at.filter(|f| *f > h.now);
        if self.fails_at.is_some_and(|f| f <= self.ready_at(s)) {
            return fails;
        }
        let stage = if self.registered > h.ready {
            Some(self.ready_at(s))
        } else if self.registered > h.startup {
            Some(self.startup_done_at(s))
        } else {
            None
        };
        match (stage, fails) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl SimCluster {
    /// Registers a Node for every instance that has been running for the registration
    /// delay, carrying its NodeClaim's labels and taints (as Karpenter's registration
    /// syncs them) plus the chaos taint if one is set.
    pub(super) fn register_nodes<'a>(&mut self, instances: impl Iterator<Item = &'a SimInstance>) {
        let now = self.now;
        // Running for the registration delay, compared without adding it to every time.
        let since = now - self.settings.registration_delay;
        // An instance running before an earlier round's `since` was launched before that
        // round (launched at or before running, and that `since` is at or before the
        // round's now), so that round registered it or it never will: it is not asked
        // about again. Unit-test builds check this against asking the set.
        let seen = self.registration_seen;
        let fresh = |i: &SimInstance| seen.is_none_or(|s| i.running_at >= s);
        let due: Vec<&SimInstance> = instances
            .filter(|i| {
                #[cfg(test)]
                assert!(
                    fresh(i)
                        || i.running_at > since
                        || i.reclaim_at.is_some_and(|t| t <= now)
                        || self.registered.contains(&i.instance.provider_id),
                    "instance {} was due before {seen:?} and is not registered",
                    i.instance.provider_id
                );
                i.running_at <= since
                    && fresh(i)
                    && i.reclaim_at.is_none_or(|t| t > now)
                    && !self.registered.contains(&i.instance.provider_id)
            })
            .collect();
        self.registration_seen = Some(seen.map_or(since, |s| s.max(since)));
        for i in due {
            let inst = &i.instance;
            self.registered.insert(inst.provider_id.clone());
            let claim = self.nodeclaims.get(&inst.nodeclaim);
            let mut node_labels: BTreeMap<String, String> = BTreeMap::new();
            let mut taints = Vec::new();
            let mut startup = Vec::new();
            let mut allocatable = Default::default();
            if let Some(c) = claim {
                node_labels.extend(c.requirements.labels());
                node_labels.extend(c.labels.clone());
                if let Some(l) = &c.launched {
                    node_labels.extend(l.labels.clone());
                    allocatable = l.allocatable.clone();
                }
                taints.extend(c.taints.clone());
                taints.extend(c.startup_taints.clone());
                startup = c.startup_taints.iter().map(|t| t.key.clone()).collect();
                node_labels.insert(labels::NODEPOOL.into(), c.nodepool.clone());
            }
            node_labels.insert(labels::INSTANCE_TYPE.into(), inst.instance_type.clone());
            node_labels.insert(labels::ZONE.into(), inst.zone.clone());
            node_labels.insert(
                labels::CAPACITY_TYPE.into(),
                inst.capacity_type.as_str().into(),
            );
            node_labels.insert(labels::HOSTNAME.into(), inst.hostname.clone());
            if let Some(t) = &self.settings.chaos_taint {
                taints.push(t.clone());
            }
            // The kubelet registers with the unregistered taint (the NodeClaim's user
            // data puts it in registerWithTaints); Karpenter's registration removes it.
            taints.push(crate::api::nodeclaim::Taint::unregistered());
            let fails_at = self
                .broken_kubelets
                .get(&node_labels.get(labels::NODEPOOL).cloned())
                .or_else(|| self.broken_kubelets.get(&None))
                .map(|after| now + *after);
            let object = NodeObject {
                name: inst.hostname.clone(),
                provider_id: inst.provider_id.clone(),
                labels: std::sync::Arc::new(node_labels),
                annotations: BTreeMap::new(),
                taints,
                allocatable,
                ready: false,
                // A kubelet registers NotReady and turns Ready once it is up.
                faults: crate::engine::repair::NodeFault::of("Ready", "False", now)
                    .into_iter()
                    .collect(),
                created: now,
            };
            self.nodes.insert(
                object.name.clone(),
                SimNode {
                    object: object.clone(),
                    timeline: NodeTimeline {
                        registered: now,
                        startup_taints_removed: startup.is_empty(),
                        kubelet_lost: None,
                        startup_taints: startup,
                        fails_at,
                    },
                },
            );
            self.emit(Change::Applied(Object::Node(Box::new(object))));
            self.place_daemons(&inst.hostname);
        }
    }

    /// Readiness, startup taints and unreachable eviction, for every node.
    pub(super) fn progress_nodes(&mut self) {
        let now = self.now;
        let h = Horizon::new(&self.settings, now);
        let mut changed = Vec::new();
        let mut evict_from = Vec::new();
        let mut failing = Vec::new();
        for n in self.nodes.values_mut() {
            let t = &mut n.timeline;
            if let Some(lost) = t.kubelet_lost {
                if lost <= h.eviction {
                    evict_from.push(n.object.name.clone());
                }
                continue;
            }
            if t.fails_at.is_some_and(|f| f <= now) {
                failing.push(n.object.name.clone());
                continue;
            }
            if t.fails_at
                .is_some_and(|f| f <= t.registered + self.settings.ready_delay)
            {
                // It fails before it would be Ready: it never is.
                continue;
            }
            let mut touched = false;
            if !n.object.ready && t.registered <= h.ready {
                n.object.ready = true;
                n.object.faults.retain(|f| f.condition != "Ready");
                touched = true;
            }
            if !t.startup_taints_removed && t.registered <= h.startup {
                let keys = std::mem::take(&mut t.startup_taints);
                n.object.taints.retain(|x| !keys.contains(&x.key));
                t.startup_taints_removed = true;
                touched = true;
            }
            if touched {
                changed.push(n.object.clone());
            }
        }
        for obj in changed {
            self.schedule_dirty = true;
            self.emit(Change::Applied(Object::Node(Box::new(obj))));
        }
        // A broken image's kubelet stops reporting as `set_not_ready` describes.
        for node in failing {
            self.set_not_ready(&node);
        }
        // Taint-based eviction: pods that do not tolerate the NoExecute unreachable taint.
        for node in evict_from {
            let Some(n) = self.nodes.get(&node) else {
                continue;
            };
            let taints: Vec<_> = n
                .object
                .taints
                .iter()
                .filter(|t| t.effect == TaintEffect::NoExecute)
                .cloned()
                .collect();
            let doomed: Vec<PodKey> = self
                .index
                .bound_to(&node)
                .filter(|p| !p.is_daemonset())
                .filter(|p| {
                    taints
                        .iter()
                        .any(|t| !p.tolerations.iter().any(|x| x.tolerates(t)))
                })
                .map(|p| p.key.clone())
                .collect();
            for k in doomed {
                self.delete_pod(&k);
            }
        }
    }

    /// Puts every DaemonSet's pod on `node` if the DaemonSet tolerates the node's taints
    /// (startup taints and the chaos taint aside: DaemonSets tolerate those in practice)
    /// and its node selector matches.
    pub(super) fn place_daemons(&mut self, node: &str) {
        let Some(n) = self.nodes.get(node) else {
            return;
        };
        let chaos = self.settings.chaos_taint.as_ref().map(|t| t.key.clone());
        let startup = n.timeline.startup_taints.clone();
        let labels = n.object.labels.clone();
        let taints: Vec<_> = n
            .object
            .taints
            .iter()
            .filter(|t| !startup.contains(&t.key) && Some(&t.key) != chaos.as_ref())
            .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
            .cloned()
            .collect();
        let mut new = Vec::new();
        for ds in self.daemonsets.values() {
            let tpl = &ds.template;
            let fits = tpl
                .node_selector
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
                && taints
                    .iter()
                    .all(|t| tpl.tolerations.iter().any(|x| x.tolerates(t)));
            if !fits {
                continue;
            }
            let mut p = tpl.clone();
            p.key = PodKey {
                namespace: ds.namespace.clone(),
                name: format!("{}-{}", ds.name, node.split('.').next().unwrap_or(node)),
            };
            p.uid = p.key.to_string();
            p.owner = Some(Owner {
                kind: "DaemonSet".into(),
                name: ds.name.clone(),
            });
            p.node_name = Some(node.to_string());
            p.phase = Phase::Running;
            p.unschedulable = false;
            p.created = self.now;
            p.started = Some(self.now);
            new.push(p);
        }
        for p in new {
            let key = p.key.clone();
            if self.pods.contains_key(&key) {
                continue;
            }
            self.store_pod(p);
            self.emit_pod(&key);
        }
    }

    /// Marks a pod bound to `node` as running (what the kubelet reports after the bind).
    pub(super) fn start_pod(&mut self, key: &PodKey, node: &str) {
        let now = self.now;
        self.change_pod(key, |p| {
            p.node_name = Some(node.to_string());
            p.phase = Phase::Running;
            p.unschedulable = false;
            p.started.get_or_insert(now);
            if p.owner.as_ref().is_some_and(|o| o.kind == "Job") {
                p.annotations.insert(STARTED.into(), now.to_rfc3339());
            }
        });
        self.emit_pod(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    /// Around every stage's moment (a second either side and on it), the horizon's
    /// comparisons decide as adding the delays to the node's times would: the next event,
    /// Ready, startup taints gone, and eviction after the kubelet was lost.
    #[test]
    fn the_horizon_decides_as_adding_the_delays_would() {
        let s = SimSettings::default();
        let t0 = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let sec = TimeDelta::seconds;
        let ready = s.ready_delay;
        let startup = s.ready_delay + s.startup_delay;
        let mut moments = Vec::new();
        for base in [TimeDelta::zero(), ready, startup, s.unreachable_eviction] {
            for d in [-1, 0, 1] {
                moments.push(t0 + base + sec(d));
            }
        }
        for lost in [None, Some(t0 + sec(5))] {
            let t = NodeTimeline {
                registered: t0,
                startup_taints_removed: false,
                kubelet_lost: lost,
                startup_taints: Vec::new(),
                fails_at: None,
            };
            for &now in &moments {
                let h = Horizon::new(&s, now);
                let plain = match lost {
                    Some(l) => Some(l + s.unreachable_eviction).filter(|x| *x > now),
                    None => [t0 + ready, t0 + startup].into_iter().find(|x| *x > now),
                };
                assert_eq!(t.next_event(&s, &h), plain, "next event at {now}");
                assert_eq!(t0 <= h.ready, now >= t0 + ready, "ready at {now}");
                assert_eq!(t0 <= h.startup, now >= t0 + startup, "startup at {now}");
                if let Some(l) = lost {
                    let evicted = now >= l + s.unreachable_eviction;
                    assert_eq!(l <= h.eviction, evicted, "eviction at {now}");
                }
            }
        }
    }
}
