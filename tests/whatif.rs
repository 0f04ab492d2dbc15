//! What-if (issue 22): the next hours played twice from one instant, as they are and with
//! a NodePool edit, compared. Through the `whatif` subcommand on a scenario, through the
//! library (a fork must not disturb the run it was taken from), and through the console's
//! `:whatif` in a real terminal (tmux).

#[path = "peers/tmux.rs"]
mod tmux;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

const EXAMPLE: &str = "examples/whatif.yaml";

const EDIT: &str = "disruption.consolidationPolicy=WhenEmptyOrUnderutilized";

fn whatif(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("whatif")
        .args(args)
        .output()
        .expect("the binary runs")
}

fn comparison(args: &[&str]) -> Value {
    let out = whatif(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn count(figures: &Value, method: &str) -> u64 {
    figures["disruptions"][method].as_u64().unwrap_or(0)
}

#[test]
fn consolidating_underutilized_nodes_is_compared_with_the_pool_as_it_is() {
    let c = comparison(&[EXAMPLE, "--at", "1h", "--json", "4h", "web", EDIT]);
    assert_eq!(c["fromSeconds"], 3600.0);
    assert_eq!(c["horizonSeconds"], 14_400.0);
    assert_eq!(c["nodepool"], "web");
    let (a, b) = (&c["unchanged"], &c["edited"]);
    // As it is: the report pods end at 2h, three nodes empty out and go; the nodes left
    // with a few web pods each stay, and nothing is evicted.
    assert_eq!(count(a, "emptiness"), 3, "{a}");
    assert_eq!(count(a, "single-node consolidation"), 0, "{a}");
    assert_eq!(a["evictions"], 0, "{a}");
    // With the edit, underutilized nodes are consolidated: it costs evictions, and saves.
    assert!(count(b, "single-node consolidation") >= 1, "{b}");
    assert!(b["evictions"].as_u64().unwrap() > 0, "{b}");
    let (cost_a, cost_b) = (a["cost"].as_f64().unwrap(), b["cost"].as_f64().unwrap());
    assert!(cost_b < cost_a * 0.9, "{cost_b} vs {cost_a}");
    assert!(b["costPerHour"].as_f64().unwrap() < a["costPerHour"].as_f64().unwrap());
    // Nobody waits for a node in either.
    assert_eq!(a["pendingAtEnd"], 0);
    assert_eq!(b["pendingAtEnd"], 0);

    // The same question as a table: both runs and the change, row by row.
    let out = whatif(&[EXAMPLE, "--at", "1h", "4h", "web", EDIT]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("what-if: NodePool web, the next 4h\n"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("cost over 4h"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains(&format!("${cost_a:.2}"))
            && row.contains(&format!("${cost_b:.2}"))
            && row.contains("-$"),
        "{row}"
    );
}

#[test]
fn the_unchanged_run_is_the_same_whatever_the_edit() {
    let one = comparison(&[EXAMPLE, "--at", "1h", "--json", "4h", "web", EDIT]);
    let two = comparison(&[
        EXAMPLE,
        "--at",
        "1h",
        "--json",
        "4h",
        "web",
        r#"{"spec":{"disruption":{"budgets":[{"nodes":"0"}]}}}"#,
    ]);
    assert_eq!(one["unchanged"], two["unchanged"]);
    // A budget of zero stops every disruption, emptiness too: it costs more.
    let b = &two["edited"];
    assert_eq!(b["disruptions"], serde_json::json!({}), "{b}");
    assert!(b["cost"].as_f64().unwrap() > two["unchanged"]["cost"].as_f64().unwrap());
}

#[test]
fn an_edit_that_does_not_apply_is_refused_by_name_before_anything_runs() {
    for (args, says) in [
        (
            vec![EXAMPLE, "4h", "api", "weight=5"],
            "no NodePool \"api\"",
        ),
        (
            vec![
                EXAMPLE,
                "4h",
                "web",
                "disruption.consolidationPolicy=Sometimes",
            ],
            "spec.disruption.consolidationPolicy",
        ),
        (vec![EXAMPLE, "4h", "web", "weight"], "is not FIELD=VALUE"),
        (vec![EXAMPLE, "200h", "web", "weight=5"], "at most 168h"),
        (
            vec![EXAMPLE, "9d", "web", "weight=5"],
            "\"9d\" is not a duration",
        ),
        (vec![EXAMPLE, "--at", "soon", "web", "weight=5"], "--at: "),
    ] {
        let out = whatif(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// The console forks the simulation it shows: the live run must go on exactly as if no
/// what-if had been asked (no shared clock, cluster or cloud between the copies).
#[test]
fn a_fork_leaves_the_run_it_was_taken_from_as_it_was() {
    use karpenter_tui::cluster::scenario;
    use karpenter_tui::control::whatif::Query;
    use karpenter_tui::simulation::{Options, Pace, Simulation};
    use karpenter_tui::whatif::Forks;

    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let scenario = scenario::parse(EXAMPLE, &text).expect("the example parses");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = |fork: bool| -> Vec<String> {
        let mut sim = Simulation::new(&scenario, &Options::default(), Pace::Virtual).unwrap();
        let start = sim.start();
        rt.block_on(sim.run_until(start + chrono::TimeDelta::hours(1), |_| {}));
        if fork {
            let q = Query::parse(&format!("4h web {EDIT}")).unwrap();
            let c = Forks::prepare(&sim, &q).unwrap().run();
            assert!(c.edited.disruption_count() > 0);
            assert_eq!(sim.now(), start + chrono::TimeDelta::hours(1));
        }
        let mut lines = Vec::new();
        rt.block_on(sim.run_until(start + chrono::TimeDelta::hours(6), |e| {
            lines.push(serde_json::to_string(e).unwrap())
        }));
        lines.push(serde_json::to_string(&sim.summary()).unwrap());
        lines
    };
    let forked = run(true);
    let plain = run(false);
    assert!(forked.len() > 10);
    assert_eq!(forked, plain);
}

/// `:whatif` in the console, read-only (it changes nothing, so read-only allows it): the
/// answer opens over the view while the embedded cluster runs on, and esc closes it.
#[test]
fn the_console_answers_whatif_in_a_popup_while_the_cluster_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={} XDG_STATE_HOME={} {BIN} --scenario {EXAMPLE} --speed 30 \
         --read-only; echo EXIT=$?; sleep 60",
        dir.path().join("config").display(),
        dir.path().join("state").display()
    );
    let tmux = tmux::Tmux::start(dir.path(), &command);
    tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview")
    });
    tmux.keys(":whatif 4h api weight=5");
    tmux.key("Enter");
    tmux.wait_for("the refusal", Duration::from_secs(5), |s| {
        s.contains("no NodePool \"api\"")
    });
    tmux.keys(&format!(":whatif 4h web {EDIT}"));
    tmux.key("Enter");
    let screen = tmux.wait_for("the answer", Duration::from_secs(30), |s| {
        s.contains("what-if: NodePool web, the next 4h") && s.contains("pending at the end")
    });
    for row in [
        "unchanged",
        "edited",
        "cost over 4h",
        "single-node consolidation",
    ] {
        assert!(screen.contains(row), "{row:?} missing:\n{screen}");
    }
    tmux.key("Escape");
    let screen = tmux.wait_for("the popup closed", Duration::from_secs(5), |s| {
        !s.contains("what-if: NodePool web")
    });
    assert!(screen.contains("1 Overview"), "{screen}");
    assert!(
        !screen.contains("EXIT="),
        "the console still runs:\n{screen}"
    );
}
