//! The disruption acceptance cases, one fixture each.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};

use super::fixture::{Fixture, instance_type};
use super::*;
use crate::api::duration::GoDuration;
use crate::api::labels;
use crate::api::nodeclaim::{NodeSelectorRequirementWithMinValues, Operator};
use crate::api::nodepool::{Budget, NodePool};
use crate::engine::catalog::CapacityType::{OnDemand, Spot};
use crate::engine::selector::Selector;
use crate::engine::state::Pdb;

fn noon() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

fn hour() -> TimeDelta {
    TimeDelta::hours(1)
}

fn budget(nodes: &str) -> Budget {
    Budget {
        nodes: nodes.into(),
        schedule: None,
        duration: None,
        reasons: vec![],
    }
}

fn pool(name: &str, budgets: Vec<Budget>, capacity_types: &[&str]) -> NodePool {
    let mut p = NodePool::unconstrained(name);
    p.spec.disruption.budgets = budgets;
    if !capacity_types.is_empty() {
        p.spec.template.spec.requirements = vec![NodeSelectorRequirementWithMinValues {
            key: labels::CAPACITY_TYPE.into(),
            operator: Operator::In,
            values: capacity_types.iter().map(|s| s.to_string()).collect(),
            min_values: None,
        }];
    }
    p
}

/// small $0.05, m $0.40 (spot $0.15), big $1.00 (spot $0.35).
fn fixture(now: DateTime<Utc>) -> Fixture {
    Fixture::new(
        vec![
            instance_type("small", 1, 2, 0.05, Some(0.02)),
            instance_type("m", 4, 16, 0.40, Some(0.15)),
            instance_type("big", 16, 64, 1.00, Some(0.35)),
        ],
        now,
    )
}

fn outcome<'a>(pass: &'a Pass, node: &str) -> &'a Outcome {
    pass.outcomes
        .get(node)
        .unwrap_or_else(|| panic!("no outcome for {node}: {:?}", pass.outcomes))
}

fn run(f: &Fixture) -> Pass {
    plan(&f.state, f.now, &Options::default())
}

#[test]
fn ten_empty_nodes_with_a_30_percent_budget_lose_exactly_three_in_one_command() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("30%")], &[]));
    for i in 0..10 {
        f.node(&format!("n{i:02}"), "default", "big", OnDemand, hour());
    }
    let pass = run(&f);
    let cmd = pass.command.as_ref().expect("an emptiness command");
    assert_eq!(cmd.method, Method::Emptiness);
    assert_eq!(cmd.candidates.len(), 3);
    assert!(cmd.is_delete());
    assert_eq!(cmd.budget["default"], 3);
    let blocked = pass
        .outcomes
        .values()
        .filter(|o| {
            matches!(
                o,
                Outcome::Blocked(Block::Budget {
                    reason: DisruptionReason::Empty,
                    ..
                })
            )
        })
        .count();
    assert_eq!(blocked, 7);
}

#[test]
fn nineteen_nodes_at_20_percent_allow_four_and_two_not_ready_leave_two() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("20%")], &[]));
    for i in 0..19 {
        f.node(&format!("n{i:02}"), "default", "m", OnDemand, hour());
    }
    let b = evaluate_budgets(&f.state, f.now, &Default::default());
    assert_eq!(b[0].allowed(DisruptionReason::Underutilized), 4);
    f.state.nodes[0].ready = false;
    f.state.nodes[1].ready = false;
    let b = evaluate_budgets(&f.state, f.now, &Default::default());
    assert_eq!(b[0].allowed(DisruptionReason::Underutilized), 2);
    assert_eq!(b[0].total, 19);
    assert_eq!(b[0].disrupting, 2);
}

fn nightly_freeze() -> Vec<Budget> {
    let mut freeze = budget("0");
    freeze.schedule = Some("@daily".into());
    freeze.duration = Some(GoDuration::parse("10m").unwrap());
    freeze.reasons = vec![DisruptionReason::Underutilized];
    vec![budget("100%"), freeze]
}

#[test]
fn a_nightly_underutilized_freeze_blocks_consolidation_but_not_emptiness_or_drift() {
    let five_past = Utc.with_ymd_and_hms(2026, 11, 29, 0, 5, 0).unwrap();
    // Empty node + underutilized node: emptiness acts, consolidation is frozen.
    let mut f = fixture(five_past);
    f.pool(pool("default", nightly_freeze(), &["on-demand"]));
    f.node("empty", "default", "m", OnDemand, hour());
    f.node("busy", "default", "m", OnDemand, hour());
    f.node("light", "default", "big", OnDemand, hour());
    f.pod("p1", "light", 500, 512);
    f.pod("p2", "busy", 1000, 512);
    let pass = run(&f);
    assert_eq!(pass.command.as_ref().unwrap().method, Method::Emptiness);
    let o = outcome(&pass, "light");
    assert!(
        o.to_string().contains(
            "budget for Underutilized in default exhausted until 2026-11-29 00:10:00 UTC"
        ),
        "{o}"
    );

    // Drifted node + underutilized node: drift proceeds.
    f.state.nodes.remove(0);
    f.state.nodes[0].nodeclass_drift = Some("AMIDrift".into());
    let pass = run(&f);
    let cmd = pass.command.as_ref().unwrap();
    assert_eq!(cmd.method, Method::Drift);
    assert_eq!(cmd.candidates[0].node, "busy");

    // At 00:10 the freeze is over: the underutilized big node is consolidated.
    f.state.nodes[0].nodeclass_drift = None;
    f.now = Utc.with_ymd_and_hms(2026, 11, 29, 0, 10, 0).unwrap();
    let pass = run(&f);
    let cmd = pass
        .command
        .as_ref()
        .expect("consolidation after the window");
    assert_eq!(cmd.reason, Reason::Underutilized);
    assert!(
        !outcome(&pass, "light").to_string().contains("budget"),
        "{}",
        outcome(&pass, "light")
    );
}

#[test]
fn do_not_disrupt_pods_and_pdbs_block_consolidation_with_the_reason() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("a", "default", "big", OnDemand, hour());
    f.node("b", "default", "big", OnDemand, hour());
    f.node("c", "default", "big", OnDemand, hour());
    f.pod("keep-me", "a", 100, 64)
        .annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
    f.pod("guarded", "b", 100, 64)
        .labels
        .insert("app".into(), "db".into());
    let two = f.pod("doubly", "c", 100, 64);
    two.labels.insert("app".into(), "cache".into());
    two.labels.insert("tier".into(), "x".into());
    let pdb = |name: &str, k: &str, v: &str, allowed: i32| Pdb {
        namespace: "default".into(),
        name: name.into(),
        selector: Selector::from_labels(&[(k.to_string(), v.to_string())].into()),
        disruptions_allowed: allowed,
    };
    f.state.pdbs = vec![
        pdb("db", "app", "db", 0),
        pdb("cache", "app", "cache", 5),
        pdb("tier-x", "tier", "x", 5),
    ];
    let pass = run(&f);
    assert!(pass.command.is_none(), "{:?}", pass.command);
    assert_eq!(
        outcome(&pass, "a").to_string(),
        "blocked: do-not-disrupt pod default/keep-me"
    );
    assert_eq!(
        outcome(&pass, "b").to_string(),
        "blocked: PDB default/db allows 0 disruptions (pod default/guarded)"
    );
    assert!(
        outcome(&pass, "c")
            .to_string()
            .contains("pod default/doubly is selected by 2 PDBs"),
        "{}",
        outcome(&pass, "c")
    );
    assert!(pass.events.iter().all(|e| e.reason == "DisruptionBlocked"));
    assert_eq!(pass.events.len(), 3);
}

#[test]
fn a_do_not_disrupt_duration_expires() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("a", "default", "big", OnDemand, hour());
    f.node("b", "default", "big", OnDemand, hour());
    let p = f.pod("warm-up", "a", 100, 64);
    p.annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "90m".into());
    // Started an hour ago: protected for 30 more minutes.
    let pass = run(&f);
    assert!(
        outcome(&pass, "a")
            .to_string()
            .contains("until 2026-11-29 12:30:00 UTC"),
        "{}",
        outcome(&pass, "a")
    );
    f.now += TimeDelta::minutes(31);
    let pass = run(&f);
    assert!(!matches!(
        outcome(&pass, "a"),
        Outcome::Blocked(Block::PodDoNotDisrupt { .. })
    ));
}

#[test]
fn a_do_not_disrupt_duration_counts_from_the_pods_start_not_its_creation() {
    // Created three hours ago, pending for two, running for one: upstream counts the 90
    // minutes from status.startTime, so it is protected for 30 more. Counting from
    // creation had let it be disrupted an hour early.
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("a", "default", "big", OnDemand, hour());
    f.node("b", "default", "big", OnDemand, hour());
    let now = f.now;
    let p = f.pod("batch", "a", 100, 64);
    p.created = now - TimeDelta::hours(3);
    p.started = Some(now - TimeDelta::hours(1));
    p.annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "90m".into());
    assert!(
        outcome(&run(&f), "a")
            .to_string()
            .contains("until 2026-11-29 12:30:00 UTC"),
        "{}",
        outcome(&run(&f), "a")
    );
    // Not started yet (no startTime): protected, as upstream fails safe.
    f.state.pods[0].started = None;
    assert!(matches!(
        outcome(&run(&f), "a"),
        Outcome::Blocked(Block::PodDoNotDisrupt { until: None, .. })
    ));
}

#[test]
fn an_invalid_do_not_disrupt_value_protects_nothing_and_says_why() {
    use crate::engine::disruption::candidates::do_not_disrupt_problem;
    let mut p = crate::engine::pod::Pod::new("default", "p", Default::default());
    for (value, problem) in [
        ("true", None),
        ("90m", None),
        ("yes", Some(r#"failed to parse "yes" as a duration"#)),
        ("0s", Some(r#"duration "0s" must be positive"#)),
    ] {
        p.annotations
            .insert(labels::DO_NOT_DISRUPT.into(), value.into());
        assert_eq!(do_not_disrupt_problem(&p).as_deref(), problem, "{value}");
    }
}

#[test]
fn two_underutilized_nodes_that_fit_on_a_third_go_in_one_multi_node_delete() {
    let mut f = Fixture::new(
        vec![
            instance_type("m", 4, 16, 0.40, None),
            instance_type("big", 16, 64, 1.50, None),
        ],
        noon(),
    );
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("a", "default", "m", OnDemand, hour());
    f.node("b", "default", "m", OnDemand, hour());
    f.node("c", "default", "m", OnDemand, hour());
    f.pod("pa", "a", 1000, 1024);
    f.pod("pb", "b", 1000, 1024);
    f.pod("pc", "c", 2000, 1024);
    let pass = run(&f);
    let cmd = pass.command.as_ref().expect("a command");
    assert_eq!(cmd.method, Method::MultiNodeConsolidation);
    assert!(cmd.is_delete());
    let nodes: Vec<&str> = cmd.nodeclaims().collect();
    assert_eq!(nodes, ["a", "b"]);
    assert!((cmd.savings_per_hour - 0.80).abs() < 1e-9);
    assert!(matches!(
        outcome(&pass, "c"),
        Outcome::Eligible { .. } | Outcome::Blocked(_)
    ));
}

#[test]
fn a_dollar_node_whose_pods_fit_a_forty_cent_type_is_replaced() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("pricey", "default", "big", OnDemand, hour());
    f.pod("p1", "pricey", 1500, 4096);
    f.pod("p2", "pricey", 1500, 4096);
    let pass = run(&f);
    let cmd = pass.command.as_ref().expect("a replace");
    assert_eq!(cmd.method, Method::SingleNodeConsolidation);
    assert_eq!(cmd.replacements.len(), 1);
    let r = &cmd.replacements[0];
    assert_eq!(r.options[0].instance_type, "m");
    assert!((r.price() - 0.40).abs() < 1e-9);
    assert!((cmd.savings_per_hour - 0.60).abs() < 1e-9);
    assert!(
        outcome(&pass, "pricey")
            .to_string()
            .starts_with("chosen: single-node consolidation (replace), saves $0.6000/h")
    );
}

#[test]
fn no_cheaper_replacement_means_no_action_and_says_so() {
    let mut f = Fixture::new(
        vec![
            instance_type("big", 16, 64, 1.00, None),
            instance_type("m", 4, 16, 1.20, None),
        ],
        noon(),
    );
    f.pool(pool("default", vec![budget("100%")], &["on-demand"]));
    f.node("pricey", "default", "big", OnDemand, hour());
    f.pod("p1", "pricey", 3000, 4096);
    let pass = run(&f);
    assert!(pass.command.is_none());
    assert_eq!(
        outcome(&pass, "pricey").to_string(),
        "blocked: no cheaper replacement"
    );
    assert_eq!(pass.events[0].reason, "Unconsolidatable");
}

#[test]
fn an_on_demand_candidate_is_replaced_by_spot_when_the_pool_allows_spot() {
    let mut f = fixture(noon());
    f.pool(pool(
        "default",
        vec![budget("100%")],
        &["spot", "on-demand"],
    ));
    f.node("od", "default", "big", OnDemand, hour());
    f.pod("p1", "od", 3000, 4096);
    let pass = run(&f);
    let r = &pass.command.as_ref().expect("a replace").replacements[0];
    assert_eq!(r.capacity_types, ["spot"]);
    assert!(r.options.iter().all(|o| o.capacity_type == Spot));
    assert!((r.price() - 0.15).abs() < 1e-9);
}

#[test]
fn spot_to_spot_needs_the_flag_and_fifteen_cheaper_types() {
    let mut types = vec![instance_type("big", 16, 64, 1.00, Some(0.50))];
    for i in 0..20 {
        types.push(instance_type(
            &format!("t{i:02}"),
            4,
            16,
            0.40,
            Some(0.10 + 0.01 * f64::from(i)),
        ));
    }
    let mut f = Fixture::new(types, noon());
    f.pool(pool("default", vec![budget("100%")], &["spot"]));
    f.node("s", "default", "big", Spot, hour());
    f.pod("p1", "s", 3000, 4096);
    let pass = run(&f);
    assert!(matches!(
        outcome(&pass, "s"),
        Outcome::Blocked(Block::SpotToSpotDisabled)
    ));
    let pass = plan(
        &f.state,
        f.now,
        &Options {
            spot_to_spot: true,
            ..Default::default()
        },
    );
    let r = &pass.command.as_ref().expect("spot to spot").replacements[0];
    assert_eq!(r.options.len(), 15, "sends the 15 cheapest");
    assert_eq!(r.options[0].instance_type, "t00");

    // With only 10 cheaper spot types it stays.
    f.state
        .instance_types
        .insert("default".into(), f.types[..11].to_vec());
    let pass = plan(
        &f.state,
        f.now,
        &Options {
            spot_to_spot: true,
            ..Default::default()
        },
    );
    assert_eq!(
        outcome(&pass, "s"),
        &Outcome::Blocked(Block::TooFewCheaperSpotTypes { count: 10 })
    );
}

#[test]
fn consolidate_after_counts_from_the_last_pod_event() {
    let mut f = fixture(noon());
    let mut p = pool("default", vec![budget("100%")], &["on-demand"]);
    p.spec.disruption.consolidate_after = Some(GoDuration::parse("5m").unwrap());
    f.pool(p);
    let now = f.now;
    f.node("n", "default", "big", OnDemand, hour())
        .last_pod_event = Some(now - TimeDelta::minutes(2));
    f.pod("p", "n", 500, 512);
    let pass = run(&f);
    assert_eq!(
        outcome(&pass, "n").to_string(),
        "blocked: consolidateAfter has 3m00s left"
    );
    f.now += TimeDelta::minutes(3);
    let pass = run(&f);
    assert!(matches!(outcome(&pass, "n"), Outcome::Chosen { .. }));
}

#[test]
fn drift_follows_the_template_not_weight_or_budgets() {
    let mut f = fixture(noon());
    let mut p = pool("default", vec![budget("100%")], &[]);
    p.spec.template.spec.requirements = vec![NodeSelectorRequirementWithMinValues {
        key: labels::INSTANCE_TYPE.into(),
        operator: Operator::In,
        values: vec!["m".into(), "big".into()],
        min_values: None,
    }];
    f.pool(p.clone());
    f.node("n", "default", "m", OnDemand, hour());
    f.node("other", "default", "m", OnDemand, hour());
    f.pod("p", "n", 3500, 512);
    f.pod("q", "other", 3500, 512);
    let drift_of = |f: &Fixture| match outcome(&run(f), "n") {
        Outcome::Chosen {
            method: Method::Drift,
            ..
        } => "drift".to_string(),
        o => o.to_string(),
    };

    // Widened: no drift.
    let mut wide = p.clone();
    wide.spec.template.spec.requirements[0]
        .values
        .push("small".into());
    f.state.nodepools.insert("default".into(), wide);
    assert_ne!(drift_of(&f), "drift");
    // Weight and budgets: no drift.
    let mut w = p.clone();
    w.spec.weight = Some(10);
    w.spec.disruption.budgets = vec![budget("50%")];
    f.state.nodepools.insert("default".into(), w);
    assert_ne!(drift_of(&f), "drift");
    // Narrowed past the node's type: RequirementsDrifted, replaced by a big node.
    let mut narrow = p.clone();
    narrow.spec.template.spec.requirements[0].values = vec!["big".into()];
    f.state.nodepools.insert("default".into(), narrow);
    let pass = run(&f);
    let cmd = pass.command.as_ref().expect("drift");
    assert_eq!(cmd.method, Method::Drift);
    assert_eq!(cmd.replacements[0].options[0].instance_type, "big");
    // Template label added: NodePoolDrifted.
    let mut labelled = p.clone();
    labelled
        .spec
        .template
        .metadata
        .labels
        .insert("team".into(), "a".into());
    f.state.nodepools.insert("default".into(), labelled);
    assert_eq!(drift_of(&f), "drift");
}

#[test]
fn expiration_ignores_a_zero_budget() {
    let mut f = fixture(noon());
    let mut p = pool("default", vec![budget("0")], &[]);
    p.spec.template.spec.expire_after = GoDuration::parse("1h").unwrap();
    f.pool(p);
    f.node("old", "default", "m", OnDemand, TimeDelta::minutes(59));
    f.pod("p", "old", 500, 512);
    let pass = run(&f);
    assert!(pass.expirations.is_empty());
    f.now += TimeDelta::minutes(1);
    let pass = run(&f);
    assert_eq!(pass.expirations.len(), 1);
    assert_eq!(pass.expirations[0].candidates[0].node, "old");
    assert_eq!(pass.expirations[0].reason, Reason::Expired);
}

#[test]
fn cheaper_to_disrupt_nodes_are_tried_first() {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("1")], &["on-demand"]));
    f.node("important", "default", "big", OnDemand, hour());
    f.node("cheap", "default", "big", OnDemand, hour());
    f.node("sink", "default", "big", OnDemand, hour());
    f.pod("vip", "important", 100, 64).priority = 1_000_000_000;
    f.pod("batch", "cheap", 100, 64);
    f.pod("x", "sink", 8000, 64);
    let pass = run(&f);
    let cmd = pass.command.as_ref().unwrap();
    assert_eq!(cmd.candidates[0].node, "cheap");
}

#[test]
fn every_node_gets_an_outcome_every_pass() {
    let state = crate::bench::disruption::cluster(200, 2000, 7);
    let pass = plan(
        &state,
        crate::bench::disruption::bench_now(),
        &Options::default(),
    );
    assert_eq!(pass.outcomes.len(), state.nodes.len());
    assert!(
        pass.candidates_evaluated >= 150,
        "{}",
        pass.candidates_evaluated
    );
}

/// The disruption pass reuses one simulator for thousands of "what if this node were
/// gone" questions; each answer must be the one a fresh solve without the node gives.
#[test]
fn a_reused_simulator_answers_like_fresh_solves() {
    use crate::engine::scheduling::{Simulator, solve};
    let state = crate::bench::disruption::cluster(60, 600, 3);
    let pods_by_node = state.pods_by_node();
    let sim_input = SimInput::new(&state, &pods_by_node);
    let mut sim = Simulator::new(&sim_input.input);
    let mut compared = 0;
    for n in (0..state.nodes.len()).step_by(3) {
        let pods: Vec<&crate::engine::pod::Pod> = pods_by_node[n]
            .iter()
            .map(|&p| &state.pods[p])
            .filter(|p| crate::engine::state::is_reschedulable(p))
            .collect();
        if pods.is_empty() {
            continue;
        }
        let reused = sim.run(&pods, &[sim_input.index[n].unwrap()]);
        // Asked again, a simulator answers the same (each run undoes its placements).
        let again = sim.run(&pods, &[sim_input.index[n].unwrap()]);
        assert_eq!(again.nominations, reused.nominations);
        assert_eq!(
            format!("{:?}", again.errors),
            format!("{:?}", reused.errors)
        );
        assert_eq!(
            format!("{:?}", again.new_nodeclaims),
            format!("{:?}", reused.new_nodeclaims)
        );

        let mut without = state.clone();
        without.nodes.remove(n);
        let by_node = without.pods_by_node();
        let fresh_input = SimInput::new(&without, &by_node);
        let fresh = solve(&fresh_input.input, &pods);

        let name = &state.nodes[n].name;
        assert_eq!(
            reused.errors.keys().collect::<Vec<_>>(),
            fresh.errors.keys().collect::<Vec<_>>(),
            "errors differ without {name}"
        );
        assert_eq!(
            reused.nominations, fresh.nominations,
            "nominations differ without {name}"
        );
        let claims = |r: &crate::engine::scheduling::Results| {
            r.new_nodeclaims
                .iter()
                .map(|c| {
                    (
                        c.pods.clone(),
                        c.instance_types
                            .iter()
                            .map(|t| t.name.clone())
                            .collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            claims(&reused),
            claims(&fresh),
            "claims differ without {name}"
        );
        compared += 1;
    }
    assert!(compared >= 15, "only {compared} nodes compared");
}

mod claim_limit;
mod incremental;
mod min_savings;
mod ranking;
mod repair;
mod upstream_rules;

/// m $0.40 (4 cpu), l $0.70 (8 cpu), big $1.00 (16 cpu); on-demand only.
fn balanced_fixture() -> Fixture {
    Fixture::new(
        vec![
            instance_type("m", 4, 16, 0.40, None),
            instance_type("l", 8, 32, 0.70, None),
            instance_type("big", 16, 64, 1.00, None),
        ],
        noon(),
    )
}

fn with_policy(mut p: NodePool, policy: crate::api::nodepool::ConsolidationPolicy) -> NodePool {
    p.spec.disruption.consolidation_policy = policy;
    p
}

#[test]
fn a_balanced_pool_refuses_a_replace_that_saves_too_little_for_its_disruption() {
    use crate::api::nodepool::ConsolidationPolicy::{Balanced, WhenEmptyOrUnderutilized};
    for (policy, replaced) in [(WhenEmptyOrUnderutilized, true), (Balanced, false)] {
        let mut f = balanced_fixture();
        f.pool(with_policy(
            pool("default", vec![budget("100%")], &["on-demand"]),
            policy,
        ));
        f.node("big", "default", "big", OnDemand, hour());
        f.pod("p1", "big", 6000, 4096);
        let pass = run(&f);
        // big -> l saves 30% of the pool's cost for 100% of its disruption: score 0.3,
        // below upstream's 1/k = 0.5.
        assert_eq!(
            pass.command.is_some(),
            replaced,
            "{policy:?}: {:?}",
            pass.outcomes
        );
        if !replaced {
            assert_eq!(
                outcome(&pass, "big").to_string(),
                "blocked: Balanced pool default: saves 30.0% of its cost for 100.0% of its disruption (score 0.30, needs 0.50)"
            );
            assert_eq!(pass.events[0].reason, "Unconsolidatable");
        }
    }
}

#[test]
fn a_balanced_pool_takes_a_move_that_saves_more_than_half_its_disruption_share() {
    use crate::api::nodepool::ConsolidationPolicy::Balanced;
    let mut f = balanced_fixture();
    f.pool(with_policy(
        pool("default", vec![budget("100%")], &["on-demand"]),
        Balanced,
    ));
    for i in 0..3 {
        let n = format!("big{i}");
        f.node(&n, "default", "big", OnDemand, hour());
        f.pod(&format!("p{i}"), &n, 1000, 1024);
    }
    let pass = run(&f);
    // Three bigs ($3) onto one m ($0.40): 87% of the cost for 100% of the disruption.
    let cmd = pass.command.as_ref().expect("a consolidation");
    assert_eq!(cmd.method, Method::MultiNodeConsolidation);
    assert_eq!(cmd.candidates.len(), 3);
}

#[test]
fn a_static_pool_keeps_its_empty_nodes() {
    let mut f = fixture(noon());
    let mut p = pool("static", vec![budget("100%")], &[]);
    p.spec.replicas = Some(2);
    f.pool(p);
    f.node("s0", "static", "m", OnDemand, hour());
    f.node("s1", "static", "m", OnDemand, hour());
    let pass = run(&f);
    assert!(pass.command.is_none(), "{:?}", pass.command);
    assert_eq!(
        outcome(&pass, "s0").to_string(),
        "blocked: NodePool static is static (spec.replicas): its nodes are not consolidated"
    );
}

#[test]
fn nothing_disrupts_the_nodes_of_a_pool_that_failed_validation() {
    let mut f = fixture(noon());
    let mut p = pool("default", vec![budget("100%")], &[]);
    p.mark_invalid(
        "spec.disruption.consolidationPolicy: unknown consolidationPolicy Sometimes".into(),
    );
    f.pool(p);
    f.node("n0", "default", "m", OnDemand, hour());
    let pass = run(&f);
    assert!(pass.command.is_none());
    assert!(
        outcome(&pass, "n0")
            .to_string()
            .contains("NodePool default failed validation: spec.disruption.consolidationPolicy"),
        "{}",
        outcome(&pass, "n0")
    );
}

#[test]
fn disruption_simulates_with_the_operators_min_values_policy() {
    // Narrowed to small and big with minValues 2: the node's m type drifted, and its
    // 3.5-core pod fits only big, one type where minValues asks for two. Strict (the
    // default) cannot launch the replacement; best effort relaxes it, as provisioning
    // does under that policy. Disruption's simulations once ignored the policy.
    let mut f = fixture(noon());
    let mut p = pool("default", vec![budget("100%")], &[]);
    p.spec.template.spec.requirements = vec![NodeSelectorRequirementWithMinValues {
        key: labels::INSTANCE_TYPE.into(),
        operator: Operator::In,
        values: vec!["small".into(), "big".into()],
        min_values: Some(2),
    }];
    f.pool(p);
    f.node("n", "default", "m", OnDemand, hour());
    f.pod("p", "n", 3500, 512);
    let pass_with = |policy| {
        plan_with(
            &Prepared::new(&f.state).with_min_values_policy(policy),
            &mut None,
            f.now,
            &Options::default(),
            &mut super::incremental::Verdicts::default(),
        )
    };
    let strict = pass_with(crate::engine::scheduling::MinValuesPolicy::Strict);
    assert!(strict.command.is_none(), "{:?}", strict.command);
    let why = outcome(&strict, "n").to_string();
    assert!(why.contains("minValues"), "{why}");

    let relaxed = pass_with(crate::engine::scheduling::MinValuesPolicy::BestEffort);
    let cmd = relaxed.command.as_ref().expect("a drift replacement");
    assert_eq!(cmd.method, Method::Drift);
    assert_eq!(cmd.replacements[0].options[0].instance_type, "big");
}
