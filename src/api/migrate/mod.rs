//! `karpenter-tui migrate`: Karpenter v1beta1 manifests to v1.
//!
//! The rules mirror upstream's "v1 Migration" guide (karpenter.sh, docs/upgrading/v1-migration,
//! changelog and "Kubelet Configuration Migration") and the conversion webhooks it describes
//! (`pkg/apis/v1/nodepool_conversion.go` and `nodeclaim_conversion.go` in kubernetes-sigs/karpenter,
//! `pkg/apis/v1/ec2nodeclass_conversion.go` in aws/karpenter-provider-aws).
//!
//! One deliberate difference: a webhook converts one object at a time, so it cannot move a
//! NodePool's `kubelet` to the EC2NodeClass and parks it in the
//! `compatibility.karpenter.sh/v1beta1-kubelet-conversion` annotation instead, which the
//! guide then asks users to move by hand before v1.1. We see the whole input, so we do that
//! move ourselves and never write the annotation: it would only keep a second copy of the
//! kubelet that takes precedence over the EC2NodeClass and must be deleted later.
//!
//! Conversion works on JSON values rather than typed objects so that every field the user
//! wrote, including ones this tool does not know, is carried over (and left for `validate`
//! to judge) instead of being dropped by a deserializer.

mod ec2nodeclass;
mod nodepool;
mod yaml11;

use serde_json::{Map, Value, json};

use super::labels::{AWS_GROUP, KARPENTER_GROUP, NODEPOOL};
use super::manifest::{Diagnostic, Document, Severity, read_stream, type_name};

/// The converted manifests and what the user should know about them.
#[derive(Debug)]
pub struct Migrated {
    /// Multi-document YAML in input order; new partial EC2NodeClasses follow the document
    /// that caused them.
    pub yaml: String,
    /// Every change made and every step left to the user, one line each.
    pub warnings: Vec<Diagnostic>,
}

/// Converts every v1beta1 NodePool, NodeClaim and EC2NodeClass in `text` to v1.
///
/// `source` is the file name used in diagnostics ("-" for stdin). Anything that cannot be
/// converted faithfully is an error, and then nothing is returned but the errors: a partial
/// migration printed as if complete would be applied as if complete.
pub fn migrate(source: &str, text: &str) -> Result<Migrated, Vec<Diagnostic>> {
    let mut stream = read_stream(source, text);
    if stream.documents.is_empty() && stream.errors.is_empty() {
        return Err(vec![Diagnostic::error(
            source,
            0,
            "",
            "no Kubernetes objects in input (it is empty)",
        )]);
    }
    let mut items: Vec<Item> = std::mem::take(&mut stream.documents)
        .into_iter()
        .map(|d| {
            let line = stream.lines.line(d.index, "").unwrap_or(1);
            Item {
                line,
                ..convert_document(source, d)
            }
        })
        .collect();
    move_kubelets(source, &mut items);
    fill_nodeclaim_expiry(source, &mut items);

    let mut yaml = String::new();
    let mut diagnostics = Vec::new();
    for item in items {
        diagnostics.extend(item.notes.into_iter().map(|d| stream.locate(d)));
        for value in std::iter::once(&item.value).chain(&item.appended) {
            match yaml11::to_yaml(value) {
                Ok(text) => {
                    if !yaml.is_empty() {
                        yaml.push_str("---\n");
                    }
                    yaml.push_str(&text);
                }
                Err(e) => diagnostics.push(Diagnostic::error(
                    source,
                    item.index,
                    "",
                    format!("cannot write the converted document as YAML: {e}"),
                )),
            }
        }
    }
    diagnostics.extend(stream.errors.iter().cloned());
    if diagnostics.iter().any(|d| d.severity == Severity::Error) {
        return Err(diagnostics
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .collect());
    }
    Ok(Migrated {
        yaml,
        warnings: diagnostics,
    })
}

/// What a document is, as far as the cross-document steps care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    NodePool,
    NodeClaim,
    EC2NodeClass,
    /// Already v1 (NodePool, NodeClaim or EC2NodeClass): passed through.
    V1(&'static str),
    /// Not a Karpenter object, or unreadable.
    Other,
}

/// One input document on its way out.
struct Item {
    index: usize,
    /// The line the document starts on, for messages that point at it from another.
    line: usize,
    value: Value,
    kind: Kind,
    notes: Vec<Diagnostic>,
    /// A kubelet block taken off a NodePool or NodeClaim, to land on its EC2NodeClass.
    kubelet: Option<KubeletMove>,
    /// Documents to print right after this one (partial EC2NodeClasses).
    appended: Vec<Value>,
}

/// A kubelet configuration that v1 keeps on the EC2NodeClass instead.
#[derive(Debug, PartialEq)]
pub(super) struct KubeletMove {
    /// Name of the EC2NodeClass the owner references.
    pub node_class: String,
    pub kubelet: Value,
    /// Where the owner held it, for diagnostics.
    pub path: String,
}

/// Collects the diagnostics of one document.
pub(super) struct Notes<'s> {
    source: &'s str,
    document: usize,
    pub diagnostics: Vec<Diagnostic>,
}

impl<'s> Notes<'s> {
    pub fn new(source: &'s str, document: usize) -> Self {
        Notes {
            source,
            document,
            diagnostics: Vec::new(),
        }
    }

    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let d = Diagnostic::warning(self.source, self.document, path, message);
        self.diagnostics.push(d);
    }

    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let d = Diagnostic::error(self.source, self.document, path, message);
        self.diagnostics.push(d);
    }
}

/// `parent.key` as a field path.
pub(super) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// The mapping under `key`, reporting a wrong type, and a missing field when `required`.
pub(super) fn child_mapping<'v>(
    parent: &'v mut Map<String, Value>,
    key: &str,
    path: &str,
    required: bool,
    notes: &mut Notes,
) -> Option<&'v mut Map<String, Value>> {
    match parent.get_mut(key) {
        Some(Value::Object(m)) => Some(m),
        None | Some(Value::Null) => {
            if required {
                notes.error(path, "required field is missing");
            }
            None
        }
        Some(other) => {
            notes.error(
                path,
                format!("expected a mapping, found {}", type_name(other)),
            );
            None
        }
    }
}

/// Removes `status`: the controller writes it, and v1's status (its conditions in
/// particular) has a different shape, so a copied v1beta1 status would not validate.
pub(super) fn drop_status(object: &mut Map<String, Value>, notes: &mut Notes) {
    if object.remove("status").is_some() {
        notes.warn(
            "status",
            "removed: the controller writes status, and v1's differs from v1beta1's",
        );
    }
}

/// `metadata.name` of a document, or "" when absent.
fn name_of(value: &Value) -> &str {
    value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Reads apiVersion and kind, or says why the document cannot be identified.
fn header(value: &Value) -> Result<(String, String), (&'static str, String)> {
    let Some(map) = value.as_object() else {
        return Err((
            "",
            format!(
                "expected a Kubernetes object (a mapping), found {}",
                type_name(value)
            ),
        ));
    };
    let field = |key: &'static str| match map.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err((
            key,
            format!("expected a string, found {}", type_name(other)),
        )),
        None => Err((key, "required field is missing".to_string())),
    };
    Ok((field("apiVersion")?, field("kind")?))
}

fn convert_document(source: &str, doc: Document) -> Item {
    let mut notes = Notes::new(source, doc.index);
    let mut value = doc.value;
    let mut kubelet = None;
    let kind = match header(&value) {
        Err((path, message)) => {
            notes.error(path, message);
            Kind::Other
        }
        Ok((api_version, kind)) => match (api_version.as_str(), kind.as_str()) {
            ("karpenter.sh/v1beta1", "NodePool") => {
                kubelet = nodepool::convert_nodepool(&mut value, &mut notes);
                Kind::NodePool
            }
            ("karpenter.sh/v1beta1", "NodeClaim") => {
                kubelet = nodepool::convert_nodeclaim(&mut value, &mut notes);
                Kind::NodeClaim
            }
            ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") => {
                ec2nodeclass::convert_ec2nodeclass(&mut value, &mut notes);
                Kind::EC2NodeClass
            }
            ("karpenter.sh/v1", "NodePool" | "NodeClaim")
            | ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                notes.warn(
                    "",
                    format!("already {api_version} {kind}: nothing to change, left as it is"),
                );
                Kind::V1(match kind.as_str() {
                    "NodePool" => "NodePool",
                    "NodeClaim" => "NodeClaim",
                    _ => "EC2NodeClass",
                })
            }
            _ => {
                let group = api_version.split_once('/').map_or("", |(g, _)| g);
                if group == KARPENTER_GROUP || group == AWS_GROUP {
                    // v1 only converts from v1beta1 (the guide: "Earlier Provisioner,
                    // AWSNodeTemplate, and Machine APIs are not supported").
                    notes.error(
                        "apiVersion",
                        format!(
                            "cannot convert {api_version} {kind}: only karpenter.sh/v1beta1 NodePool and NodeClaim and karpenter.k8s.aws/v1beta1 EC2NodeClass convert to v1 (older APIs need the v1beta1 migration of Karpenter v0.32 first)"
                        ),
                    );
                } else {
                    notes.warn(
                        "",
                        format!("{api_version} {kind} is not a Karpenter object: left as it is"),
                    );
                }
                Kind::Other
            }
        },
    };
    Item {
        index: doc.index,
        line: 0,
        value,
        kind,
        notes: notes.diagnostics,
        kubelet,
        appended: Vec::new(),
    }
}

/// Lands each NodePool's (and NodeClaim's) kubelet on the EC2NodeClass it references, as
/// the guide's "Kubelet Configuration Migration" asks: into that EC2NodeClass's document
/// when it is in the input, else into a partial EC2NodeClass printed after the first owner.
fn move_kubelets(source: &str, items: &mut [Item]) {
    let moves: Vec<(usize, KubeletMove)> = items
        .iter_mut()
        .enumerate()
        .filter_map(|(i, item)| item.kubelet.take().map(|m| (i, m)))
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for (_, m) in &moves {
        if !names.contains(&m.node_class.as_str()) {
            names.push(&m.node_class);
        }
    }
    for name in names {
        let owners: Vec<&(usize, KubeletMove)> =
            moves.iter().filter(|(_, m)| m.node_class == name).collect();
        let (first_item, first) = owners[0];
        let first_owner = describe(&items[*first_item]);
        let mut conflict = false;
        for (i, m) in &owners[1..] {
            if m.kubelet != first.kubelet {
                conflict = true;
                let message = format!(
                    "differs from the kubelet of {first_owner}, and both use EC2NodeClass {name:?}; v1 keeps one kubelet per EC2NodeClass: split {name:?} into one EC2NodeClass per kubelet configuration and point each NodePool at its own (their nodes will drift and be replaced)"
                );
                items[*i].notes.push(Diagnostic::error(
                    source,
                    items[*i].index,
                    m.path.as_str(),
                    message,
                ));
            }
        }
        if conflict {
            continue;
        }
        let target = items.iter().position(|it| {
            matches!(it.kind, Kind::EC2NodeClass | Kind::V1("EC2NodeClass"))
                && name_of(&it.value) == name
        });
        match target {
            Some(t) => land_kubelet(source, items, t, &owners),
            None => {
                items[*first_item].appended.push(json!({
                    "apiVersion": format!("{AWS_GROUP}/v1"),
                    "kind": "EC2NodeClass",
                    "metadata": {"name": name},
                    "spec": {"kubelet": first.kubelet},
                }));
                for (i, m) in &owners {
                    let message = format!(
                        "moved to spec.kubelet of EC2NodeClass {name:?}, which is not in this input: a partial EC2NodeClass {name:?} holding only the kubelet is printed after {first_owner}; merge it into the real one before applying"
                    );
                    items[*i].notes.push(Diagnostic::warning(
                        source,
                        items[*i].index,
                        m.path.as_str(),
                        message,
                    ));
                }
            }
        }
    }
}

/// Writes the owners' (identical) kubelet into the EC2NodeClass document at `t`.
fn land_kubelet(source: &str, items: &mut [Item], t: usize, owners: &[&(usize, KubeletMove)]) {
    let (first_item, first) = owners[0];
    let first_owner = describe(&items[*first_item]);
    let target_index = items[t].index;
    let target_line = items[t].line;
    let name = first.node_class.as_str();
    let was_v1 = items[t].kind == Kind::V1("EC2NodeClass");
    let Some(spec) = items[t]
        .value
        .get_mut("spec")
        .and_then(Value::as_object_mut)
    else {
        // A converted EC2NodeClass without a spec mapping already carries an error.
        if was_v1 {
            let message = format!("expected a mapping to receive the kubelet of {first_owner}");
            items[t]
                .notes
                .push(Diagnostic::error(source, target_index, "spec", message));
        }
        return;
    };
    let mut added = false;
    let existing_differs = match spec.get("kubelet") {
        None | Some(Value::Null) => {
            spec.insert("kubelet".into(), first.kubelet.clone());
            added = true;
            false
        }
        Some(existing) => *existing != first.kubelet,
    };
    for (i, m) in owners {
        let index = items[*i].index;
        let d = if existing_differs {
            Diagnostic::error(
                source,
                index,
                m.path.as_str(),
                format!(
                    "differs from spec.kubelet already in EC2NodeClass {name:?} (line {target_line}); v1 keeps one kubelet per EC2NodeClass: reconcile them, or give this NodePool its own EC2NodeClass"
                ),
            )
        } else {
            Diagnostic::warning(
                source,
                index,
                m.path.as_str(),
                format!(
                    "moved to spec.kubelet of EC2NodeClass {name:?} (line {target_line}), where v1 keeps kubelet settings"
                ),
            )
        };
        items[*i].notes.push(d);
    }
    if added && was_v1 {
        let message =
            format!("added from {first_owner}; the rest of this v1 document is unchanged");
        items[t].notes.push(Diagnostic::warning(
            source,
            target_index,
            "spec.kubelet",
            message,
        ));
    }
}

/// "NodePool default (line 12)", for messages that point at another document.
fn describe(item: &Item) -> String {
    let kind = match item.kind {
        Kind::NodePool => "NodePool",
        Kind::NodeClaim => "NodeClaim",
        Kind::EC2NodeClass => "EC2NodeClass",
        Kind::V1(k) => k,
        Kind::Other => "document",
    };
    format!("{kind} {:?} (line {})", name_of(&item.value), item.line)
}

/// Gives each converted NodeClaim its NodePool's expireAfter, as upstream's NodeClaim
/// conversion does (`setExpireAfter`): v1 NodeClaims carry their own expiry.
fn fill_nodeclaim_expiry(source: &str, items: &mut [Item]) {
    for c in 0..items.len() {
        if items[c].kind != Kind::NodeClaim || items[c].value.pointer("/spec/expireAfter").is_some()
        {
            continue;
        }
        if !items[c].value.get("spec").is_some_and(Value::is_object) {
            continue; // already an error
        }
        let index = items[c].index;
        let pool_name = items[c]
            .value
            .pointer("/metadata/labels")
            .and_then(|l| l.get(NODEPOOL))
            .and_then(Value::as_str)
            .map(str::to_string);
        let pool = pool_name.as_deref().and_then(|p| {
            items.iter().position(|it| {
                matches!(it.kind, Kind::NodePool | Kind::V1("NodePool")) && name_of(&it.value) == p
            })
        });
        let note = match (pool_name.as_deref(), pool) {
            (_, Some(p)) => {
                let owner = describe(&items[p]);
                match items[p]
                    .value
                    .pointer("/spec/template/spec/expireAfter")
                    .cloned()
                {
                    Some(expire) => {
                        if let Some(spec) = items[c]
                            .value
                            .get_mut("spec")
                            .and_then(Value::as_object_mut)
                        {
                            spec.insert("expireAfter".into(), expire);
                        }
                        Diagnostic::warning(
                            source,
                            index,
                            "spec.expireAfter",
                            format!("set from {owner}, as upstream's conversion does"),
                        )
                    }
                    // Both default to 720h: nothing to copy.
                    None => continue,
                }
            }
            (Some(p), None) => Diagnostic::warning(
                source,
                index,
                "spec.expireAfter",
                format!(
                    "not set, so v1 defaults it to 720h; NodePool {p:?} is not in this input: set it to that NodePool's expireAfter, as upstream's conversion would"
                ),
            ),
            (None, None) => Diagnostic::warning(
                source,
                index,
                "spec.expireAfter",
                format!(
                    "not set, so v1 defaults it to 720h; no {NODEPOOL} label names the NodePool whose expireAfter upstream's conversion would copy"
                ),
            ),
        };
        items[c].notes.push(note);
    }
}

#[cfg(test)]
mod tests;
