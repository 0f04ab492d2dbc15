//! The control loop end to end on an in-process cluster: policy, approval, rejection,
//! pause, withdrawal, orchestration, journal and metrics.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};

use super::approvals::{PolicyTable, VALIDATION_DELAY};
use super::disruption::{ActionError, DisruptionController, POLL_INTERVAL};
use super::journal::{Action, Journal};
use super::orchestration::{Effect, apply};
use crate::api::duration::GoDuration;
use crate::api::labels;
use crate::api::nodeclaim::{NodeSelectorRequirementWithMinValues, Operator};
use crate::api::nodepool::{Budget, NodePool};
use crate::engine::approval::{Policy, Rule, Scope};
use crate::engine::catalog::CapacityType::OnDemand;
use crate::engine::disruption::fixture::{Fixture, instance_type};
use crate::engine::disruption::{Method, Reason};

fn noon() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

fn od_pool(budget: &str) -> NodePool {
    let mut p = NodePool::unconstrained("default");
    p.spec.disruption.budgets = vec![Budget {
        nodes: budget.into(),
        schedule: None,
        duration: None,
        reasons: vec![],
    }];
    p.spec.template.spec.requirements = vec![NodeSelectorRequirementWithMinValues {
        key: labels::CAPACITY_TYPE.into(),
        operator: Operator::In,
        values: vec!["on-demand".into()],
        min_values: None,
    }];
    p
}

/// One $1.00 node whose two pods fit a $0.40 node, plus a node that stays busy.
fn replaceable() -> Fixture {
    let mut f = Fixture::new(
        vec![
            instance_type("m", 4, 16, 0.40, None),
            instance_type("big", 16, 64, 1.00, None),
        ],
        noon(),
    );
    f.pool(od_pool("100%"));
    f.node("pricey", "default", "big", OnDemand, TimeDelta::hours(1));
    f.pod("p1", "pricey", 1500, 1024);
    f.pod("p2", "pricey", 1500, 1024);
    f
}

fn step(ctl: &mut DisruptionController, f: &mut Fixture) -> Vec<Effect> {
    let effects = ctl.tick(&f.state, f.now);
    for e in &effects {
        apply(&mut f.state, e, f.now);
    }
    effects
}

/// A pass that proposes, and the pass once the validation delay is over, which runs what
/// is still valid: the effects of both.
fn step_validated(ctl: &mut DisruptionController, f: &mut Fixture) -> Vec<Effect> {
    let mut effects = step(ctl, f);
    f.now += VALIDATION_DELAY;
    effects.extend(step(ctl, f));
    effects
}

fn manual() -> PolicyTable {
    PolicyTable {
        rules: vec![Rule::parse("manual").unwrap()],
        ..Default::default()
    }
}

fn journal_actions(path: &std::path::Path) -> Vec<Action> {
    Journal::read(path)
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect()
}

#[test]
fn a_replacement_is_initialized_before_the_candidate_is_deleted() {
    let mut f = replaceable();
    let mut ctl = DisruptionController::new(PolicyTable::all_auto(), None);
    // Proposed, then run once the validation delay is over.
    assert!(step(&mut ctl, &mut f).is_empty());
    f.now += VALIDATION_DELAY;
    let effects = step(&mut ctl, &mut f);
    assert!(effects.contains(&Effect::Taint {
        nodeclaim: "pricey".into()
    }));
    assert!(matches!(
        effects.iter().find(|e| matches!(e, Effect::CreateNodeClaim { .. })),
        Some(Effect::CreateNodeClaim { replacement, .. }) if replacement.options[0].instance_type == "m"
    ));
    assert!(!effects.iter().any(|e| matches!(e, Effect::Delete { .. })));
    let pricey = f.state.node("pricey").unwrap();
    assert!(
        pricey.is_disrupted_tainted() && !pricey.deleting,
        "{pricey:?} after {effects:?}"
    );

    // The replacement launches but is not initialized: the candidate stays.
    f.now += POLL_INTERVAL;
    let effects = step(&mut ctl, &mut f);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Delete { .. })));
    assert!(
        ctl.last_pass.as_ref().unwrap().outcomes["pricey"]
            .to_string()
            .contains("waiting for its replacement")
    );

    // Initialized: now the candidate goes.
    let replacement = f.state.nodes.last_mut().unwrap();
    replacement.initialized = true;
    replacement.ready = true;
    f.now += POLL_INTERVAL;
    let effects = step(&mut ctl, &mut f);
    assert_eq!(
        effects,
        vec![Effect::Delete {
            nodeclaim: "pricey".into()
        }]
    );
    assert!(f.state.node("pricey").unwrap().deleting);
}

#[test]
fn a_replacement_that_never_initializes_untaints_the_candidate() {
    let mut f = replaceable();
    let mut ctl = DisruptionController::new(PolicyTable::all_auto(), None);
    step_validated(&mut ctl, &mut f);
    f.now += TimeDelta::minutes(10);
    let effects = step(&mut ctl, &mut f);
    assert!(effects.contains(&Effect::Untaint {
        nodeclaim: "pricey".into()
    }));
    let pricey = f.state.node("pricey").unwrap();
    assert!(!pricey.is_disrupted_tainted() && !pricey.deleting);
    let failed = ctl.orchestrator.finished().next().unwrap();
    assert!(format!("{:?}", failed.phase).contains("not initialized after 10 min"));
}

#[test]
fn a_manual_decision_waits_and_approve_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let mut f = replaceable();
    let mut ctl = DisruptionController::new(manual(), Some(Journal::open(&path).unwrap()));
    let effects = step(&mut ctl, &mut f);
    assert!(effects.is_empty(), "{effects:?}");
    let d = ctl
        .gate
        .pending()
        .next()
        .expect("a pending decision")
        .clone();
    assert_eq!(d.policy, Policy::Manual);
    assert_eq!(d.command.method, Method::SingleNodeConsolidation);
    assert_eq!(d.command.candidates[0].pods.len(), 2);
    assert!((d.command.savings_per_hour - 0.60).abs() < 1e-9);

    // Another pass proposes nothing new for the held node, and nothing runs.
    f.now += POLL_INTERVAL;
    assert!(step(&mut ctl, &mut f).is_empty());
    assert_eq!(ctl.gate.pending().count(), 1);
    assert!(
        ctl.last_pass.as_ref().unwrap().outcomes["pricey"]
            .to_string()
            .contains("waiting for approval")
    );

    let effects = ctl.approve(d.id, "console:test", &f.state, f.now).unwrap();
    assert!(effects.contains(&Effect::Taint {
        nodeclaim: "pricey".into()
    }));
    assert_eq!(ctl.gate.pending().count(), 0);
    assert_eq!(
        journal_actions(&path),
        [Action::Proposed, Action::Approved, Action::Executed]
    );
    let entries = Journal::read(&path).unwrap();
    assert_eq!(entries[1].actor, "console:test");
    assert_eq!(entries[1].nodes, ["pricey"]);
}

#[test]
fn reject_keeps_the_node_until_the_rejection_expires() {
    let mut f = replaceable();
    let mut ctl = DisruptionController::new(manual(), None);
    step(&mut ctl, &mut f);
    let id = ctl.gate.pending().next().unwrap().id;
    ctl.reject(id, "peak traffic", "console:test", f.now)
        .unwrap();
    f.now += POLL_INTERVAL;
    step(&mut ctl, &mut f);
    assert_eq!(ctl.gate.pending().count(), 0);
    let o = ctl.last_pass.as_ref().unwrap().outcomes["pricey"].to_string();
    assert!(o.contains("rejected by an operator (peak traffic)"), "{o}");
    assert!(!f.state.node("pricey").unwrap().is_disrupted_tainted());

    f.now += TimeDelta::hours(1);
    step(&mut ctl, &mut f);
    assert_eq!(
        ctl.gate.pending().count(),
        1,
        "proposed again after an hour"
    );
}

#[test]
fn a_decision_whose_node_gained_a_pod_is_withdrawn_not_executed() {
    let mut f = replaceable();
    let mut ctl = DisruptionController::new(manual(), None);
    step(&mut ctl, &mut f);
    let id = ctl.gate.pending().next().unwrap().id;
    f.pod("newcomer", "pricey", 100, 64);
    let err = ctl
        .approve(id, "console:test", &f.state, f.now)
        .unwrap_err();
    assert!(
        matches!(&err, ActionError::Gate(super::approvals::GateError::Stale { reason, .. }) if reason.contains("gained pod default/newcomer")),
        "{err}"
    );
    assert!(!f.state.node("pricey").unwrap().is_disrupted_tainted());

    // The same happens on the next poll if nobody acts.
    let mut ctl = DisruptionController::new(manual(), None);
    let mut f = replaceable();
    step(&mut ctl, &mut f);
    f.pod("newcomer", "pricey", 100, 64);
    f.now += POLL_INTERVAL;
    step(&mut ctl, &mut f);
    let w = ctl.gate.withdrawn().next().expect("withdrawn");
    assert!(w.reason.contains("gained pod"), "{}", w.reason);
}

#[test]
fn pause_all_holds_everything_including_expiration() {
    let mut f = replaceable();
    let mut expiring = od_pool("0");
    expiring.metadata.name = Some("short".into());
    expiring.spec.template.spec.expire_after = GoDuration::parse("1h").unwrap();
    f.pool(expiring);
    f.node("old", "short", "m", OnDemand, TimeDelta::hours(1));
    f.pod("busy", "old", 3500, 1024);
    let mut ctl = DisruptionController::new(PolicyTable::all_auto(), None);
    ctl.pause(Scope::All, None, "console:test", f.now).unwrap();
    let effects = step(&mut ctl, &mut f);
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(ctl.gate.pending().count(), 2);
    let o = ctl.last_pass.as_ref().unwrap().outcomes["old"].to_string();
    assert!(o.contains("paused by scope all"), "{o}");
    let id = ctl.gate.pending().next().unwrap().id;
    assert!(matches!(
        ctl.approve(id, "console:test", &f.state, f.now),
        Err(ActionError::Gate(
            super::approvals::GateError::Paused { .. }
        ))
    ));

    // Resume: expiration deletes at once despite the zero budget; consolidation starts
    // (its validation delay has passed).
    assert!(ctl.resume(&Scope::All, "console:test", f.now).unwrap());
    f.now += VALIDATION_DELAY;
    let effects = step(&mut ctl, &mut f);
    assert!(
        effects.contains(&Effect::Delete {
            nodeclaim: "old".into()
        }),
        "{effects:?}"
    );
    assert!(effects.contains(&Effect::Taint {
        nodeclaim: "pricey".into()
    }));
}

#[test]
fn a_pause_by_reason_leaves_other_reasons_running() {
    let mut f = replaceable();
    f.node("idle", "default", "m", OnDemand, TimeDelta::hours(1));
    let mut ctl = DisruptionController::new(PolicyTable::all_auto(), None);
    ctl.pause(Scope::Reason(Reason::Underutilized), None, "op", f.now)
        .unwrap();
    let effects = step_validated(&mut ctl, &mut f);
    // Emptiness acts on the idle node.
    assert!(effects.contains(&Effect::Delete {
        nodeclaim: "idle".into()
    }));
}

#[test]
fn metrics_use_upstream_names() {
    let mut f = replaceable();
    let mut ctl = DisruptionController::new(PolicyTable::all_auto(), None);
    step(&mut ctl, &mut f);
    let text = ctl.metrics.encode();
    let eligible = r#"karpenter_voluntary_disruption_eligible_nodes{reason="underutilized"} 1"#;
    assert!(text.contains(eligible), "missing {eligible} in\n{text}");
    f.now += VALIDATION_DELAY;
    step(&mut ctl, &mut f);
    let text = ctl.metrics.encode();
    for needle in [
        r#"karpenter_voluntary_disruption_decisions_total{decision="replace",reason="underutilized",consolidation_type="single"} 1"#,
        r#"karpenter_nodeclaims_disrupted_total{reason="underutilized",nodepool="default",capacity_type="on-demand"} 1"#,
        // The budget's reason as the API spells it, as upstream labels these two.
        r#"karpenter_nodepools_allowed_disruptions{nodepool="default",reason="Underutilized"} 1"#,
        r#"karpenter_nodepools_nodes_consuming_budgets{nodepool="default",reason="Underutilized"} 1"#,
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}
