//! serde's type errors in the words of the person who wrote the file. serde speaks of
//! `i32`, `unit` and `struct EC2NodeClassSpec with 15 elements`; a manifest's author wrote
//! a YAML scalar, list or mapping and wants to know which one the field takes:
//! `expected an integer, found the string "5"`.

/// Rewrites one serde error message; a message it does not recognise is returned as is.
pub fn in_user_words(msg: &str) -> String {
    if let Some(rest) = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))
        && let Some((found, expected)) = rest.split_once(", expected ")
    {
        return format!(
            "expected {}, found {}",
            expected_words(expected),
            found_words(found)
        );
    }
    if let Some(rest) = msg.strip_prefix("invalid length ")
        && let Some((len, expected)) = rest.split_once(", expected ")
    {
        if expected.starts_with("struct ") || expected == "a map" {
            return "expected a mapping, found a list".to_string();
        }
        if let Some(size) = expected.strip_prefix("a tuple of size ") {
            return format!("expected a list of {size} items, found {len}");
        }
        return format!("expected {}, found {len} items", expected_words(expected));
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `")
        && let Some((value, expected)) = rest.split_once("`, expected ")
    {
        let choices = expected
            .strip_prefix("one of ")
            .unwrap_or(expected)
            .replace('`', "");
        return format!("unknown value {value:?}: expected one of {choices}");
    }
    msg.to_string()
}

/// What serde's `expecting` text means in YAML terms.
fn expected_words(expected: &str) -> String {
    let range = |lo: &str, hi: &str| format!("an integer from {lo} to {hi}");
    match expected {
        "i8" => range("-128", "127"),
        "i16" => range("-32768", "32767"),
        "i32" => range("-2147483648", "2147483647"),
        "i64" | "isize" | "i128" => "an integer".to_string(),
        "u8" => range("0", "255"),
        "u16" => range("0", "65535"),
        "u32" => range("0", "4294967295"),
        "u64" | "usize" | "u128" => "a non-negative integer".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a sequence" => "a list".to_string(),
        "a map" | "map" => "a mapping".to_string(),
        "string or map" => "a name (a string)".to_string(),
        "unit" => "no value (leave it empty)".to_string(),
        e if e.starts_with("struct ") => "a mapping".to_string(),
        e if e.starts_with("a tuple of size ") => "a list".to_string(),
        e if e.starts_with("enum ") => "one of its names (a string)".to_string(),
        e => e.to_string(),
    }
}

/// What serde's `Unexpected` text means in YAML terms.
fn found_words(found: &str) -> String {
    let quoted = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('`'))
            .and_then(|r| r.strip_suffix('`'))
            .map(str::to_string)
    };
    if let Some(s) = found.strip_prefix("string ") {
        return format!("the string {s}");
    }
    if let Some(n) = quoted("integer ") {
        return format!("the integer {n}");
    }
    if let Some(n) = quoted("floating point ") {
        return format!("the number {n}");
    }
    if let Some(b) = quoted("boolean ") {
        return format!("the boolean {b}");
    }
    if let Some(c) = quoted("character ") {
        return format!("the character {c}");
    }
    match found {
        "sequence" => "a list".to_string(),
        "map" => "a mapping".to_string(),
        "unit value" => "an empty value (null)".to_string(),
        f => f.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::in_user_words;

    #[test]
    fn the_messages_a_fuzzer_met_read_as_yaml() {
        for (serde, ours) in [
            (
                r#"invalid type: string "5", expected i32"#,
                r#"expected an integer from -2147483648 to 2147483647, found the string "5""#,
            ),
            (
                "invalid value: integer `-1`, expected u64",
                "expected a non-negative integer, found the integer -1",
            ),
            (
                "invalid type: integer `1`, expected unit",
                "expected no value (leave it empty), found the integer 1",
            ),
            (
                "invalid length 0, expected struct EC2NodeClassSpec with 15 elements",
                "expected a mapping, found a list",
            ),
            (
                "invalid type: sequence, expected a string",
                "expected a string, found a list",
            ),
            (
                "invalid type: map, expected a boolean",
                "expected true or false, found a mapping",
            ),
            (
                "unknown variant `Sometimes`, expected one of `Always`, `Never`",
                r#"unknown value "Sometimes": expected one of Always, Never"#,
            ),
            ("something else entirely", "something else entirely"),
        ] {
            assert_eq!(in_user_words(serde), ours);
        }
    }
}
