//! End to end: the terminal always comes back. The real console in tmux is stopped by
//! SIGINT, SIGHUP and SIGQUIT (sent by `kill`, as a closing terminal or a supervisor
//! would) and by a panic in its controller; each time the shell behind it must be back in
//! cooked mode, off the alternate screen, with a message and a failing exit status.
//! Needs tmux (.ci/run installs it).

#[path = "peers/tmux.rs"]
mod tmux;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tmux::Tmux;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

/// Starts the console in tmux; the shell reports its exit status and terminal mode.
fn console(dir: &Path, env: &str) -> Tmux {
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={cfg} XDG_STATE_HOME={state} {env} sh -c 'echo $$ > {pid}; exec {BIN} --speed 6'; \
         echo EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
        cfg = dir.join("config").display(),
        state = dir.join("state").display(),
        pid = dir.join("pid").display(),
    );
    let tmux = Tmux::start(dir, &command);
    tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview")
    });
    assert!(
        tmux.alternate_screen(),
        "the console is on the alternate screen"
    );
    tmux
}

/// The shell's view once the console is gone: cooked mode, normal screen.
fn assert_restored(tmux: &Tmux, exit: &str, message: &str) -> String {
    // The shell prints the exit status, then the terminal's mode on the next line.
    let mode_after = |s: &str| {
        s.lines()
            .skip_while(|l| !l.contains(exit))
            .nth(1)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let screen = tmux.wait_for(exit, Duration::from_secs(20), |s| !mode_after(s).is_empty());
    assert!(
        !tmux.alternate_screen(),
        "left the alternate screen:\n{screen}"
    );
    assert_eq!(
        mode_after(&screen),
        "icanon",
        "the terminal is back in cooked mode:\n{screen}"
    );
    assert!(screen.contains(message), "says why it stopped:\n{screen}");
    screen
}

#[test]
fn sigint_sighup_and_sigquit_restore_the_terminal() {
    for (signal, code) in [("INT", 130), ("HUP", 129), ("QUIT", 131)] {
        let dir = tempfile::tempdir().unwrap();
        let tmux = console(dir.path(), "");
        let pid = std::fs::read_to_string(dir.path().join("pid")).unwrap();
        let ok = Command::new("kill")
            .args(["-s", signal, pid.trim()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -s {signal}");
        assert_restored(
            &tmux,
            &format!("EXIT={code}"),
            &format!("stopped by SIG{signal}"),
        );
    }
}

#[test]
fn a_controller_panic_ends_the_console_with_a_message_and_a_failing_status() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = console(dir.path(), "KARPENTER_TUI_TEST_PANIC_AT_SECONDS=60");
    let screen = assert_restored(&tmux, "EXIT=1", "panicked at src/simulation.rs");
    assert!(
        screen.contains("the console stopped"),
        "the console ends rather than freezing:\n{screen}"
    );
}
