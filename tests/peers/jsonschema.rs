//! The independent JSON Schema validator for tests/crd_schemas.rs: Python's `jsonschema`
//! in a venv cached under `$HOME/.cache/karpenter-tui`, driving jsonschema_check.py.
//! Without Python or PyPI the tests fail with the reason; they never pass silently.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The venv's python, created once per machine under `$HOME/.cache/karpenter-tui`. It is
/// built in a private temporary directory and renamed into place, so concurrent test
/// processes never see a half-installed venv; the loser of the race uses the winner's.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(ensure_venv) {
        Ok(path) => path,
        Err(why) => panic!("cannot set up the jsonschema venv: {why}"),
    }
}

fn usable(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import jsonschema, yaml"])
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

fn ensure_venv() -> Result<PathBuf, String> {
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    let cache = PathBuf::from(home).join(".cache").join("karpenter-tui");
    let venv = cache.join("venv-jsonschema");
    let venv_python = venv.join("bin").join("python");
    if usable(&venv_python) {
        return Ok(venv_python);
    }
    fs::create_dir_all(&cache).map_err(|e| format!("create {}: {e}", cache.display()))?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = cache.join(format!(
        "venv-jsonschema.tmp-{}-{nanos}",
        std::process::id()
    ));
    let built = (|| {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&tmp),
            "python3 -m venv",
        )?;
        run(
            Command::new(tmp.join("bin").join("python")).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "jsonschema",
                "pyyaml",
            ]),
            "pip install jsonschema pyyaml (needs PyPI)",
        )
    })();
    if let Err(why) = built {
        let _ = fs::remove_dir_all(&tmp);
        return Err(why);
    }
    if venv.exists() && !usable(&venv_python) {
        // A venv left broken by something else: move it aside rather than trust it.
        let aside = cache.join(format!(
            "venv-jsonschema.broken-{}-{nanos}",
            std::process::id()
        ));
        if fs::rename(&venv, &aside).is_ok() {
            let _ = fs::remove_dir_all(&aside);
        }
    }
    if fs::rename(&tmp, &venv).is_err() {
        // Another test process won the race; ours is surplus.
        let _ = fs::remove_dir_all(&tmp);
    }
    if usable(&venv_python) {
        Ok(venv_python)
    } else {
        Err(format!(
            "{} cannot import jsonschema and yaml",
            venv_python.display()
        ))
    }
}

/// One validated (or skipped) document, as the checker reports it.
#[derive(Debug)]
pub struct Report {
    pub file: String,
    pub kind: String,
    pub skipped: bool,
    /// (JSON path such as `spec.disruption.budgets[0].nodes`, message)
    pub errors: Vec<(String, String)>,
}

/// Runs the checker on CRD manifests (`crds_yaml`, as printed) and the given fixture
/// files, with JSON Schema `draft` "7" or "2020-12".
pub fn check(crds_yaml: &str, fixtures: &[PathBuf], draft: &str) -> Vec<Report> {
    let dir = tempfile::tempdir().expect("temp dir");
    let crds_path = dir.path().join("crds.yaml");
    fs::write(&crds_path, crds_yaml).expect("write crds.yaml");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/jsonschema_check.py");
    let out = Command::new(python())
        .arg(&script)
        .arg("--crds")
        .arg(&crds_path)
        .args(["--draft", draft])
        .args(fixtures)
        .output()
        .expect("run jsonschema_check.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "jsonschema_check.py failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap_or("")).expect("header line");
    assert_eq!(
        header["crds"],
        json!(["EC2NodeClass", "NodeClaim", "NodePool"])
    );
    lines
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("report line is JSON");
            let text = |k: &str| v[k].as_str().unwrap_or("").to_string();
            let errors = v["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
                    (s("path"), s("message"))
                })
                .collect();
            Report {
                file: text("file"),
                kind: text("kind"),
                skipped: v["skipped"] == json!(true),
                errors,
            }
        })
        .collect()
}
