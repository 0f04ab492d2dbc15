//! Topology counts kept from pass to pass.
//!
//! A simulation that places a pod with a spread or (anti-)affinity rule starts from the
//! matching pods already bound per domain. A fresh simulator counts them over every bound
//! pod of the cluster, once per rule: at 10,000 pods that was a sixth of a simulated day,
//! repeated at every poll although only the few nodes the controller reported changed
//! could have changed a count. [`TopologyCounts`] keeps, per rule the simulations needed,
//! what each node adds to each domain, and at each refresh of the [`super::Planner`]
//! recounts only the nodes that changed. The simulator takes the totals
//! ([`crate::engine::scheduling::Simulator::with_group_counts`]); the unit tests' builds
//! check every total it takes against a fresh count.

use crate::engine::fast_hash::FastMap;
use std::sync::Arc;

use crate::engine::scheduling::topology::{Group, GroupKey};
use crate::engine::scheduling::{BoundPod, GroupCounts};
use crate::engine::state::ClusterState;

use super::sim_input::bound_on;

/// A rule no simulation asked for in this many refreshes is no longer kept.
const KEEP_UNUSED: u64 = 256;

/// Bound-pod counts per topology rule, by node, kept up to date from changed nodes.
#[derive(Debug, Default)]
pub(super) struct TopologyCounts {
    /// What each node (by NodeClaim) adds, per rule: a node's pods share its labels, so
    /// they count in one domain.
    by_node: FastMap<GroupKey, Kept>,
    /// The totals, shared with the simulators of a pass (copied on write only while one
    /// of them is still alive).
    totals: Arc<GroupCounts>,
}

#[derive(Debug)]
struct Kept {
    /// The matcher of the rule (its universe of domains is not used).
    group: Group,
    nodes: FastMap<String, (String, i32)>,
    /// The refresh at which a simulation last asked for the rule.
    used: u64,
}

impl TopologyCounts {
    /// Forgets everything (the state is seen for the first time).
    pub fn clear(&mut self) {
        self.by_node.clear();
        self.totals = Arc::default();
    }

    /// The totals, for a simulator over the state of the last update.
    pub fn totals(&self) -> Arc<GroupCounts> {
        Arc::clone(&self.totals)
    }

    /// Recounts the nodes (by NodeClaim) that changed since the last update, which
    /// brought the counts to the state before these changes. `index` maps NodeClaims to
    /// nodes of `state`; a NodeClaim it lacks has gone. Rules unused for long are dropped.
    pub fn update<'c>(
        &mut self,
        changed: impl IntoIterator<Item = &'c str>,
        index: &FastMap<&str, usize>,
        state: &ClusterState,
        pods_by_node: &[Vec<usize>],
        refresh: u64,
    ) {
        let totals = Arc::make_mut(&mut self.totals);
        self.by_node.retain(|key, kept| {
            let keep = kept.used + KEEP_UNUSED > refresh;
            if !keep {
                totals.remove(key);
            }
            keep
        });
        if self.by_node.is_empty() {
            return;
        }
        let mut pods: Vec<BoundPod> = Vec::new();
        for claim in changed {
            // The node's pods are gathered once for every rule.
            pods.clear();
            if let Some(&i) = index.get(claim) {
                pods.extend(bound_on(state, i, pods_by_node));
            }
            for (key, kept) in &mut self.by_node {
                let Some(total) = totals.get_mut(key) else {
                    continue;
                };
                if let Some((domain, n)) = kept.nodes.remove(claim) {
                    add(total, &domain, -n);
                }
                if let Some((domain, n)) = kept.group.count_node(&pods) {
                    add(total, domain, n);
                    kept.nodes
                        .insert(claim.to_string(), (domain.to_string(), n));
                }
            }
        }
    }

    /// Starts keeping the rules of `used` not kept yet, counting them over every node of
    /// `state` (the state of the last update), and notes that a simulation needed them.
    pub fn adopt<'k>(
        &mut self,
        used: impl IntoIterator<Item = &'k GroupKey>,
        state: &ClusterState,
        pods_by_node: &[Vec<usize>],
        refresh: u64,
    ) {
        for key in used {
            if let Some(kept) = self.by_node.get_mut(key) {
                kept.used = refresh;
                continue;
            }
            let group = Group::new(key.clone(), Arc::default());
            let mut nodes = FastMap::default();
            let mut total = FastMap::default();
            let mut pods: Vec<BoundPod> = Vec::new();
            for (i, n) in state.nodes.iter().enumerate() {
                pods.clear();
                pods.extend(bound_on(state, i, pods_by_node));
                if let Some((domain, c)) = group.count_node(&pods) {
                    add(&mut total, domain, c);
                    nodes.insert(n.nodeclaim.clone(), (domain.to_string(), c));
                }
            }
            Arc::make_mut(&mut self.totals).insert(key.clone(), total);
            self.by_node.insert(
                key.clone(),
                Kept {
                    group,
                    nodes,
                    used: refresh,
                },
            );
        }
    }
}

/// Adds `n` to a domain's count, dropping counts that reach zero.
fn add(total: &mut FastMap<String, i32>, domain: &str, n: i32) {
    match total.get_mut(domain) {
        Some(c) => {
            *c += n;
            if *c == 0 {
                total.remove(domain);
            }
        }
        None => {
            total.insert(domain.to_string(), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use chrono::{DateTime, TimeDelta};

    use super::*;
    use crate::api::labels;
    use crate::api::nodepool::NodePool;
    use crate::engine::catalog::CapacityType;
    use crate::engine::disruption::SimInput;
    use crate::engine::disruption::fixture::{Fixture, instance_type};
    use crate::engine::scheduling::TopologyKind;
    use crate::engine::selector::Selector;

    fn web_per(key: &str) -> GroupKey {
        GroupKey {
            kind: TopologyKind::Spread,
            key: key.into(),
            namespaces: BTreeSet::from(["default".to_string()]),
            selector: Selector::from_labels(&BTreeMap::from([(
                "app".to_string(),
                "web".to_string(),
            )])),
            max_skew: 1,
            min_domains: None,
            node_filter: None,
            taint_filter: None,
        }
    }

    /// What a fresh simulator counts for the rule over the state.
    fn fresh(f: &Fixture, key: &GroupKey) -> FastMap<String, i32> {
        let pods = f.state.pods_by_node();
        let sim = SimInput::new(&f.state, &pods);
        Group::counted(key.clone(), Arc::default(), &sim.input.bound)
            .counts()
            .clone()
    }

    fn update(kept: &mut TopologyCounts, f: &Fixture, claims: &[&str], refresh: u64) {
        let pods = f.state.pods_by_node();
        let index = f.state.node_index();
        kept.update(claims.iter().copied(), &index, &f.state, &pods, refresh);
    }

    fn web(f: &mut Fixture, name: &str, node: &str) {
        f.pod(name, node, 100, 64)
            .labels
            .insert("app".into(), "web".into());
    }

    #[test]
    fn kept_counts_follow_changed_nodes_as_a_fresh_count_does() {
        let mut f = Fixture::new(
            vec![instance_type("m", 4, 16, 0.2, None)],
            DateTime::UNIX_EPOCH,
        );
        f.pool(NodePool::unconstrained("default"));
        for (i, zone) in ["a", "b", "b"].iter().enumerate() {
            let n = f.node(
                &format!("n{i}"),
                "default",
                "m",
                CapacityType::OnDemand,
                TimeDelta::hours(1),
            );
            Arc::make_mut(&mut n.labels).insert(labels::ZONE.into(), (*zone).into());
        }
        web(&mut f, "w0", "n0");
        web(&mut f, "w1", "n1");
        web(&mut f, "w2", "n1");
        f.pod("other", "n2", 100, 64);
        let rules = [web_per(labels::ZONE), web_per(labels::HOSTNAME)];
        let mut kept = TopologyCounts::default();
        let pods = f.state.pods_by_node();
        kept.adopt(&rules, &f.state, &pods, 1);
        for r in &rules {
            assert_eq!(kept.totals()[r], fresh(&f, r), "adopted {}", r.key);
        }

        // A web pod moves from n1 to n2, one goes, a new one lands on n0, and n0 starts
        // deleting (its pods stop counting for simulations).
        let before = fresh(&f, &rules[0]);
        f.state.pods[2].node_name = Some("n2".into());
        f.state.pods.remove(0);
        web(&mut f, "w3", "n0");
        update(&mut kept, &f, &["n0", "n1", "n2"], 2);
        for r in &rules {
            assert_eq!(kept.totals()[r], fresh(&f, r), "after moves, {}", r.key);
        }
        f.state.nodes[0].deleting = true;
        update(&mut kept, &f, &["n0"], 3);
        for r in &rules {
            assert_eq!(kept.totals()[r], fresh(&f, r), "after n0 went, {}", r.key);
        }
        assert_ne!(
            before,
            fresh(&f, &rules[0]),
            "the changes moved the zone counts"
        );

        // A node that is gone from the state takes its counts with it.
        f.state.nodes.remove(1);
        update(&mut kept, &f, &["n1"], 4);
        for r in &rules {
            assert_eq!(
                kept.totals()[r],
                fresh(&f, r),
                "after n1 was removed, {}",
                r.key
            );
        }

        // A rule no simulation asks for is forgotten after a while.
        update(&mut kept, &f, &[], 4 + KEEP_UNUSED);
        assert!(kept.totals().is_empty());
    }
}
