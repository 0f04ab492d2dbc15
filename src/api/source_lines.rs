//! Where a field is in the YAML text: maps a document and a field path
//! (`spec.timeline[2].at`) to the line it starts on, so that errors found after parsing
//! (type errors, validation) can say `file:line` like a compiler. Uses the YAML parser's
//! event stream, which carries positions that the value tree has lost. The same walk holds
//! the text to the input limits of [`super::yaml_limits`] before anything deserializes it.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

use super::yaml_limits::{self, AliasBudget, Located, MAX_DEPTH};

/// Line numbers of every node of every document.
#[derive(Clone, Debug, Default)]
pub struct SourceLines {
    /// Per document in stream order, empty ones included (so that positions agree with
    /// every YAML reader's count): field path -> 1-based line; "" is the document itself.
    docs: Vec<HashMap<String, usize>>,
}

/// What one walk over a YAML stream found.
#[derive(Debug, Default)]
pub struct Scan {
    pub lines: SourceLines,
    /// Input-limit violations and duplicate keys, in text order.
    pub problems: Vec<Located>,
    /// How many bytes of the text a deserializer may read: all of it, or up to the
    /// document where a fatal problem (or a syntax error) was found.
    pub readable: usize,
    /// The parser's own syntax error, if it found one, to report when the deserializer
    /// (whose wording users know from kubectl) does not.
    pub syntax: Option<Located>,
}

enum Frame {
    Map {
        path: String,
        key: Option<String>,
        /// Keys seen so far and their lines, for duplicate detection.
        seen: HashMap<String, usize>,
    },
    Seq {
        path: String,
        next: usize,
    },
}

impl SourceLines {
    /// Indexes a YAML stream. Text that does not parse yields what was read up to the
    /// error (the syntax error is reported elsewhere, with its own line).
    pub fn new(text: &str) -> SourceLines {
        SourceLines::scan(text).lines
    }

    /// Indexes a YAML stream and checks it against the input limits: a forbidden
    /// character, nesting deeper than [`MAX_DEPTH`], aliases past their budget, and keys
    /// written twice in one mapping.
    pub fn scan(text: &str) -> Scan {
        let mut out = Scan {
            readable: text.len(),
            ..Scan::default()
        };
        if let Some(p) = yaml_limits::forbidden_character(text) {
            // Nothing is safe to read: the deserializer would stop there with a byte offset.
            out.readable = 0;
            out.problems.push(p);
            return out;
        }
        let mut current: Option<HashMap<String, usize>> = None;
        let mut doc_start = 0usize;
        let mut stack: Vec<Frame> = Vec::new();
        let mut aliases = AliasBudget::default();
        let fatal = |out: &mut Scan, at: Located, doc_start_char: usize| {
            out.readable = byte_offset(text, doc_start_char);
            out.problems.push(Located { fatal: true, ..at });
        };
        for item in Parser::new_from_str(text) {
            let (event, span) = match item {
                Ok(x) => x,
                Err(e) => {
                    let m = e.marker();
                    let document = out.lines.docs.len() + usize::from(current.is_some());
                    let at = Located {
                        line: m.line(),
                        column: m.col() + 1,
                        document,
                        path: String::new(),
                        message: e.info().to_string(),
                        fatal: true,
                    };
                    if e.info().contains("recursion limit") {
                        fatal(
                            &mut out,
                            Located {
                                message: too_deep(),
                                ..at
                            },
                            doc_start,
                        );
                    } else {
                        // The deserializer reads up to the error and reports it in its
                        // own words; this one is kept in case it does not.
                        out.readable = byte_offset(text, m.index());
                        out.syntax = Some(at);
                    }
                    break;
                }
            };
            let line = span.start.line();
            let document = out.lines.docs.len() + 1;
            let located = |path: &str, message: String| Located {
                line,
                column: span.start.col() + 1,
                document,
                path: path.to_string(),
                message,
                fatal: false,
            };
            match event {
                Event::DocumentStart(_) => {
                    current = Some(HashMap::new());
                    doc_start = span.start.index();
                    stack.clear();
                    aliases.reset();
                }
                Event::DocumentEnd => {
                    if let Some(paths) = current.take() {
                        out.lines.docs.push(paths);
                    }
                }
                Event::Scalar(value, _, anchor, _) => {
                    let Some(paths) = current.as_mut() else {
                        continue;
                    };
                    aliases.scalar(anchor);
                    if let Some(Frame::Map { path, key, seen }) = stack.last_mut()
                        && key.is_none()
                    {
                        let p = join(path, &value);
                        if let Some(first) = seen.get(value.as_ref()) {
                            let msg = format!(
                                "the key `{}` is written twice in one mapping (first at line {first}); \
                                 remove one (YAML readers disagree on which wins)",
                                value.escape_debug()
                            );
                            out.problems.push(located(&p, msg));
                        } else {
                            seen.insert(value.to_string(), line);
                        }
                        paths.entry(p).or_insert(line);
                        *key = Some(value.to_string());
                        continue;
                    }
                    let p = child(&mut stack);
                    paths.entry(p).or_insert(line);
                    done_value(&mut stack);
                }
                Event::Alias(id) => {
                    if current.is_none() {
                        continue;
                    }
                    let p = child(&mut stack);
                    if let Err(msg) = aliases.alias(id) {
                        fatal(&mut out, located(&p, msg), doc_start);
                        break;
                    }
                    done_value(&mut stack);
                }
                Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                    let Some(paths) = current.as_mut() else {
                        continue;
                    };
                    let p = child(&mut stack);
                    if stack.len() >= MAX_DEPTH {
                        fatal(&mut out, located(&p, too_deep()), doc_start);
                        break;
                    }
                    aliases.open(anchor);
                    paths.entry(p.clone()).or_insert(line);
                    stack.push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map {
                            path: p,
                            key: None,
                            seen: HashMap::new(),
                        }
                    } else {
                        Frame::Seq { path: p, next: 0 }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    aliases.close();
                    stack.pop();
                    done_value(&mut stack);
                }
                _ => {}
            }
        }
        if let Some(paths) = current.take() {
            out.lines.docs.push(paths);
        }
        out
    }

    /// The line of `path` in document `doc` (its stream position counting from 1, empty
    /// documents included), or of its nearest ancestor that is in the text (a defaulted
    /// field has no line of its own).
    pub fn line(&self, doc: usize, path: &str) -> Option<usize> {
        let paths = self.docs.get(doc.checked_sub(1)?)?;
        let mut p = path.to_string();
        loop {
            if let Some(l) = paths.get(&p) {
                return Some(*l);
            }
            if p.is_empty() {
                return None;
            }
            let cut = p.rfind(['.', '[']).unwrap_or(0);
            p.truncate(cut);
        }
    }
}

fn too_deep() -> String {
    format!("nested more than {MAX_DEPTH} levels deep; no Kubernetes object needs that many")
}

/// The byte offset of the `chars`-th character (the parser counts characters).
fn byte_offset(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map(|(i, _)| i)
        .unwrap_or(text.len())
}

fn join(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

/// The path of the next value in the innermost container.
fn child(stack: &mut [Frame]) -> String {
    match stack.last_mut() {
        None => String::new(),
        Some(Frame::Map { path, key, .. }) => join(path, key.as_deref().unwrap_or("")),
        Some(Frame::Seq { path, next }) => {
            let p = format!("{path}[{next}]");
            *next += 1;
            p
        }
    }
}

/// A mapping's value is complete: the next scalar is a key again.
fn done_value(stack: &mut [Frame]) {
    if let Some(Frame::Map { key, .. }) = stack.last_mut() {
        *key = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_to_their_lines_across_documents() {
        let text = "a: 1\nb:\n  - x: 2\n    y: [1, 2]\n---\n---\nspec:\n  timeline:\n    - at: 2m\n      scale: {deployment: web}\n";
        let s = SourceLines::new(text);
        assert_eq!(s.line(1, "a"), Some(1));
        assert_eq!(s.line(1, "b[0].y"), Some(4));
        assert_eq!(s.line(1, "b[0].y[1]"), Some(4));
        // The empty document between the separators is counted, as every YAML reader
        // counts it (a scenario's empty document used to shift every later line).
        assert_eq!(s.line(3, "spec.timeline[0].scale.deployment"), Some(10));
        // A field that is not in the text points at its nearest ancestor.
        assert_eq!(s.line(3, "spec.timeline[0].operator.action"), Some(9));
        assert_eq!(s.line(4, "a"), None);
    }
}
