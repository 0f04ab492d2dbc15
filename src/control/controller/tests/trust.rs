//! The cases of "decisions an operator can trust", each as it was seen on the embedded
//! cluster: nodes deleted while pods were on their way to them, NodeClaims launched
//! twice, churn under a moving cluster, budgets exceeded by waiting decisions, decisions
//! run without validation, failures noticed late, silent drains, and operator decisions
//! lost across a restart.

use chrono::TimeDelta;

use super::{deployment, kinds, rt, run_for, scenario_text, sim};
use crate::control::events::{Event, EventKind};
use crate::simulation::Simulation;

/// The scenario document: `spec` is its body below `spec:`, indented by two spaces.
fn scenario(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: karpenter-tui.dev/v1alpha1\nkind: Scenario\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    )
}

/// A whole scenario: the `default` pool with `pool_extra`, the `workloads` documents
/// (each ending in `---`), and the Scenario document `name` with `spec`.
fn world(pool_extra: &str, workloads: &[String], name: &str, spec: &str) -> String {
    scenario_text(
        pool_extra,
        &format!("{}{}", workloads.concat(), scenario(name, spec)),
    )
}

/// A Deployment document followed by the document separator.
fn deployed(name: &str, replicas: u32, cpu: &str) -> String {
    format!("{}---\n", deployment(name, replicas, cpu))
}

fn pdb(name: &str, app: &str, min_available: u32) -> String {
    format!(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: {name}}}\nspec:\n  minAvailable: {min_available}\n  selector: {{matchLabels: {{app: {app}}}}}\n---\n"
    )
}

/// Steps the simulation until `until` (virtual), handing each round's events to `f`
/// with the simulation, so a test can act at the moment something happens.
fn drive(s: &mut Simulation, d: TimeDelta, mut f: impl FnMut(&mut Simulation, &[Event])) {
    let rt = rt();
    let until = s.now() + d;
    while s.now() < until {
        let events = rt.block_on(s.step());
        f(s, &events);
        let next = s.next_time().min(until);
        rt.block_on(s.wait_until(next));
    }
}

fn deleted_claims(events: &[Event]) -> Vec<(f64, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeClaimDeleted { nodeclaim, reason } => {
                Some((e.t, nodeclaim.clone(), reason.clone()))
            }
            _ => None,
        })
        .collect()
}

fn created_claims(events: &[Event]) -> Vec<(f64, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeClaimCreated {
                nodeclaim, cause, ..
            } => Some((e.t, nodeclaim.clone(), cause.clone())),
            _ => None,
        })
        .collect()
}

/// `TRUST_DEBUG=1 cargo test ...` prints a test's events (for reading a failure).
fn dump(events: &[Event]) {
    if std::env::var_os("TRUST_DEBUG").is_some() {
        for e in events {
            eprintln!("{:>8.1} {:?}", e.t, e.kind);
        }
    }
}

fn evictions(events: &[Event]) -> usize {
    kinds(events, "PodEvicted").count()
}

fn pending_pods(s: &Simulation) -> usize {
    s.controller
        .state()
        .pods
        .iter()
        .filter(|p| !p.is_daemonset() && p.node_name.is_none())
        .count()
}

/// 17 pods arriving over 15 s on an idle cluster, bound by a kube-scheduler that takes
/// seconds and watched through a lagging watch, as on a live cluster: the batches are
/// right, and then the cluster must settle. Seen: single-node consolidation deleted full
/// nodes with no replacement while other NodeClaims were still coming up (177 deletions
/// and 193 NodeClaims for 17 pods in 30 minutes, 4 pods still pending at the end).
#[test]
fn seventeen_pods_over_fifteen_seconds_settle_without_churn() {
    let steps: Vec<String> = (0..=15)
        .map(|s| {
            let replicas = if s == 15 { 17 } else { s + 1 };
            format!("{{at: {s}s, replicas: {replicas}}}")
        })
        .collect();
    let text = world(
        "  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}",
        &[deployed("web", 0, "250m")],
        "arrivals",
        &format!(
            "  cluster: {{bindDelay: 3s, watchLatency: 1s}}\n  replicas:\n    web:\n      steps: [{}]\n",
            steps.join(", ")
        ),
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(30));
    dump(&events);
    let created = created_claims(&events).len();
    let deleted = deleted_claims(&events).len();
    let evicted = evictions(&events);
    eprintln!("17 pods: {created} NodeClaims created, {deleted} deleted, {evicted} evictions");
    assert_eq!(pending_pods(&s), 0, "every pod runs after 30 minutes");
    assert!(
        created <= 3,
        "{created} NodeClaims for 17 pods: {:#?}",
        created_claims(&events)
    );
    assert!(
        deleted <= 1,
        "{deleted} NodeClaims deleted: {:#?}",
        deleted_claims(&events)
    );
    assert!(evicted <= 17, "{evicted} evictions for 17 pods");
}

/// The kube-scheduler binds a pod seconds after its node is Ready. Seen: a node was
/// deleted as Empty seconds after it registered while its pod was nominated to it (the
/// nomination was kept under the NodeClaim's name, the pass looked for the Node's).
#[test]
fn a_node_is_not_deleted_while_its_pod_is_on_the_way() {
    let text = world(
        "  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}",
        &[deployed("web", 1, "1")],
        "late-bind",
        "  cluster: {registrationDelay: 1s, readyDelay: 1s, startupDelay: 0s, bindDelay: 15s}\n  cloud: {launchLatency: 1s, instanceTypes: [m5.large]}\n",
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(2));
    dump(&events);
    assert_eq!(
        deleted_claims(&events),
        vec![],
        "no node goes while its pod is nominated to it"
    );
    assert_eq!(created_claims(&events).len(), 1, "one node for one pod");
    assert_eq!(pending_pods(&s), 0, "the pod runs");
}

/// The watch echoes the controller's own writes back late, as a real API server's does.
/// Seen: a NodeClaim that had already launched was launched again ("provisioning
/// (retry)"), and two Nodes carried the same NodeClaim.
#[test]
fn a_nodeclaim_launches_exactly_once_under_a_lagging_watch() {
    let text = world(
        "  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 5m}",
        &[deployed("web", 6, "1")],
        "lagging-watch",
        "  cluster: {watchLatency: 3s}\n  cloud: {instanceTypes: [m5.large, m5.xlarge]}\n",
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(3));
    dump(&events);
    let retries: Vec<_> = created_claims(&events)
        .into_iter()
        .filter(|(_, _, cause)| cause.contains("retry"))
        .collect();
    assert_eq!(retries, vec![], "no NodeClaim is launched a second time");
    let (cluster, cloud) = s.controller.parts_mut();
    let claims: Vec<String> = cluster.nodeclaims().map(|c| c.name.clone()).collect();
    let mut per_claim = std::collections::BTreeMap::<String, usize>::new();
    for i in cloud.instances() {
        *per_claim.entry(i.instance.nodeclaim.clone()).or_default() += 1;
    }
    for (claim, n) in &per_claim {
        assert_eq!(*n, 1, "NodeClaim {claim} has {n} instances");
    }
    assert_eq!(
        per_claim.len(),
        claims.len(),
        "one instance per NodeClaim: {per_claim:?} vs {claims:?}"
    );
    let mut nodes_per_claim = std::collections::BTreeMap::<String, usize>::new();
    for n in cluster.nodes() {
        if let Some(i) = cloud
            .instances()
            .find(|i| i.instance.provider_id == n.provider_id)
        {
            *nodes_per_claim
                .entry(i.instance.nodeclaim.clone())
                .or_default() += 1;
        }
    }
    assert!(
        nodes_per_claim.values().all(|&n| n == 1),
        "no two Nodes share a NodeClaim: {nodes_per_claim:?}"
    );
}

/// An auto decision is validated 15 s after it was proposed, as upstream validates, and
/// abandoned if the cluster moved. Seen: auto decisions executed in the pass that
/// proposed them; a pod added 5 s later went pending and got a new node.
#[test]
fn an_auto_decision_waits_for_validation_and_is_abandoned_on_churn() {
    let text = world(
        "  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}",
        &[deployed("web", 2, "1500m")],
        "validation",
        "  cloud: {instanceTypes: [m5.large]}\n  timeline:\n    - at: 2m\n      scale: {deployment: web, replicas: 1}\n",
    );
    let mut s = sim(&text, "auto");
    let mut all: Vec<Event> = Vec::new();
    let mut proposed_at: Option<f64> = None;
    let mut scaled = false;
    drive(&mut s, TimeDelta::minutes(5), |s, events| {
        all.extend(events.iter().cloned());
        if proposed_at.is_none() {
            proposed_at = events
                .iter()
                .find(|e| matches!(&e.kind, EventKind::DisruptionProposed { .. }))
                .map(|e| e.t);
        }
        let now = (s.now() - s.start()).num_milliseconds() as f64 / 1000.0;
        if let Some(t) = proposed_at
            && !scaled
            && now >= t + 5.0
        {
            scaled = true;
            s.scale("default", "web", 2).expect("scale");
        }
    });
    dump(&all);
    let t = proposed_at.expect("a node is proposed for consolidation after the scale-down");
    assert!(scaled, "the deployment was scaled back up");
    let after: Vec<_> = created_claims(&all)
        .into_iter()
        .filter(|(at, _, _)| *at > t)
        .collect();
    assert_eq!(after, vec![], "the returning pod needs no new node");
    assert_eq!(
        deleted_claims(&all),
        vec![],
        "no node is deleted: the pod that came back needs both"
    );
    assert!(
        kinds(&all, "DisruptionWithdrawn").count() >= 1,
        "the decision is abandoned, saying why"
    );
    assert_eq!(pending_pods(&s), 0);
}

/// A replacement stays protected until its command ends. Seen: a replacement NodeClaim
/// that registered during its command was deleted as Empty while the candidate's drain
/// was still moving its pods (the protected set was keyed by NodeClaim name, the pass
/// looked nodes up by Node name).
#[test]
fn a_replacement_is_protected_until_its_command_ends() {
    let text = world(
        "      terminationGracePeriod: 2m\n  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 0s, budgets: [{nodes: \"100%\"}]}",
        &[deployed("app", 3, "1"), pdb("app", "app", 3)],
        "drain",
        "  cloud: {instanceTypes: [m5.xlarge]}\n  timeline:\n    - at: 1m\n      patchNodePool: {name: default, patch: {spec: {template: {metadata: {labels: {team: a}}}}}}\n",
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(8));
    dump(&events);
    let replacements: Vec<String> = created_claims(&events)
        .into_iter()
        .filter(|(_, _, cause)| cause.starts_with("disruption"))
        .map(|(_, n, _)| n)
        .collect();
    assert_eq!(replacements.len(), 1, "one replacement: {events:#?}");
    let lost: Vec<_> = deleted_claims(&events)
        .into_iter()
        .filter(|(_, n, _)| replacements.contains(n))
        .collect();
    assert_eq!(lost, vec![], "the replacement is not deleted");
    assert!(
        kinds(&events, "DisruptionCompleted").count() == 1,
        "the drift completes"
    );
    assert_eq!(pending_pods(&s), 0, "the pods run on the replacement");
}

/// Three drifted nodes, a budget of two: waiting decisions hold budget as commands in
/// flight do. Seen: three drift decisions awaiting approval at a budget of 2, and
/// "approve all" refused in part.
#[test]
fn waiting_decisions_hold_their_budget() {
    let text = world(
        "  disruption:\n    consolidationPolicy: WhenEmpty\n    consolidateAfter: Never\n    budgets: [{nodes: \"2\"}]",
        &[deployed("app", 3, "3")],
        "budget",
        "  cloud: {instanceTypes: [m5.xlarge]}\n  timeline:\n    - at: 1m\n      patchNodePool: {name: default, patch: {spec: {template: {metadata: {labels: {team: a}}}}}}\n",
    );
    let mut s = sim(&text, "manual");
    let mut most = 0;
    drive(&mut s, TimeDelta::minutes(3), |s, _| {
        most = most.max(s.controller.pending_decisions().len());
    });
    assert_eq!(most, 2, "at most two drift decisions wait at a budget of 2");
    let rt = rt();
    for id in s.controller.pending_decisions() {
        rt.block_on(s.controller.approve(id, "test"))
            .unwrap_or_else(|e| panic!("approving #{id}: {e}"));
    }
}

/// Two drifted nodes, a budget that opens at 09:04: the node that drifted first goes
/// first, at the moment the window closes. Seen: the older node went first, and the
/// blocked drift ran only at the next 5-minute full pass.
#[test]
fn drift_goes_in_the_order_nodes_drifted_when_the_window_closes() {
    let reqs = |types: &str| {
        format!(
            "{{spec: {{template: {{spec: {{requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}, {{key: node.kubernetes.io/instance-type, operator: In, values: [{types}]}}]}}}}}}}}"
        )
    };
    let text = world(
        "        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}\n  disruption:\n    consolidationPolicy: WhenEmpty\n    consolidateAfter: Never\n    budgets:\n      - {nodes: \"1\"}\n      - {schedule: \"0 9 * * *\", duration: 4m, nodes: \"0\", reasons: [Drifted]}",
        &[deployed("old", 1, "3"), deployed("young", 0, "1")],
        "drift-order",
        &format!(
            "  cloud: {{instanceTypes: [m5.large, m5.xlarge, m5.2xlarge]}}\n  replicas:\n    young:\n      steps: [{{at: 1m, replicas: 1}}]\n  timeline:\n    - at: 2m\n      patchNodePool: {{name: default, patch: {}}}\n    - at: 3m\n      patchNodePool: {{name: default, patch: {}}}\n",
            reqs("m5.xlarge, m5.2xlarge"),
            reqs("m5.2xlarge")
        ),
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(10));
    dump(&events);
    let drifts: Vec<(f64, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::DisruptionProposed {
                reason, candidates, ..
            } if reason == "Drifted" => Some((e.t, candidates[0].instance_type.clone())),
            _ => None,
        })
        .collect();
    let (t, first) = drifts.first().cloned().expect("a drift is proposed");
    assert_eq!(
        first, "m5.large",
        "the node that drifted first (the young m5.large) goes first: {drifts:?}"
    );
    assert!(
        (240.0..=241.0).contains(&t),
        "proposed when the window closes at 09:04:00 (t=240), not at {t}"
    );
}

/// A replacement that cannot launch fails its command in the same round. Seen: a drift
/// replacement that failed to launch (capacity outage) was noticed only at the
/// 10-minute orchestration timeout, its candidate tainted all along.
#[test]
fn a_replacement_that_fails_to_launch_fails_its_command_at_once() {
    let text = world(
        "  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}",
        &[deployed("app", 1, "3")],
        "outage",
        "  cloud: {instanceTypes: [m5.xlarge]}\n  timeline:\n    - at: 50s\n      capacity: {available: false}\n    - at: 1m\n      patchNodePool: {name: default, patch: {spec: {template: {metadata: {labels: {team: a}}}}}}\n",
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(4));
    dump(&events);
    let failed_launch = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::NodeClaimLaunchFailed { .. }))
        .map(|e| e.t)
        .expect("the replacement's launch fails");
    let failed = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::DisruptionFailed { .. }))
        .map(|e| e.t)
        .expect("the command fails");
    assert!(
        failed - failed_launch <= 2.0,
        "the command fails with its replacement (launch failed at {failed_launch} s, command at {failed} s)"
    );
    super::assert_no_disruption_taint(&mut s, "after the failed replacement");
}

/// A node deleted while a PodDisruptionBudget blocks its drain: the refusal is reported
/// at once and repeated, and the pods' new capacity launches with the drain. Seen: the
/// drain was silent until the force-delete at the terminationGracePeriod deadline, and
/// capacity for the drained pods was launched only then.
#[test]
fn a_blocked_drain_is_reported_and_its_pods_get_capacity_at_once() {
    let text = world(
        "      expireAfter: 3m\n      terminationGracePeriod: 10m\n  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}",
        &[deployed("app", 2, "1"), pdb("app", "app", 2)],
        "blocked-drain",
        "  cloud: {instanceTypes: [m5.xlarge]}\n",
    );
    let mut s = sim(&text, "auto");
    let events = run_for(&mut s, TimeDelta::minutes(8));
    dump(&events);
    let deleting = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::NodeClaimDeleting { .. }))
        .map(|e| e.t)
        .expect("the expired node is deleted");
    let capacity = created_claims(&events)
        .into_iter()
        .find(|(t, _, _)| *t >= deleting)
        .map(|(t, _, _)| t)
        .expect("capacity for the drained pods");
    assert!(
        capacity - deleting <= 15.0,
        "capacity launched {} s after the drain started",
        capacity - deleting
    );
    let reports: Vec<f64> = events
        .iter()
        .filter(|e| e.kind.name() == "DrainBlocked" && format!("{:?}", e.kind).contains("app"))
        .map(|e| e.t)
        .collect();
    assert!(
        reports.first().is_some_and(|t| t - deleting <= 5.0),
        "the refusal is reported at once: {reports:?} (drain from {deleting} s)"
    );
    assert!(
        reports.len() >= 2,
        "and repeated while it lasts: {reports:?}"
    );
}

/// An approval a console wrote before the controller died is carried out by the next
/// one, after re-validation. Seen: the standby refused the operator's approval ("no
/// pending decision #23").
#[test]
fn an_approval_written_before_a_restart_is_carried_out() {
    use crate::api::protocol as keys;
    use crate::cluster::{Cluster, ObjectRef, Write};

    let mut s = sim(&super::drifting(), "manual");
    run_for(&mut s, TimeDelta::minutes(2));
    let snapshot = s.controller.snapshot();
    let decision = snapshot.pending.first().expect("the drift waits").clone();
    let claim = decision.command.candidates[0].node.clone();
    let claim = snapshot
        .state
        .nodes
        .iter()
        .find(|n| n.name == claim || n.nodeclaim == claim)
        .map(|n| n.nodeclaim.clone())
        .expect("the candidate");
    let annotations = [
        (keys::APPROVE.to_string(), Some(decision.id.to_string())),
        (keys::ACTOR.to_string(), Some("alice".to_string())),
    ]
    .into_iter()
    .collect();
    let (cluster, _) = s.controller.parts_mut();
    rt().block_on(cluster.write(Write::Annotate {
        target: ObjectRef::NodeClaim(claim),
        annotations,
    }))
    .expect("approve");
    // The controller dies before it reads the approval.
    s.restart_controller().expect("restart");
    let events = run_for(&mut s, TimeDelta::minutes(4));
    dump(&events);
    assert!(
        kinds(&events, "DisruptionApproved").any(
            |k| matches!(k, EventKind::DisruptionApproved { id, actor } if *id == decision.id && actor == "alice")
        ),
        "the approval is honoured: {events:#?}"
    );
    assert!(
        !events.iter().any(
            |e| matches!(&e.kind, EventKind::Error { message } if message.contains("refused"))
        ),
        "nothing is refused"
    );
    assert_eq!(kinds(&events, "DisruptionCompleted").count(), 1);
}

/// A rejection holds its node for the hour, across a restart. Seen: a rejected node was
/// proposed again after a restart.
#[test]
fn a_rejected_node_stays_held_across_a_restart() {
    let mut s = sim(&super::drifting(), "manual");
    run_for(&mut s, TimeDelta::minutes(2));
    let decision = s
        .controller
        .snapshot()
        .pending
        .first()
        .cloned()
        .expect("the drift waits");
    rt().block_on(s.controller.reject(decision.id, "not now", "bob"))
        .expect("reject");
    s.restart_controller().expect("restart");
    let events = run_for(&mut s, TimeDelta::minutes(3));
    dump(&events);
    let again: Vec<_> = kinds(&events, "DisruptionProposed").collect();
    assert!(
        again.is_empty(),
        "proposed again after a restart: {again:#?}"
    );
}

/// kill -9 at every write of a replace an operator approved through the cluster (the
/// records, the taint, the replacement's creation and launch, registration, the drain):
/// the next process finishes it, once. No orphaned instance, no lost NodeClaim, no stuck
/// taint, one replacement, one completion, and nothing refused.
#[test]
fn a_restart_at_every_write_of_an_approved_replace_honours_the_approval_once() {
    use crate::api::protocol as keys;
    use crate::cluster::{Cluster, ObjectRef, Write};

    /// A drift decision waiting for approval, and the approval written on its candidate
    /// (as a console writes it); returns the simulation, the id and the candidate.
    fn approved() -> (Simulation, u64, String) {
        let mut s = sim(&super::drifting(), "manual");
        run_for(&mut s, TimeDelta::minutes(2));
        let d = s
            .controller
            .snapshot()
            .pending
            .first()
            .cloned()
            .expect("the drift waits");
        let claim = d.command.candidates[0].nodeclaim.clone();
        let annotations = [
            (keys::APPROVE.to_string(), Some(d.id.to_string())),
            (keys::ACTOR.to_string(), Some("alice".to_string())),
        ]
        .into_iter()
        .collect();
        let (cluster, _) = s.controller.parts_mut();
        rt().block_on(cluster.write(Write::Annotate {
            target: ObjectRef::NodeClaim(claim.clone()),
            annotations,
        }))
        .expect("approve");
        (s, d.id, claim)
    }

    let rt = rt();
    let (mut reference, id, _) = approved();
    let first = reference.controller.parts_mut().0.writes();
    let mut last = None;
    drive(&mut reference, TimeDelta::minutes(6), |s, events| {
        if last.is_none()
            && events
                .iter()
                .any(|e| matches!(e.kind, EventKind::DisruptionCompleted { .. }))
        {
            last = Some(s.controller.parts_mut().0.writes());
        }
    });
    let last = last.expect("the approved replace completes in the reference run");
    assert!(
        last - first >= 6,
        "records, taint, create, launch, delete, evict, finalize"
    );
    eprintln!("approved replace: crashing at each of writes {first}..{last}");

    for k in first..last {
        let (mut s, _, candidate) = approved();
        s.controller.parts_mut().0.fail_writes_after(Some(k));
        let mut all: Vec<Event> = Vec::new();
        let mut crashed = false;
        let end = s.now() + TimeDelta::minutes(8);
        while s.now() < end {
            all.extend(rt.block_on(s.step()));
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
        let context = format!("crash at write {k}");
        super::assert_settled(&mut s, &context);
        let cause = format!("disruption #{id}");
        let replacements = created_claims(&all)
            .into_iter()
            .filter(|(_, _, c)| *c == cause)
            .count();
        assert_eq!(replacements, 1, "{context}: one replacement: {all:#?}");
        assert_eq!(
            kinds(&all, "DisruptionCompleted").count(),
            1,
            "{context}: {all:#?}"
        );
        let refused: Vec<_> = all
            .iter()
            .filter(
                |e| matches!(&e.kind, EventKind::Error { message } if message.contains("refused")),
            )
            .collect();
        assert!(refused.is_empty(), "{context}: {refused:?}");
        let (cluster, _) = s.controller.parts_mut();
        assert!(
            cluster.nodeclaims().all(|c| c.name != candidate),
            "{context}: the drifted NodeClaim is gone"
        );
    }
}
