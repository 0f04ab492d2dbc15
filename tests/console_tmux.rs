//! End to end: the real binary in a real terminal (tmux), on the built-in demo. An
//! operator waits for a decision, approves it from the keyboard, sees it execute, and
//! quits; the terminal must come back in cooked mode and out of the alternate screen.
//! Needs tmux (.ci/run installs it).

#[path = "peers/tmux.rs"]
mod tmux;

use std::process::Command;
use std::time::Duration;

use tmux::{Tmux, first_awaiting};

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

#[test]
fn approve_from_the_keyboard_and_quit_restores_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let state = dir.path().join("state");
    // Manual approval: every decision waits for the operator. Fast clock: the demo's
    // first decisions come within ~10 s of wall time.
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={} XDG_STATE_HOME={} {BIN} --speed 6 --approve manual; \
         echo EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
        config.display(),
        state.display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview")
    });
    assert!(
        tmux.alternate_screen(),
        "the console draws on the alternate screen"
    );

    // A resize redraws at the new size.
    let ok = Command::new("tmux")
        .args(["-S", &tmux.socket, "resize-window", "-x", "100", "-y", "30"])
        .status()
        .unwrap()
        .success();
    assert!(ok, "resize-window");
    tmux.wait_for("the console at 100 columns", Duration::from_secs(10), |s| {
        // The rightmost panel's corner sits in the last of the 100 columns.
        s.lines()
            .any(|l| l.ends_with('┐') && l.chars().count() == 100)
    });
    tmux.keys("5");
    let screen = tmux.wait_for(
        "a decision awaiting approval",
        Duration::from_secs(60),
        |s| first_awaiting(s).is_some(),
    );
    let id = first_awaiting(&screen).unwrap();

    tmux.keys("a");
    tmux.wait_for("the approval", Duration::from_secs(10), |s| {
        s.contains(&format!("approved #{id}"))
    });
    // Executed: the history says so (the command launches its replacement or deletes).
    tmux.wait_for("the decision executing", Duration::from_secs(60), |s| {
        s.contains(&format!("executing #{id}")) || s.contains(&format!("completed #{id}"))
    });

    tmux.keys("q");
    // Wait for stty's line too: it prints a moment after EXIT=.
    let screen = tmux.wait_for("the exit and stty's report", Duration::from_secs(15), |s| {
        s.contains("EXIT=")
            && s.lines()
                .any(|l| l.trim() == "icanon" || l.trim() == "-icanon")
    });
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("karpenter-tui:") && screen.contains("frames"),
        "{screen}"
    );
    assert!(!tmux.alternate_screen(), "left the alternate screen");
    // stty prints "icanon" (cooked) rather than "-icanon" (raw).
    let after: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("EXIT="))
        .collect();
    assert!(
        after.iter().any(|l| l.trim() == "icanon"),
        "terminal left in raw mode:\n{screen}"
    );
}
