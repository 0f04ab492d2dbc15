//! Safety properties of the disruption loop over random small clusters and many polls:
//! no budget is ever exceeded, no do-not-disrupt node or pod is ever disrupted
//! voluntarily, and no candidate is deleted before its replacements are Initialized.

use std::collections::HashSet;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;

use super::approvals::PolicyTable;
use super::disruption::{DisruptionController, POLL_INTERVAL};
use super::orchestration::{Effect, apply};
use crate::api::labels;
use crate::api::nodepool::{Budget, NodePool};
use crate::engine::catalog::CapacityType::OnDemand;
use crate::engine::disruption::candidates::do_not_disrupt_until;
use crate::engine::disruption::fixture::{Fixture, instance_type};
use crate::engine::disruption::{Command, Method, evaluate_budgets};
use crate::engine::state::ClusterState;

fn noon() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

#[derive(Clone, Debug)]
struct NodeSpec {
    big: bool,
    pods: Vec<(i64, bool)>,
    node_do_not_disrupt: bool,
    drifted: bool,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        any::<bool>(),
        prop::collection::vec((100i64..3000, prop::bool::weighted(0.15)), 0..4),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(big, pods, node_do_not_disrupt, drifted)| NodeSpec {
            big,
            pods,
            node_do_not_disrupt,
            drifted,
        })
}

fn build(budget: &str, nodes: &[NodeSpec]) -> Fixture {
    let mut f = Fixture::new(
        vec![
            instance_type("small", 1, 4, 0.05, None),
            instance_type("m", 4, 16, 0.40, None),
            instance_type("big", 16, 64, 1.00, None),
        ],
        noon(),
    );
    let mut pool = NodePool::unconstrained("default");
    pool.spec.disruption.budgets = vec![Budget {
        nodes: budget.into(),
        schedule: None,
        duration: None,
        reasons: vec![],
    }];
    f.pool(pool);
    for (i, n) in nodes.iter().enumerate() {
        let name = format!("n{i}");
        let node = f.node(
            &name,
            "default",
            if n.big { "big" } else { "m" },
            OnDemand,
            TimeDelta::hours(2),
        );
        if n.node_do_not_disrupt {
            node.annotations
                .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
        }
        if n.drifted {
            node.nodeclass_drift = Some("AMIDrift".into());
        }
        for (j, (cpu, dnd)) in n.pods.iter().enumerate() {
            let p = f.pod(&format!("p{i}-{j}"), &name, *cpu, 256);
            if *dnd {
                p.annotations
                    .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
            }
        }
    }
    f
}

/// Nodes a command is not allowed to touch voluntarily.
fn protected(state: &ClusterState, now: DateTime<Utc>) -> HashSet<String> {
    let mut out: HashSet<String> = state
        .nodes
        .iter()
        .filter(|n| n.do_not_disrupt())
        .map(|n| n.name.clone())
        .collect();
    for p in &state.pods {
        if let Some(node) = &p.node_name
            && do_not_disrupt_until(p, now).is_some()
        {
            out.insert(node.clone());
        }
    }
    out
}

fn check_command(cmd: &Command, before: &ClusterState, now: DateTime<Utc>) -> Result<(), String> {
    if let Some(reason) = cmd.reason.budget_reason() {
        let budgets = evaluate_budgets(before, now, &Default::default());
        for (pool, n) in &cmd.budget {
            let allowed = budgets
                .iter()
                .find(|b| &b.nodepool == pool)
                .map(|b| b.allowed(reason))
                .unwrap_or(0);
            if *n > allowed {
                return Err(format!("{cmd:?} takes {n} of {pool}'s {allowed}"));
            }
        }
    }
    if cmd.method != Method::Expiration {
        let protected = protected(before, now);
        if let Some(n) = cmd.nodeclaims().find(|n| protected.contains(*n)) {
            return Err(format!("{} disrupted protected node {n}", cmd.method));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_loop_never_breaks_budgets_protection_or_replacement_order(
        budget in prop::sample::select(vec!["0", "1", "2", "50%", "100%"]),
        nodes in prop::collection::vec(node_spec(), 1..7),
        // Per poll: does a launching replacement initialize this time?
        inits in prop::collection::vec(any::<bool>(), 12),
    ) {
        let mut f = build(budget, &nodes);
        let mut ctl = DisruptionController::new(PolicyTable::all_auto(), None);
        for init in inits {
            let before = f.state.clone();
            let started: HashSet<u64> = ctl
                .orchestrator
                .running()
                .iter()
                .map(|e| e.id)
                .chain(ctl.orchestrator.finished().map(|e| e.id))
                .collect();
            let effects = ctl.tick(&f.state, f.now);

            // Every command started this poll respects budgets and protection.
            for e in ctl.orchestrator.running().iter().chain(ctl.orchestrator.finished()) {
                if !started.contains(&e.id)
                    && let Err(why) = check_command(&e.command, &before, f.now)
                {
                    prop_assert!(false, "{}", why);
                }
            }
            // A candidate is deleted only once its replacements are Initialized.
            for e in &effects {
                let Effect::Delete { nodeclaim: node } = e else { continue };
                let exec = ctl
                    .orchestrator
                    .running()
                    .iter()
                    .chain(ctl.orchestrator.finished())
                    .find(|x| x.command.nodeclaims().any(|n| n == node))
                    .expect("a delete belongs to an execution");
                for k in 0..exec.command.replacements.len() {
                    let claim = format!(
                        "{}-replacement-{}-{k}",
                        exec.command.replacements[k].nodepool, exec.id
                    );
                    let r = before.nodes.iter().find(|n| n.nodeclaim == claim);
                    prop_assert!(
                        r.is_some_and(|r| r.initialized),
                        "{node} deleted before {claim} was initialized"
                    );
                }
            }
            for e in &effects {
                apply(&mut f.state, e, f.now);
            }

            // The world moves: deleted nodes go with their pods, replacements may come up.
            let gone: HashSet<String> = f
                .state
                .nodes
                .iter()
                .filter(|n| n.deleting)
                .map(|n| n.name.clone())
                .collect();
            f.state.nodes.retain(|n| !gone.contains(&n.name));
            f.state
                .pods
                .retain(|p| p.node_name.as_ref().is_none_or(|n| !gone.contains(n)));
            if init {
                for n in f.state.nodes.iter_mut().filter(|n| !n.initialized) {
                    n.initialized = true;
                    n.ready = true;
                }
            }
            f.now += POLL_INTERVAL;
            // The state changed: a new revision, as the controller numbers its changes.
            ctl.revision += 1;
        }
    }
}
