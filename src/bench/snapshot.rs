//! `bench snapshot`: what publishing a controller snapshot costs at scale. Over the
//! disruption benchmark's N-node, M-pod cluster, two things are timed: building the
//! snapshot (what the controller does after a change when a console listens), and
//! copying the cluster state (what the controller's next change costs while a console
//! still holds the snapshot: the state is shared copy-on-write). With `--nodes 0` the
//! cluster is instead simulated into place through the real controller (a Deployment of M
//! pods, ten to an m5.2xlarge) and the controller's own `snapshot()` is timed.

use std::fmt;
use std::time::Instant;

use chrono::TimeDelta;

use crate::cluster::scenario;
use crate::control::controller::Snapshot;
use crate::simulation::{Options, Pace, Simulation};

/// The figures.
#[derive(Clone, Debug)]
pub struct Figures {
    pub nodes: usize,
    pub pods: usize,
    /// Wall time to simulate the cluster into existence.
    pub setup_seconds: f64,
    /// Building one snapshot (best of the repeats).
    pub snapshot_seconds: f64,
    /// Copying the state on the first change after a publish (best of the repeats).
    pub copy_on_write_seconds: f64,
    /// Peak resident memory of the process (VmHWM), if the OS reports it.
    pub peak_rss_mib: Option<f64>,
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nodes, {} pods (set up in {:.1} s): snapshot {:.3} ms, copy-on-write of the state {:.1} ms",
            self.nodes,
            self.pods,
            self.setup_seconds,
            self.snapshot_seconds * 1000.0,
            self.copy_on_write_seconds * 1000.0
        )?;
        if let Some(m) = self.peak_rss_mib {
            write!(f, ", peak RSS {m:.0} MiB")?;
        }
        Ok(())
    }
}

/// The scenario: one pool of m5.2xlarge on-demand, `pods` pods of 750m / 2Gi.
pub fn scenario_text(pods: usize) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.2xlarge]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
  disruption: {{consolidationPolicy: WhenEmpty, consolidateAfter: Never}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: bench}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: bench}}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app}}
spec:
  replicas: {pods}
  selector: {{matchLabels: {{app: app}}}}
  template:
    metadata: {{labels: {{app: app}}}}
    spec:
      containers:
        - name: app
          image: app
          resources: {{requests: {{cpu: 750m, memory: 2Gi}}}}
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {{name: snapshot-bench}}
spec:
  cloud: {{instanceTypes: [m5.2xlarge]}}
"#
    )
}

/// Peak resident set size of this process, from /proc (Linux).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

pub fn run(nodes: usize, pods: usize, repeat: usize) -> Figures {
    let began = Instant::now();
    if nodes == 0 {
        return simulated(pods, repeat);
    }
    // The disruption benchmark's cluster: the same state a controller of that size
    // holds, built directly (simulating 5,000 nodes into place takes far longer than
    // the figure it serves).
    let state = std::sync::Arc::new(crate::bench::disruption::cluster(nodes, pods, 42));
    let now = crate::bench::disruption::bench_now();
    let pass = crate::engine::disruption::plan(&state, now, &Default::default());
    let setup_seconds = began.elapsed().as_secs_f64();
    let (snapshot_seconds, copy_on_write_seconds) = time_publication(repeat, || {
        // What `Controller::snapshot` builds: the shared state plus the last pass's
        // budgets and per-node outcomes (decisions and events are small).
        Snapshot {
            generation: 1,
            state: std::sync::Arc::clone(&state),
            budgets: pass.budgets.clone(),
            outcomes: pass.outcomes.clone(),
            ..Snapshot::empty(now)
        }
    });
    Figures {
        nodes: state.nodes.len(),
        pods: state.pods.len(),
        setup_seconds,
        snapshot_seconds,
        copy_on_write_seconds,
        peak_rss_mib: peak_rss_mib(),
    }
}

/// `--nodes 0`: simulate the cluster into place through the real controller instead
/// (ten pods per node), then time its own `snapshot()`.
fn simulated(pods: usize, repeat: usize) -> Figures {
    let text = scenario_text(pods);
    let scenario = match scenario::parse("snapshot-bench", &text) {
        Ok(s) => s,
        Err(e) => panic!("the generated benchmark scenario is invalid: {e:?}"),
    };
    let options = Options {
        approval: Some(vec!["manual".into()]),
        ..Default::default()
    };
    let Ok(mut sim) = Simulation::new(&scenario, &options, Pace::Virtual) else {
        panic!("the benchmark simulation did not start");
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime starts");
    let began = Instant::now();
    let mut at = sim.start();
    // Until every pod runs (or an hour of simulated time).
    for _ in 0..60 {
        at += TimeDelta::minutes(1);
        rt.block_on(sim.run_until(at, |_| {}));
        let s = sim.controller.state();
        if s.pods.len() >= pods && s.pods.iter().all(|p| p.node_name.is_some()) {
            break;
        }
    }
    let setup_seconds = began.elapsed().as_secs_f64();
    let (snapshot_seconds, copy_on_write_seconds) =
        time_publication(repeat, || sim.controller.snapshot());
    let state = sim.controller.state();
    Figures {
        nodes: state.nodes.len(),
        pods: state.pods.len(),
        setup_seconds,
        snapshot_seconds,
        copy_on_write_seconds,
        peak_rss_mib: peak_rss_mib(),
    }
}

/// Best-of-`repeat` times of building a snapshot and of copying the state it shares.
fn time_publication(repeat: usize, mut build: impl FnMut() -> Snapshot) -> (f64, f64) {
    let (mut snapshot, mut copy_on_write) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let snap = std::hint::black_box(build());
        snapshot = snapshot.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let copy = std::hint::black_box((*snap.state).clone());
        copy_on_write = copy_on_write.min(t.elapsed().as_secs_f64());
        drop(copy);
    }
    (snapshot, copy_on_write)
}
