//! A Kubernetes API server on 127.0.0.1 for the kube-rs backend tests: kmock (PyPI, a
//! Kubernetes API emulator) with the adapter in kmock_server.py, in a venv cached under
//! `$HOME/.cache/karpenter-tui/peers/kmock-venv`. Each `KubePeer` is a fresh, empty
//! cluster in its own process, killed on drop. Without Python, PyPI or kubectl the tests
//! fail with the reason; they never pass silently.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The kmock release the adapter was written against (its gaps are listed in
/// kmock_server.py).
const KMOCK: &str = "kmock==0.8";

/// A running peer: the server process, its port and a kubeconfig pointing at it.
pub struct KubePeer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl KubePeer {
    /// Starts a fresh peer on a free port, creating the venv first if needed.
    pub fn start() -> KubePeer {
        let dir = tempfile::tempdir().expect("temp dir for the peer");
        let log = File::create(dir.path().join("server.log")).expect("server log file");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/kmock_server.py");
        let mut child = Command::new(python())
            .arg(&script)
            .arg("0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start kmock_server.py");

        // The server prints "listening on PORT" once it accepts connections.
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = line.strip_prefix("listening on ") {
                    let _ = tx.send(port.trim().parse::<u16>().ok());
                }
            }
        });
        let port = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Some(port)) => port,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                let log = fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
                panic!("kmock_server.py did not report its port ({other:?}); its log:\n{log}");
            }
        };
        TcpStream::connect(("127.0.0.1", port)).expect("the peer accepts connections");

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
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig_path()).expect("read kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .expect("config from the peer's kubeconfig");
        kube::Client::try_from(config).expect("kube client")
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
}

impl Drop for KubePeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
