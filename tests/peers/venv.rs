//! Python venvs for the test peers, created once per machine under
//! `$HOME/.cache/karpenter-tui`. Each is built in a private temporary directory and
//! renamed into place, so concurrent test processes never see a half-installed venv; the
//! loser of the race uses the winner's. Without Python or PyPI the caller's tests fail
//! with the reason; they never pass silently.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// True when `python` runs `probe` (a Python snippet that imports what the peer needs).
pub fn usable(python: &Path, probe: &str) -> bool {
    Command::new(python)
        .args(["-c", probe])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// The python of the venv at `$HOME/.cache/karpenter-tui/<relative>`, with `packages`
/// installed; `probe` decides whether an existing venv is good enough.
pub fn ensure(relative: &str, packages: &[&str], probe: &str) -> Result<PathBuf, String> {
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    let venv = PathBuf::from(home)
        .join(".cache/karpenter-tui")
        .join(relative);
    let venv_python = venv.join("bin").join("python");
    if usable(&venv_python, probe) {
        return Ok(venv_python);
    }
    let cache = venv.parent().ok_or("venv path has no parent")?;
    fs::create_dir_all(cache).map_err(|e| format!("create {}: {e}", cache.display()))?;
    let name = venv
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tag = format!("{}-{nanos}", std::process::id());
    let tmp = cache.join(format!("{name}.tmp-{tag}"));
    let built = (|| {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&tmp),
            "python3 -m venv",
        )?;
        run(
            Command::new(tmp.join("bin").join("python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(packages),
            &format!("pip install {} (needs PyPI)", packages.join(" ")),
        )
    })();
    if let Err(why) = built {
        let _ = fs::remove_dir_all(&tmp);
        return Err(why);
    }
    if venv.exists() && !usable(&venv_python, probe) {
        // A venv left broken by something else: move it aside rather than trust it.
        let aside = cache.join(format!("{name}.broken-{tag}"));
        if fs::rename(&venv, &aside).is_ok() {
            let _ = fs::remove_dir_all(&aside);
        }
    }
    if fs::rename(&tmp, &venv).is_err() {
        // Another test process won the race; ours is surplus.
        let _ = fs::remove_dir_all(&tmp);
    }
    if usable(&venv_python, probe) {
        Ok(venv_python)
    } else {
        Err(format!("{} cannot run {probe:?}", venv_python.display()))
    }
}
