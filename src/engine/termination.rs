//! Termination: draining a node that is being deleted, one step at a time.
//!
//! Mirrors upstream `node/termination/terminator`: pods are evicted in tiers, each tier
//! only once the ones before it are gone: non-critical non-DaemonSet pods, non-critical
//! DaemonSet pods, critical non-DaemonSet pods, critical DaemonSet pods (critical =
//! system-cluster-critical / system-node-critical). Eviction honours PDBs (a pod whose PDB
//! allows no more disruptions waits, and two pods under a PDB allowing one go one at a
//! time). Static pods and pods that tolerate `karpenter.sh/disrupted:NoSchedule` are not
//! evicted. do-not-disrupt pods are not evicted either; with a terminationGracePeriod,
//! every pod still present is deleted at `deadline - its own grace period`, so it has its
//! full grace period before the node goes at the deadline. When nothing is left to drain,
//! the instance is deleted and the finalizer removed.

use chrono::{DateTime, TimeDelta, Utc};

use crate::engine::disruption::candidates::PdbIndex;
use crate::engine::pod::{Pod, PodKey};
use crate::engine::state::{Pdb, StateNode, disrupted_taint};

/// The drain order of a pod (lower drains first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    NonCriticalWorkload,
    NonCriticalDaemon,
    CriticalWorkload,
    CriticalDaemon,
}

impl Tier {
    pub fn of(p: &Pod) -> Tier {
        match (p.is_critical(), p.is_daemonset()) {
            (false, false) => Tier::NonCriticalWorkload,
            (false, true) => Tier::NonCriticalDaemon,
            (true, false) => Tier::CriticalWorkload,
            (true, true) => Tier::CriticalDaemon,
        }
    }
}

/// For people: "non-critical workload", "critical daemon".
impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tier::NonCriticalWorkload => "non-critical workload",
            Tier::NonCriticalDaemon => "non-critical daemon",
            Tier::CriticalWorkload => "critical workload",
            Tier::CriticalDaemon => "critical daemon",
        })
    }
}

/// What to do now to drain a node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrainStep {
    /// Evict these through the eviction API (PDBs allow it).
    pub evict: Vec<PodKey>,
    /// Delete these now: the terminationGracePeriod deadline minus their grace period has
    /// come (bypasses PDBs and do-not-disrupt, as upstream).
    pub force_delete: Vec<PodKey>,
    /// Pods that must go but cannot yet, and why.
    pub waiting: Vec<(PodKey, String)>,
    /// Nothing left to drain: delete the instance and remove the finalizer.
    pub drained: bool,
}

/// The deadline by which the node goes regardless of its pods, if it has a
/// terminationGracePeriod.
pub fn deadline(node: &StateNode, deletion_started: DateTime<Utc>) -> Option<DateTime<Utc>> {
    node.termination_grace_period.map(|g| deletion_started + g)
}

/// One drain step for `node` whose deletion started at `deletion_started`.
pub fn drain_step(
    node: &StateNode,
    pods: &[&Pod],
    pdbs: &[Pdb],
    deletion_started: DateTime<Utc>,
    now: DateTime<Utc>,
) -> DrainStep {
    let taint = disrupted_taint();
    let mut step = DrainStep::default();
    let mut drainable: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| !p.is_terminal() && !p.is_static())
        .filter(|p| !p.tolerations.iter().any(|t| t.tolerates(&taint)))
        .collect();
    let deadline = deadline(node, deletion_started);

    // Deadline first: pods whose own grace period no longer fits before the deadline.
    if let Some(d) = deadline {
        drainable.retain(|p| {
            let grace = TimeDelta::seconds(p.termination_grace_period_seconds.max(0));
            if now >= d - grace {
                step.force_delete.push(p.key.clone());
                false
            } else {
                true
            }
        });
    }
    if drainable.is_empty() && step.force_delete.is_empty() {
        step.drained = true;
        return step;
    }

    let Some(tier) = drainable.iter().map(|p| Tier::of(p)).min() else {
        return step;
    };
    let index = PdbIndex::new(pdbs);
    // Disruptions each PDB still allows within this step.
    let mut allowed: Vec<i32> = pdbs.iter().map(|p| p.disruptions_allowed).collect();
    for p in drainable {
        if p.deleting.is_some() {
            step.waiting
                .push((p.key.clone(), "terminating".to_string()));
            continue;
        }
        if Tier::of(p) != tier {
            step.waiting
                .push((p.key.clone(), format!("drains after the {tier} tier")));
            continue;
        }
        if p.do_not_disrupt().is_some() {
            step.waiting.push((
                p.key.clone(),
                match deadline {
                    Some(d) => format!(
                        "do-not-disrupt; deleted at {} (deadline minus its grace period)",
                        (d - TimeDelta::seconds(p.termination_grace_period_seconds.max(0)))
                            .format("%H:%M:%S UTC")
                    ),
                    None => "do-not-disrupt; no terminationGracePeriod bounds the wait".into(),
                },
            ));
            continue;
        }
        let matching = index.matching_indices(p);
        if matching.len() > 1 {
            step.waiting.push((
                p.key.clone(),
                "selected by more than one PDB: the eviction API refuses it".into(),
            ));
            continue;
        }
        if let Some(&i) = matching.first() {
            let pdb = &pdbs[i];
            if allowed[i] <= 0 {
                step.waiting.push((
                    p.key.clone(),
                    format!(
                        "PDB {}/{} allows no more disruptions",
                        pdb.namespace, pdb.name
                    ),
                ));
                continue;
            }
            allowed[i] -= 1;
        }
        step.evict.push(p.key.clone());
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::nodepool::NodePool;
    use crate::engine::catalog::{CapacityType, Catalog};
    use crate::engine::pod::Owner;
    use crate::engine::resources::Resources;
    use crate::engine::selector::Selector;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
    }

    fn node(tgp: Option<TimeDelta>) -> StateNode {
        let catalog = Catalog::builtin();
        let mut n = StateNode::launched(
            "n1",
            &NodePool::unconstrained("default"),
            catalog.get("m5.large").unwrap(),
            CapacityType::OnDemand,
            t0(),
        );
        n.termination_grace_period = tgp;
        n.deleting = true;
        n
    }

    fn pod(name: &str, critical: bool, daemon: bool) -> Pod {
        let mut p = Pod::new("default", name, Resources::cpu_mem(100, 1 << 20));
        p.node_name = Some("n1".into());
        p.unschedulable = false;
        if critical {
            p.priority_class_name = "system-node-critical".into();
        }
        if daemon {
            p.owner = Some(Owner {
                kind: "DaemonSet".into(),
                name: "ds".into(),
            });
        }
        p
    }

    #[test]
    fn drains_in_tiers() {
        let n = node(None);
        let pods = [
            pod("critical-ds", true, true),
            pod("ds", false, true),
            pod("critical-app", true, false),
            pod("app", false, false),
        ];
        let mut left: Vec<Pod> = pods.to_vec();
        let mut order = Vec::new();
        for _ in 0..10 {
            let refs: Vec<&Pod> = left.iter().collect();
            let s = drain_step(&n, &refs, &[], t0(), t0());
            if s.drained {
                break;
            }
            assert!(!s.evict.is_empty(), "{s:?}");
            order.extend(s.evict.iter().map(|k| k.name.clone()));
            left.retain(|p| !s.evict.contains(&p.key));
        }
        assert_eq!(order, ["app", "ds", "critical-app", "critical-ds"]);
    }

    #[test]
    fn evictions_honour_pdbs_one_at_a_time() {
        let n = node(None);
        let mut a = pod("a", false, false);
        let mut b = pod("b", false, false);
        a.labels.insert("app".into(), "web".into());
        b.labels.insert("app".into(), "web".into());
        let pdb = Pdb {
            namespace: "default".into(),
            name: "web".into(),
            selector: Selector::from_labels(&[("app".to_string(), "web".to_string())].into()),
            disruptions_allowed: 1,
        };
        let s = drain_step(&n, &[&a, &b], std::slice::from_ref(&pdb), t0(), t0());
        assert_eq!(s.evict.len(), 1);
        assert!(s.waiting[0].1.contains("PDB default/web"), "{s:?}");
    }

    #[test]
    fn a_grace_period_deadline_force_deletes_do_not_disrupt_pods_in_time() {
        let n = node(Some(TimeDelta::minutes(10)));
        let mut p = pod("precious", false, false);
        p.annotations
            .insert(crate::api::labels::DO_NOT_DISRUPT.into(), "true".into());
        p.termination_grace_period_seconds = 120;
        // Before deadline - grace (12:08): waits.
        let s = drain_step(&n, &[&p], &[], t0(), t0() + TimeDelta::minutes(7));
        assert!(s.evict.is_empty() && s.force_delete.is_empty());
        assert!(s.waiting[0].1.contains("12:08:00"), "{s:?}");
        // At 12:08: deleted, with its full 2-minute grace period before the deadline.
        let s = drain_step(&n, &[&p], &[], t0(), t0() + TimeDelta::minutes(8));
        assert_eq!(s.force_delete, vec![p.key.clone()]);
        // Without the grace period: it waits forever.
        let n = node(None);
        let s = drain_step(&n, &[&p], &[], t0(), t0() + TimeDelta::days(3));
        assert!(s.force_delete.is_empty() && s.evict.is_empty() && !s.drained);
    }

    #[test]
    fn a_node_with_only_static_or_tolerating_pods_is_drained() {
        let n = node(None);
        let mut mirror = pod("kube-proxy", false, false);
        mirror.owner = Some(Owner {
            kind: "Node".into(),
            name: "n1".into(),
        });
        let s = drain_step(&n, &[&mirror], &[], t0(), t0());
        assert!(s.drained);
    }
}
