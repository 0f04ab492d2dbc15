//! The independent JSON Schema validator for tests/crd_schemas.rs: Python's `jsonschema`
//! in a venv cached under `$HOME/.cache/karpenter-tui`, driving jsonschema_check.py.
//! Without Python or PyPI the tests fail with the reason; they never pass silently.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

#[path = "venv.rs"]
mod venv;

/// The venv's python (jsonschema and PyYAML), created once per machine.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(|| {
        venv::ensure(
            "venv-jsonschema",
            &["jsonschema", "pyyaml"],
            "import jsonschema, yaml",
        )
    }) {
        Ok(path) => path,
        Err(why) => panic!("cannot set up the jsonschema venv: {why}"),
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
