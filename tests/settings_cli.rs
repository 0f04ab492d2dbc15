//! Upstream's settings as the binary reads them (flags and upstream's environment
//! variable names), the shell completions and the man page, from the binary as a user
//! runs it.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("LOG_LEVEL")
        .envs(env.iter().copied())
        .output()
        .expect("run karpenter-tui")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A value upstream would not take is refused before anything connects, naming the
/// flag and, for the settings read through one parser, the environment variable it
/// came from. (The kubeconfig does not exist: reaching it would be another error.)
#[test]
fn a_bad_setting_in_the_environment_is_refused_by_name_before_anything_connects() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "BATCH_MAX_DURATION",
            "10",
            &["BATCH_MAX_DURATION", "Go writes it"],
        ),
        ("BATCH_IDLE_DURATION", "-1s", &["BATCH_IDLE_DURATION"]),
        (
            "PREFERENCE_POLICY",
            "ignore",
            &["PREFERENCE_POLICY", "Respect or Ignore"],
        ),
        ("MIN_VALUES_POLICY", "Loose", &["MIN_VALUES_POLICY"]),
        (
            "FEATURE_GATES",
            "Bogus=true",
            &["FEATURE_GATES", "unknown gate"],
        ),
        (
            "VM_MEMORY_OVERHEAD_PERCENT",
            "7.5",
            &["--vm-memory-overhead-percent", "below 1"],
        ),
        ("RESERVED_ENIS", "-1", &["--reserved-enis"]),
        ("ISOLATED_VPC", "maybe", &["--isolated-vpc"]),
        (
            "LOG_LEVEL",
            "inof",
            &["--log-level", "debug, info, warn or error"],
        ),
        ("LOG_LEVEL", "info,x=loud", &["--log-level"]),
    ];
    for (var, value, words) in cases {
        let out = run(
            &["controller", "--kubeconfig", "/nonexistent/kubeconfig"],
            &[(var, value)],
        );
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{var}={value} was taken:\n{err}");
        for w in *words {
            assert!(err.contains(w), "{var}={value}: {w:?} not in:\n{err}");
        }
        assert!(
            !err.contains("kubeconfig"),
            "{var}={value}: refused late:\n{err}"
        );
    }
    // Good values get past the settings to the kubeconfig.
    let out = run(
        &["controller", "--kubeconfig", "/nonexistent/kubeconfig"],
        &[
            ("BATCH_MAX_DURATION", "20s"),
            ("BATCH_IDLE_DURATION", "500ms"),
            ("PREFERENCE_POLICY", "Ignore"),
            ("ISOLATED_VPC", "true"),
            ("RESERVED_ENIS", "1"),
            ("VM_MEMORY_OVERHEAD_PERCENT", "0.1"),
            ("LOG_LEVEL", "info"),
        ],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    assert!(
        err.contains("settings: ") && err.contains("BATCH_MAX_DURATION=20s"),
        "{err}"
    );
}

/// `completions SHELL` prints a script that knows every subcommand and the settings'
/// flags; bash's parses.
#[test]
fn completions_know_the_subcommands_and_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell], &[]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in [
            "controller",
            "whatif",
            "export",
            "batch-max-duration",
            "preference-policy",
        ] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("karpenter-tui.bash");
    std::fs::write(&path, run(&["completions", "bash"], &[]).stdout).unwrap();
    let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(check.status.success(), "{}", text(&check.stderr));
    let out = run(&["completions", "tcsh"], &[]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("bash"),
        "the shells it knows are named"
    );
}

/// `man` prints one roff page with every subcommand and the environment variables; man
/// renders it without a warning.
#[test]
fn the_man_page_documents_every_subcommand_and_renders() {
    let out = run(&["man"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.contains(".TH karpenter-tui 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    for section in [
        "CONTROLLER",
        "RUN",
        "ATTACH",
        "WHATIF",
        "EXPORT",
        "COMPLETIONS",
        "MAN",
    ] {
        assert!(
            page.contains(&format!(".SH \"{section}\"")),
            "no {section} section"
        );
    }
    for var in [
        "LOG_LEVEL",
        "FEATURE_GATES",
        "BATCH_MAX_DURATION",
        "BATCH_IDLE_DURATION",
        "MIN_VALUES_POLICY",
        "PREFERENCE_POLICY",
        "CLUSTER_NAME",
        "CLUSTER_ENDPOINT",
        "INTERRUPTION_QUEUE",
        "ISOLATED_VPC",
        "RESERVED_ENIS",
        "VM_MEMORY_OVERHEAD_PERCENT",
    ] {
        assert!(page.contains(var), "the man page does not name {var}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("karpenter-tui.1");
    std::fs::write(&path, &out.stdout).unwrap();
    let rendered = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(&path)
        .output()
        .expect("groff (the man page renderer)");
    assert!(
        rendered.status.success() && rendered.stderr.is_empty(),
        "groff: {}",
        text(&rendered.stderr)
    );
}
