//! Reading Karpenter objects out of multi-document YAML, with every problem reported as
//! `source:line[:column]: field.path: message` and nothing ever panicking on input.
//!
//! Parsing happens in two steps: YAML to a JSON value (syntax errors carry a line and
//! column), then the value to a typed object (type errors carry the field path; unknown
//! fields become warnings, as `kubectl apply` warns about them).

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use super::ec2nodeclass::EC2NodeClass;
use super::nodeclaim::NodeClaim;
use super::nodepool::NodePool;
use super::source_lines::SourceLines;
use super::text::escape_controls;
use super::yaml_limits::Located;

/// One parsed YAML document of a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// Position in the stream, counting from 1, empty documents included (the count every
    /// YAML reader agrees on, and the key to [`SourceLines`]).
    pub index: usize,
    /// The document as a JSON value.
    pub value: Value,
}

/// A Karpenter object this tool understands.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    NodePool(Box<NodePool>),
    NodeClaim(Box<NodeClaim>),
    EC2NodeClass(Box<EC2NodeClass>),
}

impl Object {
    /// The kind as written in manifests.
    pub fn kind(&self) -> &'static str {
        match self {
            Object::NodePool(_) => "NodePool",
            Object::NodeClaim(_) => "NodeClaim",
            Object::EC2NodeClass(_) => "EC2NodeClass",
        }
    }

    /// metadata.name, or "" when missing (validation reports that).
    pub fn name(&self) -> &str {
        let meta = match self {
            Object::NodePool(o) => &o.metadata,
            Object::NodeClaim(o) => &o.metadata,
            Object::EC2NodeClass(o) => &o.metadata,
        };
        meta.name.as_deref().unwrap_or("")
    }
}

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// A problem found in input, located by source name, document and field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// File name, or "-" / "<stdin>" for standard input.
    pub source: String,
    /// Document position in the stream counting from 1 (empty documents included); 0 when
    /// the problem is with the stream itself.
    pub document: usize,
    /// 1-based line, when the text was read (filled in by [`Stream::locate`]).
    pub line: Option<usize>,
    /// 1-based column, for problems found in the text itself (syntax, input limits).
    pub column: Option<usize>,
    /// Field path such as `spec.template.spec.requirements[2].values`; empty for the document.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        // Compiler style, `file:line:column: field.path: message`, with everything that
        // came from the input escaped: a control character in a key or a kind must not
        // reach the terminal, and a newline must not forge a second diagnostic.
        f.write_str(&escape_controls(&self.source))?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", escape_controls(&self.path))?;
        }
        f.write_str(&escape_controls(&self.message))
    }
}

impl Diagnostic {
    pub fn error(
        source: &str,
        document: usize,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Error,
            source: source.to_string(),
            document,
            line: None,
            column: None,
            path: path.into(),
            message: message.into(),
        }
    }

    pub fn warning(
        source: &str,
        document: usize,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(source, document, path, message)
        }
    }
}

/// A YAML stream read into documents, with where each field is in the text.
#[derive(Debug, Default)]
pub struct Stream {
    /// The non-empty documents that read cleanly, in stream order.
    pub documents: Vec<Document>,
    /// Problems with the text: a syntax error or an input limit (which end the stream:
    /// YAML cannot resynchronise), and keys written twice (which refuse their document).
    pub errors: Vec<Diagnostic>,
    pub lines: SourceLines,
}

impl Stream {
    /// Gives a diagnostic found after parsing (a type error, a validation rule) the line
    /// of its field.
    pub fn locate(&self, mut d: Diagnostic) -> Diagnostic {
        if d.line.is_none() {
            d.line = self.lines.line(d.document, &d.path);
        }
        d
    }
}

/// Reads a YAML stream into documents. The text is first walked once for positions and
/// held to the input limits ([`super::yaml_limits`]); only what passed reaches the
/// deserializer. A syntax error stops the stream there, with its line and column.
pub fn read_stream(source: &str, text: &str) -> Stream {
    let scan = SourceLines::scan(text);
    // The text's end, found once and only when a position must be placed.
    let end = std::cell::OnceCell::new();
    let at = |line: usize, column: usize| {
        let end = *end.get_or_init(|| super::input::line_and_column(text));
        super::input::clamp_to_end(end, line, column)
    };
    let located = |p: &Located| {
        let (line, column) = at(p.line, p.column);
        Diagnostic {
            line: Some(line),
            column: Some(column),
            ..Diagnostic::error(source, p.document, p.path.clone(), p.message.clone())
        }
    };
    let mut stream = Stream {
        errors: scan.problems.iter().map(located).collect(),
        lines: scan.lines,
        documents: Vec::new(),
    };
    let refused: Vec<usize> = scan.problems.iter().map(|p| p.document).collect();
    let mut position = 0;
    let mut syntax_reported = false;
    for de in serde_norway::Deserializer::from_str(&text[..scan.readable]) {
        position += 1;
        match Value::deserialize(de) {
            Ok(Value::Null) => {}
            Ok(_) if refused.contains(&position) => {}
            Ok(value) => stream.documents.push(Document {
                index: position,
                value,
            }),
            Err(e) => {
                let msg = strip_location(&e.to_string());
                let mut d =
                    Diagnostic::error(source, position, "", format!("malformed YAML: {msg}"));
                if let Some(l) = e.location() {
                    let (line, column) = at(l.line(), l.column());
                    d.line = Some(line);
                    d.column = Some(column);
                }
                // Text cut short at a fatal problem ends where it was cut, which is not
                // a syntax error of the user's.
                if scan.readable == text.len() || scan.syntax.is_some() {
                    stream.errors.push(d);
                    syntax_reported = true;
                }
                break;
            }
        }
    }
    if let Some(p) = &scan.syntax
        && !syntax_reported
    {
        let mut d = located(p);
        d.message = format!("malformed YAML: {}", p.message);
        stream.errors.push(d);
    }
    stream
}

/// serde_norway appends " at line L column C"; we print the location once, ourselves.
fn strip_location(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// The apiVersion/kind pairs this tool reads, and what to say about near misses.
fn classify(value: &Value) -> Result<&'static str, (String, String)> {
    let Some(map) = value.as_object() else {
        return Err((
            String::new(),
            format!(
                "expected a Kubernetes object (a mapping), found {}",
                type_name(value)
            ),
        ));
    };
    let api_version = match map.get("apiVersion") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err((
                "apiVersion".into(),
                format!("expected a string, found {}", type_name(other)),
            ));
        }
        None => return Err(("apiVersion".into(), "required field is missing".into())),
    };
    let kind = match map.get("kind") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err((
                "kind".into(),
                format!("expected a string, found {}", type_name(other)),
            ));
        }
        None => return Err(("kind".into(), "required field is missing".into())),
    };
    match (api_version, kind) {
        ("karpenter.sh/v1", "NodePool") => Ok("NodePool"),
        ("karpenter.sh/v1", "NodeClaim") => Ok("NodeClaim"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => Ok("EC2NodeClass"),
        ("karpenter.sh/v1beta1", "NodePool" | "NodeClaim")
        | ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") => Err((
            "apiVersion".into(),
            format!(
                "{api_version} {kind} is the pre-v1 API; convert it with `karpenter-tui migrate`"
            ),
        )),
        ("karpenter.sh/v1", _) | ("karpenter.k8s.aws/v1", _) => Err((
            "kind".into(),
            format!(
                "unknown kind {kind:?} for {api_version} (expected NodePool, NodeClaim or EC2NodeClass)"
            ),
        )),
        _ => Err((
            "apiVersion".into(),
            format!(
                "unsupported object {api_version} {kind}: expected karpenter.sh/v1 NodePool or NodeClaim, or karpenter.k8s.aws/v1 EC2NodeClass"
            ),
        )),
    }
}

/// A short name for a JSON value's type, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Deserializes `value` as `T`, returning the unknown-field paths seen on the way, or the
/// path and message of the first type error.
pub fn typed<T: serde::de::DeserializeOwned>(
    value: Value,
) -> Result<(T, Vec<String>), (String, String)> {
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let result = {
        let de = serde_path_to_error::Deserializer::new(value, &mut track);
        serde_ignored::deserialize(de, |path| unknown.push(ignored_path(&path)))
    };
    match result {
        Ok(obj) => Ok((obj, unknown)),
        Err(e) => {
            let path = track.path().to_string();
            let path = if path == "." { String::new() } else { path };
            let msg = e.to_string();
            // serde says "missing field `x`" at the parent; point at the field itself.
            if let Some(field) = msg
                .strip_prefix("missing field `")
                .and_then(|m| m.split('`').next())
            {
                let full = if path.is_empty() {
                    field.to_string()
                } else {
                    format!("{path}.{field}")
                };
                return Err((full, format!("required field `{field}` is missing")));
            }
            Err((path, super::type_errors::in_user_words(&msg)))
        }
    }
}

/// Renders a serde_ignored path the way Kubernetes field paths read: `a.b[2].c`.
fn ignored_path(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        Path::Map { parent, key } => {
            let p = ignored_path(parent);
            if p.is_empty() {
                key.clone()
            } else {
                format!("{p}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_path(parent),
    }
}

/// Parses one document into an [`Object`]; unknown fields are returned as warnings.
pub fn parse_object(source: &str, doc: &Document) -> Result<(Object, Vec<Diagnostic>), Diagnostic> {
    let kind = classify(&doc.value).map_err(|(p, m)| Diagnostic::error(source, doc.index, p, m))?;
    let err = |(p, m): (String, String)| Diagnostic::error(source, doc.index, p, m);
    let (object, unknown) =
        match kind {
            "NodePool" => typed::<NodePool>(doc.value.clone())
                .map(|(o, u)| (Object::NodePool(Box::new(o)), u)),
            "NodeClaim" => typed::<NodeClaim>(doc.value.clone())
                .map(|(o, u)| (Object::NodeClaim(Box::new(o)), u)),
            _ => typed::<EC2NodeClass>(doc.value.clone())
                .map(|(o, u)| (Object::EC2NodeClass(Box::new(o)), u)),
        }
        .map_err(err)?;
    let warnings = unknown
        .into_iter()
        // `status` is written by controllers; fields there are not the user's concern.
        // apiVersion and kind were read by `classify`; the typed root skips them.
        .filter(|p| !p.starts_with("status") && p != "apiVersion" && p != "kind")
        .map(|p| Diagnostic::warning(source, doc.index, p, "unknown field, ignored"))
        .collect();
    Ok((object, warnings))
}

/// Everything read from one input: the objects that parsed and every diagnostic.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Parsed objects with their document positions.
    pub objects: Vec<(usize, Object)>,
    pub diagnostics: Vec<Diagnostic>,
    /// Where each field is, to locate what later checks (validation) find.
    pub lines: SourceLines,
}

impl Loaded {
    /// An error at a field of document `doc`, with the field's line.
    pub fn error_at(&self, source: &str, doc: usize, path: &str, message: &str) -> Diagnostic {
        Diagnostic {
            line: self.lines.line(doc, path),
            ..Diagnostic::error(source, doc, path, message)
        }
    }

    /// True when any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Reads every Karpenter object from a YAML stream. Documents that fail are reported and
/// skipped; the others still load.
pub fn load(source: &str, text: &str) -> Loaded {
    let mut loaded = Loaded::default();
    let stream = read_stream(source, text);
    for doc in &stream.documents {
        match parse_object(source, doc) {
            Ok((obj, warnings)) => {
                loaded
                    .diagnostics
                    .extend(warnings.into_iter().map(|d| stream.locate(d)));
                loaded.objects.push((doc.index, obj));
            }
            Err(d) => loaded.diagnostics.push(stream.locate(d)),
        }
    }
    loaded.diagnostics.extend(stream.errors);
    loaded.lines = stream.lines;
    if stream.documents.is_empty() && !loaded.has_errors() {
        loaded.diagnostics.push(Diagnostic::error(
            source,
            0,
            "",
            "no Kubernetes objects in input (it is empty)",
        ));
    }
    loaded
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
";

    #[test]
    fn loads_a_nodepool_with_upstream_defaults() {
        let l = load("np.yaml", POOL);
        assert!(l.diagnostics.is_empty(), "{:?}", l.diagnostics);
        let Object::NodePool(np) = &l.objects[0].1 else {
            panic!("not a NodePool")
        };
        assert_eq!(np.spec.template.spec.expire_after.text(), "720h");
        assert_eq!(
            np.spec
                .disruption
                .consolidate_after
                .as_ref()
                .unwrap()
                .text(),
            "0s"
        );
        assert_eq!(np.spec.disruption.budgets[0].nodes, "10%");
    }

    #[test]
    fn counts_documents_and_skips_empty_ones() {
        let text = format!("---\n{POOL}---\n---\n{POOL}");
        let l = load("np.yaml", &text);
        assert_eq!(
            l.objects.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![1, 3],
            "positions count the empty document, as every YAML reader does"
        );
    }

    #[test]
    fn type_errors_name_the_field_path() {
        let text = POOL.replace("values: [spot]", "values: spot");
        let l = load("np.yaml", &text);
        let d = &l.diagnostics[0];
        assert_eq!(d.path, "spec.template.spec.requirements[0].values");
        assert!(
            d.to_string()
                .starts_with("np.yaml:9: spec.template.spec.requirements[0].values: "),
            "{d}"
        );
    }

    #[test]
    fn unknown_fields_warn() {
        let text = POOL
            .replace(
                "metadata: {name: default}",
                "metadata: {name: default}\nspec2: 1",
            )
            .replace("  template:", "  tempalte: {}\n  template:");
        let l = load("np.yaml", &text);
        let mut warnings: Vec<_> = l
            .diagnostics
            .iter()
            .map(|d| (d.severity, d.path.as_str()))
            .collect();
        warnings.sort();
        assert_eq!(
            warnings,
            vec![
                (Severity::Warning, "spec.tempalte"),
                (Severity::Warning, "spec2")
            ]
        );
    }

    #[test]
    fn malformed_yaml_reports_line_and_keeps_earlier_documents() {
        let text = format!("{POOL}---\nkind: [unclosed\n");
        let l = load("np.yaml", &text);
        assert_eq!(l.objects.len(), 1);
        let d = l.diagnostics.last().unwrap();
        assert!(d.message.starts_with("malformed YAML: "), "{d}");
        // At the end of the text, where the parser ran out of input looking for `]`.
        assert_eq!(
            (d.document, d.line, d.column),
            (2, Some(12), Some(1)),
            "{d}"
        );
    }

    #[test]
    fn empty_input_is_an_error() {
        assert!(load("x", "").has_errors());
        assert!(load("x", "---\n# only a comment\n").has_errors());
    }

    #[test]
    fn old_and_foreign_kinds_are_named() {
        let l = load(
            "x",
            &POOL.replace("karpenter.sh/v1", "karpenter.sh/v1beta1"),
        );
        assert!(l.diagnostics[0].message.contains("migrate"));
        let l = load("x", "apiVersion: apps/v1\nkind: Deployment\n");
        assert!(l.diagnostics[0].message.contains("apps/v1 Deployment"));
        let l = load("x", "- a\n- b\n");
        assert!(l.diagnostics[0].message.contains("found a list"));
    }
}
