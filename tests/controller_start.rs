//! How `run` and `controller` start, against the kube peer (kmock on 127.0.0.1, kubectl as
//! the independent reader): one controller at a time on the one Lease (a second waits as
//! a standby, an attached console knows it is ours), none beside a running upstream
//! Karpenter unless forced, and the start under faults: an API server that does not
//! answer (retried with backoff, each report naming it, `q` on the console's connecting
//! screen), SIGTERM during the initial sync, and kubeconfig errors that name the file.

#[path = "peers/kube_peer.rs"]
mod kube_peer;
#[path = "peers/objects.rs"]
mod objects;
#[path = "peers/proc.rs"]
mod proc;
#[path = "peers/tmux.rs"]
mod tmux;
#[path = "peers/wait.rs"]
mod wait;

use std::time::{Duration, Instant};

use kube_peer::KubePeer;
use proc::{Proc, controller};
use tmux::Tmux;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");
/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(60);
const LEASE: &str = "karpenter-tui-leader-election";

fn peer_with_pool() -> (KubePeer, String) {
    let peer = KubePeer::start();
    let kubeconfig = peer.kubeconfig_path().display().to_string();
    peer.kubectl(
        &["apply", "-f", "-"],
        &objects::nodepool(
            "m5.large",
            "    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 0s",
        ),
    );
    (peer, kubeconfig)
}

/// `run` headless (not on a terminal) with short lease timings.
fn run(kubeconfig: &str, extra: &[&str]) -> Proc {
    let mut args = vec![
        "run",
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        "default",
        "--lease",
        "3,2,0.5",
    ];
    args.extend(extra);
    Proc::start(&args)
}

/// The identity a process says leads ("karpenter-tui: ID leads").
fn leader_of(p: &Proc) -> Option<String> {
    p.stderr().lines().find_map(|l| {
        l.strip_prefix("karpenter-tui: ")?
            .strip_suffix(" leads")
            .map(str::to_string)
    })
}

fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, PATIENCE, probe)
}

fn holder(peer: &KubePeer, namespace: &str, name: &str) -> String {
    peer.get_json(&["get", "lease", name, "-n", namespace])["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn run_holds_the_lease_a_second_run_waits_and_a_console_sees_our_controller() {
    let (peer, kubeconfig) = peer_with_pool();
    let mut first = run(&kubeconfig, &[]);
    let id = eventually("the first run to lead", || leader_of(&first));
    assert!(id.starts_with("peer@"), "{id}");
    assert_eq!(holder(&peer, "default", LEASE), id);

    // A second `run` waits as a standby, naming who holds the Lease.
    let mut second = run(&kubeconfig, &[]);
    second.wait_stderr("the standby's notice", |s| {
        s.contains(&format!(
            "standby: the Lease default/{LEASE} is held by {id}"
        ))
    });
    assert_eq!(leader_of(&second), None, "{}", second.stderr());

    // A console attached with --write knows the controller is ours (it would otherwise
    // act as against upstream Karpenter, deleting NodeClaims on approve).
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {BIN} attach --write \
         --kubeconfig {kubeconfig} --namespace default; sleep 30",
        dir.path().display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    let screen = tmux.wait_for("the attached console", PATIENCE, |s| {
        s.contains("attached to")
    });
    assert!(screen.contains("karpenter-tui controller"), "{screen}");
    assert!(!screen.contains("upstream Karpenter"), "{screen}");
    tmux.keys("q");

    // The first one stops and releases the Lease: the standby takes over.
    assert_eq!(first.terminate(), Some(0), "{}", first.stderr());
    let next = eventually("the standby to lead", || leader_of(&second));
    assert_ne!(next, id);
    assert_eq!(holder(&peer, "default", LEASE), next);
    assert_eq!(second.terminate(), Some(0), "{}", second.stderr());
}

/// Upstream Karpenter's Lease as its leader writes it, renewed `renewed`, in kube-system.
fn upstream_lease(renewed: &str, seconds: u32) -> String {
    format!(
        r#"apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: karpenter-leader-election, namespace: kube-system}}
spec:
  holderIdentity: karpenter-6d9c7b5f4-x2x7q_0c1d2e3f
  leaseDurationSeconds: {seconds}
  acquireTime: "2026-01-01T00:00:00.000000Z"
  renewTime: "{renewed}"
  leaseTransitions: 2
"#
    )
}

fn micro_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Waits for the process to exit on its own; its exit code.
fn exit_code(p: &mut Proc) -> Option<i32> {
    p.wait_exit(PATIENCE)
}

#[test]
fn run_and_controller_refuse_beside_upstream_karpenter_unless_forced_or_its_lease_is_stale() {
    let (peer, kubeconfig) = peer_with_pool();
    // Renewed just now, for an hour: upstream Karpenter is running.
    let now = chrono::Utc::now();
    peer.kubectl(
        &["apply", "-f", "-"],
        &upstream_lease(&micro_time(now), 3600),
    );
    for mut refused in [run(&kubeconfig, &[]), controller(&kubeconfig, &[])] {
        assert_eq!(exit_code(&mut refused), Some(1), "{}", refused.stderr());
        let err = refused.stderr();
        for want in [
            "upstream Karpenter is running here",
            "kube-system/karpenter-leader-election",
            "held by karpenter-6d9c7b5f4-x2x7q_0c1d2e3f",
            &format!("renewed {}", now.format("%Y-%m-%dT%H:%M:%S")),
            "--force",
        ] {
            assert!(err.contains(want), "{want:?} missing:\n{err}");
        }
        assert!(leader_of(&refused).is_none(), "{err}");
    }
    // Nothing of ours was written: no Lease, no NodeClaim.
    let leases = peer.get_json(&["get", "leases", "-n", "default"]);
    assert_eq!(
        leases["items"].as_array().map(Vec::len),
        Some(0),
        "{leases}"
    );

    // --force starts anyway, saying so.
    let mut forced = run(&kubeconfig, &["--force"]);
    eventually("the forced run to lead", || leader_of(&forced));
    assert!(
        forced.stderr().contains("starting anyway (--force)"),
        "{}",
        forced.stderr()
    );
    assert_eq!(forced.terminate(), Some(0), "{}", forced.stderr());

    // Last renewed two minutes ago on a 15 s lease: that controller is gone.
    let stale = now - chrono::Duration::seconds(120);
    peer.kubectl(
        &["apply", "-f", "-"],
        &upstream_lease(&micro_time(stale), 15),
    );
    let mut c = controller(&kubeconfig, &[]);
    eventually("the controller to lead beside a stale lease", || {
        leader_of(&c)
    });
    assert_eq!(c.terminate(), Some(0), "{}", c.stderr());
}

/// A kubeconfig for an API server on a closed port of 127.0.0.1; its URL.
fn unreachable(dir: &std::path::Path) -> (String, String) {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: {url}\n\
             users:\n- name: me\n  user: {{}}\ncontexts:\n- name: gone\n  context:\n    \
             cluster: gone\n    user: me\ncurrent-context: gone\n"
        ),
    )
    .unwrap();
    (path.display().to_string(), url)
}

#[test]
fn an_unreachable_api_server_is_named_retried_with_backoff_and_sigterm_stops_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, url) = unreachable(dir.path());
    for command in ["run", "controller"] {
        let mut p = match command {
            "run" => run(&kubeconfig, &[]),
            _ => controller(&kubeconfig, &[]),
        };
        p.wait_stderr("the first failed attempt", |s| s.contains("connecting to"));
        // Several seconds of an outage: a few attempts, not a flood (it was ~12 lines a
        // second, none naming the server).
        std::thread::sleep(Duration::from_secs(7));
        let err = p.stderr();
        let reports: Vec<&str> = err.lines().filter(|l| l.contains("WARN")).collect();
        assert!(
            (1..=5).contains(&reports.len()),
            "{} reports in 7 s:\n{err}",
            reports.len()
        );
        for l in &reports {
            assert!(
                l.contains(&format!("connecting to {url}")) && l.contains("refused"),
                "a report without the server or the cause: {l}"
            );
        }
        assert!(err.lines().count() <= 10, "{err}");
        assert_eq!(p.terminate(), Some(0), "{err}");
        assert!(
            p.stderr().contains("stopped before the controller started"),
            "{}",
            p.stderr()
        );
    }
}

#[test]
fn sigterm_during_the_initial_sync_is_honoured() {
    let (peer, kubeconfig) = peer_with_pool();
    // The pod list hangs for 100 s: the initial sync cannot complete within its
    // 120 s limit's first 100 s.
    peer.delay("GET", "/api/v1/pods", 100.0, 10);
    for command in ["controller", "run"] {
        peer.clear_requests();
        let mut p = match command {
            "controller" => controller(&kubeconfig, &[]),
            _ => run(&kubeconfig, &[]),
        };
        let asked = Instant::now();
        while !peer
            .requests()
            .iter()
            .any(|r| r.path == "/api/v1/pods" && r.status.is_none())
        {
            assert!(
                asked.elapsed() < PATIENCE,
                "the pod list was never asked for; requests: {:?}\nstderr:\n{}",
                peer.requests(),
                p.stderr()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // Far below the sync's 120 s limit and the hung list's 100 s; a bound on
        // honouring the signal at all, not on its speed.
        assert_eq!(
            p.terminate_within(Duration::from_secs(30)),
            Some(0),
            "{}",
            p.stderr()
        );
        assert!(leader_of(&p).is_none(), "{}", p.stderr());
    }
}

#[test]
fn kubeconfig_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere").join("config");
    let missing = missing.display().to_string();
    let malformed = dir.path().join("malformed");
    std::fs::write(&malformed, "apiVersion: v1\nclusters: [oops\n").unwrap();
    let malformed = malformed.display().to_string();
    let (good, _) = unreachable(dir.path());

    let failure = |args: &[&str], env: &[(String, String)]| {
        let mut p = Proc::start_with(args, env);
        assert_eq!(p.wait_exit(PATIENCE), Some(1), "{}", p.stderr());
        p.stderr()
    };
    let home = ("HOME".to_string(), dir.path().display().to_string());
    let home_only = [home.clone()];
    let env_kubeconfig =
        |path: &str| vec![("KUBECONFIG".to_string(), path.to_string()), home.clone()];

    // $KUBECONFIG naming a missing file.
    let err = failure(
        &["controller", "--metrics-addr", "127.0.0.1:0"],
        &env_kubeconfig(&missing),
    );
    assert!(
        err.contains(&missing) && err.contains("KUBECONFIG"),
        "{err}"
    );
    let err = failure(&["run"], &env_kubeconfig(&missing));
    assert!(err.contains(&missing), "{err}");
    // --kubeconfig naming a missing file, and a malformed one.
    let err = failure(&["run", "--kubeconfig", &missing], &home_only);
    assert!(err.contains(&missing), "{err}");
    let err = failure(&["run", "--kubeconfig", &malformed], &home_only);
    assert!(err.contains(&malformed), "{err}");
    let err = failure(&["run"], &env_kubeconfig(&malformed));
    assert!(err.contains(&malformed), "{err}");
    // A context the file does not have.
    let err = failure(
        &["run", "--kubeconfig", &good, "--context", "prod"],
        &home_only,
    );
    assert!(
        err.contains(&good) && err.contains("\"prod\"") && err.contains("gone"),
        "{err}"
    );
}

#[test]
fn the_console_shows_the_connecting_screen_and_q_quits_it() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, url) = unreachable(dir.path());
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={0}/config XDG_STATE_HOME={0}/state {BIN} run \
         --kubeconfig {kubeconfig} --namespace default; echo EXIT=$?; \
         stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
        dir.path().display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    let screen = tmux.wait_for("the connecting screen", PATIENCE, |s| {
        s.contains(&format!("connecting to {url}:")) && s.contains("q quits")
    });
    assert!(screen.contains("refused"), "{screen}");
    assert!(
        tmux.alternate_screen(),
        "the screen is on the alternate screen"
    );
    tmux.keys("q");
    let screen = tmux.wait_for("the exit and stty's report", PATIENCE, |s| {
        s.contains("EXIT=")
            && s.lines()
                .any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!tmux.alternate_screen(), "left the alternate screen");
    assert!(
        screen.lines().any(|l| l.trim() == "icanon"),
        "terminal left in raw mode:\n{screen}"
    );
}

/// Upstream's settings carry over under their names: a gate or policy this build cannot
/// honour is refused before anything touches the cluster, naming the flag, its env
/// variable and what is accepted; upstream's known gates are accepted.
#[test]
fn upstream_feature_gates_and_min_values_policy_are_checked_by_name() {
    let out = std::process::Command::new(BIN)
        .args(["controller", "--kubeconfig", "/nonexistent"])
        .env("FEATURE_GATES", "SpotToSpotConsolidation=true,Bogus=true")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("FEATURE_GATES: unknown gate \"Bogus\""),
        "{err}"
    );

    let out = std::process::Command::new(BIN)
        .args([
            "run",
            "--kubeconfig",
            "/nonexistent",
            "--min-values-policy",
            "Lax",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MIN_VALUES_POLICY: \"Lax\": expected Strict or BestEffort"),
        "{err}"
    );

    // Known gates and a valid policy pass the check: the failure is the kubeconfig's.
    let out = std::process::Command::new(BIN)
        .args([
            "controller",
            "--kubeconfig",
            "/nonexistent",
            "--min-values-policy",
            "BestEffort",
        ])
        .env(
            "FEATURE_GATES",
            "SpotToSpotConsolidation=true,NodeRepair=false",
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("FEATURE_GATES"), "{err}");
    assert!(err.contains("/nonexistent"), "{err}");
}
