//! Bad input through the real binary, each case one failure a fuzzing run met (issue 20):
//! the exact line a user reads, the exit code, and no panic. `validate`, `migrate`,
//! `simulate` and `journal` are run as a user runs them, on files and on stdin.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn transcript(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    /// Asserts the exit code and that `line` is one whole line of stderr.
    fn says(&self, code: i32, line: &str) {
        assert!(
            !self.stderr.contains("panicked"),
            "panicked:\n{}",
            self.transcript()
        );
        assert_eq!(self.code, Some(code), "{}", self.transcript());
        assert!(
            self.stderr.lines().any(|l| l == line),
            "no stderr line\n  {line}\n{}",
            self.transcript()
        );
    }
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    if let Some(input) = stdin {
        // A binary that refuses early closes the pipe; that is its right.
        let _ = child.stdin.take().unwrap().write_all(input);
    }
    let out = child.wait_with_output().expect("the binary finishes");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn validate_stdin(text: &str) -> Run {
    run(&["validate", "-f", "-"], Some(text.as_bytes()))
}

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
";

#[test]
fn a_key_written_twice_is_an_error_naming_both_lines() {
    let text = POOL.replace(
        "spec:\n  template:",
        "spec:\n  weight: 0\n  weight: 50\n  template:",
    );
    validate_stdin(&text).says(
        1,
        "-:6:3: spec.weight: the key `weight` is written twice in one mapping (first at line 5); remove one (YAML readers disagree on which wins)",
    );
}

#[test]
fn deep_nesting_is_refused_at_its_line_before_the_parser_recurses() {
    // 100 KB of `{a: {a: ...}}` took the YAML scanner 12.7 s; the depth check is linear.
    let depth = 10_000;
    let text = format!("{}{}\n", "{a: ".repeat(depth), "}".repeat(depth));
    // The YAML scanner looks ahead through flow collections (one might be a key), so it
    // stops at its own limit of 255 levels, column 1021, before any event reaches ours.
    validate_stdin(&text).says(
        1,
        "-:1:1021: nested more than 100 levels deep; no Kubernetes object needs that many",
    );
    // Block nesting reaches our check: the 101st level is refused at its line.
    let mut block = String::new();
    for i in 0..150 {
        block.push_str(&format!("{}k:\n", "  ".repeat(i)));
    }
    validate_stdin(&block).says(
        1,
        "-:101:201: k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k.k: nested more than 100 levels deep; no Kubernetes object needs that many",
    );
}

#[test]
fn an_alias_bomb_is_refused_at_its_line() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let prev = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    validate_stdin(&text).says(
        1,
        "-:4:45: a3[7]: aliases expand this document to more than 10057 values (from 19 written); a YAML alias bomb is refused",
    );
}

#[test]
fn a_control_character_is_located_at_its_own_line_and_column() {
    let text = POOL.replacen("nodeClassRef: {group", "nodeClassRef: {gr\u{0}oup", 1);
    validate_stdin(&text).says(
        1,
        "-:7:24: the control character U+0000 is not allowed in YAML",
    );
}

#[test]
fn invalid_utf8_on_stdin_names_its_position() {
    let mut bytes = POOL.as_bytes().to_vec();
    bytes.extend_from_slice(b"# caf\xe9\n");
    run(&["validate", "-f", "-"], Some(&bytes)).says(
        1,
        "-:10:6: not UTF-8 text (byte 0xE9 at offset 278); save the file as UTF-8",
    );
}

#[test]
fn input_over_the_size_limit_is_refused_before_it_is_read_whole() {
    let big = format!("{POOL}{}", "# padding\n".repeat(200));
    run(&["validate", "--max-input-size", "1KiB", "-f", "-"], Some(big.as_bytes())).says(
        1,
        "-: larger than the input limit of 1 KiB; raise it with --max-input-size if the file is meant to be this big",
    );
    // The default limit takes it.
    assert_eq!(validate_stdin(&big).code, Some(0));
}

#[test]
fn control_characters_in_echoed_input_are_escaped() {
    let text = POOL.replace("kind: NodePool", "kind: \"Node\\e[2J\\nerror: forged\"");
    let r = validate_stdin(&text);
    r.says(
        1,
        "-:2: kind: unknown kind \"Node\\u{1b}[2J\\nerror: forged\" for karpenter.sh/v1 (expected NodePool, NodeClaim or EC2NodeClass)",
    );
    assert!(!r.stderr.contains('\u{1b}'), "{}", r.transcript());
}

#[test]
fn limits_and_values_karpenter_would_refuse_are_errors_naming_the_rule() {
    let with = |from: &str, to: &str| POOL.replace(from, to);
    let limit = |value: &str| {
        POOL.replace(
            "spec:\n  template:",
            &format!("spec:\n  limits: {{cpu: \"{value}\"}}\n  template:"),
        )
    };
    let cases: Vec<(String, &str)> = vec![
        (
            limit("1e100"),
            "-:5: spec.limits[cpu]: quantity \"1e100\" is out of range: Kubernetes quantities hold at most 2^63-1 (9223372036854775807; resource.Quantity caps larger ones, so the object stored would not be the one written)",
        ),
        (
            limit("9223372036854775807Ki"),
            "-:5: spec.limits[cpu]: quantity \"9223372036854775807Ki\" is out of range: Kubernetes quantities hold at most 2^63-1 (9223372036854775807; resource.Quantity caps larger ones, so the object stored would not be the one written)",
        ),
        (
            limit("-5"),
            "-:5: spec.limits[cpu]: limit \"-5\" is negative: no node fits under it, so this pool would launch nothing (write 0 to stop a pool on purpose)",
        ),
        (
            with("    spec:\n", "    spec:\n      expireAfter: 2562048h\n"),
            "-:7: spec.template.spec.expireAfter: invalid duration \"2562048h\": longer than Go's longest duration, 2562047h47m16.854775807s (an int64 of nanoseconds), so Karpenter could not read it (expected e.g. 720h, 1h30m, 30s or Never)",
        ),
        (
            POOL.replace(
                "spec:\n  template:",
                "spec:\n  disruption:\n    budgets: [{nodes: \"0\", schedule: \"0 0 30 2 *\", duration: 1h}]\n    consolidateAfter: 0s\n  template:",
            ),
            "-:6: spec.disruption.budgets[0].schedule: cron schedule \"0 0 30 2 *\" never fires: no date matches its day-of-month and month fields together, so this budget would never apply",
        ),
        (
            POOL.replace("spec:\n  template:", "spec:\n  weight: \"5\"\n  template:"),
            "-:5: spec.weight: expected an integer from -2147483648 to 2147483647, found the string \"5\"",
        ),
        (
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: x}\nspec: []\n"
                .to_string(),
            "-:4: spec: expected a mapping, found a list",
        ),
    ];
    for (text, line) in cases {
        validate_stdin(&text).says(1, line);
    }
    // 7Ei cores is 8 x 10^18, inside Kubernetes' range: a limit that large is no limit,
    // and valid (a request that large is refused by the simulator, below).
    let r = validate_stdin(&limit("7Ei"));
    assert_eq!(r.code, Some(0), "{}", r.transcript());
}

#[test]
fn migrate_quotes_what_yaml_1_1_would_misread() {
    let text = "apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata:
      labels: {'<<': a, 'y': 'no', time: '1:30'}
    spec:
      nodeClassRef: {name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ['on']}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}
";
    let r = run(&["migrate", "-f", "-"], Some(text.as_bytes()));
    assert_eq!(r.code, Some(0), "{}", r.transcript());
    for line in ["'<<': a", "'y': 'no'", "time: '1:30'", "- 'on'"] {
        assert!(
            r.stdout.lines().any(|l| l.trim() == line),
            "{line:?} not written quoted:\n{}",
            r.transcript()
        );
    }
}

/// The 1-based line of the first line of `file` containing `needle` (counting LF, CRLF
/// and bare CR line ends, as YAML does).
fn line_of(file: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(file).unwrap().replace("\r\n", "\n");
    1 + text
        .split(['\n', '\r'])
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {file}"))
}

/// A scenario around one body; the Scenario document is the last.
fn scenario(dir: &Path, name: &str, before: &str, spec: &str) -> String {
    let text = format!(
        "{before}apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: web}}]
---
apiVersion: karpenter-tui.dev/v1alpha1
kind: Scenario
metadata: {{name: t}}
spec:
{spec}"
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn scenario_lines_stay_right_after_empty_documents_and_bare_cr_line_ends() {
    let dir = tempfile::tempdir().unwrap();
    let body =
        "  duration: 1m\n  timeline:\n    - at: 10s\n      scale: {deployment: api, replicas: 2}\n";
    let mut expected = 0;
    for (name, before) in [
        ("plain.yaml", ""),
        ("empty-string.yaml", "--- ''\n---\n"),
        ("null.yaml", "--- NULL\n---\n"),
    ] {
        let file = scenario(dir.path(), name, before, body);
        let line = line_of(&file, "deployment: api");
        if before.is_empty() {
            expected = line;
        } else {
            assert_eq!(line, expected + 2);
        }
        run(&["simulate", &file], None).says(
            1,
            &format!("{file}:{line}: spec.timeline[0].scale.deployment: no Deployment default/api in this scenario"),
        );
    }
    let file = scenario(dir.path(), "cr.yaml", "", body);
    let text = std::fs::read_to_string(&file).unwrap().replace('\n', "\r");
    std::fs::write(&file, text).unwrap();
    run(&["simulate", &file], None).says(
        1,
        &format!("{file}:{expected}: spec.timeline[0].scale.deployment: no Deployment default/api in this scenario"),
    );
}

#[test]
fn scenario_counts_and_lengths_are_capped_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        "replicas.yaml",
        "",
        "  duration: 1m\n  timeline:\n    - at: 10s\n      scale: {deployment: web, replicas: 2147483647}\n",
    );
    let line = line_of(&file, "replicas: 2147483647");
    run(&["simulate", &file], None).says(
        1,
        &format!("{file}:{line}: spec.timeline[0].scale.replicas: 2147483647 is more than a scenario runs: at most 100000 per workload or static NodePool (the simulated cluster would grow until memory ran out)"),
    );
    for (request, message) in [
        (
            "7Ei",
            "cpu: quantity \"7Ei\" is out of range: it is more than 9223372036854775807 milli-units (2^63-1), the most this tool counts",
        ),
        (
            "-1",
            "cpu: \"-1\" is negative; Kubernetes requires requests and limits to be 0 or more",
        ),
    ] {
        let file = scenario(dir.path(), "request.yaml", "", "  duration: 1m\n");
        let text = std::fs::read_to_string(&file).unwrap().replace(
            "containers: [{name: web, image: web}]",
            &format!("containers: [{{name: web, image: web, resources: {{requests: {{cpu: \"{request}\"}}}}}}]"),
        );
        std::fs::write(&file, text).unwrap();
        let line = line_of(&file, "containers:");
        run(&["simulate", &file], None).says(
            1,
            &format!("{file}:{line}: spec.template.spec.containers: pod default/: container web: {message}"),
        );
    }
    let file = scenario(dir.path(), "ok.yaml", "", "  duration: 1m\n");
    run(&["simulate", &file, "--until", "100000h"], None).says(
        1,
        "--until: 100000h is longer than the longest run, 8784h (366 days of virtual time)",
    );
    let file = scenario(dir.path(), "seed.yaml", "", "  seed: -1\n");
    let line = line_of(&file, "seed: -1");
    run(&["simulate", &file], None).says(
        1,
        &format!("{file}:{line}: spec.seed: expected a non-negative integer, found the integer -1"),
    );
}

#[test]
fn an_operator_action_the_journal_refuses_fails_the_run() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        "pause.yaml",
        "",
        "  duration: 1m\n  timeline:\n    - at: 10s\n      operator: {action: pause}\n",
    );
    let r = run(&["simulate", &file, "--journal", "/dev/full"], None);
    r.says(
        1,
        "simulate: operator action not done: not done, the journal refused it: journal /dev/full: No space left on device (os error 28)",
    );
}

#[test]
fn a_directory_as_journal_is_named_as_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path(), "ok.yaml", "", "  duration: 1m\n");
    let d = dir.path().display().to_string();
    run(&["simulate", &file, "--journal", &d], None).says(
        1,
        &format!("journal {d}: is a directory; give a file path such as journal.jsonl"),
    );
}

#[test]
fn a_journal_reads_back_for_review_and_a_torn_line_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.jsonl").display().to_string();
    let file = scenario(
        dir.path(),
        "pause.yaml",
        "",
        "  duration: 1m\n  timeline:\n    - at: 10s\n      operator: {action: pause, }\n    - at: 20s\n      operator: {action: resume}\n",
    );
    let r = run(&["simulate", &file, "--journal", &journal], None);
    assert_eq!(r.code, Some(0), "{}", r.transcript());
    let table = run(&["journal", &journal], None);
    assert_eq!(table.code, Some(0), "{}", table.transcript());
    let rows: Vec<&str> = table.stdout.lines().collect();
    assert!(rows[0].starts_with("TIME "), "{}", table.stdout);
    assert!(
        rows.iter()
            .any(|l| l.contains(" scenario ") && l.contains(" paused ")),
        "{}",
        table.stdout
    );
    let json = run(&["journal", "--json", &journal], None);
    let entries: serde_json::Value = serde_json::from_str(&json.stdout).expect("a JSON array");
    assert_eq!(entries.as_array().unwrap().len(), rows.len() - 1);

    // A crash mid-write: the reviewer still reads every complete entry.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();
    f.write_all(b"{\"at\":\"2026-01-05T09:0").unwrap();
    drop(f);
    let torn = run(&["journal", &journal], None);
    torn.says(
        0,
        &format!("warning: journal {journal}: the last line is cut short (a crash while writing?) and is skipped: {{\"at\":\"2026-01-05T09:0"),
    );
    assert_eq!(torn.stdout, table.stdout);
    // The next run cuts the fragment and appends on a line of its own.
    let again = run(&["simulate", &file, "--journal", &journal], None);
    again.says(
        0,
        &format!("warning: journal {journal}: the last line was cut short (22 bytes without an end, likely a crash while writing); removed it, keeping every complete entry"),
    );
    let after = run(&["journal", &journal], None);
    assert_eq!(after.code, Some(0), "{}", after.transcript());
    assert!(after.stderr.is_empty(), "{}", after.transcript());
    assert_eq!(after.stdout.lines().count(), 2 * rows.len() - 1);
}
