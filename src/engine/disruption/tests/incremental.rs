//! A [`Planner`] carrying simulations from pass to pass says exactly what a full pass says,
//! whatever changed in between.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::api::nodeclaim::{Taint, TaintEffect};
use crate::engine::pod::{AffinityTerm, Phase, SpreadConstraint, Toleration};
use crate::engine::resources::Resources;

fn gpu_taint() -> Taint {
    Taint {
        key: "gpu".into(),
        value: Some("true".into()),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }
}

fn gpu_toleration() -> Toleration {
    Toleration {
        key: "gpu".into(),
        exists: true,
        value: String::new(),
        effect: None,
    }
}

fn app(name: &str) -> crate::engine::selector::Selector {
    crate::engine::selector::Selector::from_labels(&BTreeMap::from([(
        "app".to_string(),
        name.to_string(),
    )]))
}

/// Two pools: "default" and "gpu", whose nodes carry a taint only tolerating pods pass.
fn cluster() -> Fixture {
    let mut f = fixture(noon());
    f.pool(pool("default", vec![budget("100%")], &[]));
    f.pool(pool("gpu", vec![budget("100%")], &[]));
    for i in 0..6 {
        let ty = ["m", "big", "small"][i % 3];
        f.node(
            &format!("d{i}"),
            "default",
            ty,
            OnDemand,
            hour() * (i as i32 + 1),
        );
    }
    for i in 0..3 {
        f.node(&format!("g{i}"), "gpu", "m", OnDemand, hour() * 2)
            .taints
            .push(gpu_taint());
    }
    for i in 0..12 {
        let node = format!("d{}", i % 5);
        f.pod(&format!("p{i}"), &node, 300 + 100 * (i as i64 % 4), 512);
    }
    for i in 0..4 {
        f.pod(&format!("gp{i}"), &format!("g{}", i % 2), 500, 1024)
            .tolerations
            .push(gpu_toleration());
    }
    f
}

/// One change to the cluster, from a random code.
fn change(f: &mut Fixture, code: u8, a: usize, b: usize, step: usize) {
    let s = &mut f.state;
    let nodes = s.nodes.len().max(1);
    let pods = s.pods.len().max(1);
    match code % CHANGES {
        // A pod moves to another node.
        0 if !s.pods.is_empty() && !s.nodes.is_empty() => {
            let to = s.nodes[b % nodes].name.clone();
            s.pods[a % pods].node_name = Some(to);
        }
        // A pod goes.
        1 if !s.pods.is_empty() => {
            s.pods.remove(a % pods);
        }
        // A new pod lands on a node, maybe tolerating the taint, maybe with topology rules.
        2 if !s.nodes.is_empty() => {
            let node = s.nodes[a % nodes].name.clone();
            let p = f.pod(&format!("n{step}"), &node, 200 + 100 * (b as i64 % 5), 256);
            if b.is_multiple_of(3) {
                p.tolerations.push(gpu_toleration());
            }
            if b % 7 == 1 {
                p.labels.insert("app".into(), "web".into());
                p.spread.push(SpreadConstraint {
                    max_skew: 1,
                    topology_key: labels::ZONE.into(),
                    hard: true,
                    selector: app("web"),
                    min_domains: None,
                    honor_node_affinity: true,
                    honor_node_taints: false,
                    match_label_keys: vec![],
                });
            }
            if b % 7 == 2 {
                p.labels.insert("app".into(), "db".into());
                p.anti_affinity.push(AffinityTerm {
                    selector: app("db"),
                    namespaces: vec![],
                    topology_key: labels::HOSTNAME.into(),
                    weight: 0,
                });
            }
        }
        // A pending pod appears, or a pending one is bound.
        3 => {
            let mut p = crate::engine::pod::Pod::new(
                "default",
                &format!("pending{step}"),
                Resources::cpu_mem(500 + 500 * (a as i64 % 3), 1 << 30),
            );
            if b.is_multiple_of(2) {
                p.tolerations.push(gpu_toleration());
            }
            p.created = f.now;
            s.pods.push(p);
        }
        4 if !s.nodes.is_empty() => {
            let node = s.nodes[b % nodes].name.clone();
            if let Some(p) = s.pods.iter_mut().find(|p| p.node_name.is_none()) {
                p.node_name = Some(node);
                p.phase = Phase::Running;
                p.started = Some(f.now);
            }
        }
        // A node comes or goes.
        5 => {
            let (pool, name) = if b.is_multiple_of(2) {
                ("default", "dn")
            } else {
                ("gpu", "gn")
            };
            let n = f.node(
                &format!("{name}{step}"),
                pool,
                ["m", "small"][a % 2],
                OnDemand,
                hour(),
            );
            if pool == "gpu" {
                n.taints.push(gpu_taint());
            }
        }
        6 if s.nodes.len() > 1 => {
            s.nodes.remove(a % nodes);
        }
        // A node is tainted or untainted, relabelled, starts deleting.
        7 if !s.nodes.is_empty() => {
            let n = &mut s.nodes[a % nodes];
            if n.taints.is_empty() {
                n.taints.push(gpu_taint());
            } else {
                n.taints.clear();
            }
        }
        8 if !s.nodes.is_empty() => {
            s.nodes[a % nodes].deleting = true;
        }
        // Time passes.
        9 => f.now += chrono::TimeDelta::seconds(10 * (1 + a as i64 % 30)),
        // A pool's consolidation changes.
        10 => {
            let p = s.nodepools.get_mut("default").expect("default pool");
            p.spec.disruption.consolidate_after = Some(GoDuration::from_std(
                std::time::Duration::from_secs(60 * (a as u64 % 3)),
            ));
        }
        // A pod starts protecting its node.
        11 if !s.pods.is_empty() => {
            s.pods[a % pods]
                .annotations
                .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
        }
        // A PDB over app=web appears, or its disruptions allowed flip.
        12 => match s.pdbs.iter_mut().find(|p| p.name == "web") {
            Some(p) => p.disruptions_allowed = 1 - p.disruptions_allowed,
            None => s.pdbs.push(crate::engine::state::Pdb {
                namespace: "default".into(),
                name: "web".into(),
                selector: app("web"),
                disruptions_allowed: (a % 2) as i32,
            }),
        },
        // A second PDB over the same pods (upstream refuses to evict those), or it goes.
        13 => match s.pdbs.iter().position(|p| p.name == "web-too") {
            Some(i) => {
                s.pdbs.remove(i);
            }
            None => s.pdbs.push(crate::engine::state::Pdb {
                namespace: "default".into(),
                name: "web-too".into(),
                selector: app("web"),
                disruptions_allowed: 1,
            }),
        },
        // A pod is relabelled into (or out of) the PDBs' selection.
        14 if !s.pods.is_empty() => {
            let labels = &mut s.pods[a % pods].labels;
            if labels.remove("app").is_none() {
                labels.insert("app".into(), "web".into());
            }
        }
        // A pod takes all (or nearly all) the room left on a node: a verdict whose pods
        // went there must not carry over; one whose pods went elsewhere may.
        15 if !s.nodes.is_empty() => {
            let i = a % nodes;
            let node = s.nodes[i].name.clone();
            let used: i64 = s
                .pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(node.as_str()) && !p.is_terminal())
                .map(|p| p.requests.cpu)
                .sum();
            let free = s.nodes[i].allocatable.cpu - used - 100 * (b as i64 % 3);
            if free > 0 {
                f.pod(&format!("fill{step}"), &node, free, 256);
            }
        }
        // What drift reads of a node: the cloud's verdict, the hash stamped at launch, a
        // NodeClaim label the default pool's requirements may exclude, another
        // controller's recorded verdict.
        16 if !s.nodes.is_empty() => {
            let n = &mut s.nodes[a % nodes];
            n.nodeclass_drift = match n.nodeclass_drift {
                None => Some("AMIDrift".into()),
                Some(_) => None,
            };
        }
        17 if !s.nodes.is_empty() => {
            let n = &mut s.nodes[a % nodes];
            n.annotations
                .insert(labels::NODEPOOL_HASH.into(), format!("stale-{b}"));
        }
        18 if !s.nodes.is_empty() => {
            let n = &mut s.nodes[a % nodes];
            let value = ["m", "small", "gone"][b % 3];
            n.claim_labels
                .insert(labels::INSTANCE_TYPE.into(), value.into());
        }
        19 if !s.nodes.is_empty() => {
            let n = &mut s.nodes[a % nodes];
            n.foreign_drift = match n.foreign_drift {
                None => Some(b.is_multiple_of(2).then(|| "Drifted".to_string())),
                Some(_) => None,
            };
        }
        // The default pool's requirements narrow to some instance types, or widen again.
        20 => {
            let p = s.nodepools.get_mut("default").expect("default pool");
            p.spec.template.spec.requirements = if a.is_multiple_of(2) {
                vec![]
            } else {
                vec![NodeSelectorRequirementWithMinValues {
                    key: labels::INSTANCE_TYPE.into(),
                    operator: Operator::In,
                    values: vec!["m".into(), "big".into(), "small".into()][..1 + b % 3].to_vec(),
                    min_values: None,
                }]
            };
        }
        _ => {}
    }
}

/// How many kinds of change [`change`] makes.
const CHANGES: u8 = 21;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn incremental_passes_match_full_passes(
        steps in proptest::collection::vec(
            (0u8..2 * CHANGES, 0usize..64, 0usize..64, any::<bool>()),
            1..24,
        ),
        fast in any::<bool>(),
    ) {
        let mut f = cluster();
        let mut planner = Planner::default();
        let mut revision = 0;
        for (step, (code, a, b, repeat)) in steps.into_iter().enumerate() {
            let options = Options { fast, ..Options::default() };
            // Half the codes change nothing: the planner must carry everything.
            if code < CHANGES {
                change(&mut f, code, a, b, step);
                if code != 9 {
                    revision += 1;
                }
            }
            let full = plan(&f.state, f.now, &options);
            let incremental = planner.plan(&f.state, revision, f.now, &options);
            prop_assert_eq!(&incremental, &full, "step {} (change {})", step, code);
            if repeat {
                let again = planner.plan(&f.state, revision, f.now, &options);
                prop_assert_eq!(&again, &full, "step {} repeated", step);
            }
        }
    }
}

#[test]
fn an_unchanged_cluster_is_not_simulated_again() {
    let f = cluster();
    let mut planner = Planner::default();
    let first = planner.plan(&f.state, 1, f.now, &Options::default());
    let simulated = planner.stats.simulated;
    assert!(simulated > 0, "the first pass simulates");
    let later = f.now + chrono::TimeDelta::minutes(5);
    let second = planner.plan(&f.state, 1, later, &Options::default());
    assert_eq!(
        planner.stats.simulated, simulated,
        "nothing simulated again"
    );
    assert_eq!(planner.stats.carried, simulated);
    assert_eq!(second, plan(&f.state, later, &Options::default()));
    assert_eq!(first.outcomes, second.outcomes);
}

#[test]
fn a_change_on_a_tainted_node_keeps_the_verdicts_of_pods_that_cannot_go_there() {
    let mut f = cluster();
    let mut planner = Planner::default();
    planner.plan(&f.state, 1, f.now, &Options::default());
    let before = planner.stats.simulated;
    // A pod of the gpu pool goes: only pods tolerating the taint could have used the room.
    let gone = f
        .state
        .pods
        .iter()
        .position(|p| p.key.name == "gp0")
        .expect("gp0");
    f.state.pods.remove(gone);
    let pass = planner.plan(&f.state, 2, f.now, &Options::default());
    assert_eq!(pass, plan(&f.state, f.now, &Options::default()));
    let again = planner.stats.simulated - before;
    assert!(
        planner.stats.carried > 0 && again < before,
        "the default pool's verdicts carry over ({again} simulated again of {before})"
    );
}
