//! End to end: the mouse in a real terminal (tmux). tmux passes the terminal's mouse
//! reports (SGR 1006 sequences, as xterm sends them) to the console like any input, so
//! a click is typed as the bytes a terminal would send. A click on a tab switches views,
//! a click on a row and a second click open its details, the wheel scrolls them, and on
//! quit the terminal stops reporting the mouse. Needs tmux (.ci/run installs it).

#[path = "peers/tmux.rs"]
mod tmux;

use std::process::Command;
use std::time::Duration;

use tmux::Tmux;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

/// What a terminal sends for a left click at 0-based (column, row): press and release.
fn click(x: usize, y: usize) -> String {
    format!("\x1b[<0;{};{}M\x1b[<0;{};{}m", x + 1, y + 1, x + 1, y + 1)
}

/// What a terminal sends for one wheel notch down at (column, row).
fn wheel_down(x: usize, y: usize) -> String {
    format!("\x1b[<65;{};{}M", x + 1, y + 1)
}

fn flag(tmux: &Tmux, name: &str) -> String {
    let out = Command::new("tmux")
        .args(["-S", &tmux.socket, "display", "-p", &format!("#{{{name}}}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn clicks_switch_views_and_open_rows_and_the_wheel_scrolls() {
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "KARPENTER_TUI_CONFIG_DIR={} XDG_STATE_HOME={} {BIN} --speed 2; echo EXIT=$?; sleep 60",
        dir.path().join("config").display(),
        dir.path().join("state").display()
    );
    let tmux = Tmux::start(dir.path(), &command);
    let screen = tmux.wait_for("the console", Duration::from_secs(20), |s| {
        s.contains("1 Overview") && s.contains("3 Nodes")
    });
    assert_eq!(
        flag(&tmux, "mouse_any_flag"),
        "1",
        "the console asks for the mouse"
    );

    // The tabs are on the second line.
    let tabs = screen.lines().nth(1).unwrap();
    let x = tabs.find("3 Nodes").unwrap() + 2;
    tmux.keys(&click(x, 1));
    tmux.wait_for("the Nodes view", Duration::from_secs(10), |s| {
        s.lines().any(|l| l.contains("NODE") && l.contains("STATE"))
    });
    // The demo's first nodes appear within a few seconds.
    let screen = tmux.wait_for("two nodes in the table", Duration::from_secs(30), |s| {
        s.lines()
            .filter(|l| l.starts_with('│') && (l.contains(" od ") || l.contains(" spot ")))
            .count()
            >= 2
    });

    // The second node row: click selects it, a second click opens its details.
    let header = screen
        .lines()
        .position(|l| l.contains("NODE") && l.contains("STATE"))
        .unwrap();
    let y = header + 2;
    let node = screen.lines().nth(y).unwrap().trim_start_matches('│');
    let name = node.split_whitespace().next().unwrap().to_string();
    tmux.keys(&click(10, y));
    // A person's double click: the second press comes a moment after the first.
    std::thread::sleep(Duration::from_millis(300));
    tmux.keys(&click(10, y));
    tmux.wait_for("the node's details", Duration::from_secs(10), |s| {
        s.contains("esc close") && s.contains(&name)
    });
    // The popup's title counts the line at its top: one notch moves it three lines.
    tmux.keys(&wheel_down(40, 10));
    tmux.wait_for("the popup scrolled", Duration::from_secs(10), |s| {
        s.lines()
            .any(|l| l.contains("esc close") && l.contains(" 4/"))
    });

    tmux.key("Escape");
    // As a person does, wait for the popup to close before the next key: an Escape and a
    // `q` read together are Alt+q to the terminal parser (seen on a loaded machine).
    tmux.wait_for("the popup closed", Duration::from_secs(10), |s| {
        !s.contains("esc close")
    });
    tmux.keys("q");
    let screen = tmux.wait_for("the exit", Duration::from_secs(15), |s| s.contains("EXIT="));
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert_eq!(
        flag(&tmux, "mouse_any_flag"),
        "0",
        "the terminal no longer reports the mouse after quit"
    );
}
