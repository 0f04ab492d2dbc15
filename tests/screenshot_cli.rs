//! `karpenter-tui screenshot`: the demo's views as SVG and PNG files, and clear errors.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_karpenter-tui");

fn run(args: &[&str], config_dir: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("KARPENTER_TUI_CONFIG_DIR", config_dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn svg_and_png_of_a_view() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("d.svg");
    let (ok, _, err) = run(
        &[
            "screenshot",
            "--view",
            "disruption",
            "--out",
            svg.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg") || text.starts_with("<?xml"),
        "{}",
        &text[..80]
    );
    assert!(text.contains("Decisions") && text.contains("awaiting approval"));
    // Box drawing is geometry, not glyphs.
    assert!(!text.contains('─') && !text.contains('│'));

    let png = dir.path().join("o.png");
    let (ok, _, err) = run(
        &[
            "screenshot",
            "--view",
            "overview",
            "--theme",
            "light",
            "--size",
            "100x30",
            "--out",
            png.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(ok, "{err}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big-endian, at bytes 16..24: 100 x 9 px by 30 x 18 px.
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((w, h), (900, 540));
}

#[test]
fn bad_requests_say_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.svg");
    let out = out.to_str().unwrap();
    let (ok, _, err) = run(&["screenshot", "--view", "bogus", "--out", out], dir.path());
    assert!(!ok);
    assert!(
        err.contains("--view \"bogus\": one of overview, nodepools, nodes"),
        "{err}"
    );
    let (ok, _, err) = run(&["screenshot", "--out", "x.jpg"], dir.path());
    assert!(!ok);
    assert!(err.contains("must end in .svg or .png"), "{err}");
    // A user theme with a typo: the key and the file are named.
    std::fs::create_dir_all(dir.path().join("themes")).unwrap();
    std::fs::write(
        dir.path().join("themes/mine.toml"),
        "[styles]\nheadr = { fg = \"red\" }\n",
    )
    .unwrap();
    let (ok, _, err) = run(&["screenshot", "--theme", "mine", "--out", out], dir.path());
    assert!(!ok);
    assert!(err.contains("mine.toml") && err.contains("headr"), "{err}");
}
