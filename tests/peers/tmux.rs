//! A tmux server of its own for driving the real console in a real terminal: start a
//! command in a session, type keys, read the screen.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of our own (its own socket), killed on drop.
pub struct Tmux {
    pub socket: String,
}

impl Tmux {
    pub fn start(dir: &Path, command: &str) -> Tmux {
        let socket = dir.join("tmux.sock").display().to_string();
        let status = Command::new("tmux")
            .args([
                "-S",
                &socket,
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "45",
                command,
            ])
            .env("TERM", "xterm-256color")
            .status()
            .expect("tmux must be installed (.ci/run installs it)");
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    pub fn capture(&self) -> String {
        let out = Command::new("tmux")
            .args(["-S", &self.socket, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[allow(dead_code)]
    pub fn keys(&self, keys: &str) {
        let ok = Command::new("tmux")
            .args(["-S", &self.socket, "send-keys", "-l", keys])
            .status()
            .unwrap()
            .success();
        assert!(ok, "send-keys {keys}");
    }

    /// Sends one key by its tmux name ("Escape", "Enter", "Up", "C-c").
    #[allow(dead_code)]
    pub fn key(&self, name: &str) {
        let ok = Command::new("tmux")
            .args(["-S", &self.socket, "send-keys", name])
            .status()
            .unwrap()
            .success();
        assert!(ok, "send-keys {name}");
    }

    #[allow(dead_code)]
    pub fn alternate_screen(&self) -> bool {
        let out = Command::new("tmux")
            .args(["-S", &self.socket, "display", "-p", "#{alternate_on}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Polls the screen until `pred` holds; panics with the last screen after `within`.
    pub fn wait_for(&self, what: &str, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if pred(&screen) {
                return screen;
            }
            if start.elapsed() > within {
                panic!("waited {within:?} for {what}; the screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-S", &self.socket, "kill-server"])
            .status();
    }
}

/// The decision id on the first "awaiting approval" row of the Disruption view.
#[allow(dead_code)]
pub fn first_awaiting(screen: &str) -> Option<u64> {
    screen
        .lines()
        .find(|l| l.contains("awaiting approval") && l.trim_start_matches('│').starts_with('#'))
        .and_then(|l| {
            l.trim_start_matches('│')
                .trim_start_matches('#')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
}
