//! The rules of upstream's disruption simulation and budgets that a pass must keep (the
//! trust issue's engine cases), one fixture each.

use chrono::TimeDelta;

use super::super::fixture::{Fixture, instance_type};
use super::super::*;
use super::{budget, fixture, hour, noon, outcome, pool, run};
use crate::api::duration::GoDuration;
use crate::engine::catalog::CapacityType::{self, OnDemand};
use crate::engine::state::StateNode;

/// Upstream's `filterOutSameInstanceType`: when a replacement option is a type one of the
/// candidates already runs, the replacement must be cheaper than that candidate; replacing
/// [2xlarge, 2xlarge, large] with one xlarge is worse than deleting the two 2xlarges and
/// keeping the large. Seen: the three went for one xlarge.
#[test]
fn a_multi_node_replace_that_keeps_a_candidates_type_deletes_instead() {
    let mut f = Fixture::new(
        vec![
            instance_type("large", 2, 8, 0.096, None),
            instance_type("xlarge", 4, 16, 0.192, None),
            instance_type("2xlarge", 8, 32, 0.384, None),
        ],
        noon(),
    );
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("a", "default", "2xlarge", OnDemand, hour());
    f.node("b", "default", "2xlarge", OnDemand, hour());
    f.node("c", "default", "large", OnDemand, hour());
    f.pod("pa", "a", 500, 1024);
    f.pod("pb", "b", 500, 1024);
    f.pod("pc", "c", 500, 1024);
    let pass = run(&f);
    let cmd = pass.command.as_ref().expect("a command");
    assert_eq!(cmd.method, Method::MultiNodeConsolidation, "{cmd:?}");
    let nodes: Vec<&str> = cmd.nodeclaims().collect();
    assert_eq!(nodes, vec!["a", "b"], "{cmd:?}");
    assert!(
        cmd.is_delete(),
        "the large stays and takes their pods: {cmd:?}"
    );
}

/// Upstream's `SimulateScheduling`: a candidate's pods may not count on a node that is
/// not initialized yet ("would schedule against uninitialized nodeclaim").
#[test]
fn a_candidates_pods_may_not_count_on_an_uninitialized_node() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("a", "default", "m", OnDemand, hour());
    f.node("coming", "default", "m", OnDemand, TimeDelta::seconds(30))
        .initialized = false;
    f.pod("pa", "a", 1000, 1024);
    let pass = run(&f);
    assert!(pass.command.is_none(), "{:?}", pass.command);
    assert_eq!(
        outcome(&pass, "a").to_string(),
        "blocked: pod default/pa would schedule against uninitialized nodeclaim/coming"
    );
    // Once it is initialized, the pod may move there.
    f.state.nodes[1].initialized = true;
    f.state.nodes[1].initialized_at = Some(f.now - hour());
    f.state.nodes[1].created = f.now - hour();
    let pass = run(&f);
    assert!(pass.command.is_some(), "{:?}", pass.outcomes);
}

/// `Consolidatable` counts `consolidateAfter` from initialization or the last pod event,
/// whichever is later, never from creation: a node that took minutes to join is not
/// consolidatable the moment it does.
#[test]
fn consolidate_after_counts_from_initialization_not_creation() {
    let mut f = fixture(noon());
    let mut p = pool("default", vec![budget("100%")], &["on-demand"]);
    p.spec.disruption.consolidate_after = Some(GoDuration::parse("30s").unwrap());
    f.pool(p);
    let n = f.node("late", "default", "m", OnDemand, TimeDelta::minutes(5));
    n.initialized_at = Some(noon() - TimeDelta::seconds(10));
    let pass = run(&f);
    assert_eq!(
        outcome(&pass, "late").to_string(),
        "blocked: consolidateAfter has 20s left"
    );
    assert_eq!(
        pass.next_change,
        Some(noon() + TimeDelta::seconds(20)),
        "a pass is due when it runs out"
    );
    // A pod event after initialization counts from there.
    f.state.nodes[0].last_pod_event = Some(noon() - TimeDelta::seconds(5));
    assert_eq!(
        outcome(&run(&f), "late").to_string(),
        "blocked: consolidateAfter has 25s left"
    );
    f.now += TimeDelta::seconds(25);
    assert!(matches!(
        outcome(&run(&f), "late"),
        Outcome::Chosen {
            method: Method::Emptiness,
            ..
        }
    ));
}

/// Pods that were pending before the simulation may fail without blocking a command;
/// pods of a node being deleted may not (upstream `NonPendingPodSchedulingErrors`).
#[test]
fn pods_of_deleting_nodes_that_fit_nowhere_block_consolidation_pending_ones_do_not() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("a", "default", "big", OnDemand, hour());
    f.node("b", "default", "big", OnDemand, hour());
    f.pod("pa", "a", 1000, 1024);
    f.pod("pb", "b", 1000, 1024);
    // A pending pod nothing can run: it does not hold consolidation back.
    let stuck = f.pod("stuck", "a", 100, 64);
    stuck.node_name = None;
    stuck.phase = crate::engine::pod::Phase::Pending;
    stuck.unschedulable = true;
    stuck.node_selector.insert("no-such".into(), "label".into());
    let pass = run(&f);
    let cmd = pass.command.as_ref().expect("consolidation goes ahead");
    assert_eq!(cmd.reason, Reason::Underutilized, "{cmd:?}");

    // The same pod on a node being deleted blocks it: it must move, and cannot.
    f.node("going", "default", "m", OnDemand, hour()).deleting = true;
    let p = f
        .state
        .pods
        .iter_mut()
        .find(|p| p.key.name == "stuck")
        .unwrap();
    p.node_name = Some("going".into());
    p.phase = crate::engine::pod::Phase::Running;
    p.unschedulable = false;
    let pass = run(&f);
    assert!(pass.command.is_none(), "{:?}", pass.command);
    assert!(
        outcome(&pass, "a")
            .to_string()
            .starts_with("blocked: pods would not fit: default/stuck"),
        "{}",
        outcome(&pass, "a")
    );
}

/// Waiting decisions hold budget: a pass counts their NodeClaims as disrupting.
#[test]
fn reserved_nodeclaims_count_against_the_budget() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("2")], &["on-demand"]));
    for n in ["a", "b", "c"] {
        f.node(n, "default", "m", OnDemand, hour());
    }
    let reserved: crate::engine::fast_hash::FastSet<String> =
        ["a".to_string()].into_iter().collect();
    let b = evaluate_budgets(&f.state, f.now, &reserved);
    assert_eq!(
        b[0].allowed(crate::api::nodepool::DisruptionReason::Empty),
        1
    );
    assert_eq!((b[0].disrupting, b[0].reserved), (1, 1));
}

/// Reserved capacity costs the on-demand price over 10,000,000 (upstream's reserved
/// offerings), so a node in a reservation is never replaced by a cheaper on-demand or
/// spot node: the replacement must cost less than the candidate. The same node bought
/// on demand is replaced.
#[test]
fn a_reserved_node_is_never_consolidated_into_on_demand() {
    let mut types = vec![
        instance_type("large", 2, 8, 0.096, Some(0.03)),
        instance_type("2xlarge", 8, 32, 0.384, Some(0.12)),
    ];
    let mut big = (*types[1]).clone();
    big.offerings
        .push(crate::engine::reservation::reserved_offering(
            super::super::fixture::ZONE,
            0.384 / 1e7,
            "cr-0a1",
            0,
        ));
    types[1] = std::sync::Arc::new(big);
    let mut f = Fixture::new(types, noon());
    f.pool(pool(
        "default",
        vec![budget("100%")],
        &["on-demand", "spot", "reserved"],
    ));
    // The reservation is full (this node is its only instance), as the provider counts it.
    f.node("rsv", "default", "2xlarge", CapacityType::Reserved, hour())
        .price = 0.384 / 1e7;
    f.pod("p", "rsv", 500, 1024);
    let pass = run(&f);
    assert!(pass.command.is_none(), "{:?}", pass.command);
    // Bought on demand, the same node is replaced by a large.
    f.state.nodes[0] = StateNode::launched(
        "od",
        &f.state.nodepools["default"],
        &f.types[1],
        OnDemand,
        noon() - hour(),
    );
    f.state.pods[0].node_name = Some("od".into());
    let pass = run(&f);
    let cmd = pass.command.as_ref().expect("a replacement");
    assert!(!cmd.is_delete(), "{cmd:?}");
}

/// Seen in the notifications kube-peer test: an empty node of a `consolidateAfter:
/// Never` pool that drifted stayed forever, because emptiness claimed it ("consolidateAfter
/// is Never") before drift could look. Upstream's drift deletes it.
#[test]
fn an_empty_drifted_node_is_drifts_to_delete_whatever_consolidate_after_or_the_empty_budget_say() {
    use crate::api::nodepool::{Budget, DisruptionReason};
    for (consolidate_after, empty_budget) in
        [(Some("Never"), None), (Some("1h"), None), (None, Some("0"))]
    {
        let mut f = fixture(noon());
        let mut p = pool("default", vec![budget("100%")], &[]);
        if let Some(after) = consolidate_after {
            p.spec.disruption.consolidate_after = Some(GoDuration::parse(after).unwrap());
        }
        if let Some(n) = empty_budget {
            p.spec.disruption.budgets.push(Budget {
                reasons: vec![DisruptionReason::Empty],
                ..budget(n)
            });
        }
        f.pool(p.clone());
        f.node("n", "default", "m", OnDemand, TimeDelta::minutes(5));
        p.spec
            .template
            .metadata
            .labels
            .insert("team".into(), "a".into());
        f.state.nodepools.insert("default".into(), p);
        let pass = run(&f);
        let cmd = pass.command.as_ref().unwrap_or_else(|| {
            panic!(
                "{consolidate_after:?}/{empty_budget:?}: {:?}",
                pass.outcomes
            )
        });
        assert_eq!(cmd.method, Method::Drift);
        assert!(
            cmd.replacements.is_empty(),
            "an empty node goes without one"
        );
    }
}
