//! Starting a Python test peer: `python SCRIPT 0` in a fresh temporary directory, its
//! stderr in `server.log` there, its port read from the "listening on PORT" line it prints
//! once it accepts connections.

use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Starts `tests/peers/<script>` and returns the process, its port and its directory
/// (which holds `server.log`) once the port answers. Panics with the log when the server
/// reports no port within `patience`.
pub fn start(python: &Path, script: &str, patience: Duration) -> (Child, u16, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir for the peer");
    let log_path = dir.path().join("server.log");
    let log = File::create(&log_path).expect("server log file");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(script);
    let mut child = Command::new(python)
        .arg(&path)
        .arg("0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
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
    let abort = |child: &mut Child, why: String| -> ! {
        let _ = child.kill();
        let _ = child.wait();
        let log = fs::read_to_string(&log_path).unwrap_or_default();
        panic!("{script} did not start: {why}; its log:\n{log}");
    };
    let port = match rx.recv_timeout(patience) {
        Ok(Some(port)) => port,
        other => abort(&mut child, format!("no port reported ({other:?})")),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            abort(&mut child, format!("port {port} does not answer"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port, dir)
}
