//! Where a field is in the YAML text: maps a document number and a field path
//! (`spec.timeline[2].at`) to the line it starts on, so that errors found after parsing
//! (type errors, validation) can say `file:line` like a compiler. Uses the YAML parser's
//! event stream, which carries positions that the value tree has lost.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

/// Line numbers of every node of every non-empty document.
#[derive(Clone, Debug, Default)]
pub struct SourceLines {
    /// Per non-empty document (in stream order): field path -> 1-based line; "" is the
    /// document itself.
    docs: Vec<HashMap<String, usize>>,
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

impl SourceLines {
    /// Indexes a YAML stream. Text that does not parse yields what was read up to the
    /// error (the syntax error is reported elsewhere, with its own line).
    pub fn new(text: &str) -> SourceLines {
        let mut out = SourceLines::default();
        let mut current: Option<(HashMap<String, usize>, bool)> = None;
        let mut stack: Vec<Frame> = Vec::new();
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let line = span.start.line();
            match event {
                Event::DocumentStart(_) => {
                    current = Some((HashMap::new(), false));
                    stack.clear();
                }
                Event::DocumentEnd => {
                    if let Some((paths, non_empty)) = current.take()
                        && non_empty
                    {
                        out.docs.push(paths);
                    }
                }
                Event::Scalar(value, ..) => {
                    let Some((paths, non_empty)) = current.as_mut() else {
                        continue;
                    };
                    if let Some(Frame::Map { path, key }) = stack.last_mut()
                        && key.is_none()
                    {
                        let p = join(path, &value);
                        paths.entry(p).or_insert(line);
                        *key = Some(value.to_string());
                        continue;
                    }
                    if stack.is_empty() {
                        // A bare scalar document: empty when null.
                        *non_empty |= !matches!(value.as_ref(), "" | "~" | "null" | "Null");
                    }
                    let p = child(&mut stack);
                    paths.entry(p).or_insert(line);
                    done_value(&mut stack);
                }
                Event::Alias(_) => {
                    child(&mut stack);
                    done_value(&mut stack);
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let Some((paths, non_empty)) = current.as_mut() else {
                        continue;
                    };
                    *non_empty = true;
                    let p = child(&mut stack);
                    paths.entry(p.clone()).or_insert(line);
                    stack.push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map { path: p, key: None }
                    } else {
                        Frame::Seq { path: p, next: 0 }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    done_value(&mut stack);
                }
                _ => {}
            }
        }
        out
    }

    /// The line of `path` in non-empty document `doc` (counting from 1), or of its
    /// nearest ancestor that is in the text (a defaulted field has no line of its own).
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
        Some(Frame::Map { path, key }) => join(path, key.as_deref().unwrap_or("")),
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
        // The empty document between the separators is not counted.
        assert_eq!(s.line(2, "spec.timeline[0].scale.deployment"), Some(10));
        // A field that is not in the text points at its nearest ancestor.
        assert_eq!(s.line(2, "spec.timeline[0].operator.action"), Some(9));
        assert_eq!(s.line(3, "a"), None);
    }
}
