//! The container image: the Containerfile passes hadolint and has the shape the
//! manifests rely on (a cargo build stage, a distroless cc runtime running the binary as
//! a numeric non-root user, `controller` by default, the endpoints' port); the binary
//! this build made needs only the shared libraries and glibc version that runtime image
//! has; scripts/build-image.sh picks an engine, names the image after Cargo.toml's
//! version, and says what is missing when neither podman nor docker is installed.
//!
//! No image is built here (no daemon on a test machine); what would break the image at
//! run time is checked on its parts.

#[path = "peers/packaging_tools.rs"]
mod packaging_tools;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use packaging_tools::{hadolint, output, stdout_of};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn containerfile() -> String {
    fs::read_to_string(root().join("Containerfile")).expect("read Containerfile")
}

/// hadolint on `text` (read from stdin); returns (passed, findings).
fn lint(text: &str) -> (bool, String) {
    let mut child = Command::new(hadolint())
        .args(["--no-color", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run hadolint");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let findings = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), findings)
}

#[test]
fn hadolint_finds_nothing_in_the_containerfile() {
    // hadolint's default failure threshold is `info`: any finding at all, warnings
    // included, fails it.
    let (passed, findings) = lint(&containerfile());
    assert!(
        passed && findings.trim().is_empty(),
        "hadolint on Containerfile:\n{findings}"
    );
    // And it reads this file's syntax: an untagged base image is reported (DL3006).
    let untagged = containerfile().replace("cc-debian12:nonroot", "cc-debian12");
    let (passed, findings) = lint(&untagged);
    assert!(
        !passed && findings.contains("DL3006"),
        "hadolint missed an untagged FROM:\n{findings}"
    );
}

/// One instruction: the keyword (upper case) and the rest, continuation lines joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let (keyword, rest) = pending
            .split_once(char::is_whitespace)
            .unwrap_or((&pending, ""));
        out.push((keyword.to_ascii_uppercase(), rest.trim().to_string()));
        pending.clear();
    }
    out
}

/// The stages: each FROM and the instructions after it.
fn stages(text: &str) -> Vec<Vec<(String, String)>> {
    let mut out: Vec<Vec<(String, String)>> = Vec::new();
    for ins in instructions(text) {
        if ins.0 == "FROM" {
            out.push(Vec::new());
        }
        out.last_mut()
            .expect("an instruction before the first FROM")
            .push(ins);
    }
    out
}

fn args_of<'a>(stage: &'a [(String, String)], keyword: &str) -> Vec<&'a str> {
    stage
        .iter()
        .filter(|(k, _)| k == keyword)
        .map(|(_, rest)| rest.as_str())
        .collect()
}

fn json_list(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not an exec-form list: {text}: {e}"))
}

fn cargo_field(name: &str) -> String {
    let manifest: toml::Table =
        toml::from_str(&fs::read_to_string(root().join("Cargo.toml")).expect("read Cargo.toml"))
            .expect("Cargo.toml parses");
    manifest["package"][name]
        .as_str()
        .unwrap_or_else(|| panic!("package.{name}"))
        .to_string()
}

/// (major, minor) of "1.95" or "1.95.0".
fn minor_version(v: &str) -> (u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().expect("a number"));
    (parts.next().unwrap(), parts.next().unwrap())
}

#[test]
fn the_containerfile_builds_with_cargo_and_runs_the_controller_non_root_on_distroless_cc() {
    let text = containerfile();
    let stages = stages(&text);
    assert_eq!(stages.len(), 2, "a build stage and a runtime stage");
    let (build, runtime) = (&stages[0], &stages[1]);

    // Build stage: an official rust image at least Cargo.toml's rust-version, on the
    // runtime's Debian release (its glibc symbol versions must exist at run time).
    let from = build[0].1.as_str();
    let (image, alias) = from.split_once(" AS ").expect("the build stage is named");
    let tag = image
        .strip_prefix("docker.io/library/rust:")
        .or_else(|| image.strip_prefix("rust:"))
        .unwrap_or_else(|| panic!("build stage is not a rust image: {image}"));
    let (version, release) = tag
        .split_once('-')
        .expect("rust:<version>-<debian release>");
    assert!(
        minor_version(version) >= minor_version(&cargo_field("rust-version")),
        "rust:{version} is older than Cargo.toml's rust-version"
    );
    assert_eq!(release, "bookworm", "the runtime is debian12 (bookworm)");
    assert!(
        args_of(build, "RUN")
            .iter()
            .any(|r| r.contains("cargo build --release --locked")),
        "the build stage does not run `cargo build --release --locked`"
    );

    // Runtime stage: distroless cc on debian12, the binary copied from the build stage.
    let base = runtime[0].1.as_str();
    assert!(
        base.starts_with("gcr.io/distroless/cc-debian12:"),
        "runtime is not distroless cc-debian12: {base}"
    );
    assert_eq!(runtime.iter().filter(|(k, _)| k == "FROM").count(), 1);
    let copies = args_of(runtime, "COPY");
    let from_build = format!("--from={}", alias.trim());
    let copy = copies
        .iter()
        .find(|c| c.starts_with(&from_build))
        .expect("the runtime copies the binary from the build stage");
    let target = copy.split_whitespace().last().unwrap();

    let user = args_of(runtime, "USER");
    let user = user.last().expect("a USER in the runtime stage");
    let ids: Vec<u32> = user
        .split(':')
        .map(|id| {
            id.parse()
                .unwrap_or_else(|_| panic!("USER {user} is not numeric"))
        })
        .collect();
    assert!(ids.iter().all(|&id| id != 0), "USER {user} is root");
    assert_eq!(ids[0], 65532, "the manifests run as 65532");

    let entrypoint = json_list(args_of(runtime, "ENTRYPOINT").last().expect("ENTRYPOINT"));
    assert_eq!(entrypoint, [target], "ENTRYPOINT is not the copied binary");
    assert!(target.ends_with("/karpenter-tui"));
    let cmd = json_list(args_of(runtime, "CMD").last().expect("CMD"));
    assert_eq!(cmd, ["controller"]);

    let port = karpenter_tui::control::endpoints::DEFAULT_ADDR
        .rsplit_once(':')
        .unwrap()
        .1;
    assert_eq!(args_of(runtime, "EXPOSE"), [port]);

    // OCI labels: the licence Cargo.toml declares, the version it carries by default.
    let labels = args_of(runtime, "LABEL").join(" ");
    let license = format!(
        "org.opencontainers.image.licenses=\"{}\"",
        cargo_field("license")
    );
    assert!(labels.contains(&license), "no {license}: {labels}");
    for key in ["source", "version"] {
        assert!(
            labels.contains(&format!("org.opencontainers.image.{key}=")),
            "no {key} label"
        );
    }
    let version_arg = format!("VERSION={}", cargo_field("version"));
    assert!(
        args_of(runtime, "ARG").contains(&version_arg.as_str()),
        "ARG {version_arg} missing or stale"
    );

    // The build context leaves out the target directory (gigabytes) and git history.
    let ignore = fs::read_to_string(root().join(".dockerignore")).expect(".dockerignore");
    for dir in ["target/", ".git/"] {
        assert!(
            ignore.lines().any(|l| l.trim() == dir),
            ".dockerignore lacks {dir}"
        );
    }
}

/// What distroless cc-debian12 ships for a dynamically linked program.
const RUNTIME_LIBS: [&str; 7] = [
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
];

/// debian12's glibc.
const RUNTIME_GLIBC: (u32, u32) = (2, 36);

fn readelf(args: &[&str]) -> String {
    stdout_of(Command::new("readelf").args(args).arg(BIN))
}

#[test]
fn the_binary_needs_only_what_distroless_cc_debian12_has_and_runs() {
    let dynamic = readelf(&["-d", "-W"]);
    let needed: BTreeSet<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split_once('[')?.1.split_once(']').map(|(lib, _)| lib))
        .collect();
    assert!(
        needed.contains("libc.so.6"),
        "not a glibc binary? {dynamic}"
    );
    let missing: Vec<_> = needed
        .iter()
        .filter(|lib| !RUNTIME_LIBS.contains(lib))
        .collect();
    assert!(
        missing.is_empty(),
        "the runtime image lacks {missing:?} (needed: {needed:?})"
    );

    // Symbol versions: none newer than the runtime's glibc.
    let versions = readelf(&["-V", "-W"]);
    let newest = versions
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut p = v.split('.').map(|n| n.parse::<u32>().ok());
            Some((p.next()??, p.next().flatten().unwrap_or(0)))
        })
        .max()
        .expect("GLIBC_ symbol versions");
    assert!(
        newest <= RUNTIME_GLIBC,
        "the binary needs GLIBC_{}.{}; debian12 has {}.{}",
        newest.0,
        newest.1,
        RUNTIME_GLIBC.0,
        RUNTIME_GLIBC.1
    );

    let version = stdout_of(Command::new(BIN).arg("--version"));
    assert_eq!(
        version.trim(),
        format!("karpenter-tui {}", cargo_field("version"))
    );
    let help = stdout_of(Command::new(BIN).args(["controller", "--help"]));
    assert!(help.contains("--cloud"), "controller --help:\n{help}");
}

fn script() -> PathBuf {
    root().join("scripts/build-image.sh")
}

/// Runs build-image.sh with bash from its absolute path, `path` as the whole PATH.
fn run_script(path: &Path, env: &[(&str, &str)], args: &[&str]) -> (bool, String) {
    let bash = ["/bin/bash", "/usr/bin/bash"]
        .into_iter()
        .find(|b| Path::new(b).exists())
        .expect("bash");
    let out = output(
        Command::new(bash)
            .arg(script())
            .args(args)
            .env_clear()
            .env("PATH", path)
            .envs(env.iter().copied()),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn build_image_sh_parses_and_says_which_engines_are_missing() {
    let check = output(Command::new("bash").arg("-n").arg(script()));
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );

    let empty = tempfile::tempdir().unwrap();
    let (ok, said) = run_script(empty.path(), &[], &[]);
    assert!(!ok, "exited 0 with no engine:\n{said}");
    assert!(
        said.contains("podman") && said.contains("docker"),
        "does not name both engines:\n{said}"
    );
}

/// A `docker` that records its arguments, one invocation a line: what the script asks
/// of the engine, on a machine without a container daemon.
fn recording_engine(dir: &Path) -> PathBuf {
    let log = dir.join("calls.log");
    let engine = dir.join("docker");
    fs::write(
        &engine,
        format!("#!/bin/bash\necho \"$*\" >> '{}'\n", log.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&engine, fs::Permissions::from_mode(0o755)).unwrap();
    log
}

#[test]
fn build_image_sh_tags_with_the_cargo_version_and_pushes_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let log = recording_engine(dir.path());
    let version = cargo_field("version");

    let (ok, said) = run_script(dir.path(), &[], &[]);
    assert!(ok, "{said}");
    let calls = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 1, "one build, no push: {calls}");
    let build = lines[0];
    assert!(build.starts_with("build "), "{build}");
    let containerfile = root().join("Containerfile");
    assert!(
        build.contains(&format!("--file {}", containerfile.display())),
        "{build}"
    );
    assert!(
        build.contains(&format!("--tag karpenter-tui:{version}")),
        "{build}"
    );
    assert!(
        build.contains(&format!("--build-arg VERSION={version}")),
        "{build}"
    );

    fs::remove_file(&log).unwrap();
    let env = [
        ("IMAGE", "registry.example.com/ops/karpenter-tui"),
        ("TAG", "dev"),
    ];
    let (ok, said) = run_script(dir.path(), &env, &["--push"]);
    assert!(ok, "{said}");
    let calls = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 2, "a build, then a push: {calls}");
    assert!(lines[0].contains("--tag registry.example.com/ops/karpenter-tui:dev"));
    assert_eq!(lines[1], "push registry.example.com/ops/karpenter-tui:dev");

    let (ok, said) = run_script(dir.path(), &[], &["--pish"]);
    assert!(!ok && said.contains("--pish"), "{said}");
}
