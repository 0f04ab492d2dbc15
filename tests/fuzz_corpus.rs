//! The fuzz corpus under `cargo test`: every file in `fuzz/corpus/<target>/` through its
//! parser's fuzz entry point (`karpenter_tui::fuzzing`), which panics when a promise to
//! the user breaks (a panic on input, a message with a raw control character or a line
//! outside the text). `seed-*` files are where mutation starts; the others are inputs a
//! fuzzing run found (`crash-`, `timeout-`, `oom-`, `wrong-line-`, `accepted-`, ...),
//! kept so the bug stays fixed.

use std::path::Path;

use karpenter_tui::fuzzing::Target;

#[test]
fn every_corpus_input_keeps_its_promises() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut failures = Vec::new();
    let mut count = 0;
    for target in Target::ALL {
        let dir = root.join(target.name());
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} has no corpus", dir.display());
        for file in files {
            let data = std::fs::read(&file).expect("a corpus file");
            count += 1;
            let outcome = std::panic::catch_unwind(|| target.run(&data));
            if let Err(panic) = outcome {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: {message}", file.display()));
            }
        }
    }
    assert!(count >= 40, "only {count} corpus files");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The checks are not vacuous: a broken promise panics, which is what a fuzzer sees.
#[test]
fn the_checks_fail_on_what_they_guard_against() {
    use karpenter_tui::fuzzing::{assert_clean_message, assert_line_inside};
    let forged = "kind: Node\u{1b}[2J\nerror: forged";
    assert!(std::panic::catch_unwind(|| assert_clean_message("x", &forged)).is_err());
    assert!(std::panic::catch_unwind(|| assert_line_inside("a\nb\n", Some(9), &"m")).is_err());
    assert_clean_message("x", &"kind: Node\\u{1b}");
    assert_line_inside("a\nb\n", Some(3), &"m");
    // Every target survives empty and binary input.
    for target in Target::ALL {
        target.run(b"");
        target.run(&[0xff, 0xfe, 0x00, b'{', b'[']);
    }
}
