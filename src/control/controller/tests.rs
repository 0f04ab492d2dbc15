//! The controller end to end on the embedded cluster and cloud, on a virtual clock: the
//! acceptance cases of the control loop (runaway scale-up, expiry under manual and auto
//! approval, a restart at every write of a replace orchestration) and the lifecycle rules
//! (liveness, garbage collection).

use chrono::TimeDelta;

use crate::cluster::scenario;
use crate::control::events::{Event, EventKind};
use crate::simulation::{Options, Pace, Simulation};

/// A pool, its EC2NodeClass, and whatever else the test adds.
fn scenario_text(pool_extra: &str, rest: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
{pool_extra}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
---
{rest}
"#
    )
}

fn deployment(name: &str, replicas: u32, cpu: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - {{name: app, image: app, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}
"#
    )
}

fn sim(text: &str, approval: &str) -> Simulation {
    let s = scenario::parse("test", text).unwrap_or_else(|e| {
        panic!(
            "{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    let options = Options {
        approval: (approval != "default").then(|| vec![approval.to_string()]),
        ..Default::default()
    };
    Simulation::new(&s, &options, Pace::Virtual).expect("the simulation starts")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn run_for(sim: &mut Simulation, d: TimeDelta) -> Vec<Event> {
    let until = sim.now() + d;
    let mut events = Vec::new();
    rt().block_on(sim.run_until(until, |e| events.push(e.clone())));
    events
}

fn kinds<'a>(events: &'a [Event], name: &'a str) -> impl Iterator<Item = &'a EventKind> + 'a {
    events
        .iter()
        .map(|e| &e.kind)
        .filter(move |k| k.name() == name)
}

/// Most NodeClaims alive at once, from the event stream.
fn peak_nodeclaims(events: &[Event]) -> usize {
    let (mut live, mut peak) = (0i64, 0i64);
    for e in events {
        match e.kind {
            EventKind::NodeClaimCreated { .. } => live += 1,
            EventKind::NodeClaimDeleted { .. } => live -= 1,
            _ => {}
        }
        peak = peak.max(live);
    }
    peak as usize
}

#[test]
fn runaway_scale_up_stays_below_35_nodes_when_nodes_never_become_usable() {
    // Upstream's chaos e2e: every new node gets a NoExecute taint the pod does not
    // tolerate, so the pod stays pending forever; consolidation removes the empty nodes.
    let text = scenario_text(
        "  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}",
        &format!(
            "{}---\napiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: chaos}}\nspec:\n  cluster:\n    chaosTaint: {{key: chaos, value: unusable, effect: NoExecute}}\n  cloud: {{instanceTypes: [m5.large, m5.xlarge, c5.large]}}\n",
            deployment("app", 1, "500m")
        ),
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(5));
    let created = kinds(&events, "NodeClaimCreated").count();
    assert!(created >= 1, "the pending pod is provisioned for");
    let peak = peak_nodeclaims(&events);
    eprintln!("chaos: {created} NodeClaims created in 5 min, at most {peak} alive at once");
    assert!(
        peak < 35 && created < 35,
        "runaway scale-up: {peak} NodeClaims alive at once, {created} created in 5 min"
    );
    let state = s.controller.state();
    assert!(
        state.nodes.len() < 35,
        "{} nodes after 5 min",
        state.nodes.len()
    );
    assert!(
        state.pods.iter().any(|p| p.node_name.is_none()),
        "the pod can never run"
    );
}

fn expiring(approval: &str) -> (Simulation, Vec<Event>) {
    let text = scenario_text(
        "      expireAfter: 3m\n  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}",
        &format!(
            "{}---\napiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: expiry}}\nspec:\n  cloud: {{instanceTypes: [m5.xlarge]}}\n",
            deployment("app", 2, "1")
        ),
    );
    let mut s = sim(&text, approval);
    let events = run_for(&mut s, TimeDelta::minutes(5));
    (s, events)
}

fn expired(k: &EventKind) -> bool {
    matches!(k, EventKind::DisruptionProposed { reason, .. } | EventKind::DisruptionExecuted { reason, .. } if reason == "Expired")
}

#[test]
fn an_expiring_node_waits_for_approval_under_a_manual_policy() {
    let (s, events) = expiring("manual");
    let proposed: Vec<_> = kinds(&events, "DisruptionProposed")
        .filter(|k| expired(k))
        .collect();
    assert!(!proposed.is_empty(), "expiry is proposed");
    assert!(
        matches!(proposed[0], EventKind::DisruptionProposed { policy, .. } if policy == "manual")
    );
    assert_eq!(
        kinds(&events, "DisruptionExecuted").count(),
        0,
        "nothing runs without an operator"
    );
    assert_eq!(kinds(&events, "NodeClaimDeleted").count(), 0);
    assert_eq!(
        s.controller.pending_decisions().len(),
        1,
        "the decision waits"
    );
}

#[test]
fn an_expiring_node_is_replaced_under_an_auto_policy() {
    let (s, events) = expiring("auto");
    let executed = kinds(&events, "DisruptionExecuted")
        .filter(|k| expired(k))
        .count();
    assert!(executed >= 1, "expiry runs on its own");
    let deleted: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeClaimDeleted { nodeclaim, .. } => Some(nodeclaim.clone()),
            _ => None,
        })
        .collect();
    assert!(!deleted.is_empty(), "the expired NodeClaim is gone");
    let state = s.controller.state();
    assert!(
        state.nodes.iter().all(|n| !deleted.contains(&n.nodeclaim)),
        "no expired NodeClaim remains"
    );
    assert!(
        state
            .pods
            .iter()
            .filter(|p| !p.is_daemonset())
            .all(|p| p.node_name.is_some()),
        "its pods run on the replacement capacity"
    );
    assert!(
        kinds(&events, "NodeClaimCreated").count() >= 2,
        "replacement launched"
    );
}

#[test]
fn a_nodeclaim_not_registered_within_15_minutes_is_deleted() {
    let text = scenario_text(
        "",
        &format!(
            "{}---\napiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: liveness}}\nspec:\n  cluster: {{registrationDelay: 20m}}\n  cloud: {{instanceTypes: [m5.large]}}\n",
            deployment("app", 1, "500m")
        ),
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(16));
    let reasons: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeClaimDeleted { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("not registered within 15m")),
        "liveness deletes it: {reasons:?}"
    );
    let first_delete = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::NodeClaimDeleted { .. }))
        .map(|e| e.t)
        .unwrap_or_default();
    assert!(
        (900.0..=930.0).contains(&first_delete),
        "deleted 15 min after launch, at {first_delete} s"
    );
}

#[test]
fn an_instance_without_a_nodeclaim_is_garbage_collected() {
    let text = scenario_text(
        "",
        "apiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {name: gc}\nspec:\n  cloud: {instanceTypes: [m5.large]}\n",
    );
    let mut s = sim(&text, "auto");
    let id = s
        .controller
        .parts_mut()
        .1
        .start_unmanaged("m5.large", "us-east-1a", "leaked");
    let events = run_for(&mut s, TimeDelta::minutes(5));
    assert!(
        events.iter().any(
            |e| matches!(&e.kind, EventKind::InstanceGarbageCollected { provider_id } if *provider_id == id)
        ),
        "the leaked instance is terminated"
    );
    assert!(
        s.controller
            .parts_mut()
            .1
            .instances()
            .all(|i| i.instance.provider_id != id)
    );
}

/// Everything that must hold after a restart settles: no orphaned instance, no lost
/// NodeClaim, every pod running, no disruption taint left on a node that stays.
fn assert_settled(s: &mut Simulation, context: &str) {
    let (cluster, cloud) = s.controller.parts_mut();
    let claims: Vec<_> = cluster.nodeclaims().cloned().collect();
    let instances: Vec<_> = cloud.instances().map(|i| i.instance.clone()).collect();
    for i in &instances {
        assert!(
            claims.iter().any(|c| c
                .launched
                .as_ref()
                .is_some_and(|l| l.provider_id == i.provider_id)),
            "{context}: orphaned instance {} (NodeClaim {})",
            i.provider_id,
            i.nodeclaim
        );
    }
    for c in &claims {
        assert!(
            c.deleting.is_none(),
            "{context}: NodeClaim {} still deleting",
            c.name
        );
        let l = c
            .launched
            .as_ref()
            .unwrap_or_else(|| panic!("{context}: NodeClaim {} never launched", c.name));
        assert!(
            instances.iter().any(|i| i.provider_id == l.provider_id),
            "{context}: NodeClaim {} lost its instance",
            c.name
        );
    }
    for p in cluster.pods() {
        assert!(
            p.node_name.is_some(),
            "{context}: pod {} has no node",
            p.key
        );
    }
    assert_no_disruption_taint(s, context);
}

/// No Node carries `karpenter.sh/disrupted` once nothing is being disrupted.
fn assert_no_disruption_taint(s: &mut Simulation, context: &str) {
    let (cluster, _) = s.controller.parts_mut();
    for n in cluster.nodes() {
        assert!(
            !n.taints
                .iter()
                .any(|t| t.key == crate::api::labels::DISRUPTED_TAINT_KEY),
            "{context}: node {} keeps the disruption taint",
            n.name
        );
    }
}

/// A node to replace by drift: the pool's labels change a minute in.
fn drifting() -> String {
    scenario_text(
        "  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}",
        &format!(
            "{}---\napiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: drift}}\nspec:\n  cloud: {{instanceTypes: [m5.xlarge]}}\n  timeline:\n    - at: 1m\n      patchNodePool: {{name: default, patch: {{spec: {{template: {{metadata: {{labels: {{team: a}}}}}}}}}}}}\n",
            deployment("app", 3, "1")
        ),
    )
}

#[test]
fn a_restart_at_every_write_of_a_replace_orchestration_loses_nothing() {
    // The reference run: which writes belong to the drift replacement.
    let mut reference = sim(&drifting(), "auto");
    let mut window: Option<(usize, usize)> = None;
    let mut executed_at: Option<usize> = None;
    let rt = rt();
    let end = reference.now() + TimeDelta::minutes(6);
    while reference.now() < end {
        let before = reference.controller.parts_mut().0.writes();
        let events = rt.block_on(reference.step());
        for e in &events {
            match &e.kind {
                EventKind::DisruptionExecuted { .. } if executed_at.is_none() => {
                    executed_at = Some(before)
                }
                EventKind::DisruptionCompleted { .. } => {
                    let after = reference.controller.parts_mut().0.writes();
                    window = executed_at.map(|a| (a, after));
                }
                _ => {}
            }
        }
        if window.is_some() {
            break;
        }
        let next = reference.next_time();
        rt.block_on(reference.wait_until(next));
    }
    let (first, last) = window.expect("the drift replacement completes in the reference run");
    assert!(
        last - first >= 5,
        "taint, create, launch, delete, evict, finalize"
    );
    eprintln!("restart: crashing at each of writes {first}..{last}");

    for k in first..last {
        let mut s = sim(&drifting(), "auto");
        s.controller.parts_mut().0.fail_writes_after(Some(k));
        let end = s.now() + TimeDelta::minutes(6);
        let mut crashed = false;
        while s.now() < end {
            rt.block_on(s.step());
            if !crashed && s.controller.parts_mut().0.refused_writes() > 0 {
                // The process dies at its first refused write; a new one starts from the
                // cluster.
                crashed = true;
                s.controller.parts_mut().0.fail_writes_after(None);
                s.restart_controller().expect("restart");
            }
            let next = s.next_time();
            rt.block_on(s.wait_until(next));
        }
        assert!(crashed, "write {k} was reached");
        // Let garbage collection and consolidation catch up, then check.
        let until = s.now() + TimeDelta::minutes(4);
        rt.block_on(s.run_until(until, |_| {}));
        assert_settled(&mut s, &format!("restart after write {k}"));
    }
}

#[test]
fn the_same_scenario_and_seed_give_the_same_run() {
    let run = || {
        let mut s = sim(scenario::DEMO, "default");
        run_for(&mut s, TimeDelta::minutes(6))
    };
    let (a, b) = (run(), run());
    assert_eq!(a.len(), b.len());
    assert!(a == b, "two runs of the demo differ");
}

/// The approval protocol's state lives in the cluster: a restarted controller finds the
/// decision it recorded under the same id and the pause it wrote, and acts on an
/// approval a console wrote on a candidate NodeClaim as an annotation.
#[test]
fn a_restart_keeps_decision_ids_and_pauses_and_annotations_approve() {
    use crate::api::protocol as keys;
    use crate::cluster::{Cluster, ObjectRef, Write};
    use crate::engine::approval::Scope;
    use std::collections::BTreeMap;

    let text = scenario_text(
        "      expireAfter: 3m\n  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}",
        &format!(
            "{}---\napiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: expiry}}\nspec:\n  cloud: {{instanceTypes: [m5.xlarge]}}\n",
            deployment("app", 2, "1")
        ),
    );
    let mut s = sim(&text, "manual");
    // Ids start at 42 here, so a restarted controller that numbered afresh (from 1)
    // would be caught.
    let seen: std::collections::BTreeSet<String> = ["elsewhere".to_string()].into();
    s.controller
        .disruption
        .gate
        .set_id_hints([(seen, 41)].into_iter().collect());
    run_for(&mut s, TimeDelta::minutes(5));
    let id = s.controller.pending_decisions()[0];
    assert_eq!(id, 42);
    let pool = Scope::NodePool("default".into());
    rt().block_on(s.controller.pause(pool.clone(), None, "console:bob"))
        .expect("pause");

    s.restart_controller().expect("restart");
    run_for(&mut s, TimeDelta::seconds(30));
    assert_eq!(
        s.controller.pending_decisions(),
        vec![id],
        "the recorded decision keeps its id"
    );
    let snapshot = s.controller.snapshot();
    assert!(snapshot.pauses.contains(&pool), "{:?}", snapshot.pauses);
    let decision = snapshot.pending.iter().find(|d| d.id == id).unwrap();
    let claim = decision.command.nodeclaims().next().unwrap().to_string();
    assert_eq!(
        snapshot
            .state
            .node(&claim)
            .and_then(|n| n.annotations.get(keys::DECISION))
            .map(String::as_str),
        Some(id.to_string().as_str()),
        "recorded on the candidate"
    );

    // A console (kubectl, say) lifts the pause and approves through annotations.
    let write = |target, set: &[(&str, Option<&str>)]| Write::Annotate {
        target,
        annotations: set
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect::<BTreeMap<_, _>>(),
    };
    let (cluster, _) = s.controller.parts_mut();
    rt().block_on(cluster.write(write(
        ObjectRef::NodePool("default".into()),
        &[(keys::PAUSED, None)],
    )))
    .expect("resume");
    rt().block_on(cluster.write(write(
        ObjectRef::NodeClaim(claim.clone()),
        &[
            (keys::APPROVE, Some(&id.to_string())),
            (keys::ACTOR, Some("alice")),
        ],
    )))
    .expect("approve");
    let events = run_for(&mut s, TimeDelta::seconds(30));
    assert!(
        kinds(&events, "DisruptionApproved")
            .any(|k| matches!(k, EventKind::DisruptionApproved { id: i, actor } if *i == id && actor == "alice")),
        "{events:#?}"
    );
    assert!(kinds(&events, "DisruptionResumed").count() == 1);
    assert!(s.controller.pending_decisions().is_empty());
}

mod change_tracking;
mod trust;

/// Live (not deleting) nodes of a pool in the controller's state.
fn pool_nodes(s: &Simulation, pool: &str) -> usize {
    s.controller
        .state()
        .nodes
        .iter()
        .filter(|n| n.nodepool == pool && !n.deleting)
        .count()
}

#[test]
fn a_static_pool_keeps_exactly_its_replicas_whatever_the_pods() {
    // replicas 3, pods needing far less than one node and then far more than three:
    // the pool holds 3 NodeClaims throughout, and nothing consolidates them.
    let text = scenario_text(
        "  replicas: 3\n  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}",
        &format!(
            "{}---\napiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: static}}\nspec:\n  cloud: {{instanceTypes: [m5.large]}}\n",
            deployment("app", 20, "1")
        ),
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(10));
    assert_eq!(pool_nodes(&s, "default"), 3);
    assert_eq!(kinds(&events, "NodeClaimCreated").count(), 3);
    assert_eq!(kinds(&events, "NodeClaimDeleted").count(), 0);
}

#[test]
fn limits_nodes_caps_a_static_pool() {
    let text = scenario_text(
        "  replicas: 3\n  limits: {nodes: \"2\"}",
        "apiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {name: static}\nspec:\n  cloud: {instanceTypes: [m5.large]}\n",
    );
    let mut s = sim(&text, "auto");
    run_for(&mut s, TimeDelta::minutes(5));
    assert_eq!(pool_nodes(&s, "default"), 2);
}

#[test]
fn an_empty_cluster_costs_zero_not_minus_zero() {
    // Seen: the console's closing line read "0 nodes, 25 pods (25 pending), $-0.0000/h"
    // (an empty f64 sum is -0.0).
    let scenario = "apiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {name: empty}\nspec:\n  cloud: {instanceTypes: [m5.large]}\n";
    let mut s = sim(&scenario_text("", scenario), "default");
    run_for(&mut s, TimeDelta::seconds(1));
    let line = s.summary().kind.to_string();
    assert!(line.contains("$0.0000/h"), "{line}");
}
