//! The binary: parse flags, pick a mode, wire implementations. Kept thin; see cli.rs for
//! the command line and the library for the work.

// The cluster modes' futures (controller, AWS provider, console) nest deeper than the
// compiler's default layout depth.
#![recursion_limit = "256"]

mod cli;
mod live_cmd;

/// mimalloc, not glibc's malloc: the simulation's many short-lived small allocations cost
/// a fifth less CPU over a simulated day (see Cargo.toml, also for why transparent huge
/// pages are off). Library tests keep the system allocator; `bench` runs in this binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use karpenter_tui::api::manifest::{self, Object};
use karpenter_tui::api::text::escape_controls;
use karpenter_tui::api::{crds, migrate, validation};

use cli::{Bench, Cli, Command};
use karpenter_tui::cluster::scenario::{self, Scenario};
use karpenter_tui::simulation::{self, Pace, Simulation};
use karpenter_tui::tui::launch;
use karpenter_tui::tui::logpane::LogPane;

fn main() -> ExitCode {
    let cli = Cli::parse();
    karpenter_tui::api::input::set_max_input(cli.max_input_size);
    // The console owns the terminal: its logs go to a file and the in-app log pane.
    let console = matches!(
        cli.command,
        None | Some(Command::Run { .. }) | Some(Command::Attach { .. })
    ) && std::io::stdout().is_terminal();
    let pane = if console {
        let path = karpenter_tui::tui::config::log_path();
        Some(LogPane::with_file(&path).unwrap_or_default())
    } else {
        None
    };
    init_logging(&cli.log_level, pane.clone());
    let console_opts = launch::Options {
        theme: cli.theme.clone(),
        config: cli.config.clone(),
        keymap: cli.keymap.clone(),
        read_only: cli.read_only,
        rate: None, // run_embedded sets the simulation's speed
    };
    match cli.command {
        None => match pane {
            Some(pane) => run_console(
                cli.scenario.as_deref(),
                cli.speed,
                cli.approve.rules(),
                &cli.notify,
                &console_opts,
                pane,
            ),
            None => run_demo(
                cli.scenario.as_deref(),
                cli.speed,
                cli.approve.rules(),
                &cli.notify,
            ),
        },
        Some(Command::Screenshot {
            view,
            size,
            at,
            out,
            whatif,
        }) => run_screenshot(
            cli.scenario.as_deref(),
            &view,
            &console_opts,
            &size,
            at.as_deref(),
            &out,
            whatif.as_deref(),
        ),
        Some(Command::Simulate {
            scenario,
            until,
            seed,
            journal,
        }) => run_simulate(
            &scenario,
            until.as_deref(),
            simulation::Options {
                seed,
                approval: cli.approve.rules(),
                journal,
            },
            &cli.notify,
        ),
        Some(Command::WhatIf {
            scenario,
            question,
            at,
            seed,
            json,
        }) => run_whatif(
            &scenario,
            &question.join(" "),
            &at,
            simulation::Options {
                seed,
                approval: cli.approve.rules(),
                journal: None,
            },
            json,
        ),
        Some(Command::Export { kube }) => live_cmd::export(&kube),
        Some(Command::Validate { files }) => run_validate(&files),
        Some(Command::Crds) => {
            print_stdout(&crds::crds_yaml());
            ExitCode::SUCCESS
        }
        Some(Command::Completions { shell }) => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "karpenter-tui", &mut out);
            print_stdout(&String::from_utf8_lossy(&out));
            ExitCode::SUCCESS
        }
        Some(Command::Man) => run_man(),
        Some(Command::Migrate { file }) => run_migrate(&file),
        Some(Command::Journal { file, json }) => run_journal(&file, json),
        Some(Command::Bench(b)) => run_bench(b),
        Some(Command::Run {
            kube,
            cloud,
            leader,
            features,
        }) => live_cmd::run(
            &kube,
            &cloud,
            &leader,
            &features,
            cli.approve.rules(),
            &cli.notify,
            &console_opts,
            pane,
        ),
        Some(Command::Attach { kube, write }) => {
            live_cmd::attach(&kube, write, &console_opts, pane)
        }
        Some(Command::Controller {
            kube,
            cloud,
            metrics_addr,
            leader,
            features,
        }) => live_cmd::controller_cmd(
            &kube,
            &cloud,
            &metrics_addr,
            &leader,
            &features,
            cli.approve.rules(),
            &cli.notify,
        ),
    }
}

/// The man page: the top-level page, then one section per subcommand (clap_mangen
/// renders one command per page; the sections keep every flag in one `man` page).
fn run_man() -> ExitCode {
    let mut out = Vec::new();
    let cmd = Cli::command();
    let written = clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .and_then(|()| {
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                out.extend_from_slice(
                    format!(".SH \"{}\"\n", sub.get_name().to_uppercase()).as_bytes(),
                );
                let man = clap_mangen::Man::new(sub.clone());
                man.render_description_section(&mut out)?;
                man.render_options_section(&mut out)?;
                if sub.has_subcommands() {
                    man.render_subcommands_section(&mut out)?;
                }
            }
            Ok(())
        });
    match written {
        Ok(()) => {
            print_stdout(&String::from_utf8_lossy(&out));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: writing the man page: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr for the subcommands (the console will log to a file instead).
fn init_logging(filter: &str, pane: Option<LogPane>) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // kube-rs logs every failed request at error level without the URL; what failed is
    // reported by our callers, once, naming the server (cluster/kube/reach.rs).
    let filter = match "kube_client::client::builder=off".parse() {
        Ok(quiet) if !filter.to_string().contains("kube_client") => filter.add_directive(quiet),
        _ => filter,
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match pane {
        Some(pane) => builder.with_ansi(false).with_writer(pane).init(),
        None => builder.with_writer(std::io::stderr).init(),
    }
}

/// Reads a file or standard input ("-") within the input limit, naming the file in
/// the error.
fn read_input(path: &Path) -> Result<(String, String), String> {
    karpenter_tui::api::input::read_text(path).map(|text| (path.display().to_string(), text))
}

/// Writes to stdout, treating a closed pipe (`| head`) as the reader's choice, not an error.
fn print_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// Prints a journal for a post-incident review.
fn run_journal(path: &Path, json: bool) -> ExitCode {
    use karpenter_tui::control::journal::{self, Journal};
    let contents = match Journal::read_all(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(torn) = &contents.torn {
        eprintln!(
            "warning: journal {}: the last line is cut short (a crash while writing?) and is skipped: {}",
            path.display(),
            escape_controls(torn)
        );
    }
    if json {
        match serde_json::to_string_pretty(&contents.entries) {
            Ok(text) => print_stdout(&format!("{text}\n")),
            Err(e) => {
                eprintln!("journal {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    } else {
        print_stdout(&journal::table(&contents.entries));
    }
    ExitCode::SUCCESS
}

fn run_validate(files: &[std::path::PathBuf]) -> ExitCode {
    let mut failed = false;
    let mut summary = String::new();
    for path in files {
        let (source, text) = match read_input(path) {
            Ok(x) => x,
            Err(msg) => {
                eprintln!("{msg}");
                failed = true;
                continue;
            }
        };
        let loaded = manifest::load(&source, &text);
        for d in &loaded.diagnostics {
            eprintln!("{d}");
        }
        failed |= loaded.has_errors();
        for (doc, object) in &loaded.objects {
            let violations = validation::validate(object);
            for v in &violations {
                eprintln!("{}", loaded.error_at(&source, *doc, &v.path, &v.message));
            }
            let verdict = if violations.is_empty() {
                format!("valid ({})", describe(object))
            } else {
                failed = true;
                let n = violations.len();
                format!("invalid ({n} problem{})", if n == 1 { "" } else { "s" })
            };
            // The object is named at the line its document starts on; its name is the
            // user's text, escaped like every echo of input.
            let at = loaded.lines.line(*doc, "").map(|l| format!(":{l}"));
            summary.push_str(&format!(
                "{}{}: {} {}: {verdict}\n",
                escape_controls(&source),
                at.unwrap_or_default(),
                object.kind(),
                escape_controls(object.name())
            ));
        }
    }
    print_stdout(&summary);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The few facts an operator wants to confirm at a glance.
fn describe(object: &Object) -> String {
    match object {
        Object::NodePool(np) => {
            let t = &np.spec.template.spec;
            let budgets = np.spec.disruption.budgets.len();
            let mut parts = vec![
                format!(
                    "{} requirement{}",
                    t.requirements.len(),
                    plural(t.requirements.len())
                ),
                format!("{budgets} budget{}", plural(budgets)),
                format!("{:?}", np.spec.disruption.consolidation_policy),
                format!("expireAfter {}", t.expire_after),
                format!(
                    "nodeClassRef {}/{}",
                    t.node_class_ref.kind, t.node_class_ref.name
                ),
            ];
            if let Some(w) = np.spec.weight {
                parts.push(format!("weight {w}"));
            }
            parts.join(", ")
        }
        Object::NodeClaim(nc) => {
            let pool = nc
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(karpenter_tui::api::labels::NODEPOOL))
                .map(String::as_str)
                .unwrap_or("no nodepool label");
            let node = nc
                .status
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or("not registered");
            format!(
                "{} requirement{}, {pool}, node {node}",
                nc.spec.requirements.len(),
                plural(nc.spec.requirements.len())
            )
        }
        Object::EC2NodeClass(nc) => {
            let s = &nc.spec;
            let ami = s
                .ami_selector_terms
                .iter()
                .find_map(|t| t.alias.clone())
                .map(|a| format!("alias {a}"))
                .unwrap_or_else(|| {
                    format!(
                        "{} AMI term{}",
                        s.ami_selector_terms.len(),
                        plural(s.ami_selector_terms.len())
                    )
                });
            let iam = match (&s.role, &s.instance_profile) {
                (Some(r), _) => format!("role {r}"),
                (_, Some(p)) => format!("instanceProfile {p}"),
                _ => "no IAM".to_string(),
            };
            format!(
                "{ami}, {iam}, {} subnet term{}, {} security group term{}",
                s.subnet_selector_terms.len(),
                plural(s.subnet_selector_terms.len()),
                s.security_group_selector_terms.len(),
                plural(s.security_group_selector_terms.len())
            )
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn run_migrate(path: &Path) -> ExitCode {
    let (source, text) = match read_input(path) {
        Ok(x) => x,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::FAILURE;
        }
    };
    match migrate::migrate(&source, &text) {
        Ok(out) => {
            for w in &out.warnings {
                eprintln!("{w}");
            }
            print_stdout(&out.yaml);
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("{e}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run_bench(b: Bench) -> ExitCode {
    match b {
        Bench::Scheduling {
            pods,
            json,
            seed,
            repeat,
        } => {
            if !json {
                println!(
                    "{:>8} {:>7} {:>9} {:>11} {:>9} {:>11}",
                    "pods", "nodes", "ms", "pods/s", "ffd nodes", "unscheduled"
                );
            }
            for n in pods {
                let f = karpenter_tui::bench::scheduling::run(n, seed, repeat);
                if json {
                    println!(
                        "{}",
                        serde_json::json!({"pods": f.pods, "nodes": f.nodes, "seconds": f.seconds, "pods_per_second": f.pods_per_second})
                    );
                } else {
                    println!(
                        "{:>8} {:>7} {:>9.1} {:>11.0} {:>9} {:>11}",
                        f.pods,
                        f.nodes,
                        f.seconds * 1000.0,
                        f.pods_per_second,
                        f.ffd_nodes,
                        f.unscheduled
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Bench::Disruption {
            nodes,
            pods,
            json,
            seed,
            repeat,
            unchanged,
        } => {
            let d = karpenter_tui::bench::disruption::run(nodes, pods, seed, repeat);
            let f = &d.figures;
            let inc = unchanged
                .then(|| karpenter_tui::bench::disruption::incremental(nodes, pods, seed, repeat));
            if json {
                println!(
                    "{}",
                    serde_json::json!({"nodes": f.nodes, "pods": f.pods, "seconds": f.seconds, "candidates_evaluated": f.candidates_evaluated, "decisions": f.decisions, "incremental": inc})
                );
            } else {
                println!(
                    "{} nodes, {} pods: one pass in {:.1} ms (best of {repeat}), {} candidate evaluations, {} decision(s)",
                    f.nodes,
                    f.pods,
                    f.seconds * 1000.0,
                    f.candidates_evaluated,
                    f.decisions
                );
                let outcomes: Vec<String> =
                    d.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
                println!("outcomes: {}", outcomes.join(", "));
                if let Some(c) = &d.command {
                    println!("command: {c}");
                }
                if let Some(i) = &inc {
                    println!("{i}");
                }
            }
            ExitCode::SUCCESS
        }
        Bench::Snapshot {
            nodes,
            pods,
            repeat,
        } => {
            let f = karpenter_tui::bench::snapshot::run(nodes, pods, repeat);
            println!("{f}");
            ExitCode::SUCCESS
        }
        Bench::Simulate {
            scenario,
            until,
            watch,
            json,
        } => run_bench_simulate(scenario.as_deref(), &until, watch, json),
        Bench::Fuzz {
            cases,
            seed,
            processes,
            corpus,
            keep,
            json,
        } => {
            use karpenter_tui::bench::fuzz;
            let run = if processes {
                fuzz::processes(&corpus, cases, seed, keep.as_deref())
            } else {
                fuzz::in_process(&corpus, cases, seed, keep.as_deref())
            };
            let report = match run {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("bench fuzz: {e}");
                    return ExitCode::FAILURE;
                }
            };
            if json {
                println!("{}", serde_json::json!(report));
            } else {
                print!("{}", fuzz::table(&report, processes));
            }
            let broken =
                report.panics + report.crashes + report.timeouts + report.memory_over_bound;
            if broken == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Bench::Render {
            nodes,
            pods,
            frames,
            json,
        } => {
            let f = karpenter_tui::bench::render::run(nodes, pods, frames, 160, 45);
            if json {
                for v in &f.views {
                    println!("{}", serde_json::json!(v));
                }
                println!(
                    "{}",
                    serde_json::json!({"nodes": f.nodes, "pods": f.pods, "idle_redraws_per_minute": f.idle_redraws_per_minute, "key_to_frame_ms": f.key_to_frame_ms, "snapshot_to_frame_ms": f.snapshot_to_frame_ms, "busy_controller": f.busy})
                );
            } else {
                println!(
                    "{} nodes, {} pods, {}x{} cells, {frames} frames per view",
                    f.nodes, f.pods, f.width, f.height
                );
                println!(
                    "{:<12} {:>12} {:>14} {:>18}",
                    "view", "ms/frame", "ms rows/snap", "ms snap to frame"
                );
                for v in &f.views {
                    println!(
                        "{:<12} {:>12.3} {:>14.2} {:>18.2}",
                        v.view, v.ms_per_frame, v.ms_rows, v.ms_snapshot_to_frame
                    );
                }
                println!(
                    "idle redraws/minute: {}; key press to frame: {:.3} ms; snapshot to frame (nodes view): {:.2} ms",
                    f.idle_redraws_per_minute, f.key_to_frame_ms, f.snapshot_to_frame_ms
                );
                let b = &f.busy;
                println!(
                    "key press to frame beside a saturated controller (the 1,000-node day, {:.0} simulated minutes, {} snapshots, {} nodes): mean {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} presses",
                    b.simulated_minutes,
                    b.snapshots,
                    b.nodes,
                    b.mean_ms,
                    b.p99_ms,
                    b.max_ms,
                    b.presses
                );
            }
            ExitCode::SUCCESS
        }
    }
}

/// Reads and checks a scenario, printing every problem as FILE:LINE: path: message.
fn load_scenario(path: Option<&Path>) -> Result<Scenario, ExitCode> {
    let (source, text) = match path {
        None => ("demo".to_string(), scenario::DEMO.to_string()),
        Some(p) => read_input(p).map_err(|msg| {
            eprintln!("{msg}");
            ExitCode::FAILURE
        })?,
    };
    scenario::parse(&source, &text).map_err(|errors| {
        for e in &errors {
            eprintln!("{e}");
        }
        ExitCode::FAILURE
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("karpenter-tui: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        })
}

fn run_simulate(
    path: &Path,
    until: Option<&str>,
    options: simulation::Options,
    notify: &[String],
) -> ExitCode {
    let scenario = match load_scenario(Some(path)) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let until = match until.map(|u| scenario::spec_duration(u).and_then(scenario::check_run_length))
    {
        None => scenario.duration,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            eprintln!("--until: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Simulation::new fails on options (the journal, approval rules), and its errors
    // name what failed; the scenario was read already.
    let mut sim = match Simulation::new(&scenario, &options, Pace::Virtual) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    for w in &sim.warnings {
        eprintln!("warning: {w}");
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    if let Err(code) = notify_from(&mut sim, &rt, notify) {
        return code;
    }
    let out = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let mut closed = false;
    let mut write = |e: &karpenter_tui::control::events::Event| {
        if closed {
            return;
        }
        let line = serde_json::to_string(e).unwrap_or_default();
        if writeln!(out, "{line}").is_err() {
            // `| head`: the reader has seen enough.
            closed = true;
        }
    };
    let end = sim.start() + until;
    rt.block_on(sim.run_until(end, &mut write));
    write(&sim.summary());
    let st = sim.controller.stats();
    tracing::info!(
        "{} disruption passes in {:.2} s, {} provisioning rounds in {:.2} s",
        st.passes,
        st.pass_seconds,
        st.provisioning_rounds,
        st.provisioning_seconds
    );
    let _ = out.flush();
    flush_notifications(&mut sim, &rt);
    let failures = sim.journal_failures();
    for f in &failures {
        eprintln!("simulate: {f}");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `whatif`: the scenario to `at`, then the two futures.
fn run_whatif(
    path: &Path,
    question: &str,
    at: &str,
    options: simulation::Options,
    json: bool,
) -> ExitCode {
    let query = match karpenter_tui::control::whatif::Query::parse(question) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("whatif: {e}");
            return ExitCode::FAILURE;
        }
    };
    let scenario = match load_scenario(Some(path)) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let at = match scenario::spec_duration(at).and_then(scenario::check_run_length) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("--at: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Refused before the run to --at, which can take a while: a pool the scenario does
    // not have, or an edit its pool refuses (checked again at the fork, where the
    // timeline may have changed the pool).
    let pool = scenario
        .nodepools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(query.edit.nodepool.as_str()));
    let checked = match pool {
        None => Err(format!(
            "no NodePool {:?} in {}",
            query.edit.nodepool,
            path.display()
        )),
        Some(p) => scenario::timeline::patch_nodepool(p, &query.edit.patch)
            .map(|_| ())
            .map_err(|e| format!("NodePool {}: {e}", query.edit.nodepool)),
    };
    if let Err(e) = checked {
        eprintln!("whatif: {e}");
        return ExitCode::FAILURE;
    }
    let mut sim = match Simulation::new(&scenario, &options, Pace::Virtual) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let fork_at = sim.start() + at;
    rt.block_on(sim.run_until(fork_at, |_| {}));
    let forks = match karpenter_tui::whatif::Forks::prepare(&sim, &query) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("whatif: {e}");
            return ExitCode::FAILURE;
        }
    };
    let comparison = forks.run();
    if json {
        print_stdout(&format!(
            "{}\n",
            serde_json::to_string(&comparison).unwrap_or_default()
        ));
    } else {
        print_stdout(&format!("{}\n", comparison.text()));
    }
    ExitCode::SUCCESS
}

/// How long a finished run waits for its notifications to be posted.
const NOTIFY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

fn run_bench_simulate(path: Option<&Path>, until: &str, watch: bool, json: bool) -> ExitCode {
    let scenario = match path {
        Some(p) => match load_scenario(Some(p)) {
            Ok(s) => s,
            Err(code) => return code,
        },
        None => match scenario::parse("examples/diurnal-1000.yaml", scenario::DIURNAL_1000) {
            Ok(s) => s,
            Err(errors) => {
                for e in &errors {
                    eprintln!("{e}");
                }
                return ExitCode::FAILURE;
            }
        },
    };
    let until = match scenario::spec_duration(until) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("--until: {e}");
            return ExitCode::FAILURE;
        }
    };
    let f = match karpenter_tui::bench::simulate::run(&scenario, until, watch) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("bench simulate: {e}");
            return ExitCode::FAILURE;
        }
    };
    if json {
        let mut v = serde_json::json!(f);
        v["disruption_share"] = serde_json::json!(f.disruption_share());
        println!("{v}");
        return ExitCode::SUCCESS;
    }
    let cpu = f
        .cpu_seconds
        .map_or_else(|| "unknown (no /proc)".to_string(), |c| format!("{c:.1} s"));
    println!(
        "{:.2} simulated hours in {:.1} s wall, CPU {cpu}; {} rounds, {} snapshots{}",
        f.simulated_seconds / 3600.0,
        f.wall_seconds,
        f.rounds,
        f.snapshots,
        if watch {
            ""
        } else {
            " (no console watching; --watch to hold one)"
        }
    );
    println!(
        "nodes: {} launched, {} deleted, {} at the end; {} evictions; ${:.2} spent",
        f.nodeclaims_created, f.nodeclaims_deleted, f.nodes, f.evictions, f.cost
    );
    println!(
        "disruption: {} full passes in {:.1} s ({:.0}% of the run); provisioning: {} rounds in {:.1} s",
        f.disruption_passes,
        f.disruption_seconds,
        f.disruption_share() * 100.0,
        f.provisioning_rounds,
        f.provisioning_seconds
    );
    println!(
        "simulations: {} run, {} verdicts carried over from an earlier pass; audits found {} unreported node changes, {} pod index misses, {} record index misses",
        f.simulations, f.carried, f.audit_misses, f.pod_index_misses, f.record_index_misses
    );
    ExitCode::SUCCESS
}

/// The scenario, its simulation on a scaled real-time clock, and a runtime to drive it.
fn live_world(
    path: Option<&Path>,
    speed: f64,
    approval: Option<Vec<String>>,
    notify: &[String],
) -> Result<(Scenario, Simulation, tokio::runtime::Runtime), ExitCode> {
    let scenario = load_scenario(path)?;
    let options = simulation::Options {
        approval,
        ..Default::default()
    };
    let mut sim = Simulation::new(&scenario, &options, Pace::RealTime { speed }).map_err(|e| {
        eprintln!("karpenter-tui: {e}");
        ExitCode::FAILURE
    })?;
    let rt = runtime()?;
    notify_from(&mut sim, &rt, notify)?;
    Ok((scenario, sim, rt))
}

/// Posts the simulation's notifications to the `--notify` webhooks, if any.
fn notify_from(
    sim: &mut Simulation,
    rt: &tokio::runtime::Runtime,
    urls: &[String],
) -> Result<(), ExitCode> {
    if urls.is_empty() {
        return Ok(());
    }
    let _entered = rt.enter();
    match karpenter_tui::control::notify::Notifier::start(urls) {
        Ok(n) => {
            sim.controller.set_notifier(n);
            Ok(())
        }
        Err(e) => {
            eprintln!("karpenter-tui: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// Gives the notifications still queued [`NOTIFY_PATIENCE`] to go out.
fn flush_notifications(sim: &mut Simulation, rt: &tokio::runtime::Runtime) {
    if let Some(n) = sim.controller.take_notifier() {
        rt.block_on(n.close(NOTIFY_PATIENCE));
    }
}

/// The default run on a terminal: the console over the embedded cluster in real time
/// (times `speed`), until the operator quits.
fn run_console(
    path: Option<&Path>,
    speed: f64,
    approval: Option<Vec<String>>,
    notify: &[String],
    opts: &launch::Options,
    pane: LogPane,
) -> ExitCode {
    let (scenario, sim, rt) = match live_world(path, speed, approval, notify) {
        Ok(w) => w,
        Err(code) => return code,
    };
    let label = format!("embedded simulation: {} at {speed}x", scenario.name);
    match rt.block_on(run_embedded(sim, label, opts, pane)) {
        Ok((sim, stats)) => {
            if let Some(mut sim) = sim {
                println!("{}", sim.summary().kind);
                flush_notifications(&mut sim, &rt);
            }
            println!(
                "karpenter-tui: {} frames for {} snapshots and {} keys",
                stats.frames, stats.snapshots, stats.keys
            );
            match stats.exit.failure() {
                None => ExitCode::SUCCESS,
                Some((message, code)) => {
                    eprintln!("karpenter-tui: {message}");
                    ExitCode::from(code)
                }
            }
        }
        Err(e) => {
            eprintln!("karpenter-tui: terminal: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the console over the embedded simulation until the operator quits. Returns the
/// simulation (for the closing summary) and the console loop's counters.
async fn run_embedded(
    mut sim: Simulation,
    label: String,
    opts: &launch::Options,
    log: LogPane,
) -> std::io::Result<(Option<Simulation>, karpenter_tui::tui::terminal::LoopStats)> {
    let snapshots = sim.controller.subscribe();
    let opts = &launch::Options {
        rate: Some(sim.rate()),
        ..opts.clone()
    };
    launch::run_backend(snapshots, label, None, opts, log, move |requests, actor| {
        tokio::spawn(sim.serve(requests, actor))
    })
    .await
}

fn run_screenshot(
    scenario: Option<&Path>,
    view: &str,
    opts: &launch::Options,
    size: &str,
    at: Option<&str>,
    out: &Path,
    whatif: Option<&str>,
) -> ExitCode {
    let at = match at.map(karpenter_tui::api::duration::GoDuration::parse) {
        None => None,
        Some(Ok(d)) => match d.value() {
            Some(v) => Some(v),
            None => {
                eprintln!("karpenter-tui: --at {at:?}: must be a finite duration");
                return ExitCode::FAILURE;
            }
        },
        Some(Err(e)) => {
            eprintln!("karpenter-tui: --at: {e}");
            return ExitCode::FAILURE;
        }
    };
    let scenario = match scenario.map(|p| load_scenario(Some(p))).transpose() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(karpenter_tui::demo::screenshot(
        scenario.as_ref(),
        view,
        opts,
        size,
        at,
        out,
        whatif,
    )) {
        Ok(()) => {
            println!("{}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("karpenter-tui: screenshot: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The default run when standard output is not a terminal (piped, logged): the embedded
/// cluster in real time, every event as a line, until Ctrl-C.
fn run_demo(
    path: Option<&Path>,
    speed: f64,
    approval: Option<Vec<String>>,
    notify: &[String],
) -> ExitCode {
    let (scenario, mut sim, rt) = match live_world(path, speed, approval, notify) {
        Ok(w) => w,
        Err(code) => return code,
    };
    println!(
        "karpenter-tui: scenario {:?} on the embedded cluster at {speed}x real time; Ctrl-C stops.",
        scenario.name
    );
    rt.block_on(async {
        let stop = tokio::signal::ctrl_c();
        tokio::pin!(stop);
        loop {
            for e in sim.step().await {
                let minutes = (e.t / 60.0).floor();
                let line = format!("{:>3}:{:04.1}  {}\n", minutes, e.t - minutes * 60.0, e.kind);
                print_stdout(&line);
            }
            let next = sim.next_time();
            tokio::select! {
                _ = &mut stop => break,
                _ = sim.wait_until(next) => {}
            }
        }
    });
    print_stdout(&format!("{}\n", sim.summary().kind));
    flush_notifications(&mut sim, &rt);
    ExitCode::SUCCESS
}
