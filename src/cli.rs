//! Command-line surface: flags, subcommands and their help text. Parsing only; the work
//! happens in the library.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// karpenter-tui: a terminal console for Kubernetes node autoscaling (Karpenter v1).
///
/// Without a subcommand it runs the autoscaler on an embedded simulated cluster (the
/// built-in demo scenario, or --scenario) in real time and shows what happens, live. The
/// subcommands simulate scenarios headless, check, convert and install Karpenter
/// manifests, and measure the engine.
#[derive(Parser, Debug)]
#[command(name = "karpenter-tui", version, about, long_about)]
pub struct Cli {
    /// Log level as upstream names it (debug, info, warn, error), or a tracing filter
    /// ("info,karpenter_tui=debug"). The console logs to its log pane.
    #[arg(long, global = true, env = "LOG_LEVEL", default_value = "warn",
          value_parser = parse_log_level)]
    pub log_level: String,

    /// Speed of the embedded cluster's clock: 1 is real time, 10 runs ten simulated
    /// seconds per second. Between 0.001 and 1,000,000.
    #[arg(long, default_value_t = 1.0, value_name = "X", value_parser = parse_speed)]
    pub speed: f64,

    /// Scenario to run instead of the built-in demo (see docs/scenarios.md).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,

    /// Approval policy for disruption decisions: auto (every decision runs on its own),
    /// manual (every decision waits for an operator), or default (the scenario's rules,
    /// else: Underutilized and Drifted wait, Empty and Expired run).
    #[arg(long, value_enum, default_value_t = Approve::Default, global = true)]
    pub approve: Approve,

    /// Console theme: a built-in name (dark, light, high-contrast, transparent), a name
    /// from ~/.config/karpenter-tui/themes/, or a path to a TOML file. Default: the
    /// config file's, else dark. NO_COLOR (set, not empty) drops colours.
    #[arg(long, global = true, value_name = "NAME|FILE")]
    pub theme: Option<String>,

    /// Console config file (default ~/.config/karpenter-tui/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Key bindings file (default ~/.config/karpenter-tui/keymap.toml; see
    /// config/keymap.toml for every action).
    #[arg(long, global = true, value_name = "FILE")]
    pub keymap: Option<PathBuf>,

    /// Refuse every action that changes the cluster (approve, reject, pause).
    #[arg(long)]
    pub read_only: bool,

    /// Post each decision awaiting approval, execution, failure, pause (the circuit
    /// breaker's trip among them) and resume to this webhook, as JSON with a Slack
    /// `text` field; repeatable, or comma-separated in the environment. Never holds up
    /// the control loop; retried with backoff.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "KARPENTER_TUI_NOTIFY",
        value_delimiter = ','
    )]
    pub notify: Vec<String>,

    /// The largest file (manifest, scenario, theme, keymap, config) read, in bytes or
    /// with a unit (64MiB, 1GiB). Larger input is refused by name before it is parsed.
    #[arg(long, global = true, value_name = "SIZE", default_value = "64MiB",
          value_parser = karpenter_tui::api::input::parse_size)]
    pub max_input_size: u64,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check NodePool, NodeClaim and EC2NodeClass manifests against the Karpenter v1 rules.
    ///
    /// Reads multi-document YAML and applies the same schema and CEL rules the CRDs carry.
    /// Prints one summary line per object; every problem is printed as
    /// FILE:LINE: field.path: message (FILE:LINE:COLUMN: for problems in the text itself).
    /// Exits 1 if any object is invalid.
    Validate {
        /// Manifest file to read, or "-" for standard input. Repeat for several files.
        #[arg(short = 'f', long = "file", required = true, value_name = "FILE|-")]
        files: Vec<PathBuf>,
    },
    /// Print the CRDs of NodePool, NodeClaim and EC2NodeClass, ready for `kubectl apply -f -`.
    ///
    /// The schemas carry the validation rules as x-kubernetes-validations (CEL), so the API
    /// server enforces what `validate` checks.
    Crds,
    /// Convert v1beta1 manifests to karpenter.sh/v1 and karpenter.k8s.aws/v1.
    ///
    /// Prints the converted YAML on stdout and every change, and every step it cannot do
    /// for you, as a warning on stderr. Input it cannot convert is an error (exit 1).
    Migrate {
        /// Manifest file to read, or "-" for standard input.
        #[arg(short = 'f', long = "file", value_name = "FILE|-")]
        file: PathBuf,
    },
    /// Print a disruption journal (written by `simulate --journal`) for a review: one line
    /// per proposal, approval, rejection, pause and execution, oldest first. A torn last
    /// line (a crash while writing) is reported on stderr and skipped.
    Journal {
        /// The journal file (JSON lines).
        file: PathBuf,
        /// Print the entries as one JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario headless on a virtual clock, as fast as the CPU allows, printing one
    /// JSON object per line per event (the format is documented in docs/simulate.md).
    ///
    /// A bad scenario fails before the run starts, with FILE:LINE: field.path: message.
    Simulate {
        /// Scenario file (see docs/scenarios.md; examples/demo.yaml is the built-in demo).
        scenario: PathBuf,
        /// Simulated time to run, as a duration (90s, 10m, 24h); the scenario's duration
        /// when not given.
        #[arg(long, value_name = "DURATION")]
        until: Option<String>,
        /// Seed of every random choice; the scenario's when not given. The same file and
        /// seed give the same output.
        #[arg(long)]
        seed: Option<u64>,
        /// Append the disruption journal (JSON lines) to this file.
        #[arg(long, value_name = "PATH")]
        journal: Option<PathBuf>,
    },
    /// What if a NodePool were different? Plays SCENARIO to --at, then plays the next
    /// hours twice from there, as they are and with the edit, and prints cost and churn
    /// side by side (the console's `:whatif`, headless).
    ///
    /// Both runs restart the controller at the fork and approve every decision. The
    /// scenario can be one `export` wrote from a live cluster.
    #[command(name = "whatif")]
    WhatIf {
        /// Scenario file (see docs/scenarios.md).
        scenario: PathBuf,
        /// The question: [DURATION] NODEPOOL FIELD=VALUE... (fields under spec, e.g.
        /// disruption.consolidateAfter=10m), or [DURATION] NODEPOOL followed by a JSON
        /// merge patch of the NodePool. DURATION is how far ahead (default 6h).
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true, value_name = "QUESTION")]
        question: Vec<String>,
        /// Simulated time since the scenario's start at which both runs fork.
        #[arg(long, default_value = "0s", value_name = "DURATION")]
        at: String,
        /// Seed of every random choice; the scenario's when not given.
        #[arg(long)]
        seed: Option<u64>,
        /// Print the comparison as one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Render one console view of the built-in demo (or of --scenario FILE), stopped at
    /// a fixed simulated time, to SVG or PNG (by the file's extension).
    Screenshot {
        /// overview, nodepools, nodes, pending, disruption, events or help.
        #[arg(long, default_value = "overview")]
        view: String,
        /// Terminal size in cells, COLSxROWS.
        #[arg(long, default_value = "160x45", value_name = "COLSxROWS")]
        size: String,
        /// Simulated time since the demo's start (a duration: 70s, 2m). Default: 70s
        /// (decisions waiting, a budget window closed), 3m10s for pending (the spot
        /// capacity outage).
        #[arg(long, value_name = "DURATION")]
        at: Option<String>,
        /// Output file: .svg or .png.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Ask `:whatif QUESTION` at that moment and show its answer over the view
        /// (e.g. "4h web disruption.consolidationPolicy=WhenEmptyOrUnderutilized").
        #[arg(long, value_name = "QUESTION")]
        whatif: Option<String>,
    },
    /// Run the autoscaler against a real cluster, with the console: the same controller
    /// as the demo, acting through the Kubernetes API (NodeClaims, taints, evictions).
    ///
    /// With --cloud sim (the default) the simulated cloud creates Ready Node objects for
    /// the built-in catalog (like Karpenter's KWOK provider), so a cluster without a cloud
    /// can be exercised. Run it only where no other autoscaler acts on the same pools.
    Run {
        #[command(flatten)]
        kube: KubeArgs,
        #[command(flatten)]
        cloud: CloudArgs,
        #[command(flatten)]
        leader: LeaderArgs,
        #[command(flatten)]
        features: FeatureArgs,
    },
    /// The console attached to a cluster where a controller already runs: ours (found by
    /// its Lease) or upstream Karpenter (found by its API). Nothing runs locally but an
    /// engine that explains what it sees.
    ///
    /// Read-only unless --write. With our controller, approve/reject/pause go through the
    /// approval protocol (docs/attach.md); with upstream Karpenter, approve deletes the
    /// candidate NodeClaims and pause sets the pool's budgets to zero (restored exactly on
    /// resume).
    Attach {
        #[command(flatten)]
        kube: KubeArgs,
        /// Allow approve, reject and pause (they change the cluster).
        #[arg(long)]
        write: bool,
    },
    /// The headless controller, as it runs in-cluster (deploy/): leader election on a
    /// Lease, /metrics, /healthz and /readyz, graceful shutdown on SIGTERM.
    Controller {
        #[command(flatten)]
        kube: KubeArgs,
        #[command(flatten)]
        cloud: CloudArgs,
        /// Where /metrics, /healthz and /readyz are served.
        #[arg(long, default_value = "0.0.0.0:8080", value_name = "ADDR:PORT")]
        metrics_addr: String,
        #[command(flatten)]
        leader: LeaderArgs,
        #[command(flatten)]
        features: FeatureArgs,
    },
    /// Write a cluster as a scenario file on stdout: its NodePools, EC2NodeClasses,
    /// running nodes (NodeClaims), workloads (at their current pod counts),
    /// DaemonSets and PodDisruptionBudgets, starting now. `whatif` and `simulate` play
    /// its future; what could not be carried over is said on stderr.
    Export {
        #[command(flatten)]
        kube: KubeArgs,
    },
    /// Measure the engine (release builds only give meaningful figures).
    #[command(subcommand)]
    Bench(Bench),
    /// Print a shell completion script: `karpenter-tui completions bash >
    /// /etc/bash_completion.d/karpenter-tui`, or for zsh into a directory on $fpath as
    /// `_karpenter-tui`, or for fish into ~/.config/fish/completions/karpenter-tui.fish.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `karpenter-tui man > karpenter-tui.1; man
    /// ./karpenter-tui.1`. It documents every subcommand and flag.
    Man,
}

/// Where a cluster is.
#[derive(clap::Args, Debug, Clone)]
pub struct KubeArgs {
    /// kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace of the controller's Lease and of the settings ConfigMap.
    #[arg(long, env = "POD_NAMESPACE", default_value = "karpenter-tui")]
    pub namespace: String,
}

/// Upstream Karpenter's settings that change what the engine decides, under upstream's
/// flag meanings and environment variable names (its `pkg/operator/options`).
#[derive(clap::Args, Debug, Clone)]
pub struct FeatureArgs {
    /// Feature gates as upstream spells them: `SpotToSpotConsolidation=true` lets
    /// consolidation replace a spot node with a cheaper spot node (off by default, as
    /// upstream). Gates this build does not know are refused.
    #[arg(
        long,
        env = "FEATURE_GATES",
        default_value = "",
        value_name = "GATE=BOOL,..."
    )]
    pub feature_gates: String,
    /// What a NodePool's `minValues` does when the offerings cannot meet it: Strict
    /// (nothing launches, as before v1.6) or BestEffort (relaxed to what is available,
    /// and the NodeClaim annotated `karpenter.sh/nodeclaim-min-values-relaxed`).
    #[arg(
        long,
        env = "MIN_VALUES_POLICY",
        default_value = "Strict",
        value_name = "Strict|BestEffort"
    )]
    pub min_values_policy: String,
    /// How the scheduler treats preferred node and pod (anti-)affinity and
    /// ScheduleAnyway topology spreads: Respect (try them first, relax them one at a time
    /// when a pod does not fit) or Ignore (schedule by required constraints only).
    #[arg(
        long,
        env = "PREFERENCE_POLICY",
        default_value = "Respect",
        value_name = "Respect|Ignore"
    )]
    pub preference_policy: String,
    /// The longest a provisioning batch stays open: pending pods that arrive within it
    /// are planned together, which usually gives fewer, larger nodes.
    #[arg(
        long,
        env = "BATCH_MAX_DURATION",
        default_value = "10s",
        value_name = "DURATION"
    )]
    pub batch_max_duration: String,
    /// A batch closes when no new pending pod arrived for this long.
    #[arg(
        long,
        env = "BATCH_IDLE_DURATION",
        default_value = "1s",
        value_name = "DURATION"
    )]
    pub batch_idle_duration: String,
    /// Split consolidation (not an upstream setting): a node no single cheaper node can
    /// replace may be replaced by several (at most 4) cheaper ones when they save at
    /// least PERCENT of its price. Off unless given; the flag alone asks 20%.
    #[arg(
        long,
        env = "KARPENTER_TUI_SPLIT_CONSOLIDATION",
        value_name = "PERCENT",
        num_args = 0..=1,
        default_missing_value = "20"
    )]
    pub split_consolidation: Option<f64>,
}

impl FeatureArgs {
    /// The settings, or what is wrong with the flags.
    pub fn parse(&self) -> Result<karpenter_tui::engine::features::Features, String> {
        use karpenter_tui::engine::features::{Features, SettingsText};
        let f = Features::parse(&SettingsText {
            feature_gates: &self.feature_gates,
            min_values_policy: &self.min_values_policy,
            preference_policy: &self.preference_policy,
            batch_max_duration: &self.batch_max_duration,
            batch_idle_duration: &self.batch_idle_duration,
        })
        .map_err(|(which, why)| {
            let (flag, env, _) = which.names();
            format!("{flag} / {env}: {why}")
        })?;
        let mut f = f;
        f.split_percent = self
            .split_consolidation
            .map(karpenter_tui::engine::features::split_percent)
            .transpose()
            .map_err(|e| format!("--split-consolidation: {e}"))?;
        Ok(f)
    }
}

/// One controller at a time: `run` and `controller` elect a leader on the same Lease
/// (a second one waits as a standby), and neither starts beside upstream Karpenter.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderArgs {
    /// Leader election timings in seconds: lease duration, renew deadline, retry
    /// period (client-go's 15/10/2).
    #[arg(long, default_value = "15,10,2", value_name = "D,R,P")]
    pub lease: String,
    /// Start even though upstream Karpenter holds its Lease (karpenter-leader-election,
    /// renewed within its duration): both controllers would then act on the same
    /// NodeClaims.
    #[arg(long)]
    pub force: bool,
}

/// Which cloud launches nodes, and for `--cloud aws` how to reach EC2 and what nodes must
/// know to join the cluster. Credentials come from the standard AWS chain (environment,
/// profile, SSO, IMDS, web identity) and are never printed.
#[derive(clap::Args, Debug, Clone)]
pub struct CloudArgs {
    #[arg(long, value_enum, default_value_t = Cloud::Sim)]
    pub cloud: Cloud,
    /// AWS region (default: the AWS chain's: AWS_REGION, the profile, IMDS).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// One endpoint URL for EC2, SSM, IAM, SQS and Pricing (an emulator; default: AWS's, or
    /// AWS_ENDPOINT_URL).
    #[arg(long, value_name = "URL")]
    pub aws_endpoint: Option<String>,
    /// The cluster's name: instances are tagged kubernetes.io/cluster/NAME and found by
    /// it. Required with --cloud aws.
    #[arg(long, env = "CLUSTER_NAME", value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// The API server URL nodes join (default: the kubeconfig's server).
    #[arg(long, env = "CLUSTER_ENDPOINT", value_name = "URL")]
    pub cluster_endpoint: Option<String>,
    /// The cluster's service CIDR, for the nodes' nodeadm config (nodeadm derives the
    /// cluster DNS address from it); an IPv6 CIDR gives the nodes' interfaces IPv6
    /// prefixes and a primary IPv6 address.
    #[arg(long, value_name = "CIDR")]
    pub cluster_cidr: Option<String>,
    /// The cluster's Kubernetes minor version (1.33), which AMI aliases resolve against
    /// (default: the API server's /version).
    #[arg(long, value_name = "X.Y")]
    pub kubernetes_version: Option<String>,
    /// The SQS queue EventBridge sends EC2's interruption events to (spot interruption,
    /// rebalance, state change, scheduled change): its nodes are drained ahead of the
    /// loss. With --cloud aws; read only while this process leads.
    #[arg(long, env = "INTERRUPTION_QUEUE", value_name = "NAME")]
    pub interruption_queue: Option<String>,
    /// The VPC reaches no AWS service without a VPC endpoint: on-demand prices come from
    /// the built-in table instead of the Pricing API. With --cloud aws.
    #[arg(long, env = "ISOLATED_VPC", value_name = "BOOL", num_args = 0..=1,
          default_value_t = false, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub isolated_vpc: bool,
    /// ENIs of each instance kept for other uses (VPC CNI custom networking): they count
    /// neither toward max pods nor toward the kube-reserved memory max pods sets. With
    /// --cloud aws.
    #[arg(long, env = "RESERVED_ENIS", default_value_t = 0, value_name = "N")]
    pub reserved_enis: u32,
    /// The share of an instance type's memory the hypervisor keeps (0.075 is 7.5%),
    /// taken off its capacity until a node of the type reports its own. With --cloud aws.
    #[arg(long, env = "VM_MEMORY_OVERHEAD_PERCENT", default_value_t = 0.075,
          value_name = "FRACTION", value_parser = parse_vm_overhead)]
    pub vm_memory_overhead_percent: f64,
}

/// `--vm-memory-overhead-percent`: a fraction of memory, at least 0 and below 1, as
/// upstream takes it (0.075, not 7.5).
fn parse_vm_overhead(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if (0.0..1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "{text:?}: expected a fraction of memory at least 0 and below 1 (0.075 is 7.5%)"
        )),
    }
}

/// `--cloud`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloud {
    /// Node objects for the built-in catalog, no instances (KWOK-style).
    Sim,
    /// EC2 (the AWS provider).
    Aws,
}

/// `--approve`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approve {
    Auto,
    Manual,
    Default,
}

impl Approve {
    /// The approval rules it stands for; None keeps the scenario's.
    pub fn rules(self) -> Option<Vec<String>> {
        match self {
            Approve::Auto => Some(vec!["auto".into()]),
            Approve::Manual => Some(vec!["manual".into()]),
            Approve::Default => None,
        }
    }
}

/// What to measure.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Karpenter's scheduling benchmark: 400 synthetic instance types and a mix of generic,
    /// zonal-spread, hostname-spread, zonal-affinity and hostname-anti-affinity pods.
    /// Only the solve is timed.
    Scheduling {
        /// Pods per run; repeat for several sizes.
        #[arg(long = "pods", default_values_t = [1000, 5000, 20000])]
        pods: Vec<usize>,
        /// Print one JSON object per size instead of a table.
        #[arg(long)]
        json: bool,
        /// Seed of the workload and catalog generators.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Runs per size; the fastest is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// One full disruption pass (emptiness, drift, multi- and single-node consolidation,
    /// every candidate evaluated and explained) over a generated cluster. Only the pass is
    /// timed.
    Disruption {
        /// Nodes in the generated cluster.
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        /// Pods in the generated cluster (placed first-fit on random nodes).
        #[arg(long, default_value_t = 50000)]
        pods: usize,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Seed of the cluster generator.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Passes; the fastest is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Also time the incremental passes of a planner that ran the first: over the
        /// same cluster 10 s later, and after one pod went; each is checked against a
        /// full pass.
        #[arg(long)]
        unchanged: bool,
    },
    /// The cost of publishing a controller snapshot: building it, and the copy-on-write
    /// of the cluster state on the first change after it (what a console holding the
    /// snapshot costs the controller).
    Snapshot {
        /// Nodes of the generated cluster; 0 simulates the cluster into place through the
        /// controller instead (ten pods per node).
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 50000)]
        pods: usize,
        /// Repeats; the fastest is reported.
        #[arg(long, default_value_t = 5)]
        repeat: usize,
    },
    /// A simulated day's cost: the scenario runs flat out on a virtual clock with every
    /// disruption auto-approved (as `simulate --approve auto`), and the simulated time
    /// covered, wall and CPU seconds, churn and the disruption passes' share are printed.
    Simulate {
        /// Scenario file; the 1,000-node day (examples/diurnal-1000.yaml, built in) when
        /// not given.
        #[arg(long, value_name = "FILE")]
        scenario: Option<PathBuf>,
        /// Simulated time to run, as a duration (90s, 10m, 24h).
        #[arg(long, default_value = "24h", value_name = "DURATION")]
        until: String,
        /// Hold a snapshot receiver as a console does, so the controller publishes
        /// snapshots (and pays for them); `simulate` runs without one.
        #[arg(long)]
        watch: bool,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Mutation fuzzing on stable Rust over the corpus in fuzz/corpus/: every parser
    /// in-process (a fuzz session: cases and CPU time), or with --processes one
    /// validate, migrate or simulate process per case, each timed and its peak memory
    /// measured (no panic, no run over 5 s, RSS within 20x input + 50 MB).
    Fuzz {
        /// Generated cases.
        #[arg(long, default_value_t = 10_000)]
        cases: usize,
        /// Seed of the mutations; the same seed gives the same cases.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run each case as its own process of this binary (the acceptance run).
        #[arg(long)]
        processes: bool,
        /// The corpus directory (one subdirectory per target).
        #[arg(long, default_value = "fuzz/corpus", value_name = "DIR")]
        corpus: PathBuf,
        /// Write every case that panicked, crashed, ran over 5 s or broke the memory
        /// bound to this directory.
        #[arg(long, value_name = "DIR")]
        keep: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Console frame render time per view over the disruption benchmark's cluster (drawn
    /// off-screen at 160x45), plus idle redraws and key-press-to-frame latency.
    Render {
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        #[arg(long, default_value_t = 50000)]
        pods: usize,
        /// Frames per view.
        #[arg(long, default_value_t = 200)]
        frames: usize,
        /// One JSON object per view ({"view": V, "ms_per_frame": F}), then one with the
        /// other figures.
        #[arg(long)]
        json: bool,
    },
}

/// The fastest `--speed`: a simulated day in under a tenth of a second of wall time, far
/// past what a console can show; beyond it the clock's arithmetic leaves any sense.
pub const MAX_SPEED: f64 = 1_000_000.0;

/// The slowest `--speed`: a simulated second every 17 minutes.
pub const MIN_SPEED: f64 = 0.001;

/// `--log-level` / `LOG_LEVEL`, refused by name when tracing cannot read it (a typo
/// used to log at warn without a word).
/// A lone word must be a level: tracing would read `inof` as a target to log at every
/// level, which nothing is named.
fn parse_log_level(text: &str) -> Result<String, String> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let refused = |why: String| {
        format!("{text:?}: expected debug, info, warn or error, or a tracing filter{why}")
    };
    let word = text.trim();
    if !word.contains(['=', ',', '[', ':']) && !LEVELS.contains(&word.to_ascii_lowercase().as_str())
    {
        return Err(refused(String::new()));
    }
    tracing_subscriber::EnvFilter::try_new(text)
        .map(|_| text.to_string())
        .map_err(|e| refused(format!(" ({e})")))
}

/// `--speed` as a number of simulated seconds per wall second, within
/// [`MIN_SPEED`]..=[`MAX_SPEED`], refused with the range otherwise.
fn parse_speed(text: &str) -> Result<f64, String> {
    let speed: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number such as 1 or 60, found {text:?}"))?;
    if !(MIN_SPEED..=MAX_SPEED).contains(&speed) {
        return Err(format!(
            "{text} is out of range: the speed must be between {MIN_SPEED} and {MAX_SPEED} \
             (simulated seconds per second)"
        ));
    }
    Ok(speed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--speed 1e15` used to be accepted and panic the clock on its first tick; a speed
    /// out of range or not a number is refused by name, with the range.
    #[test]
    fn speed_out_of_range_is_refused_with_the_range() {
        for bad in ["1e15", "0", "-3", "NaN", "inf", "fast"] {
            let err = Cli::try_parse_from(["karpenter-tui".to_string(), format!("--speed={bad}")])
                .expect_err(bad)
                .to_string();
            assert!(err.contains("--speed"), "{bad}: {err}");
            assert!(
                err.contains("between 0.001 and 1000000") || err.contains("expected a number"),
                "{bad}: {err}"
            );
        }
        for good in ["1", "60", "0.5", "1000000"] {
            let cli = Cli::try_parse_from(["karpenter-tui", "--speed", good]).expect(good);
            assert_eq!(cli.speed, good.parse::<f64>().unwrap());
        }
    }
}
