//! End to end, in a real terminal (tmux): input that cannot surprise. A paste is text
//! for the prompt it lands in and never keys; keys typed before the first frame do
//! nothing; reject asks first; ctrl-c quits whatever the keymap says. Needs tmux.

#[path = "peers/tmux.rs"]
mod tmux;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tmux::{Tmux, first_awaiting};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

/// The demo with every decision waiting for the operator, on a fast clock, in a shell
/// that reports how the console exited. `before` runs first (e.g. a pause).
fn console(dir: &Path, before: &str, args: &str) -> Tmux {
    let command = format!(
        "{before}KARPENTER_TUI_CONFIG_DIR={} XDG_STATE_HOME={} {BIN} --speed 6 --approve manual {args}; \
         echo EXIT=$?; sleep 60",
        dir.join("config").display(),
        dir.join("state").display()
    );
    Tmux::start(dir, &command)
}

fn tmux_ok(tmux: &Tmux, args: &[&str]) {
    let ok = Command::new("tmux")
        .args(["-S", &tmux.socket])
        .args(args)
        .status()
        .unwrap()
        .success();
    assert!(ok, "tmux {args:?}");
}

/// The demo's Disruption view once a decision waits; returns its id.
fn a_waiting_decision(tmux: &Tmux) -> u64 {
    tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview")
    });
    tmux.keys("5");
    let screen = tmux.wait_for(
        "a decision awaiting approval",
        Duration::from_secs(40),
        |s| first_awaiting(s).is_some(),
    );
    first_awaiting(&screen).unwrap()
}

/// What was seen: pasting `ip-10⏎Ay` into the filter prompt approved decisions #1 and #2
/// (the newline submitted the filter, then `A` and `y` ran as keys).
#[test]
fn a_paste_into_the_filter_prompt_approves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = console(dir.path(), "", "");
    let id = a_waiting_decision(&tmux);
    tmux.keys("/");
    tmux.wait_for("the filter prompt", Duration::from_secs(5), |s| {
        s.contains("enter keep")
    });
    // paste-buffer -p wraps the text in bracketed-paste markers when the application
    // asked for them, as a terminal does for a real paste.
    tmux_ok(&tmux, &["set-buffer", "--", "ip-10\nAy"]);
    tmux_ok(&tmux, &["paste-buffer", "-p"]);
    tmux.wait_for("the paste as filter text", Duration::from_secs(5), |s| {
        s.lines().any(|l| l.starts_with("/ip-10 Ay"))
    });
    tmux.key("Escape");
    let screen = tmux.wait_for("the filter closed", Duration::from_secs(5), |s| {
        !s.contains("enter keep") && first_awaiting(s).is_some()
    });
    assert!(!screen.contains("approved #"), "{screen}");
    assert!(!screen.contains("Confirm"), "{screen}");
    assert!(
        screen.contains(&format!("#{id}")),
        "decision #{id} still waits:\n{screen}"
    );
    // Outside a prompt a paste is dropped, with a word in the footer.
    tmux_ok(&tmux, &["set-buffer", "--", "Ay"]);
    tmux_ok(&tmux, &["paste-buffer", "-p"]);
    let screen = tmux.wait_for("the paste refused", Duration::from_secs(5), |s| {
        s.contains("paste ignored")
    });
    assert!(
        !screen.contains("approved #") && !screen.contains("Confirm"),
        "{screen}"
    );
}

/// What was seen: `5 A y p` typed before anything was visible paused all disruption.
#[test]
fn keys_typed_before_the_first_frame_are_discarded() {
    let dir = tempfile::tempdir().unwrap();
    // The console starts a second after the shell: the keys are already waiting.
    let tmux = console(dir.path(), "sleep 1; LOG_LEVEL=info ", "");
    tmux.keys("5Ayp");
    tmux.key("Enter");
    tmux.keys("y");
    let screen = tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview")
    });
    // Give any key that got through time to show.
    std::thread::sleep(Duration::from_millis(1500));
    let screen = format!("{screen}\n{}", tmux.capture());
    assert!(!screen.contains("PAUSED"), "{screen}");
    assert!(!screen.contains("Confirm"), "{screen}");
    tmux.keys("q");
    let screen = tmux.wait_for("the exit", Duration::from_secs(15), |s| s.contains("EXIT="));
    // Only the q was taken as a key; the others reached the console and were dropped.
    assert!(screen.contains("and 1 keys"), "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
    let log = std::fs::read_to_string(dir.path().join("state/karpenter-tui/console.log"))
        .unwrap_or_default();
    assert!(
        log.contains("typed before the console was on screen"),
        "the early keys never reached the console, so this test proves nothing:\n{log}"
    );
}

/// What was seen: `x` asked nothing; two presses 0.4 s apart rejected two decisions.
#[test]
fn reject_asks_first_and_takes_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = console(dir.path(), "", "");
    let id = a_waiting_decision(&tmux);
    tmux.keys("x");
    tmux.wait_for("the confirmation", Duration::from_secs(5), |s| {
        s.contains("Confirm") && s.contains(&format!("Reject decision #{id}"))
    });
    // A second x is text in the reason field, not a second rejection.
    std::thread::sleep(Duration::from_millis(400));
    tmux.keys("x");
    tmux.key("Escape");
    let screen = tmux.wait_for("the cancellation", Duration::from_secs(5), |s| {
        s.contains("cancelled")
    });
    assert!(!screen.contains("rejected #"), "{screen}");
    tmux.keys("x");
    tmux.wait_for("the confirmation", Duration::from_secs(5), |s| {
        s.contains("reason (optional)")
    });
    tmux.keys("peak traffic at 10:00");
    tmux.key("Enter");
    tmux.wait_for("the rejection", Duration::from_secs(10), |s| {
        s.contains(&format!("rejected #{id}"))
    });
    tmux.keys("6");
    tmux.wait_for("the reason in the events", Duration::from_secs(10), |s| {
        s.contains("peak traffic at 10:00")
    });
}

/// What was seen: a keymap without ctrl-c for quit left the operator stuck in a prompt.
#[test]
fn ctrl_c_quits_even_with_a_keymap_that_unbinds_it() {
    let dir = tempfile::tempdir().unwrap();
    let keymap = dir.path().join("keymap.toml");
    std::fs::write(&keymap, "[keys]\nquit = [\"F10\"]\n").unwrap();
    let tmux = console(dir.path(), "", &format!("--keymap {}", keymap.display()));
    tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview") && s.contains("f10 quit")
    });
    tmux.keys(":");
    tmux.key("C-c");
    let screen = tmux.wait_for("the exit", Duration::from_secs(15), |s| s.contains("EXIT="));
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!tmux.alternate_screen(), "left the alternate screen");
}
