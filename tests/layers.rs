//! The house keeps its layers (DESIGN.md, "Layers: imports only point down"):
//!
//! ```text
//! main.rs cli.rs live_cmd.rs simulation.rs whatif.rs export.rs live.rs demo.rs bench/   the entry layer
//! tui/
//! control/
//! cluster/  cloud/
//! engine/
//! api/
//! ```
//!
//! Every `crate::` path in the library and the binary is read from the source (comments
//! and string literals removed) and checked against the map: a module may name its own
//! layer or one below, never one above. Two rules of the map go further:
//! - `cluster/` and `cloud/` share a layer, but the cloud only speaks the object model of
//!   `cluster/mod.rs` (the NodeClaim its trait launches), never a cluster backend (`kube`,
//!   `sim`, `scenario`, `template`): the price book, say, is the cloud's own idea.
//! - `control/` and `tui/` talk to the traits in `cluster/mod.rs` and `cloud/mod.rs`,
//!   never to a backend (kube, the simulated cluster or its scenario files, aws, kwok, the
//!   simulated cloud); the entry layer picks those.
//!
//! Code under `#[cfg(test)]` may stand on the whole house (a view test runs the demo world,
//! a controller test the simulation): it is not shipped, so it is listed, not failed.
//! `super::` paths are not followed; none leaves its top-level module today.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// DESIGN.md's layers, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Api,
    Engine,
    /// cluster/ and cloud/: where truth lives and where nodes come from.
    World,
    Control,
    Tui,
    Entry,
}

impl Layer {
    /// The layer a top-level module (`api`, `tui`, `simulation`, ...) belongs to.
    fn of_module(top: &str) -> Layer {
        match top {
            "api" => Layer::Api,
            "engine" => Layer::Engine,
            "cluster" | "cloud" => Layer::World,
            "control" => Layer::Control,
            "tui" => Layer::Tui,
            _ => Layer::Entry,
        }
    }
}

/// The backends the layers above the world must not name (DESIGN.md: "control/ depends on
/// the traits in cluster/mod.rs and cloud/mod.rs, never on kube.rs, aws/ or sim.rs").
const BACKENDS: [(&str, &str); 7] = [
    ("cluster", "kube"),
    ("cluster", "sim"),
    ("cluster", "scenario"),
    ("cloud", "aws"),
    ("cloud", "kwok"),
    ("cloud", "sim"),
    ("cloud", "live"),
];

/// One `crate::` path found in a file.
#[derive(Debug)]
struct Use {
    line: usize,
    /// The first two segments after `crate::` (the second may be missing).
    top: String,
    second: Option<String>,
    in_test: bool,
}

/// Why `from` (a file's path under src/, `/`-separated) may not name `u`, if it may not.
fn violation(from: &str, u: &Use) -> Option<String> {
    let from_top = from
        .split('/')
        .next()
        .unwrap_or(from)
        .trim_end_matches(".rs");
    let here = Layer::of_module(from_top);
    let there = Layer::of_module(&u.top);
    let second = u.second.as_deref().unwrap_or("");
    if there > here {
        // Name the module, not each item a group imports from it.
        let module = if is_module(&u.top, second) {
            format!("crate::{}::{second}", u.top)
        } else {
            format!("crate::{}", u.top)
        };
        return Some(format!(
            "{from_top}/ ({here:?}) names {module} ({there:?}), a higher layer"
        ));
    }
    if from_top == "cloud" && u.top == "cluster" && is_module("cluster", second) {
        return Some(format!(
            "cloud/ names crate::cluster::{second}, a cluster backend (the cloud may use only \
             cluster/mod.rs's object model)"
        ));
    }
    if matches!(here, Layer::Control | Layer::Tui) && BACKENDS.contains(&(u.top.as_str(), second)) {
        return Some(format!(
            "{from_top}/ names crate::{}::{second}, a backend (only the traits in {}/mod.rs; \
             the entry layer picks the backend)",
            u.top, u.top
        ));
    }
    None
}

/// True when src/`top`/`name` is a module (a file or a directory), not an item of
/// `top`/mod.rs.
fn is_module(top: &str, name: &str) -> bool {
    !name.is_empty() && {
        let dir = src().join(top);
        dir.join(format!("{name}.rs")).is_file() || dir.join(name).join("mod.rs").is_file()
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The source with comments, string and character literals blanked (newlines kept, so
/// line numbers stay true).
fn code_only(text: &str) -> Vec<char> {
    let c: Vec<char> = text.chars().collect();
    let mut out = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in out.iter_mut().take(to.min(c.len())).skip(from) {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            let end = c[i..]
                .iter()
                .position(|&x| x == '\n')
                .map_or(c.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && next == Some('*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (c[i] == 'r' || (c[i] == 'b' && next == Some('r')))
            && (i == 0 || !ident(c[i - 1]))
            && {
                let k = if c[i] == 'b' { i + 2 } else { i + 1 };
                let hashes = c[k..].iter().take_while(|&&x| x == '#').count();
                c.get(k + hashes) == Some(&'"')
            }
        {
            // A raw string: r"...", r#"..."#, br"...".
            let k = if c[i] == 'b' { i + 2 } else { i + 1 };
            let hashes = c[k..].iter().take_while(|&&x| x == '#').count();
            let mut j = k + hashes + 1;
            while j < c.len() {
                if c[j] == '"'
                    && c[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&x| x == '#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            blank(&mut out, i, j);
            i = j;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or else a lifetime ('a).
            if next == Some('\\') {
                let j = c[i + 2..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map_or(c.len(), |p| i + 2 + p);
                blank(&mut out, i, j + 1);
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                blank(&mut out, i, i + 3);
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The spans (char ranges) of items under `#[cfg(test)]`, and the modules declared there
/// as `mod name;` (whose files are test code).
fn test_spans(code: &[char]) -> (Vec<(usize, usize)>, Vec<String>) {
    let mut spans = Vec::new();
    let mut modules = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if code[i] != '#' {
            i += 1;
            continue;
        }
        let inner = code.get(i + 1) == Some(&'!');
        let open = if inner { i + 2 } else { i + 1 };
        if code.get(open) != Some(&'[') {
            i += 1;
            continue;
        }
        let Some(close) = matching(code, open) else {
            break;
        };
        let attr: String = code[open + 1..close]
            .iter()
            .filter(|c| !c.is_whitespace())
            .collect();
        let is_test = attr == "cfg(test)" || attr.starts_with("cfg(all(test");
        if !is_test {
            i = close + 1;
            continue;
        }
        if inner {
            // #![cfg(test)]: the whole file.
            spans.push((0, code.len()));
            return (spans, modules);
        }
        // The item: up to a `;` outside brackets, or the `}` that closes its body.
        let (mut depth, mut j) = (0i32, close + 1);
        while j < code.len() {
            match code[j] {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' => depth -= 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        let item: String = code[close + 1..j.min(code.len())].iter().collect();
        let words: Vec<&str> = item.split_whitespace().collect();
        if let ["mod", name] | ["pub", "mod", name] | ["pub(crate)", "mod", name] = words[..] {
            modules.push(name.to_string());
        }
        spans.push((i, j));
        i = j + 1;
    }
    (spans, modules)
}

/// The index of the bracket closing the one at `open`.
fn matching(code: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (j, &ch) in code.iter().enumerate().skip(open) {
        match ch {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every `crate::` path in `code`, as its first two segments (a `use crate::{a, b::c}`
/// group gives one per branch).
fn uses(code: &[char], tests: &[(usize, usize)]) -> Vec<Use> {
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let line_at = |at: usize| code[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let in_test = |at: usize| tests.iter().any(|&(a, b)| a <= at && at <= b);
    let mut found = Vec::new();
    let word: Vec<char> = "crate".chars().collect();
    let mut i = 0;
    while i + word.len() < code.len() {
        let starts = code[i..].starts_with(&word)
            && (i == 0 || !(ident(code[i - 1]) || code[i - 1] == '$'))
            && !ident(code[i + word.len()]);
        if !starts {
            i += 1;
            continue;
        }
        let mut paths = Vec::new();
        let end = tree(code, i + word.len(), &[], &mut paths);
        let mut heads: Vec<(String, Option<String>)> = paths
            .iter()
            .filter_map(|p| Some((p.first()?.clone(), p.get(1).cloned())))
            .collect();
        heads.dedup();
        for (top, second) in heads {
            found.push(Use {
                line: line_at(i),
                top,
                second,
                in_test: in_test(i),
            });
        }
        i = end.max(i + 1);
    }
    found
}

/// Reads `::seg::seg...` or `::{tree, tree}` from `at`, pushing each full path (prefix
/// plus its segments) to `out`; returns where it stopped.
fn tree(code: &[char], at: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let skip_ws = |mut j: usize| {
        while j < code.len() && code[j].is_whitespace() {
            j += 1;
        }
        j
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut j = skip_ws(at);
    let mut path = prefix.to_vec();
    loop {
        if !(code.get(j) == Some(&':') && code.get(j + 1) == Some(&':')) {
            break;
        }
        j = skip_ws(j + 2);
        if code.get(j) == Some(&'{') {
            j += 1;
            loop {
                j = skip_ws(j);
                match code.get(j) {
                    Some('}') => return j + 1,
                    Some(',') => j += 1,
                    None => return j,
                    _ => {
                        // A branch: an identifier path, then maybe more.
                        let start = j;
                        while j < code.len() && ident(code[j]) {
                            j += 1;
                        }
                        if j == start {
                            j += 1;
                            continue;
                        }
                        let mut branch = path.clone();
                        branch.push(code[start..j].iter().collect());
                        let mut sub = Vec::new();
                        j = tree(code, j, &branch, &mut sub);
                        if sub.is_empty() {
                            out.push(branch);
                        } else {
                            out.extend(sub);
                        }
                        // Skip `as name` and anything else up to the branch's end.
                        while j < code.len() && !matches!(code[j], ',' | '}') {
                            j += 1;
                        }
                    }
                }
            }
        }
        let start = j;
        while j < code.len() && ident(code[j]) {
            j += 1;
        }
        if j == start {
            break;
        }
        path.push(code[start..j].iter().collect());
        j = skip_ws(j);
    }
    if path.len() > prefix.len() {
        out.push(path);
    }
    j
}

/// A module file reached from a crate root, and whether it is test code.
struct ModuleFile {
    path: PathBuf,
    in_test: bool,
}

/// Every module file of the library and the binary, following `mod name;` from the
/// roots, so only compiled files are read.
fn module_files() -> Vec<ModuleFile> {
    let root = src();
    let mut todo = vec![
        ModuleFile {
            path: root.join("lib.rs"),
            in_test: false,
        },
        ModuleFile {
            path: root.join("main.rs"),
            in_test: false,
        },
    ];
    let mut seen = BTreeSet::new();
    let mut files = Vec::new();
    while let Some(file) = todo.pop() {
        if !seen.insert(file.path.clone()) {
            continue;
        }
        let text = std::fs::read_to_string(&file.path)
            .unwrap_or_else(|e| panic!("{}: {e}", file.path.display()));
        let code = code_only(&text);
        let (_, test_modules) = test_spans(&code);
        let flat: String = code.iter().collect();
        // The directory this file's child modules live in.
        let name = file.path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let dir = match name {
            "lib" | "main" | "mod" => file.path.parent().map(Path::to_path_buf),
            _ => file.path.parent().map(|p| p.join(name)),
        }
        .unwrap_or_else(|| root.clone());
        for statement in flat.split(';') {
            let words: Vec<&str> = statement.split_whitespace().collect();
            let Some(pos) = words.iter().rposition(|w| *w == "mod") else {
                continue;
            };
            // `mod name` as the statement's end: a file module (an inline one has `{`).
            let [name] = words[pos + 1..] else {
                continue;
            };
            if !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let as_file = dir.join(format!("{name}.rs"));
            let path = if as_file.is_file() {
                as_file
            } else {
                dir.join(name).join("mod.rs")
            };
            assert!(
                path.is_file(),
                "{}: `mod {name};` has no file {} (a file module inside an inline module? \
                 teach this walk)",
                file.path.display(),
                path.display()
            );
            todo.push(ModuleFile {
                path,
                in_test: file.in_test || test_modules.iter().any(|m| m == name),
            });
        }
        files.push(file);
    }
    files
}

/// Every upward import: (file, line, why, in test code), in file and line order.
fn findings() -> Vec<(String, usize, String, bool)> {
    let root = src();
    let mut out = Vec::new();
    for file in module_files() {
        let rel = file
            .path
            .strip_prefix(&root)
            .unwrap_or(&file.path)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&file.path).unwrap_or_default();
        let code = code_only(&text);
        let (spans, _) = test_spans(&code);
        for u in uses(&code, &spans) {
            if let Some(why) = violation(&rel, &u) {
                out.push((format!("src/{rel}"), u.line, why, file.in_test || u.in_test));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_import_points_down() {
    let files = module_files();
    assert!(
        files.len() > 100,
        "only {} module files found from src/lib.rs and src/main.rs: the walk is broken",
        files.len()
    );
    let all = findings();
    let (tests, shipped): (Vec<_>, Vec<_>) = all.into_iter().partition(|f| f.3);
    if !tests.is_empty() {
        eprintln!(
            "test code that stands on a higher layer (allowed, listed for the record):\n{}",
            tests
                .iter()
                .map(|(file, line, why, _)| format!("  {file}:{line}: {why}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert!(
        shipped.is_empty(),
        "{} import(s) point up DESIGN.md's layers (main/cli/simulation > tui > control > \
         cluster, cloud > engine > api):\n{}",
        shipped.len(),
        shipped
            .iter()
            .map(|(file, line, why, _)| format!("  {file}:{line}: {why}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The reader itself: paths inside comments and strings are not imports, groups are
/// split, test items are told apart.
#[test]
fn the_reader_finds_paths_in_code_only() {
    let text = r##"
use crate::api::nodepool::NodePool;
// use crate::tui::nothing;
/* crate::tui::block */
const S: &str = "crate::tui::string";
const R: &str = r#"crate::tui::raw"#;
use crate::{engine::state::{ClusterState, Pdb}, control::approvals as gate};
fn f<'a>(x: &'a str) -> char { let _ = crate::cluster::kube::PriceBook; '{' }
#[cfg(test)]
mod tests {
    use crate::simulation::Simulation;
}
#[cfg(test)]
mod more;
"##;
    let code = code_only(text);
    let (spans, modules) = test_spans(&code);
    assert_eq!(modules, ["more"]);
    let found: Vec<(usize, String, Option<String>, bool)> = uses(&code, &spans)
        .into_iter()
        .map(|u| (u.line, u.top, u.second, u.in_test))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        found,
        [
            (2, s("api"), Some(s("nodepool")), false),
            (7, s("engine"), Some(s("state")), false),
            (7, s("control"), Some(s("approvals")), false),
            (8, s("cluster"), Some(s("kube")), false),
            (11, s("simulation"), Some(s("Simulation")), true),
        ]
    );
    let at = |top: &str, second: &str| Use {
        line: 1,
        top: top.into(),
        second: Some(second.into()),
        in_test: false,
    };
    assert!(violation("cluster/scenario/mod.rs", &at("control", "approvals")).is_some());
    assert!(violation("cloud/aws/handle.rs", &at("cluster", "kube")).is_some());
    assert!(violation("cloud/mod.rs", &at("cluster", "NodeClaimObject")).is_none());
    assert!(violation("control/disruption.rs", &at("cluster", "sim")).is_some());
    assert!(violation("control/disruption.rs", &at("cluster", "template")).is_none());
    assert!(violation("tui/frame.rs", &at("simulation", "Simulation")).is_some());
    assert!(violation("main.rs", &at("tui", "launch")).is_none());
    assert!(violation("engine/state.rs", &at("api", "nodepool")).is_none());
}
