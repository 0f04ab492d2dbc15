//! The binary as a child process for the cluster tests: stdout and stderr collected
//! line by line, SIGTERM and the exit code, killed on drop.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

/// The binary the tests run: this build's, or another named by `$KARPENTER_TUI_BIN`
/// (to check that a test fails against a build without a fix).
fn binary() -> String {
    std::env::var("KARPENTER_TUI_BIN").unwrap_or_else(|_| BIN.to_string())
}
/// Bounds every wait; nothing asserts on elapsed time.
const PATIENCE: Duration = Duration::from_secs(60);

#[allow(dead_code)]
/// A child process whose stderr is collected, killed on drop.
pub struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
    /// The threads collecting stdout and stderr; joined once the process has exited, so
    /// its last lines are in.
    readers: Vec<std::thread::JoinHandle<()>>,
}

#[allow(dead_code)]
impl Proc {
    pub fn start(args: &[&str]) -> Proc {
        Proc::start_with(args, &[])
    }

    /// Starts the binary with extra environment variables.
    pub fn start_with(args: &[&str], env: &[(String, String)]) -> Proc {
        let mut child = Command::new(binary())
            .args(args)
            .env("LOG_LEVEL", "info")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start karpenter-tui");
        let stderr = Arc::new(Mutex::new(String::new()));
        let stdout = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        for (pipe, sink) in [
            (
                Box::new(child.stderr.take().unwrap()) as Box<dyn Read + Send>,
                stderr.clone(),
            ),
            (Box::new(child.stdout.take().unwrap()), stdout.clone()),
        ] {
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let mut s = sink.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            }));
        }
        Proc {
            child,
            stderr,
            stdout,
            readers,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub fn wait_stderr(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.stderr();
            if pred(&s) {
                return s;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "waited for {what}; stderr:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL: the process dies at once, as a crashed or evicted controller does.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then the exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        self.terminate_within(PATIENCE)
    }

    /// SIGTERM, then the exit code; panics if the process is still running after `limit`.
    pub fn terminate_within(&mut self, limit: Duration) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.wait_exit(limit)
    }

    /// Waits for the process to exit on its own; its exit code. Panics after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                for r in self.readers.drain(..) {
                    let _ = r.join();
                }
                return status.code();
            }
            assert!(
                start.elapsed() < limit,
                "still running after {limit:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless controller on the peer behind `kubeconfig`, with short lease timings and
/// its endpoints on any free port.
#[allow(dead_code)]
pub fn controller(kubeconfig: &str, extra: &[&str]) -> Proc {
    controller_with(kubeconfig, extra, &[])
}

/// [`controller`] with environment variables (an AWS emulator's credentials).
#[allow(dead_code)]
pub fn controller_with(kubeconfig: &str, extra: &[&str], env: &[(String, String)]) -> Proc {
    let mut args = vec![
        "controller",
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        "default",
        "--metrics-addr",
        "127.0.0.1:0",
        "--lease",
        "3,2,0.5",
    ];
    args.extend(extra);
    Proc::start_with(&args, env)
}

/// Where a controller serves /metrics, /healthz and /readyz (it says so on stderr).
#[allow(dead_code)]
pub fn endpoints_of(p: &Proc) -> String {
    let s = p.wait_stderr("the endpoints' address", |s| s.contains("endpoints on "));
    s.lines()
        .find_map(|l| l.split("endpoints on ").nth(1))
        .unwrap()
        .trim()
        .to_string()
}

/// `/metrics` at `addr`, as a scraper reads it.
#[allow(dead_code)]
pub fn scrape(addr: &str) -> String {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the endpoints");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string()
}
