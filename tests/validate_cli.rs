//! Acceptance tests of `karpenter-tui validate`: the real binary run over the manifests in
//! `tests/fixtures/v1/`.
//!
//! - `valid/*.yaml`: our own versions of upstream's `examples/v1` NodePools and
//!   EC2NodeClasses, plus NodeClaims with status. Each must validate (exit 0) with exactly
//!   one summary line per object and no diagnostics at all.
//! - `invalid/*.yaml`: one broken variant per rule. Header lines
//!   `# expect-error: <field.path>: <substring>` say which error must be printed; every
//!   one of them must appear on stderr as `FILE:LINE: <field.path>...: ...<substring>...`,
//!   and the exit code must be 1. Errors on any other path fail the test too: a fixture
//!   breaks one rule, and the rest of it must pass. See [`Expectation`] for the matching.
//!   An empty path (`# expect-error: : malformed YAML`) is a problem with the document
//!   or the stream itself.
//! - `warn/*.yaml`: valid manifests with unknown fields; `# expect-warning:` headers name
//!   the `warning: FILE:LINE: path: ...` lines that must appear (and no others), and the
//!   exit code stays 0.
//!
//! No run may panic. Failures list every offending fixture with the expected line and the
//! actual output, so one run shows everything that is wrong.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");
const FIXTURES: &str = "tests/fixtures/v1";

/// The outcome of one `validate` run, decoded.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn from_output(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// What a failure report shows of the run.
    fn transcript(&self) -> String {
        format!(
            "    exit code: {:?}\n    stdout:\n{}    stderr:\n{}",
            self.code,
            indent(&self.stdout),
            indent(&self.stderr)
        )
    }

    fn panicked(&self) -> bool {
        self.stderr.contains("panicked")
    }
}

fn indent(text: &str) -> String {
    if text.is_empty() {
        return "      (empty)\n".to_string();
    }
    text.lines().fold(String::new(), |mut acc, l| {
        let _ = writeln!(acc, "      | {l}");
        acc
    })
}

/// Runs the binary from the crate root, so file names are printed as the relative paths
/// we pass (the CLI echoes FILE exactly as given).
fn validate(args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("validate")
        .args(args)
        .env_remove("LOG_LEVEL")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin was piped");
        // The binary may exit before reading everything (it should not, but a broken pipe
        // here must not hide its real output).
        let _ = pipe.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("cannot wait for {BIN}: {e}"));
    Run::from_output(out)
}

fn validate_file(file: &str) -> Run {
    validate(&["-f", file], None)
}

/// The `*.yaml` files of one fixture directory, as paths relative to the crate root.
fn fixtures(dir: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(FIXTURES)
        .join(dir);
    let mut files: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .filter_map(|p| {
            p.file_name()
                .map(|n| format!("{FIXTURES}/{dir}/{}", n.to_string_lossy()))
        })
        .collect();
    files.sort();
    files
}

fn read(file: &str) -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Fails the test with every collected problem, or passes when there are none.
fn report(what: &str, failures: &[String]) {
    if !failures.is_empty() {
        panic!(
            "{} of the {what} checks failed:\n\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// kind and metadata.name of every non-empty document, in stream order. Read with the
/// YAML library rather than through the crate, so the test does not trust the code under
/// test to count documents.
fn objects_in(file: &str) -> Vec<(String, String)> {
    use serde::Deserialize;
    let text = read(file);
    let mut objects = Vec::new();
    for de in serde_norway::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(de)
            .unwrap_or_else(|e| panic!("{file} is not valid YAML: {e}"));
        if value.is_null() {
            continue;
        }
        let field =
            |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).unwrap_or("").to_string();
        objects.push((
            field(value.get("kind")),
            field(value.get("metadata").and_then(|m| m.get("name"))),
        ));
    }
    objects
}

/// The line each document of `file` starts on (its first line that is not blank, a
/// comment or a `---` separator), counted here so the test does not trust the code under
/// test to count lines. Documents with no content are skipped, as `objects_in` skips them.
fn document_lines(file: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut in_document = false;
    for (i, l) in read(file).lines().enumerate() {
        if l.starts_with("---") {
            in_document = false;
        } else if !in_document && !l.trim().is_empty() && !l.trim_start().starts_with('#') {
            starts.push(i + 1);
            in_document = true;
        }
    }
    starts
}

/// One `# expect-error:` / `# expect-warning:` header.
///
/// A line of output satisfies it when:
/// - it is `FILE:LINE: rest` or `FILE:LINE:COLUMN: rest` for this file and any line (an
///   error line), or `warning: FILE:LINE: rest` for a warning;
/// - `rest` starts with the expected path, followed by `: ` or by a deeper path (`.x` or
///   `[n]`), so `spec.amiSelectorTerms` is satisfied by an error reported on
///   `spec.amiSelectorTerms[1].alias`; an empty expected path (problems with a document or
///   the stream itself) accepts any path;
/// - the message after the path contains the substring, ignoring ASCII case.
#[derive(Debug)]
struct Expectation {
    path: String,
    substring: String,
}

impl Expectation {
    /// Reads headers with the given marker (`expect-error` or `expect-warning`).
    fn parse_all(text: &str, marker: &str) -> Vec<Expectation> {
        let prefix = format!("# {marker}: ");
        text.lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .map(|rest| match rest.split_once(": ") {
                Some((path, substring)) => Expectation {
                    path: path.trim().to_string(),
                    substring: substring.trim().to_string(),
                },
                // "# expect-error: : msg" splits above; a header without ": " is all message.
                None => Expectation {
                    path: String::new(),
                    substring: rest.trim().to_string(),
                },
            })
            .collect()
    }

    /// The line we hope to see, for failure messages.
    fn display(&self, file: &str, warning: bool) -> String {
        let w = if warning { "warning: " } else { "" };
        if self.path.is_empty() {
            format!("{w}{file}:<line>: ...{}...", self.substring)
        } else {
            format!("{w}{file}:<line>: {}: ...{}...", self.path, self.substring)
        }
    }

    fn matches_line(&self, file: &str, line: &str, warning: bool) -> bool {
        diagnostic_of(file, line, warning)
            .and_then(|rest| self.message_under_path(rest))
            .is_some_and(|message| {
                message
                    .to_ascii_lowercase()
                    .contains(&self.substring.to_ascii_lowercase())
            })
    }

    /// The message of `rest` (`path: message`) when its path is the expected one or lies
    /// below it.
    fn message_under_path<'a>(&self, rest: &'a str) -> Option<&'a str> {
        if self.path.is_empty() {
            return Some(rest);
        }
        let tail = rest.strip_prefix(self.path.as_str())?;
        if let Some(m) = tail.strip_prefix(": ") {
            Some(m)
        } else if tail.starts_with('.') || tail.starts_with('[') {
            tail.split_once(": ").map(|(_, m)| m)
        } else {
            None
        }
    }

    fn is_met_by(&self, file: &str, output: &str, warning: bool) -> bool {
        output.lines().any(|l| self.matches_line(file, l, warning))
    }
}

/// `rest` of a diagnostic line `FILE:LINE[:COLUMN]: rest` (or `warning: ...`) about
/// `file`, at any line.
fn diagnostic_of<'a>(file: &str, line: &'a str, warning: bool) -> Option<&'a str> {
    let line = if warning {
        line.strip_prefix("warning: ")?
    } else {
        line
    };
    let after_file = line.strip_prefix(file)?;
    // A problem with the whole input (it is empty) has no line.
    if let Some(rest) = after_file.strip_prefix(": ") {
        return Some(rest);
    }
    let mut rest = after_file.strip_prefix(':')?;
    for position in 0..2 {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &rest[digits..];
        if let Some(message) = rest.strip_prefix(": ") {
            return Some(message);
        }
        if position == 0 {
            rest = rest.strip_prefix(':')?;
        }
    }
    None
}

#[test]
fn fixture_sets_are_complete() {
    let valid = fixtures("valid");
    let invalid = fixtures("invalid");
    assert!(
        valid.len() >= 14,
        "expected at least 14 valid fixtures, found {}",
        valid.len()
    );
    assert!(
        invalid.len() >= 40,
        "expected at least 40 invalid fixtures, found {}",
        invalid.len()
    );
    let claims = valid
        .iter()
        .filter(|f| objects_in(f).iter().any(|(kind, _)| kind == "NodeClaim"))
        .count();
    assert!(
        claims >= 2,
        "expected at least 2 valid NodeClaim fixtures, found {claims}"
    );
    let headerless: Vec<&String> = invalid
        .iter()
        .filter(|f| Expectation::parse_all(&read(f), "expect-error").is_empty())
        .collect();
    assert!(
        headerless.is_empty(),
        "invalid fixtures without a `# expect-error: path: substring` header: {headerless:?}"
    );
}

#[test]
fn valid_fixtures_pass_with_one_summary_line_per_object() {
    let mut failures = Vec::new();
    for file in fixtures("valid") {
        let run = validate_file(&file);
        let objects = objects_in(&file);
        let mut problems = Vec::new();
        if run.code != Some(0) {
            problems.push(format!("expected exit code 0, got {:?}", run.code));
        }
        if run.panicked() {
            problems.push("the binary panicked".to_string());
        }
        if !run.stderr.trim().is_empty() {
            problems.push("expected no diagnostics on stderr for a valid manifest".to_string());
        }
        let lines: Vec<&str> = run
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        if lines.len() != objects.len() {
            problems.push(format!(
                "expected {} summary lines (one per object), got {}",
                objects.len(),
                lines.len()
            ));
        }
        // Each object is named at the line its document starts on.
        let starts = document_lines(&file);
        for (i, (kind, name)) in objects.iter().enumerate() {
            let expected = format!("{file}:{}: {kind} {name}: valid", starts[i]);
            if !lines.iter().any(|l| l.starts_with(&expected)) {
                problems.push(format!("expected a stdout line starting with `{expected}`"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{file}:\n  - {}\n{}",
                problems.join("\n  - "),
                run.transcript()
            ));
        }
    }
    report("valid-fixture", &failures);
}

#[test]
fn invalid_fixtures_fail_with_the_expected_errors() {
    let mut failures = Vec::new();
    for file in fixtures("invalid") {
        let run = validate_file(&file);
        let mut problems = Vec::new();
        if run.code != Some(1) {
            problems.push(format!("expected exit code 1, got {:?}", run.code));
        }
        if run.panicked() {
            problems.push("the binary panicked".to_string());
        }
        let expectations = Expectation::parse_all(&read(&file), "expect-error");
        for exp in &expectations {
            if !exp.is_met_by(&file, &run.stderr, false) {
                problems.push(format!(
                    "expected a stderr line like `{}`",
                    exp.display(&file, false)
                ));
            }
        }
        // Each fixture breaks one rule: an error elsewhere means the fixture is broken in
        // a way it does not mean to be, or the validator flags something that is fine.
        for line in run.stderr.lines() {
            if let Some(rest) = diagnostic_of(&file, line, false)
                && !expectations
                    .iter()
                    .any(|e| e.message_under_path(rest).is_some())
            {
                problems.push(format!("unexpected error, on no expected path: `{line}`"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{file}:\n  - {}\n{}",
                problems.join("\n  - "),
                run.transcript()
            ));
        }
    }
    report("invalid-fixture", &failures);
}

#[test]
fn unknown_fields_warn_with_their_path_but_pass() {
    let files = fixtures("warn");
    assert!(!files.is_empty(), "no fixtures in {FIXTURES}/warn");
    let mut failures = Vec::new();
    for file in files {
        let run = validate_file(&file);
        let mut problems = Vec::new();
        if run.code != Some(0) {
            problems.push(format!(
                "expected exit code 0 (warnings only), got {:?}",
                run.code
            ));
        }
        if run.panicked() {
            problems.push("the binary panicked".to_string());
        }
        let expectations = Expectation::parse_all(&read(&file), "expect-warning");
        if expectations.is_empty() {
            problems
                .push("the fixture has no `# expect-warning: path: substring` header".to_string());
        }
        for exp in &expectations {
            if !exp.is_met_by(&file, &run.stderr, true) {
                problems.push(format!(
                    "expected a stderr line like `{}`",
                    exp.display(&file, true)
                ));
            }
        }
        // Only the unknown fields are warned about (apiVersion and kind, for one, are known).
        for line in run.stderr.lines() {
            if let Some(rest) = diagnostic_of(&file, line, true)
                && !expectations
                    .iter()
                    .any(|e| e.message_under_path(rest).is_some())
            {
                problems.push(format!("unexpected warning: `{line}`"));
            }
            if diagnostic_of(&file, line, false).is_some() {
                problems.push(format!("unexpected error: `{line}`"));
            }
        }
        let objects = objects_in(&file);
        let starts = document_lines(&file);
        for (i, (kind, name)) in objects.iter().enumerate() {
            let expected = format!("{file}:{}: {kind} {name}: valid", starts[i]);
            if !run.stdout.lines().any(|l| l.starts_with(&expected)) {
                problems.push(format!("expected a stdout line starting with `{expected}`"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{file}:\n  - {}\n{}",
                problems.join("\n  - "),
                run.transcript()
            ));
        }
    }
    report("warning-fixture", &failures);
}

#[test]
fn reads_standard_input_when_the_file_is_a_dash() {
    let file = format!("{FIXTURES}/valid/general-purpose.yaml");
    let run = validate(&["-f", "-"], Some(&read(&file)));
    let mut problems = Vec::new();
    if run.code != Some(0) {
        problems.push(format!("expected exit code 0, got {:?}", run.code));
    }
    let starts = document_lines(&file);
    for (i, (kind, name)) in objects_in(&file).iter().enumerate() {
        let expected = format!("-:{}: {kind} {name}: valid", starts[i]);
        if !run.stdout.lines().any(|l| l.starts_with(&expected)) {
            problems.push(format!("expected a stdout line starting with `{expected}`"));
        }
    }

    // Errors in standard input are located with the same "-" source name.
    let broken = read(&format!("{FIXTURES}/invalid/np-weight-zero.yaml"));
    let bad = validate(&["-f", "-"], Some(&broken));
    if bad.code != Some(1) {
        problems.push(format!(
            "broken stdin: expected exit code 1, got {:?}",
            bad.code
        ));
    }
    for exp in Expectation::parse_all(&broken, "expect-error") {
        if !exp.is_met_by("-", &bad.stderr, false) {
            problems.push(format!(
                "broken stdin: expected a stderr line like `{}`",
                exp.display("-", false)
            ));
        }
    }
    if run.panicked() || bad.panicked() {
        problems.push("the binary panicked".to_string());
    }
    assert!(
        problems.is_empty(),
        "validate -f - :\n  - {}\nvalid input:\n{}\nbroken input:\n{}",
        problems.join("\n  - "),
        run.transcript(),
        bad.transcript()
    );
}

#[test]
fn a_missing_file_is_an_error_naming_the_file() {
    let missing = "tests/fixtures/v1/no-such-manifest.yaml";
    let run = validate_file(missing);
    assert!(
        run.code == Some(1) && run.stderr.contains(missing) && !run.panicked(),
        "expected exit code 1 and an error naming {missing}, without a panic:\n{}",
        run.transcript()
    );
}

#[test]
fn several_files_are_checked_in_one_run_and_one_bad_file_fails_the_run() {
    let good = format!("{FIXTURES}/valid/spot.yaml");
    let bad = format!("{FIXTURES}/invalid/nc-tag-eks-cluster-name.yaml");
    let run = validate(&["-f", &good, "-f", &bad], None);
    let mut problems = Vec::new();
    if run.code != Some(1) {
        problems.push(format!("expected exit code 1, got {:?}", run.code));
    }
    // The good file is still reported object by object.
    let starts = document_lines(&good);
    for (i, (kind, name)) in objects_in(&good).iter().enumerate() {
        let expected = format!("{good}:{}: {kind} {name}: valid", starts[i]);
        if !run.stdout.lines().any(|l| l.starts_with(&expected)) {
            problems.push(format!("expected a stdout line starting with `{expected}`"));
        }
    }
    for exp in Expectation::parse_all(&read(&bad), "expect-error") {
        if !exp.is_met_by(&bad, &run.stderr, false) {
            problems.push(format!(
                "expected a stderr line like `{}`",
                exp.display(&bad, false)
            ));
        }
    }
    if run.stderr.lines().any(|l| l.starts_with(good.as_str())) {
        problems.push(format!("expected no errors for {good}"));
    }
    if run.panicked() {
        problems.push("the binary panicked".to_string());
    }
    assert!(
        problems.is_empty(),
        "{}\n{}",
        problems.join("\n"),
        run.transcript()
    );
}

#[test]
fn all_valid_fixtures_together_pass() {
    let files = fixtures("valid");
    let mut args = Vec::new();
    for f in &files {
        args.push("-f");
        args.push(f.as_str());
    }
    let run = validate(&args, None);
    let objects: usize = files.iter().map(|f| objects_in(f).len()).sum();
    let lines = run.stdout.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(
        run.code == Some(0) && lines == objects && !run.panicked(),
        "expected exit code 0 and {objects} summary lines for {} files:\n{}",
        files.len(),
        run.transcript()
    );
}

/// The matcher itself decides every verdict above, so it gets its own checks.
#[test]
fn expectation_matching_follows_the_documented_rules() {
    let exp = |path: &str, sub: &str| Expectation {
        path: path.into(),
        substring: sub.into(),
    };
    let f = "x.yaml";
    let e = exp("spec.amiSelectorTerms", "mutually exclusive");
    assert!(e.matches_line(
        f,
        "x.yaml:2: spec.amiSelectorTerms: 'alias' is Mutually Exclusive",
        false
    ));
    assert!(e.matches_line(
        f,
        "x.yaml:2: spec.amiSelectorTerms[1].alias: mutually exclusive",
        false
    ));
    assert!(!e.matches_line(
        f,
        "x.yaml:2: spec.amiSelectorTermsX: mutually exclusive",
        false
    ));
    assert!(!e.matches_line(
        f,
        "y.yaml:2: spec.amiSelectorTerms: mutually exclusive",
        false
    ));
    assert!(!e.matches_line(
        f,
        "x.yaml:2: spec: amiSelectorTerms mutually exclusive",
        false
    ));
    assert!(!e.matches_line(f, "x.yaml:2: spec.amiSelectorTerms: cannot be empty", false));
    assert!(!e.matches_line(
        f,
        "warning: x.yaml:2: spec.amiSelectorTerms: mutually exclusive",
        false
    ));
    assert!(e.matches_line(
        f,
        "warning: x.yaml:2: spec.amiSelectorTerms: mutually exclusive",
        true
    ));
    // The substring must be in the message, not merely in the path.
    let e = exp("spec", "amiSelectorTerms");
    assert!(!e.matches_line(f, "x.yaml:1: spec.amiSelectorTerms[0]: required", false));
    assert!(e.matches_line(f, "x.yaml:1: spec: missing field `amiSelectorTerms`", false));
    // Index boundaries: [1] is not [10].
    let e = exp("spec.disruption.budgets[1]", "schedule");
    assert!(!e.matches_line(f, "x.yaml:1: spec.disruption.budgets[10]: schedule", false));
    // Document-level problems have no path.
    let e = exp("", "malformed YAML");
    assert!(e.matches_line(f, "x.yaml:4:1: malformed YAML: mapping values", false));
    assert!(e.matches_line(f, "x.yaml: malformed YAML", false));
    assert!(!e.matches_line(f, "x.yaml:4:1:2: malformed YAML", false));
    let parsed = Expectation::parse_all(
        "# expect-error: spec.weight: greater than or equal to 1\n# expect-error: : malformed YAML\nkind: x\n",
        "expect-error",
    );
    assert_eq!(parsed.len(), 2);
    assert_eq!(
        (parsed[0].path.as_str(), parsed[0].substring.as_str()),
        ("spec.weight", "greater than or equal to 1")
    );
    assert_eq!(
        (parsed[1].path.as_str(), parsed[1].substring.as_str()),
        ("", "malformed YAML")
    );
}
