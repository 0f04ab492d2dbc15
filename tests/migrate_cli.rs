//! Acceptance tests of `karpenter-tui migrate`: the real binary run over the v1beta1
//! manifests in `tests/fixtures/v1beta1/`, its output fed back into `karpenter-tui validate`.
//!
//! - `*.yaml`: realistic v1beta1 manifests. Each must convert (exit 0) with the warnings
//!   listed in [`EXPECTED`] on stderr and nothing else there but warnings; the converted
//!   YAML must pass `validate -f -`, and migrating it again must change nothing.
//! - `invalid/*.yaml`: input that cannot be converted: exit 1, the error names file,
//!   document and field path, and nothing is printed on stdout.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");
const FIXTURES: &str = "tests/fixtures/v1beta1";

/// A warning that must appear: (document, field path, message substring).
type ExpectedWarning = (usize, &'static str, &'static str);

/// Per fixture: the warnings that must appear.
const EXPECTED: &[(&str, &[ExpectedWarning])] = &[
    (
        "general-purpose.yaml",
        &[
            (1, "spec.disruption.consolidateAfter", "set to 0s"),
            (
                1,
                "spec.disruption.expireAfter",
                "moved to spec.template.spec.expireAfter",
            ),
            (1, "spec.template.spec.expireAfter", "forceful"),
            (
                1,
                "spec.template.spec.kubelet",
                "EC2NodeClass \"al2\" (line 57)",
            ),
            (
                1,
                "spec.template.metadata.annotations[karpenter.sh/do-not-consolidate]",
                "karpenter.sh/do-not-disrupt",
            ),
            (2, "spec.amiSelectorTerms", "al2@latest"),
            (
                2,
                "spec.metadataOptions.httpPutResponseHopLimit",
                "set to 2",
            ),
        ],
    ),
    (
        "spot.yaml",
        &[
            (1, "spec.template.spec.expireAfter", "720h"),
            (1, "spec.template.spec.expireAfter", "forceful"),
            (2, "spec.amiSelectorTerms", "al2023@latest"),
            (2, "spec.userData", "spec.kubelet"),
            (
                2,
                "spec.metadataOptions.httpPutResponseHopLimit",
                "set to 2",
            ),
        ],
    ),
    (
        "custom-ami.yaml",
        &[
            (1, "spec.userData", "karpenter.sh/unregistered:NoExecute"),
            (1, "spec.userData", "spec.kubelet"),
        ],
    ),
    (
        "nodeclaim.yaml",
        &[
            (
                1,
                "metadata.annotations[karpenter.sh/do-not-evict]",
                "karpenter.sh/do-not-disrupt",
            ),
            (1, "status", "removed"),
            (
                1,
                "spec.expireAfter",
                "NodePool \"general-purpose\" is not in this input",
            ),
        ],
    ),
    (
        "multi-document.yaml",
        &[
            (
                1,
                "spec.template.spec.kubelet",
                "EC2NodeClass \"bottlerocket\" (line 51)",
            ),
            (
                2,
                "spec.template.spec.kubelet",
                "EC2NodeClass \"bottlerocket\" (line 51)",
            ),
            (2, "spec.disruption.expireAfter", "moved"),
            (3, "spec.amiSelectorTerms", "bottlerocket@latest"),
            (3, "spec.userData", "spec.kubelet"),
            (
                4,
                "spec.template.spec.nodeClassRef.group",
                "karpenter.k8s.aws",
            ),
            (4, "spec.template.spec.nodeClassRef.kind", "EC2NodeClass"),
            (5, "", "nothing to change"),
        ],
    ),
];

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn transcript(&self) -> String {
        format!(
            "exit code {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs the binary from the crate root, so it prints file names as we pass them.
fn karpenter_tui(args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env_remove("LOG_LEVEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.unwrap_or("").as_bytes())
            .expect("stdin is written");
    }
    let out = child.wait_with_output().expect("the binary finishes");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The document (counting from 1) that line `line` of `text` belongs to: a `---` line
/// after some content starts the next one. Counted here, not by the code under test.
fn document_of_line(text: &str, line: usize) -> usize {
    let mut doc = 1;
    let mut content = false;
    for l in text.lines().take(line) {
        if l.starts_with("---") && content {
            doc += 1;
            content = false;
        } else if !l.trim().is_empty() && !l.trim_start().starts_with('#') && !l.starts_with("---")
        {
            content = true;
        }
    }
    doc
}

fn fixtures() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURES);
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixture directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_fixture_has_expectations() {
    let listed: Vec<&str> = EXPECTED.iter().map(|(f, _)| *f).collect();
    for name in fixtures() {
        assert!(
            listed.contains(&name.as_str()),
            "{name} has no entry in EXPECTED"
        );
    }
}

#[test]
fn fixtures_convert_with_their_warnings_and_the_output_validates() {
    let mut failures = String::new();
    for (name, expected) in EXPECTED {
        let file = format!("{FIXTURES}/{name}");
        let run = karpenter_tui(&["migrate", "-f", &file], None);
        if run.code != Some(0) {
            let _ = writeln!(failures, "{name}: migrate failed\n{}", run.transcript());
            continue;
        }
        for line in run.stderr.lines() {
            if !line.starts_with(&format!("warning: {file}:")) {
                let _ = writeln!(failures, "{name}: unexpected stderr line: {line}");
            }
        }
        let source = std::fs::read_to_string(&file).expect("fixture");
        for (doc, path, text) in *expected {
            // `warning: FILE:LINE: path: ...` with LINE inside document `doc`.
            let prefix = if path.is_empty() {
                format!("warning: {file}:<line in document {doc}>: ")
            } else {
                format!("warning: {file}:<line in document {doc}>: {path}: ")
            };
            let found = run.stderr.lines().any(|l| {
                let Some(rest) = l.strip_prefix(&format!("warning: {file}:")) else {
                    return false;
                };
                let Some((line, message)) = rest.split_once(": ") else {
                    return false;
                };
                let in_doc = line
                    .parse::<usize>()
                    .is_ok_and(|n| document_of_line(&source, n) == *doc);
                let on_path = path.is_empty() || message.starts_with(&format!("{path}: "));
                in_doc && on_path && message.contains(text)
            });
            if !found {
                let _ = writeln!(
                    failures,
                    "{name}: missing `{prefix}...{text}...`\n{}",
                    run.transcript()
                );
            }
        }
        let validated = karpenter_tui(&["validate", "-f", "-"], Some(&run.stdout));
        if validated.code != Some(0) {
            let _ = writeln!(
                failures,
                "{name}: converted output does not validate\n{}",
                validated.transcript()
            );
        }
        let again = karpenter_tui(&["migrate", "-f", "-"], Some(&run.stdout));
        if again.code != Some(0) || again.stdout != run.stdout {
            let _ = writeln!(
                failures,
                "{name}: migrating the output again changed it\n{}",
                again.transcript()
            );
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

#[test]
fn custom_ami_family_without_terms_is_an_error_naming_file_document_and_field() {
    let file = format!("{FIXTURES}/invalid/custom-without-terms.yaml");
    let run = karpenter_tui(&["migrate", "-f", &file], None);
    assert_eq!(run.code, Some(1), "{}", run.transcript());
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with(&format!("{file}:20: spec.amiSelectorTerms: "))),
        "{}",
        run.transcript()
    );
    assert!(
        run.stdout.is_empty(),
        "no partial output: {}",
        run.transcript()
    );
}

#[test]
fn malformed_yaml_is_an_error_naming_file_and_document() {
    let file = format!("{FIXTURES}/invalid/malformed.yaml");
    let run = karpenter_tui(&["migrate", "-f", &file], None);
    assert_eq!(run.code, Some(1), "{}", run.transcript());
    assert!(
        run.stderr
            .contains(&format!("{file}:20:1: malformed YAML: ")),
        "{}",
        run.transcript()
    );
    assert!(run.stdout.is_empty(), "{}", run.transcript());
}

#[test]
fn empty_input_is_an_error() {
    let run = karpenter_tui(&["migrate", "-f", "-"], Some("# nothing here\n"));
    assert_eq!(run.code, Some(1), "{}", run.transcript());
    assert!(
        run.stderr.contains("-: no Kubernetes objects"),
        "{}",
        run.transcript()
    );
}

#[test]
fn other_kinds_pass_through_stdin_with_a_warning() {
    let input = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 3}
---
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: AL2023
  role: R
  subnetSelectorTerms: [{id: subnet-0abc}]
  securityGroupSelectorTerms: [{id: sg-0abc}]
";
    let run = karpenter_tui(&["migrate", "-f", "-"], Some(input));
    assert_eq!(run.code, Some(0), "{}", run.transcript());
    assert!(
        run.stderr
            .contains("warning: -:1: apps/v1 Deployment is not a Karpenter object"),
        "{}",
        run.transcript()
    );
    assert!(
        run.stdout.starts_with("apiVersion: apps/v1\n"),
        "{}",
        run.transcript()
    );
    assert!(
        run.stdout.contains("alias: al2023@latest"),
        "{}",
        run.transcript()
    );
}

#[test]
fn pools_sharing_a_class_with_different_kubelets_fail() {
    let pool = |name: &str, max_pods: u32| {
        format!(
            "apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      requirements: []
      nodeClassRef: {{apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: shared}}
      kubelet: {{maxPods: {max_pods}}}
"
        )
    };
    let input = format!("{}---\n{}", pool("a", 10), pool("b", 20));
    let run = karpenter_tui(&["migrate", "-f", "-"], Some(&input));
    assert_eq!(run.code, Some(1), "{}", run.transcript());
    assert!(
        run.stderr.contains(
            "-:19: spec.template.spec.kubelet: differs from the kubelet of NodePool \"a\" (line 1)"
        ),
        "{}",
        run.transcript()
    );
    assert!(
        run.stderr.contains("split \"shared\""),
        "{}",
        run.transcript()
    );
}
