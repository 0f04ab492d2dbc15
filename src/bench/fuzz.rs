//! `karpenter-tui bench fuzz`: a mutation fuzzer that runs on stable Rust. cargo-fuzz
//! needs nightly; this one mutates the committed corpus (`fuzz/corpus/<target>/`) with
//! the edits that found issue 20's bugs (bytes flipped, tokens a parser trips on, lines
//! doubled, deep nesting, documents spliced) and drives either
//!
//! - every parser in-process through [`crate::fuzzing`], catching panics: a fuzz session,
//!   reported as cases and CPU time per target; or
//! - the binary itself, one `validate`, `migrate` or `simulate` process per case, each
//!   measured for wall time and peak memory: the acceptance run of issue 20 (no panic, no
//!   run over 5 s on input up to 1 MiB, peak RSS within 20x the input plus 50 MB).
//!
//! Cases that break a promise are written to `--keep DIR` to join the corpus.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fuzzing::Target;

/// The edits' vocabulary: what YAML, Kubernetes and our parsers find hard.
const TOKENS: &[&str] = &[
    "{a: ",
    "[",
    "]",
    "}",
    "&a ",
    "*a",
    "<<: *a",
    "---\n",
    "--- ''\n",
    "--- NULL\n",
    "\r",
    "\r\n",
    "\0",
    "\t",
    "\u{1b}[2J",
    "\n",
    "'",
    "\"",
    "#",
    ": ",
    "- ",
    "? ",
    "!!binary ",
    "1e100",
    "-5",
    "-1",
    "2147483647",
    "9223372036854775807Ki",
    "7Ei",
    "2562048h",
    "Never",
    "0 0 30 2 *",
    "@yearly",
    "+262142-12-31T23:59:59Z",
    "0.000000001",
    "NaN",
    ".inf",
    "~",
    "null",
    "yes",
    "no",
    "\u{feff}",
    "\u{202e}",
    "é",
    "",
];

/// What a run found.
#[derive(Debug, Default, serde::Serialize)]
pub struct Report {
    pub cases: usize,
    /// Per target (or command): cases run.
    pub per_target: Vec<(String, usize)>,
    pub panics: usize,
    /// Process runs only: exits other than 0 and 1 (a signal, or 101 from a panic).
    pub crashes: usize,
    /// Process runs over 5 s on input of at most 1 MiB (killed at 5 s).
    pub timeouts: usize,
    /// Process runs whose peak RSS broke 20x input + 50 MB.
    pub memory_over_bound: usize,
    pub largest_input_bytes: usize,
    pub slowest_run_seconds: f64,
    pub peak_rss_mb: f64,
    /// The highest peak RSS as a fraction of its bound (1.0 = at the bound).
    pub worst_rss_to_bound: f64,
    /// CPU time spent in the cases (user + system; the children's for process runs).
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
}

/// The committed corpus, by target.
fn corpus(root: &Path, target: Target) -> Result<Vec<Vec<u8>>, String> {
    let dir = root.join(target.name());
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries.flatten() {
        if let Ok(data) = std::fs::read(e.path()) {
            out.push(data);
        }
    }
    if out.is_empty() {
        return Err(format!("{}: no corpus files", dir.display()));
    }
    Ok(out)
}

/// One to four edits of `data`; `other` is another corpus input to splice from.
pub fn mutate(rng: &mut fastrand::Rng, data: &[u8], other: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    for _ in 0..rng.usize(1..=4) {
        let at = rng.usize(0..=d.len());
        match rng.u8(0..9) {
            0 if !d.is_empty() => {
                let i = rng.usize(0..d.len());
                d[i] ^= 1 << rng.u8(0..8);
            }
            1 | 2 => {
                let t = TOKENS[rng.usize(0..TOKENS.len())].as_bytes();
                d.splice(at..at, t.iter().copied());
            }
            3 if !d.is_empty() => {
                let end = (at + rng.usize(0..64)).min(d.len());
                d.drain(at.min(end)..end);
            }
            4 => {
                // Double a line: duplicate keys, repeated documents.
                let start = d[..at]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let end = d[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(d.len(), |i| at + i + 1);
                let line = d[start..end].to_vec();
                d.splice(end..end, line);
            }
            5 => {
                // Replace a value after `: ` with a token.
                if let Some(i) = d[at..].windows(2).position(|w| w == b": ") {
                    let from = at + i + 2;
                    let to = d[from..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(d.len(), |j| from + j);
                    let t = TOKENS[rng.usize(0..TOKENS.len())].as_bytes();
                    d.splice(from..to, t.iter().copied());
                }
            }
            6 => {
                // Deep flow nesting, the shape that once took the scanner quadratic time.
                let depth = rng.usize(50..3000);
                let mut nest = b"{a: ".repeat(depth);
                nest.extend(b"}".repeat(rng.usize(0..=depth)));
                d.splice(at..at, nest);
            }
            7 if !other.is_empty() => {
                let from = rng.usize(0..other.len());
                let to = (from + rng.usize(1..512)).min(other.len());
                d.splice(at..at, other[from..to].iter().copied());
            }
            _ => d.truncate(at),
        }
    }
    d
}

/// CPU time of this process or of its waited-for children, in seconds.
fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// The in-process fuzz session: `cases` mutated inputs across every target.
pub fn in_process(
    root: &Path,
    cases: usize,
    seed: u64,
    keep: Option<&Path>,
) -> Result<Report, String> {
    let corpora: Vec<(Target, Vec<Vec<u8>>)> = Target::ALL
        .iter()
        .map(|&t| corpus(root, t).map(|c| (t, c)))
        .collect::<Result<_, _>>()?;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut report = Report::default();
    let mut counts = vec![0usize; corpora.len()];
    // Panics are counted and kept, not printed case by case.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (cpu0, wall0) = (cpu_seconds(libc::RUSAGE_SELF), Instant::now());
    for case in 0..cases {
        let k = rng.usize(0..corpora.len());
        let (target, inputs) = &corpora[k];
        let base = &inputs[rng.usize(0..inputs.len())];
        let other = &inputs[rng.usize(0..inputs.len())];
        let data = mutate(&mut rng, base, other);
        report.largest_input_bytes = report.largest_input_bytes.max(data.len());
        counts[k] += 1;
        let t = *target;
        if std::panic::catch_unwind(|| t.run(&data)).is_err() {
            report.panics += 1;
            save(keep, &format!("{}-panic-{case}", t.name()), &data);
        }
    }
    std::panic::set_hook(hook);
    report.cases = cases;
    report.cpu_seconds = cpu_seconds(libc::RUSAGE_SELF) - cpu0;
    report.wall_seconds = wall0.elapsed().as_secs_f64();
    report.per_target = corpora
        .iter()
        .zip(counts)
        .map(|((t, _), n)| (t.name().to_string(), n))
        .collect();
    Ok(report)
}

/// The acceptance run: `cases` processes of `validate`, `migrate` and `simulate`.
pub fn processes(
    root: &Path,
    cases: usize,
    seed: u64,
    keep: Option<&Path>,
) -> Result<Report, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let commands = [
        ("validate", Target::Manifest),
        ("migrate", Target::Migrate),
        ("simulate", Target::Scenario),
    ];
    let corpora: Vec<Vec<Vec<u8>>> = commands
        .iter()
        .map(|(_, t)| corpus(root, *t))
        .collect::<Result<_, _>>()?;
    let dir = tempfile_dir()?;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut report = Report::default();
    let mut counts = [0usize; 3];
    let (cpu0, wall0) = (cpu_seconds(libc::RUSAGE_CHILDREN), Instant::now());
    for case in 0..cases {
        let k = rng.usize(0..commands.len());
        let inputs = &corpora[k];
        let base = &inputs[rng.usize(0..inputs.len())];
        let other = &inputs[rng.usize(0..inputs.len())];
        let data = mutate(&mut rng, base, other);
        report.largest_input_bytes = report.largest_input_bytes.max(data.len());
        counts[k] += 1;
        let input = dir.join("case.yaml");
        std::fs::write(&input, &data).map_err(|e| format!("{}: {e}", input.display()))?;
        let err = dir.join("stderr");
        let name = commands[k].0;
        let mut cmd = Command::new(&exe);
        match name {
            "validate" => cmd.args(["validate", "-f"]).arg(&input),
            "migrate" => cmd.args(["migrate", "-f"]).arg(&input),
            _ => cmd.arg("simulate").arg(&input).args(["--until", "2m"]),
        };
        let run = measure(&mut cmd, &err, Duration::from_secs(5))?;
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        let label = format!("{name}-{case}");
        if stderr.contains("panicked at") {
            report.panics += 1;
            save(keep, &format!("{label}-panic"), &data);
        } else if !run.timed_out && !matches!(run.code, Some(0 | 1)) {
            report.crashes += 1;
            save(keep, &format!("{label}-crash"), &data);
        }
        if run.timed_out && data.len() <= 1 << 20 {
            report.timeouts += 1;
            save(keep, &format!("{label}-timeout"), &data);
        }
        let bound = 20.0 * data.len() as f64 + 50e6;
        let ratio = run.peak_rss_bytes as f64 / bound;
        if ratio > 1.0 {
            report.memory_over_bound += 1;
            save(keep, &format!("{label}-oom"), &data);
        }
        report.worst_rss_to_bound = report.worst_rss_to_bound.max(ratio);
        report.peak_rss_mb = report.peak_rss_mb.max(run.peak_rss_bytes as f64 / 1e6);
        report.slowest_run_seconds = report.slowest_run_seconds.max(run.seconds);
    }
    report.cases = cases;
    report.cpu_seconds = cpu_seconds(libc::RUSAGE_CHILDREN) - cpu0;
    report.wall_seconds = wall0.elapsed().as_secs_f64();
    report.per_target = commands
        .iter()
        .zip(counts)
        .map(|((c, _), n)| (c.to_string(), n))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}

fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("karpenter-tui-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

fn save(keep: Option<&Path>, name: &str, data: &[u8]) {
    if let Some(dir) = keep {
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(dir.join(name), data);
    }
}

/// One child's outcome.
struct Measured {
    code: Option<i32>,
    timed_out: bool,
    seconds: f64,
    peak_rss_bytes: u64,
}

/// Runs `cmd` (stdout discarded, stderr to `err`), killing it at `limit`; its peak RSS
/// comes from `wait4`, which reports the child's own high-water mark.
fn measure(cmd: &mut Command, err: &Path, limit: Duration) -> Result<Measured, String> {
    let stderr = std::fs::File::create(err).map_err(|e| format!("{}: {e}", err.display()))?;
    let start = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut timed_out = false;
    loop {
        let mut status = 0;
        // SAFETY: wait4 fills `status` and `usage`, both owned here, for our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            return Ok(Measured {
                code,
                timed_out,
                seconds: start.elapsed().as_secs_f64(),
                // ru_maxrss is in KiB on Linux.
                peak_rss_bytes: usage.ru_maxrss.max(0) as u64 * 1024,
            });
        }
        if r < 0 {
            return Err(format!("wait4: {}", std::io::Error::last_os_error()));
        }
        if !timed_out && start.elapsed() > limit {
            timed_out = true;
            // SAFETY: signalling our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The report as the bench prints it.
pub fn table(r: &Report, processes: bool) -> String {
    let per = r
        .per_target
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = format!(
        "cases {} ({per})\npanics {}\nCPU {:.1} s, wall {:.1} s ({:.0} cases/s)\nlargest input {} bytes\n",
        r.cases,
        r.panics,
        r.cpu_seconds,
        r.wall_seconds,
        r.cases as f64 / r.wall_seconds.max(1e-9),
        r.largest_input_bytes
    );
    if processes {
        out.push_str(&format!(
            "crashes {}\nruns over 5 s {}\nslowest run {:.2} s\npeak RSS {:.1} MB (worst {:.0}% of 20x input + 50 MB; {} over)\n",
            r.crashes,
            r.timeouts,
            r.slowest_run_seconds,
            r.peak_rss_mb,
            r.worst_rss_to_bound * 100.0,
            r.memory_over_bound
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_is_reproducible_and_changes_input() {
        let seed = b"a: 1\nb: [x, y]\n";
        let run = |s| {
            let mut rng = fastrand::Rng::with_seed(s);
            (0..50)
                .map(|_| mutate(&mut rng, seed, b"c: 2\n"))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert!(run(7).iter().filter(|m| m.as_slice() != seed).count() > 40);
    }
}
