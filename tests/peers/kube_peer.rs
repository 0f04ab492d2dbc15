//! A Kubernetes API server on 127.0.0.1 for the kube-rs backend tests: kmock (PyPI, a
//! Kubernetes API emulator) with the adapter in kmock_server.py, in a venv cached under
//! `$HOME/.cache/karpenter-tui/peers/kmock-venv`. Each `KubePeer` is a fresh, empty
//! cluster in its own process, killed on drop. Without Python, PyPI or kubectl the tests
//! fail with the reason; they never pass silently.
//!
//! The test controls (kmock_server.py, items 17-20) are plain HTTP on the same port:
//! injected faults, dropped watches, journal compaction (410 Gone) and the request log.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Deserialize;
use serde_json::{Value, json};

/// The kmock release the adapter was written against (its gaps are listed in
/// kmock_server.py).
const KMOCK: &str = "kmock==0.8";

/// One API request the peer answered (`GET /_peer/requests`), oldest first.
#[derive(Debug, Clone, Deserialize)]
#[allow(dead_code)]
pub struct PeerRequest {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    /// None while a request is in flight (a watch has 200 once its headers are out).
    pub status: Option<u16>,
    /// Answered by an injected fault, not by the emulator.
    pub injected: bool,
}

#[allow(dead_code)]
impl PeerRequest {
    pub fn is_watch(&self) -> bool {
        self.query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1")
    }
}

/// A running peer: the server process, its port and a kubeconfig pointing at it.
pub struct KubePeer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl KubePeer {
    /// Starts a fresh peer on a free port, creating the venv first if needed.
    pub fn start() -> KubePeer {
        let (child, port, dir) =
            server::start(python(), "kmock_server.py", Duration::from_secs(60));

        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: peer\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: peer\n  user: {{}}\n\
             contexts:\n- name: peer\n  context:\n    cluster: peer\n    user: peer\n\
             current-context: peer\n"
        );
        fs::write(dir.path().join("kubeconfig"), kubeconfig).expect("write kubeconfig");
        KubePeer { child, port, dir }
    }

    /// For tests that talk HTTP to the peer directly.
    #[allow(dead_code)]
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The server's stderr so far (for failure messages).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// A kube client built the way the console builds one: from the kubeconfig file.
    /// Like every kube 5 client from a kubeconfig, it retries 429, 503 and 504 answers
    /// itself (up to 15 times, honouring Retry-After, else backing off from 5 ms).
    #[allow(dead_code)]
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config().await).expect("kube client")
    }

    /// A client that returns 429, 503 and 504 to the caller at once (`default_retry` off).
    #[allow(dead_code)]
    pub async fn client_without_retries(&self) -> kube::Client {
        let mut config = self.config().await;
        config.default_retry = false;
        kube::Client::try_from(config).expect("kube client")
    }

    async fn config(&self) -> kube::Config {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig_path()).expect("read kubeconfig");
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("config from the peer's kubeconfig")
    }

    /// Runs kubectl (`$KUBECTL`, default `kubectl`) against the peer, with `stdin` piped
    /// in; returns stdout, panicking with stderr and the server log on failure.
    pub fn kubectl(&self, args: &[&str], stdin: &str) -> String {
        let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
        let mut child = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(self.kubeconfig_path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {kubectl}: {e}"));
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(stdin.as_bytes())
            .expect("write kubectl stdin");
        let out = child.wait_with_output().expect("kubectl output");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\n{stdout}{}\nserver log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        stdout
    }

    /// The next `count` API requests with `method` ("GET", ..., or "*") whose path (or
    /// "path?query") contains `path_contains` are answered with `status` (a Kubernetes
    /// Status; 429 and 503 with `Retry-After: 1`) instead of reaching the emulator.
    #[allow(dead_code)]
    pub fn inject(&self, method: &str, path_contains: &str, status: u16, count: u32) {
        let fault = json!({"method": method, "path_contains": path_contains,
                           "status": status, "count": count});
        self.control("POST", "faults", Some(&fault));
    }

    /// The next `count` API requests with `method` whose path contains `path_contains`
    /// are held `seconds` each, then answered by the emulator: a slow API server.
    #[allow(dead_code)]
    pub fn delay(&self, method: &str, path_contains: &str, seconds: f64, count: u32) {
        let fault = json!({"method": method, "path_contains": path_contains,
                           "delay": seconds, "count": count});
        self.control("POST", "faults", Some(&fault));
    }

    /// Turns on the peer's kube-scheduler stand-in (kmock_server.py item 21): pending pods
    /// are bound to Ready nodes they fit, `min`..`max` seconds after they could be, and
    /// those that fit nowhere are marked Unschedulable.
    #[allow(dead_code)]
    pub fn start_scheduler(&self, min_delay: f64, max_delay: f64) {
        let settings = json!({"min_delay": min_delay, "max_delay": max_delay, "interval": 0.2});
        let answer = self.control("POST", "scheduler", Some(&settings));
        assert_eq!(answer["enabled"], true, "{answer}");
    }

    /// Turns on the peer's kubelet stand-in (item 22): a KWOK Node registers NotReady,
    /// tainted `node.kubernetes.io/not-ready`, and turns Ready `ready_after` seconds later.
    #[allow(dead_code)]
    pub fn start_kubelet(&self, ready_after: f64) {
        let settings = json!({"ready_after": ready_after});
        let answer = self.control("POST", "kubelet", Some(&settings));
        assert_eq!(answer["enabled"], true, "{answer}");
    }

    /// Pods the scheduler stand-in has bound since the peer started.
    #[allow(dead_code)]
    pub fn pods_bound(&self) -> u64 {
        self.control("GET", "scheduler", None)["bound"]
            .as_u64()
            .expect("bound in the scheduler's answer")
    }

    /// How many requests injected faults have answered since the peer started.
    #[allow(dead_code)]
    pub fn faults_served(&self) -> u64 {
        self.control("GET", "faults", None)["served"]
            .as_u64()
            .expect("served in the fault summary")
    }

    /// Forgets the watch journal up to now; a watch from an older resourceVersion then
    /// gets a 410 Expired ERROR event. Returns the version compacted at.
    #[allow(dead_code)]
    pub fn compact(&self) -> u64 {
        self.control("POST", "compact", None)["compacted"]
            .as_u64()
            .expect("the compacted version")
    }

    /// Aborts the connection of every open watch; returns how many there were.
    #[allow(dead_code)]
    pub fn drop_watches(&self) -> u64 {
        self.control("POST", "drop-watches", None)["dropped"]
            .as_u64()
            .expect("the dropped count")
    }

    /// The API requests answered so far (the last 5000), oldest first.
    #[allow(dead_code)]
    pub fn requests(&self) -> Vec<PeerRequest> {
        serde_json::from_value(self.control("GET", "requests", None)).expect("the request log")
    }

    /// Empties the request log.
    #[allow(dead_code)]
    pub fn clear_requests(&self) {
        self.control("DELETE", "requests", None);
    }

    /// A test control (`/_peer/NAME`), which must answer 200 with JSON.
    fn control(&self, method: &str, name: &str, body: Option<&Value>) -> Value {
        let path = format!("/_peer/{name}");
        let (status, head, body) = self.http(method, &path, body);
        assert_eq!(
            status,
            200,
            "{method} {path}: {head}\n{body}\nserver log:\n{}",
            self.log()
        );
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"))
    }

    /// `kubectl ARGS -o json`, parsed.
    #[allow(dead_code)]
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all, "")).expect("kubectl JSON")
    }

    /// `kubectl get ARGS -o json`'s items (empty when there are none).
    #[allow(dead_code)]
    pub fn items(&self, args: &[&str]) -> Vec<Value> {
        self.get_json(args)["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// One HTTP/1.1 request to the peer; returns the status, the head and the body.
    #[allow(dead_code)]
    pub fn http(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String, String) {
        http::request(self.port, method, path, body, || self.log())
    }
}

impl Drop for KubePeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[path = "http.rs"]
mod http;
#[path = "server.rs"]
mod server;
#[path = "venv.rs"]
mod venv;

/// The venv's python (kmock 0.8), created once per machine.
fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(|| {
        venv::ensure(
            "peers/kmock-venv",
            &[KMOCK],
            "import kmock, aiohttp; assert kmock.__version__ == '0.8'",
        )
    }) {
        Ok(path) => path,
        Err(why) => panic!("cannot set up the kmock venv: {why}"),
    }
}
