//! Node repair as a voluntary disruption (issue 22): unhealthy past the toleration, then
//! through budgets that do not count the broken nodes themselves, the veto and the cap.

use super::*;
use crate::engine::repair::NodeFault;

fn repairing() -> Options {
    Options {
        repair: true,
        ..Options::default()
    }
}

/// `n` nodes of pool default (4 cpu), one 3-cpu pod each (nothing to consolidate); the listed ones NotReady (Ready=False)
/// since `ago`.
fn pool_with_faults(n: usize, faulty: &[usize], ago: TimeDelta, budgets: Vec<Budget>) -> Fixture {
    let mut f = fixture(noon());
    f.pool(pool("default", budgets, &["on-demand"]));
    for i in 0..n {
        let name = format!("n{i:02}");
        let node = f.node(&name, "default", "m", OnDemand, TimeDelta::hours(5));
        if faulty.contains(&i) {
            node.ready = false;
            node.faults = vec![NodeFault::of("Ready", "False", noon() - ago).unwrap()];
        }
        f.pod(&format!("p{i:02}"), &name, 3000, 1024);
    }
    f
}

fn repair_of(pass: &Pass) -> Option<&Command> {
    pass.command.as_ref().filter(|c| c.method == Method::Repair)
}

#[test]
fn a_node_unhealthy_past_its_toleration_is_replaced_first_and_not_before() {
    let f = pool_with_faults(5, &[3], TimeDelta::minutes(31), vec![budget("100%")]);
    let pass = plan(&f.state, f.now, &repairing());
    let cmd = pass.command.as_ref().expect("a repair");
    assert_eq!(cmd.method, Method::Repair);
    assert_eq!(cmd.reason, Reason::Unhealthy);
    assert_eq!(cmd.candidates[0].nodeclaim, "n03");
    assert_eq!(
        cmd.replacements.len(),
        1,
        "its pod moves to a new node first"
    );
    assert_eq!(
        outcome(&pass, "n03").to_string(),
        "chosen: repair (replace)"
    );

    // 29 minutes: tolerated still; the pass is due again when it runs out.
    let f = pool_with_faults(5, &[3], TimeDelta::minutes(29), vec![budget("100%")]);
    let pass = plan(&f.state, f.now, &repairing());
    assert!(repair_of(&pass).is_none());
    assert_eq!(pass.next_change, Some(f.now + TimeDelta::minutes(1)));

    // Without the NodeRepair gate, nothing is repaired.
    let f = pool_with_faults(5, &[3], TimeDelta::hours(2), vec![budget("100%")]);
    assert!(repair_of(&run(&f)).is_none());
}

#[test]
fn the_repair_budget_does_not_count_the_broken_nodes_but_counts_repairs_under_way() {
    // Ten nodes at 10%: one may be disrupted. Two are NotReady, which exhausts the
    // budget for every other reason, but not for repair (they are what it mends).
    let mut f = pool_with_faults(10, &[1, 2], TimeDelta::hours(1), vec![budget("10%")]);
    let b = evaluate_budgets(&f.state, f.now, &Default::default());
    assert_eq!(b[0].allowed(DisruptionReason::Drifted), 0);
    assert_eq!(b[0].allowed(DisruptionReason::Unhealthy), 1);
    let pass = plan(&f.state, f.now, &repairing());
    assert_eq!(
        pass.command.as_ref().unwrap().candidates[0].nodeclaim,
        "n01"
    );
    // One repair waiting for approval holds the budget: the other waits its turn.
    let held = Options {
        reserved: ["n01".to_string()].into_iter().collect(),
        held: [("n01".to_string(), "waiting for approval".to_string())]
            .into_iter()
            .collect(),
        ..repairing()
    };
    let pass = plan(&f.state, f.now, &held);
    assert!(pass.command.is_none(), "{:?}", pass.command);
    assert_eq!(
        outcome(&pass, "n02").to_string(),
        "blocked: budget for Unhealthy in default exhausted"
    );
    // A budget scoped to other reasons does not govern repairs.
    f.state
        .nodepools
        .get_mut("default")
        .unwrap()
        .spec
        .disruption
        .budgets = vec![Budget {
        reasons: vec![DisruptionReason::Drifted],
        ..budget("0")
    }];
    let pass = plan(&f.state, f.now, &held);
    assert_eq!(
        pass.command.as_ref().unwrap().candidates[0].nodeclaim,
        "n02"
    );
}

#[test]
fn a_veto_on_the_node_or_its_pool_and_a_widespread_fault_hold_repair_and_say_why() {
    use crate::api::pool_settings::DO_NOT_REPAIR;
    let mut f = pool_with_faults(10, &[4], TimeDelta::hours(1), vec![budget("100%")]);
    f.state.nodes[4]
        .annotations
        .insert(DO_NOT_REPAIR.into(), "true".into());
    let pass = plan(&f.state, f.now, &repairing());
    assert!(repair_of(&pass).is_none());
    assert_eq!(
        outcome(&pass, "n04").to_string(),
        "blocked: unhealthy, but repair is vetoed by karpenter-tui.dev/do-not-repair on node n04"
    );
    let event = pass.events.iter().find(|e| e.nodeclaim == "n04").unwrap();
    assert_eq!(event.reason, "NodeRepairBlocked");

    let mut f = pool_with_faults(10, &[4], TimeDelta::hours(1), vec![budget("100%")]);
    f.state
        .nodepools
        .get_mut("default")
        .unwrap()
        .metadata
        .annotations = Some([(DO_NOT_REPAIR.to_string(), "true".to_string())].into());
    let pass = plan(&f.state, f.now, &repairing());
    assert!(
        outcome(&pass, "n04")
            .to_string()
            .ends_with("on NodePool default")
    );

    // Three of ten unhealthy (one not even due yet) is over the cap of two.
    let mut f = pool_with_faults(10, &[4, 5], TimeDelta::hours(1), vec![budget("100%")]);
    f.state.nodes[6].faults = vec![NodeFault::of("KernelReady", "False", noon()).unwrap()];
    let pass = plan(&f.state, f.now, &repairing());
    assert!(repair_of(&pass).is_none());
    assert_eq!(
        outcome(&pass, "n04").to_string(),
        "blocked: unhealthy, but 3 of NodePool default's 10 nodes are: more than 20% (2), so repair waits (a fault that wide is not the node's)"
    );
}
