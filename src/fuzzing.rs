//! One entry point per parser of user input, for fuzzers. Each takes arbitrary bytes,
//! runs the parser the way the binary does, and asserts what a user relies on: no panic,
//! and every message one line with the input's control characters escaped and its line
//! number inside the text. A broken promise panics, which a fuzzer reports as a crash.
//!
//! Three drivers call these: the cargo-fuzz targets under `fuzz/` (libFuzzer, nightly
//! Rust), `tests/fuzz_corpus.rs` (the committed corpus, under `cargo test`), and
//! `karpenter-tui bench fuzz` (a stable-Rust mutation run; see [`crate::bench::fuzz`]).

use std::fmt::Display;

use crate::api::{duration::GoDuration, manifest, migrate, quantity, schedule::Schedule};

/// A parser a fuzzer drives; the name is the corpus directory's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Manifest,
    Migrate,
    Scenario,
    Duration,
    Quantity,
    Cron,
    Theme,
    Keymap,
    Config,
}

impl Target {
    pub const ALL: [Target; 9] = [
        Target::Manifest,
        Target::Migrate,
        Target::Scenario,
        Target::Duration,
        Target::Quantity,
        Target::Cron,
        Target::Theme,
        Target::Keymap,
        Target::Config,
    ];

    /// The corpus directory and cargo-fuzz target name.
    pub fn name(self) -> &'static str {
        match self {
            Target::Manifest => "manifest",
            Target::Migrate => "migrate",
            Target::Scenario => "scenario",
            Target::Duration => "duration",
            Target::Quantity => "quantity",
            Target::Cron => "cron",
            Target::Theme => "theme",
            Target::Keymap => "keymap",
            Target::Config => "config",
        }
    }

    /// Runs one input through this target's parser, panicking on a broken promise.
    pub fn run(self, data: &[u8]) {
        match self {
            Target::Manifest => manifest_input(data),
            Target::Migrate => migrate_input(data),
            Target::Scenario => scenario_input(data),
            Target::Duration => text(data).map_or((), duration),
            Target::Quantity => text(data).map_or((), quantity_text),
            Target::Cron => text(data).map_or((), cron),
            Target::Theme => text(data).map_or((), theme),
            Target::Keymap => text(data).map_or((), keymap),
            Target::Config => text(data).map_or((), config),
        }
    }
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A message a user reads: one line, no raw control character from the input.
pub fn assert_clean_message(what: &str, message: &impl Display) {
    let m = message.to_string();
    assert!(
        !m.chars().any(|c| c.is_control()),
        "{what} message echoes a control character: {m:?}"
    );
}

/// A line number a message gives lies inside the text.
pub fn assert_line_inside(text: &str, line: Option<usize>, message: &impl Display) {
    let (lines, _) = crate::api::input::line_and_column(text);
    if let Some(l) = line {
        assert!(
            (1..=lines).contains(&l),
            "line {l} outside the text's {lines} lines: {message}"
        );
    }
}

/// Bytes as `validate -f -` reads them: the UTF-8 check, then manifests and validation.
fn manifest_input(data: &[u8]) {
    let text = match crate::api::input::read_from("fuzz.yaml", data) {
        Ok(t) => t,
        Err(e) => return assert_clean_message("input", &e),
    };
    let loaded = manifest::load("fuzz.yaml", &text);
    for d in &loaded.diagnostics {
        assert_clean_message("manifest", d);
        assert_line_inside(&text, d.line, d);
    }
    for (doc, object) in &loaded.objects {
        for v in crate::api::validation::validate(object) {
            let d = loaded.error_at("fuzz.yaml", *doc, &v.path, &v.message);
            assert_clean_message("validation", &d);
            assert_line_inside(&text, d.line, &d);
        }
    }
}

/// `migrate`: errors are clean lines, and what it writes reads back as YAML.
fn migrate_input(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match migrate::migrate("fuzz.yaml", text) {
        Ok(m) => {
            for d in &m.warnings {
                assert_clean_message("migrate", d);
            }
            let back = manifest::read_stream("out.yaml", &m.yaml);
            assert!(
                back.errors.is_empty(),
                "migrate wrote YAML it cannot read back: {:?}\n{}",
                back.errors,
                m.yaml
            );
        }
        Err(errors) => {
            for d in &errors {
                assert_clean_message("migrate", d);
                assert_line_inside(text, d.line, d);
            }
        }
    }
}

/// A scenario: parsed, and when valid, run for a simulated minute.
fn scenario_input(data: &[u8]) {
    use crate::cluster::scenario;
    use crate::simulation::{Options, Pace, Simulation};
    let Some(text) = text(data) else { return };
    let s = match scenario::parse("fuzz.yaml", text) {
        Ok(s) => s,
        Err(errors) => {
            for e in &errors {
                assert_clean_message("scenario", e);
                assert_line_inside(text, e.line, e);
            }
            return;
        }
    };
    let Ok(mut sim) = Simulation::new(&s, &Options::default(), Pace::Virtual) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds");
    let end = sim.start() + chrono::TimeDelta::minutes(1);
    rt.block_on(sim.run_until(end, |_| {}));
}

fn duration(text: &str) {
    match GoDuration::parse(text) {
        Ok(d) => {
            if let Some(v) = d.value() {
                assert!(
                    v.as_nanos() <= i64::MAX as u128,
                    "{text:?} accepted past Go's longest duration"
                );
            }
        }
        Err(e) => assert_clean_message("duration", &e),
    }
}

fn quantity_text(text: &str) {
    let valid = quantity::is_valid_quantity(text);
    let parsed = crate::engine::resources::parse_milli(text);
    // The engine counts milli-units, so a valid quantity may be too big for it (7Ei of
    // CPU), but it must never call valid text malformed.
    if valid {
        assert!(
            !matches!(
                parsed,
                Err(crate::engine::resources::QuantityError::Malformed(_))
            ),
            "{text:?} is a valid quantity the engine calls malformed"
        );
    }
    let _ = crate::engine::resources::limit_milli(text);
}

fn cron(text: &str) {
    match Schedule::parse(text) {
        Ok(s) => {
            let t = chrono::DateTime::from_timestamp(1_767_600_000, 0).expect("a fixed instant");
            let never = s.never_fires();
            let next = s.next_after(t);
            let _ = s.last_at_or_before(t);
            assert!(
                !(never && next.is_some()),
                "{text:?} said to never fire but fires at {next:?}"
            );
        }
        Err(e) => assert_clean_message("cron", &e),
    }
}

fn theme(text: &str) {
    let (_, problems) = crate::tui::theme::Theme::read("fuzz.toml", text);
    for p in &problems {
        assert_clean_message("theme", p);
        assert_line_inside(text, p.line, p);
    }
}

fn keymap(text: &str) {
    let (_, problems) = crate::tui::keymap::Keymap::default().overlay("fuzz.toml", text);
    for p in &problems {
        assert_clean_message("keymap", p);
        assert_line_inside(text, p.line, p);
    }
}

fn config(text: &str) {
    let (_, _, problems) = crate::tui::config::parse("fuzz.toml", text);
    for p in &problems {
        assert_clean_message("config", p);
        assert_line_inside(text, p.line, p);
    }
}
