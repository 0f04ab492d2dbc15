//! Writing YAML that YAML 1.1 readers read back as written. `kubectl` and the API server
//! read manifests with go-yaml's YAML 1.1 rules, where a plain `no` is false, `1:30` is
//! 90, `<<` is a merge key and `~` is null. serde_norway writes such strings plain (they
//! are strings under YAML 1.2), so a migrated file would change meaning when applied.
//!
//! serde_norway has no per-scalar style control, so every ambiguous string is swapped for
//! a placeholder token that is written plain, and each token is then replaced by the
//! single-quoted string.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Strings a YAML 1.1 reader resolves to something other than a string when plain: the
/// booleans, nulls, ints (binary, octal, hex, base 60), floats, timestamps, and the merge
/// and value keys of the YAML 1.1 type repository (yaml.org/type).
fn misread_by_yaml_1_1(s: &str) -> bool {
    static PATTERNS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(concat!(
            r"^(?:",
            // bool
            r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE",
            r"|on|On|ON|off|Off|OFF",
            // null, merge, value
            r"|~|null|Null|NULL|<<|=",
            // int
            r"|[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+",
            r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+",
            // float
            r"|[-+]?(?:[0-9][0-9_]*)?\.[0-9.]*(?:[eE][-+][0-9]+)?",
            r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
            // timestamp
            r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?",
            r")$"
        ))
        .expect("the YAML 1.1 scalar patterns are valid")
    });
    s.is_empty() || PATTERNS.is_match(s)
}

/// Serializes `value` with every string a YAML 1.1 reader would misread single-quoted.
pub fn to_yaml(value: &Value) -> Result<String, serde_norway::Error> {
    let mut quoted = Vec::new();
    let prefix = placeholder_prefix(value);
    let value = swap(value, &prefix, &mut quoted);
    let mut text = serde_norway::to_string(&value)?;
    if quoted.is_empty() {
        return Ok(text);
    }
    // Replace from the highest number down, so `…x1` never matches inside `…x12`.
    for (i, original) in quoted.iter().enumerate().rev() {
        let token = format!("{prefix}{i}");
        let single = format!("'{}'", original.replace('\'', "''"));
        text = text.replace(&token, &single);
    }
    Ok(text)
}

/// A placeholder prefix that occurs in no string of the document.
fn placeholder_prefix(value: &Value) -> String {
    let mut strings = Vec::new();
    collect(value, &mut strings);
    (0..)
        .map(|n| format!("ktuiyaml{n}q"))
        .find(|p| !strings.iter().any(|s| s.contains(p.as_str())))
        .expect("some prefix is free")
}

fn collect<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k);
            collect(v, out);
        }),
        _ => {}
    }
}

/// `value` with ambiguous keys and strings replaced by numbered placeholders.
fn swap(value: &Value, prefix: &str, quoted: &mut Vec<String>) -> Value {
    let token = |s: &str, quoted: &mut Vec<String>| {
        if misread_by_yaml_1_1(s) {
            quoted.push(s.to_string());
            format!("{prefix}{}", quoted.len() - 1)
        } else {
            s.to_string()
        }
    };
    match value {
        Value::String(s) => Value::String(token(s, quoted)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| swap(v, prefix, quoted)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (token(k, quoted), swap(v, prefix, quoted)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_and_values_yaml_1_1_would_misread_are_quoted() {
        let v = json!({
            "<<": "merge?",
            "labels": {"y": "no", "time": "1:30", "octal": "0755", "day": "2001-12-14"},
            "plain": "spot",
            "it's": "it's",
            "": "~",
        });
        let text = to_yaml(&v).unwrap();
        for line in [
            "'<<': merge?",
            "'y': 'no'",
            "time: '1:30'",
            "octal: '0755'",
            "day: '2001-12-14'",
            "plain: spot",
            "'': '~'",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }
        // And it reads back as written.
        let back: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn a_placeholder_never_collides_with_input() {
        let v = json!({"a": "ktuiyaml0q0", "b": "no"});
        let text = to_yaml(&v).unwrap();
        let back: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
    }

    #[test]
    fn many_quoted_strings_are_each_restored() {
        let v = Value::Array((0..15).map(|i| json!(format!("0{i}"))).collect());
        let text = to_yaml(&v).unwrap();
        let back: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
    }
}
