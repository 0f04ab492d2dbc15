//! Static NodePools (`spec.replicas`): the pool keeps exactly that many NodeClaims,
//! whatever the pods need.
//!
//! Mirrors upstream v1.14.1 `pkg/controllers/static/provisioning/controller.go` (create
//! `replicas - running` NodeClaims from the pool's template, never past `limits.nodes`;
//! a pool that failed validation launches nothing) and
//! `pkg/controllers/static/deprovisioning/controller.go` (delete `running - replicas`,
//! with no disruption budget: NodeClaims that have not launched first, then empty nodes
//! (no pods but DaemonSet pods, none of them do-not-disrupt), then the others by
//! rescheduling cost times lifetime remaining, those with an active do-not-disrupt pod
//! last). Emptiness and consolidation leave static nodes alone
//! (`disruption::Block::StaticNodePool`).

use std::sync::Arc;

use crate::api::nodepool::NodePool;
use crate::engine::catalog::InstanceType;
use crate::engine::pod::Pod;
use crate::engine::requirements::Requirements;
use crate::engine::resources::Resources;
use crate::engine::scheduling::template::Template;

/// Upstream caps a NodeClaim's instance type options at 60.
const MAX_OPTIONS: usize = 60;

/// A NodeClaim of a static pool that is not being deleted.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveClaim {
    pub name: String,
    /// The cloud launched it (it has a provider id).
    pub launched: bool,
    /// Pods bound to its node, DaemonSet pods excluded.
    pub pods: usize,
    /// A pod on its node has an active `karpenter.sh/do-not-disrupt`.
    pub do_not_disrupt: bool,
    /// Upstream's deprovisioning cost: the rescheduling cost of the node's pods (the sum
    /// of their eviction costs) times the node's lifetime remaining.
    pub cost: f64,
}

impl LiveClaim {
    /// Upstream's "empty": nothing but DaemonSet pods, none of them do-not-disrupt.
    fn is_empty(&self) -> bool {
        self.pods == 0 && !self.do_not_disrupt
    }
}

/// What keeps one static pool at its replica count.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticPlan {
    pub nodepool: String,
    /// How many NodeClaims to create from the template.
    pub create: usize,
    /// The NodeClaims to delete, in upstream's order of preference.
    pub delete: Vec<String>,
    /// Why fewer are created than `replicas` asks, if so (the node limit).
    pub limited: Option<String>,
}

/// The plan for a pool, or None when the pool is not static or already at its count.
pub fn plan(pool: &NodePool, live: &[LiveClaim]) -> Option<StaticPlan> {
    let replicas = pool.spec.replicas?;
    let name = pool.metadata.name.clone().unwrap_or_default();
    let running = live.len() as i64;
    if running > replicas {
        let mut order: Vec<&LiveClaim> = live.iter().collect();
        // Unlaunched, then empty, then do-not-disrupt last and the cheapest first; ties by
        // name (upstream leaves them in list order).
        order.sort_by(|a, b| {
            a.launched
                .cmp(&b.launched)
                .then(b.is_empty().cmp(&a.is_empty()))
                .then(a.do_not_disrupt.cmp(&b.do_not_disrupt))
                .then(a.cost.total_cmp(&b.cost))
                .then(a.name.cmp(&b.name))
        });
        let delete = order
            .into_iter()
            .take((running - replicas) as usize)
            .map(|c| c.name.clone())
            .collect();
        return Some(StaticPlan {
            nodepool: name,
            create: 0,
            delete,
            limited: None,
        });
    }
    if running == replicas || pool.validation_failure().is_some() {
        return None;
    }
    let want = replicas - running;
    let room = node_limit(pool).map(|l| (l - running).max(0));
    let create = room.map_or(want, |r| want.min(r));
    let limited = (create < want).then(|| {
        format!(
            "nodepool {name} node limit reached: limits.nodes {} with {running} running, {replicas} replicas wanted",
            node_limit(pool).unwrap_or_default()
        )
    });
    Some(StaticPlan {
        nodepool: name,
        create: create as usize,
        delete: Vec::new(),
        limited,
    })
}

/// `limits.nodes` as a count, if set and readable.
pub fn node_limit(pool: &NodePool) -> Option<i64> {
    let q = pool.spec.limits.get("nodes")?;
    Some(crate::engine::resources::limit_milli(&q.0) / 1000)
}

/// The shape of a static NodeClaim: the template's requirements, its compatible types
/// cheapest first (at most 60), and the DaemonSet overhead as requests (upstream's
/// `NewNodeClaimTemplate` with no pods). None when the pool's requirements do not parse
/// or nothing can launch.
pub fn claim_shape(
    pool: &NodePool,
    instance_types: &[Arc<InstanceType>],
    daemonsets: &[Pod],
) -> Option<(Requirements, Vec<String>, Resources)> {
    let t = Template::new(pool, instance_types, daemonsets).ok()?;
    let mut options: Vec<(f64, String)> = t
        .options
        .iter()
        .filter_map(|o| {
            let price = o.it.cheapest_offering(|_| true)?.price;
            Some((price, o.it.name.clone()))
        })
        .collect();
    if options.is_empty() {
        return None;
    }
    options.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    options.truncate(MAX_OPTIONS);
    Some((
        t.requirements.clone(),
        options.into_iter().map(|(_, n)| n).collect(),
        t.daemon_overhead.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::quantity::Quantity;

    fn pool(replicas: i64) -> NodePool {
        let mut p = NodePool::unconstrained("static");
        p.spec.replicas = Some(replicas);
        p
    }

    fn claim(name: &str, launched: bool, pods: usize) -> LiveClaim {
        LiveClaim {
            name: name.into(),
            launched,
            pods,
            do_not_disrupt: false,
            cost: pods as f64,
        }
    }

    #[test]
    fn a_static_pool_creates_up_to_its_replicas_whatever_the_pods() {
        let p = plan(&pool(3), &[claim("a", true, 0)]).unwrap();
        assert_eq!((p.create, p.delete.len()), (2, 0));
        assert_eq!(
            plan(
                &pool(3),
                &[
                    claim("a", true, 0),
                    claim("b", true, 0),
                    claim("c", false, 0)
                ]
            ),
            None
        );
        assert_eq!(plan(&NodePool::unconstrained("dynamic"), &[]), None);
    }

    #[test]
    fn limits_nodes_caps_a_static_pool() {
        let mut p = pool(5);
        p.spec.limits.insert("nodes".into(), Quantity("3".into()));
        let plan = plan(&p, &[claim("a", true, 0)]).unwrap();
        assert_eq!(plan.create, 2);
        assert!(plan.limited.unwrap().contains("limits.nodes 3"));
    }

    #[test]
    fn scaling_down_removes_unlaunched_then_empty_then_least_busy_claims() {
        let live = [
            claim("busy", true, 5),
            claim("empty", true, 0),
            claim("pending", false, 0),
            claim("light", true, 1),
        ];
        let p = plan(&pool(1), &live).unwrap();
        assert_eq!(p.delete, ["pending", "empty", "light"]);
        assert_eq!(p.create, 0);
    }

    #[test]
    fn scaling_down_goes_by_cost_and_leaves_do_not_disrupt_nodes_last() {
        let protected = |name: &str, pods: usize| LiveClaim {
            do_not_disrupt: true,
            ..claim(name, true, pods)
        };
        let costly = LiveClaim {
            cost: 9.0,
            ..claim("few-but-costly", true, 1)
        };
        let live = [
            protected("guarded-empty", 0),
            costly,
            claim("many-cheap", true, 3),
            protected("guarded-busy", 1),
        ];
        // Budgets play no part: every one can go, the order decides which go first.
        let p = plan(&pool(0), &live).unwrap();
        assert_eq!(
            p.delete,
            [
                "many-cheap",
                "few-but-costly",
                "guarded-empty",
                "guarded-busy"
            ]
        );
        assert_eq!(plan(&pool(3), &live).unwrap().delete, ["many-cheap"]);
    }

    #[test]
    fn an_invalid_static_pool_launches_nothing() {
        let mut p = pool(2);
        p.mark_invalid("bad".into());
        assert_eq!(plan(&p, &[]), None);
    }
}
