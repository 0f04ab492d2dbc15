//! The binary's cluster modes: `run` (controller + console against a real cluster),
//! `attach` (the console beside a controller already running there) and `controller`
//! (headless, in-cluster). Wiring only; the loops live in the library's `live` module.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use karpenter_tui::cloud::aws::user_data::ClusterInfo;
use karpenter_tui::cloud::aws::{AwsCloud, AwsOptions, price_book};
use karpenter_tui::cloud::kwok::KwokCloud;
use karpenter_tui::cloud::live::LiveCloud;
use karpenter_tui::cloud::prices::{self, PriceBook};
use karpenter_tui::cluster::kube::lease::holding::{self, UPSTREAM_LEASE};
use karpenter_tui::cluster::kube::lease::{LeaderElector, LeaseConfig, default_identity};
use karpenter_tui::cluster::kube::protocol::{self, Remote};
use karpenter_tui::cluster::kube::reach::{causes, reach};
use karpenter_tui::cluster::kube::{self, Connection, KubeCluster};
use karpenter_tui::control::approvals::PolicyTable;
use karpenter_tui::control::clock::SystemClock;
use karpenter_tui::control::controller::{Controller, Settings};
use karpenter_tui::control::endpoints::{Endpoints, Health};
use karpenter_tui::engine::approval::Rule;
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::live::{self, Stop};
use karpenter_tui::tui::logpane::LogPane;
use karpenter_tui::tui::{connecting, launch};
use tokio::sync::watch;

use crate::cli::{Cloud, CloudArgs, FeatureArgs, KubeArgs, LeaderArgs};

/// Spot-to-spot consolidation and the minValues policy (see [`FeatureArgs`]).
use karpenter_tui::engine::features::Features;

/// How long the watches get to list the cluster before the controller gives up.
const SYNC_LIMIT: Duration = Duration::from_secs(120);

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("karpenter-tui: {msg}");
    ExitCode::FAILURE
}

fn policy(rules: Option<Vec<String>>) -> Result<PolicyTable, String> {
    let rules = rules
        .unwrap_or_default()
        .iter()
        .map(|r| Rule::parse(r).map_err(|e| format!("approval rule {r:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PolicyTable {
        rules,
        ..PolicyTable::default()
    })
}

async fn connect(kube: &KubeArgs) -> Result<Connection, String> {
    let mut conn = kube::connect(kube.kubeconfig.as_deref(), kube.context.as_deref()).await?;
    conn.namespace = kube.namespace.clone();
    Ok(conn)
}

/// The cloud the flags choose. `leading` gates the AWS provider's EC2NodeClass status
/// writes to the leader (`None`: this process always leads).
async fn live_cloud(
    conn: &Connection,
    args: &CloudArgs,
    leading: Option<watch::Receiver<bool>>,
    wake: Arc<tokio::sync::Notify>,
) -> Result<(LiveCloud, PriceBook), String> {
    if args.cloud == Cloud::Sim {
        if let Some(queue) = &args.interruption_queue {
            return Err(format!(
                "--interruption-queue {queue} needs --cloud aws: the queue carries EC2's events"
            ));
        }
        let defaults = karpenter_tui::engine::catalog::overhead::CapacityOptions::default();
        if args.isolated_vpc
            || args.reserved_enis != 0
            || args.vm_memory_overhead_percent != defaults.vm_memory_overhead_percent
        {
            tracing::warn!(
                "ISOLATED_VPC, RESERVED_ENIS and VM_MEMORY_OVERHEAD_PERCENT apply to --cloud aws; \
                 --cloud sim's built-in catalog keeps upstream's defaults"
            );
        }
        let catalog = Catalog::builtin_shared();
        let prices = prices::of_catalog(catalog.clone());
        return Ok((
            LiveCloud::Kwok(KwokCloud::new(conn.client.clone(), &catalog)),
            prices,
        ));
    }
    let name = args.cluster_name.clone().ok_or(
        "--cloud aws needs --cluster-name (or CLUSTER_NAME): instances are tagged with it",
    )?;
    let kubernetes_version = match &args.kubernetes_version {
        Some(v) => v.clone(),
        None => {
            let info = conn.client.apiserver_version().await.map_err(|e| {
                format!("reading the API server's /version for AMI aliases ({e}); pass --kubernetes-version")
            })?;
            format!("{}.{}", info.major, info.minor.trim_end_matches('+'))
        }
    };
    let opts = AwsOptions {
        region: args.region.clone(),
        endpoint: args.aws_endpoint.clone(),
        cluster: ClusterInfo {
            name,
            endpoint: args
                .cluster_endpoint
                .clone()
                .unwrap_or_else(|| conn.server.clone()),
            ca_bundle: conn.ca_bundle.clone(),
            cidr: args.cluster_cidr.clone(),
        },
        kubernetes_version,
        max_attempts: 6,
        credentials: None,
        capacity: karpenter_tui::engine::catalog::overhead::CapacityOptions {
            vm_memory_overhead_percent: args.vm_memory_overhead_percent,
            reserved_enis: args.reserved_enis.into(),
        },
        isolated_vpc: args.isolated_vpc,
    };
    let cloud = AwsCloud::connect(opts).await?;
    let handle = cloud.handle();
    if let Some(queue) = &args.interruption_queue {
        karpenter_tui::cloud::aws::interruption::spawn(
            handle.clone(),
            queue.clone(),
            leading.clone(),
            wake.clone(),
        );
    }
    karpenter_tui::cloud::aws::watch::spawn(handle.clone(), conn.client.clone(), leading, wake);
    Ok((LiveCloud::Aws(Box::new(cloud)), price_book(handle)))
}

/// A controller over the cluster with the chosen cloud.
async fn controller(
    conn: &Connection,
    cloud: &CloudArgs,
    policy: PolicyTable,
    features: Features,
    identity: &str,
    leading: Option<watch::Receiver<bool>>,
) -> Result<Controller<KubeCluster, LiveCloud>, String> {
    let wake = Arc::new(tokio::sync::Notify::new());
    let (cloud, prices) = live_cloud(conn, cloud, leading, wake.clone()).await?;
    let cluster = KubeCluster::start(conn, prices, identity);
    // The cloud's background work wakes the loop the watches wake.
    let loop_wake = cluster.wake();
    tokio::spawn(async move {
        loop {
            wake.notified().await;
            loop_wake.notify_one();
        }
    });
    let now = chrono::Utc::now();
    Ok(Controller::new(
        cluster,
        cloud,
        Arc::new(SystemClock),
        Settings {
            policy,
            features,
            journal: None,
            start: now,
            seed: fastrand::u64(..),
        },
    ))
}

/// `export`: the cluster as a scenario on stdout, notes on stderr.
pub fn export(kube: &KubeArgs) -> ExitCode {
    block_on(async {
        let conn = connect(kube).await?;
        let out =
            karpenter_tui::export::export(conn.client, &conn.context, chrono::Utc::now()).await?;
        for n in &out.notes {
            eprintln!("export: {n}");
        }
        let mut stdout = std::io::stdout().lock();
        std::io::Write::write_all(&mut stdout, out.yaml.as_bytes())
            .and_then(|_| std::io::Write::flush(&mut stdout))
            .map_err(|e| format!("writing to stdout: {e}"))
    })
}

/// Runs a command's body on a fresh runtime: its error is printed, exit code 1.
fn block_on(body: impl std::future::Future<Output = Result<(), String>>) -> ExitCode {
    let result = tokio::runtime::Runtime::new()
        .map_err(|e| format!("tokio runtime: {e}"))
        .and_then(|rt| rt.block_on(body));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// What a start step is doing, for the console's connecting screen (headless, the steps
/// log instead).
type Progress = watch::Sender<String>;

/// The election, running: released (after the loop it guards has stopped) by [`Election::release`].
struct Election {
    task: tokio::task::JoinHandle<()>,
    release: watch::Sender<bool>,
}

impl Election {
    fn spawn(elector: LeaderElector) -> Election {
        let (release, mut released) = watch::channel(false);
        let task = tokio::spawn(elector.run(async move {
            let _ = released.wait_for(|r| *r).await;
        }));
        Election { task, release }
    }

    /// Lets go of the lease, so a standby takes over at once; bounded, as the release is.
    async fn release(self) {
        let _ = self.release.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(15), self.task).await;
    }
}

/// Refuses to start while upstream Karpenter holds its Lease (lease/holding.rs), unless
/// `force`: two controllers would act on the same NodeClaims.
async fn guard_upstream(conn: &Connection, force: bool) -> Result<(), String> {
    let refusal = match holding::held(&conn.client, UPSTREAM_LEASE, &conn.namespace).await {
        Ok(found) => holding::upstream_refusal(&found, chrono::Utc::now()),
        Err(e) => Some(format!(
            "cannot read Leases at {} to check for upstream Karpenter's \
             ({UPSTREAM_LEASE}): {}; pass --force to start without the check",
            conn.server,
            causes(&e)
        )),
    };
    match refusal {
        Some(why) if force => {
            tracing::warn!("--force: {why}");
            eprintln!("karpenter-tui: starting anyway (--force): {why}");
            Ok(())
        }
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// A controller that leads, or waits to.
struct Started {
    controller: Controller<KubeCluster, LiveCloud>,
    leader: watch::Receiver<bool>,
    holder: watch::Receiver<String>,
    lease: String,
}

/// The start `run` and `controller` share, once the kubeconfig is read: reach the API
/// server, refuse to start beside upstream Karpenter, compete for the Lease (the
/// election is left in `election`, so that a start given up half-way still releases
/// it), start the watches and wait until they have listed the cluster. Leading is not
/// awaited: a standby syncs too.
#[allow(clippy::too_many_arguments)]
async fn start_controller(
    conn: &Connection,
    cloud: &CloudArgs,
    policy: PolicyTable,
    features: Features,
    leader: &LeaderArgs,
    identity: &str,
    progress: &Progress,
    election: &mut Option<Election>,
) -> Result<Started, String> {
    let config = lease_config(&leader.lease)?;
    reach(&conn.client, &conn.server, progress).await;
    progress.send_replace(format!(
        "checking {} for upstream Karpenter's Lease",
        conn.server
    ));
    guard_upstream(conn, leader.force).await?;
    let lease_name = karpenter_tui::api::protocol::LEASE;
    let elector = LeaderElector::new(
        conn.client.clone(),
        &conn.namespace,
        lease_name,
        identity.to_string(),
        config,
    )
    .map_err(|e| e.to_string())?;
    let leading = elector.subscribe();
    let holder = elector.holder();
    let lease = elector.lease();
    *election = Some(Election::spawn(elector));
    progress.send_replace(format!("starting the controller against {}", conn.server));
    let mut controller = controller(
        conn,
        cloud,
        policy,
        features,
        identity,
        Some(leading.clone()),
    )
    .await?;
    progress.send_replace(format!("listing the cluster's objects at {}", conn.server));
    let wake = controller.parts_mut().0.wake();
    live::wait_synced(&mut controller, &wake, SYNC_LIMIT).await?;
    Ok(Started {
        controller,
        leader: leading,
        holder,
        lease,
    })
}

/// Waits until `started` leads, saying once (and on the connecting screen) who holds the
/// Lease meanwhile.
async fn lead(started: &mut Started, identity: &str, progress: &Progress) {
    let mut said = String::new();
    loop {
        if *started.leader.borrow() {
            eprintln!("karpenter-tui: {identity} leads");
            return;
        }
        let holder = started.holder.borrow().clone();
        if !holder.is_empty() && holder != said {
            let text = format!(
                "standby: the Lease {} is held by {holder}; this controller acts once it \
                 is released or expires",
                started.lease
            );
            eprintln!("karpenter-tui: {text}");
            progress.send_replace(text);
            said = holder;
        }
        tokio::select! {
            _ = started.leader.changed() => {}
            _ = started.holder.changed() => {}
        }
    }
}

/// Runs `start` unless a stop comes first (`None` then), calling `tick` every 5 s while
/// it waits (a controller's liveness heartbeat).
async fn unless_stopped<T>(
    stop: &mut watch::Receiver<bool>,
    start: impl std::future::Future<Output = T>,
    mut tick: impl FnMut(),
) -> Option<T> {
    let mut start = std::pin::pin!(start);
    let mut beat = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            done = &mut start => return Some(done),
            _ = stop.wait_for(|s| *s) => return None,
            _ = beat.tick() => tick(),
        }
    }
}

/// A stop that turns true on SIGTERM or Ctrl-C.
fn stop_on_signal() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    let (tx, rx) = watch::channel(false);
    let signal_tx = tx.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("SIGTERM: stopping");
        let _ = signal_tx.send(true);
    });
    (tx, rx)
}

/// `run`: the controller in-process against the cluster, with the console on a terminal
/// or event lines (JSON) on stdout otherwise. It holds the same Lease as `controller`:
/// a second `run` or `controller` waits as a standby, and attached consoles know it is
/// ours.
#[allow(clippy::too_many_arguments)]
pub fn run(
    kube: &KubeArgs,
    cloud: &CloudArgs,
    leader: &LeaderArgs,
    features: &FeatureArgs,
    rules: Option<Vec<String>>,
    notify: &[String],
    opts: &launch::Options,
    pane: Option<LogPane>,
) -> ExitCode {
    block_on(async {
        let policy = policy(rules)?;
        let features = features.parse()?;
        tracing::info!("settings: {}", features.describe());
        lease_config(&leader.lease)?;
        let conn = connect(kube).await?;
        let identity = format!("{}@{}", conn.user, default_identity());
        let (progress, progress_rx) = watch::channel(String::new());
        let mut election = None;
        let start = async {
            let mut started = start_controller(
                &conn,
                cloud,
                policy,
                features,
                leader,
                &identity,
                &progress,
                &mut election,
            )
            .await?;
            lead(&mut started, &identity, &progress).await;
            Ok::<_, String>(started)
        };
        let (stop_tx, mut stop) = stop_on_signal();
        let started = match &pane {
            None => unless_stopped(&mut stop, start, || {}).await,
            Some(_) => {
                let title = format!("run · context {} · {}", conn.context, conn.user);
                connecting::run(&title, progress_rx, start)
                    .await
                    .map_err(|e| format!("terminal: {e}"))?
            }
        };
        let release = |election: Option<Election>| async move {
            if let Some(e) = election {
                e.release().await;
            }
        };
        let Started {
            mut controller,
            leader: leading,
            ..
        } = match started {
            None => {
                release(election).await;
                eprintln!("karpenter-tui: stopped before the controller started");
                return Ok(());
            }
            Some(Err(e)) => {
                release(election).await;
                return Err(e);
            }
            Some(Ok(s)) => s,
        };
        notify_from(&mut controller, notify)?;
        let wake = controller.parts_mut().0.wake();
        let outcome = match pane {
            None => {
                // Not on a terminal: the events as JSON lines, as `simulate` prints them.
                let stopped = live::drive(
                    &mut controller,
                    wake,
                    None,
                    "controller",
                    stop,
                    Some(leading),
                    |c| {
                        for e in c.take_events() {
                            if let Ok(line) = serde_json::to_string(&e) {
                                println!("{line}");
                            }
                        }
                    },
                )
                .await;
                flush_notifications(&mut controller).await;
                stopped
            }
            Some(pane) => {
                let label = format!(
                    "cluster {} · in-process controller · {}",
                    conn.context, conn.user
                );
                let snapshots = controller.subscribe();
                let actor = format!("console:{}", conn.user);
                // The console quitting closes the request channel, which ends the loop.
                let (done, stats) = launch::run_backend(
                    snapshots,
                    label,
                    Some(actor),
                    opts,
                    pane,
                    move |requests, actor| {
                        tokio::spawn(async move {
                            let _keep = stop_tx;
                            let mut controller = controller;
                            let stopped = live::drive(
                                &mut controller,
                                wake,
                                Some(requests),
                                &actor,
                                stop,
                                Some(leading),
                                |_| {},
                            )
                            .await;
                            flush_notifications(&mut controller).await;
                            stopped
                        })
                    },
                )
                .await
                .map_err(|e| format!("terminal: {e}"))?;
                if let Some((message, _)) = stats.exit.failure() {
                    release(election).await;
                    return Err(message);
                }
                done.unwrap_or(Stop::Requested)
            }
        };
        // The loop has stopped acting: only now may the lease go to someone else.
        release(election).await;
        match outcome {
            Stop::Requested => Ok(()),
            Stop::LostLeadership => Err(format!(
                "{identity}: lost the Lease {}; stopped acting",
                karpenter_tui::api::protocol::LEASE
            )),
        }
    })
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `attach`: the console over an observing controller; requests become protocol writes.
/// Until the API server answers and the cluster is listed, the connecting screen says so.
pub fn attach(
    kube: &KubeArgs,
    write: bool,
    opts: &launch::Options,
    pane: Option<LogPane>,
) -> ExitCode {
    let Some(pane) = pane else {
        return fail("attach is the console: run it on a terminal");
    };
    block_on(async {
        let sim = CloudArgs {
            cloud: Cloud::Sim,
            region: None,
            aws_endpoint: None,
            cluster_name: None,
            cluster_endpoint: None,
            cluster_cidr: None,
            kubernetes_version: None,
            interruption_queue: None,
            isolated_vpc: false,
            reserved_enis: 0,
            vm_memory_overhead_percent:
                karpenter_tui::engine::catalog::overhead::VM_MEMORY_OVERHEAD_PERCENT,
        };
        let conn = connect(kube).await?;
        let (progress, progress_rx) = watch::channel(String::new());
        let start = async {
            reach(&conn.client, &conn.server, &progress).await;
            progress.send_replace(format!("finding the controller at {}", conn.server));
            let flavour = protocol::detect(&conn.client, &conn.namespace).await?;
            let identity = format!("{}@{}", conn.user, default_identity());
            let controller = controller(
                &conn,
                &sim,
                PolicyTable::default(),
                Features::default(),
                &identity,
                None,
            )
            .await?;
            let mut controller = controller.observing();
            progress.send_replace(format!("listing the cluster's objects at {}", conn.server));
            let wake = controller.parts_mut().0.wake();
            live::wait_synced(&mut controller, &wake, SYNC_LIMIT).await?;
            Ok::<_, String>((flavour, controller, wake))
        };
        let title = format!("attach · context {} · {}", conn.context, conn.user);
        let (flavour, mut controller, wake) = match connecting::run(&title, progress_rx, start)
            .await
            .map_err(|e| format!("terminal: {e}"))?
        {
            None => return Ok(()),
            Some(started) => started?,
        };
        let remote = Remote {
            client: conn.client.clone(),
            namespace: conn.namespace.clone(),
            actor: conn.user.clone(),
            flavour,
            write,
        };
        let label = live::attach_label(flavour, &conn.context, write);
        let mut opts = opts.clone();
        opts.read_only |= !write;
        let snapshots = controller.subscribe();
        launch::run_backend(
            snapshots,
            label,
            Some(conn.user.clone()),
            &opts,
            pane,
            move |requests, _| tokio::spawn(live::attach(controller, wake, requests, remote)),
        )
        .await
        .map_err(|e| format!("terminal: {e}"))
        .and_then(|(_, stats)| match stats.exit.failure() {
            None => Ok(()),
            Some((message, _)) => Err(message),
        })
    })
}

fn lease_config(text: &str) -> Result<LeaseConfig, String> {
    let parts: Vec<f64> = text
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            format!("--lease {text:?}: expected three numbers of seconds, e.g. 15,10,2")
        })?;
    let [d, r, p] = parts[..] else {
        return Err(format!(
            "--lease {text:?}: expected three numbers of seconds, e.g. 15,10,2"
        ));
    };
    let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
    let config = LeaseConfig {
        lease_duration: secs(d),
        renew_deadline: secs(r),
        retry_period: secs(p),
    };
    config
        .validate()
        .map_err(|e| format!("--lease {text:?}: {e}"))?;
    Ok(config)
}

/// `controller`: headless. Serves the endpoints at once, reaches the API server (backing
/// off, one log line per attempt), refuses to start beside upstream Karpenter, is ready
/// once the watches listed the cluster, competes for the Lease, and acts only while it
/// leads. Losing the lease ends the process (exit 1) as upstream's does, so Kubernetes
/// restarts it as a fresh candidate; SIGTERM stops it at any point, the start included,
/// then releases the lease so the other replica takes over without waiting for it to
/// expire.
pub fn controller_cmd(
    kube: &KubeArgs,
    cloud: &CloudArgs,
    metrics_addr: &str,
    leader: &LeaderArgs,
    features: &FeatureArgs,
    rules: Option<Vec<String>>,
    notify: &[String],
) -> ExitCode {
    block_on(async {
        let addr: SocketAddr = metrics_addr
            .parse()
            .map_err(|e| format!("--metrics-addr {metrics_addr:?}: {e}"))?;
        lease_config(&leader.lease)?;
        let policy = policy(rules)?;
        let features = features.parse()?;
        tracing::info!("settings: {}", features.describe());
        let identity = default_identity();
        let conn = connect(kube).await?;
        let lease_name = karpenter_tui::api::protocol::LEASE;
        let metrics = karpenter_tui::control::metrics::Metrics::default();
        let health = Health::new(karpenter_tui::control::endpoints::DEFAULT_STALL_AFTER);
        let endpoints = Endpoints::bind(addr, metrics.clone(), health.clone())
            .await
            .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
        if let Ok(a) = endpoints.local_addr() {
            tracing::info!("serving /metrics, /healthz, /readyz on {a}");
            eprintln!("karpenter-tui: endpoints on {a}");
        }
        let (stop_tx, mut stop) = stop_on_signal();
        let mut stopped = stop.clone();
        let endpoints_task = tokio::spawn(endpoints.serve(async move {
            let _ = stopped.wait_for(|s| *s).await;
        }));
        metrics.set_leader(lease_name, false);
        let (progress, _) = watch::channel(String::new());
        let mut election = None;
        // Ready once the watches listed the cluster, leader or not: a standby that is
        // never ready would stall every rolling update of the Deployment (upstream's
        // standby replicas are ready too). The watches keep running while it waits, so a
        // new leader acts on a synced picture at once.
        let start = start_controller(
            &conn,
            cloud,
            policy,
            features,
            leader,
            &identity,
            &progress,
            &mut election,
        );
        let beat = health.clone();
        let started = unless_stopped(&mut stop, start, || beat.beat()).await;
        let outcome = match started {
            None => {
                eprintln!("karpenter-tui: stopped before the controller started");
                Ok(Stop::Requested)
            }
            Some(Err(e)) => Err(e),
            Some(Ok(mut started)) => {
                // The endpoints have served these metrics since the start.
                started.controller.disruption.metrics = metrics.clone();
                notify_from(&mut started.controller, notify)?;
                metrics.set_synced(true);
                health.set_ready(true);
                let mut stop_wait = stop.clone();
                let mut beat = tokio::time::interval(Duration::from_secs(5));
                let became_leader = loop {
                    tokio::select! {
                        r = started.leader.wait_for(|l| *l) => break r.is_ok(),
                        _ = stop_wait.wait_for(|s| *s) => break false,
                        // A standby is alive too.
                        _ = beat.tick() => health.beat(),
                    }
                };
                let outcome = if became_leader {
                    eprintln!("karpenter-tui: {identity} leads");
                    metrics.set_leader(lease_name, true);
                    let beat = health.clone();
                    let wake = started.controller.parts_mut().0.wake();
                    let stopped = live::drive(
                        &mut started.controller,
                        wake,
                        None,
                        "controller",
                        stop.clone(),
                        Some(started.leader.clone()),
                        move |_| beat.beat(),
                    )
                    .await;
                    flush_notifications(&mut started.controller).await;
                    stopped
                } else {
                    Stop::Requested
                };
                Ok(outcome)
            }
        };
        metrics.set_leader(lease_name, false);
        health.set_ready(false);
        // The loop has stopped acting: only now may the lease go to someone else.
        if let Some(election) = election {
            election.release().await;
        }
        let _ = stop_tx.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(2), endpoints_task).await;
        match outcome? {
            Stop::Requested => Ok(()),
            Stop::LostLeadership => Err(format!(
                "{identity}: leader election lost; exiting so a fresh candidate starts"
            )),
        }
    })
}

/// Posts the controller's notifications to the `--notify` webhooks, if any.
fn notify_from(
    controller: &mut Controller<KubeCluster, LiveCloud>,
    urls: &[String],
) -> Result<(), String> {
    if !urls.is_empty() {
        controller.set_notifier(karpenter_tui::control::notify::Notifier::start(urls)?);
    }
    Ok(())
}

/// Gives the notifications still queued a few seconds to go out before the process ends.
async fn flush_notifications(controller: &mut Controller<KubeCluster, LiveCloud>) {
    if let Some(n) = controller.take_notifier() {
        n.close(Duration::from_secs(5)).await;
    }
}
