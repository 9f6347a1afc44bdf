//! Where two normalized JSON documents differ.

use std::collections::BTreeSet;
use std::fmt::Write as _; // `write!` to a `String` cannot fail.

use serde_json::Value;

/// Differences kept per comparison.
const MAX_DIFFERENCES: usize = 200;

/// One difference: a JSON pointer and the two sides, shortened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// JSON pointer (`/metadata/labels/a`).
    pub pointer: String,
    /// The embedded server's value (`absent` when missing).
    pub embedded: String,
    /// The real server's value.
    pub real: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "(body)"
        } else {
            &self.pointer
        };
        write!(f, "{pointer}: {} ≠ {}", self.embedded, self.real)
    }
}

/// The differences between `embedded` and `real`, in document order
/// (object keys sorted), at most [`MAX_DIFFERENCES`].
pub fn differences(embedded: &Value, real: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    diff(embedded, real, &mut String::new(), &mut out);
    out
}

// `a`/`b`, then `x`/`y` and `v`/`w`: embedded and real side by side.
#[allow(clippy::many_single_char_names)]
fn diff(a: &Value, b: &Value, pointer: &mut String, out: &mut Vec<Difference>) {
    if out.len() >= MAX_DIFFERENCES || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(v), Some(w)) => diff(v, w, pointer, out),
                    (v, w) => push(pointer, v, w, out),
                }
                pointer.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let len = pointer.len();
                let _ = write!(pointer, "/{i}");
                match (x.get(i), y.get(i)) {
                    (Some(v), Some(w)) => diff(v, w, pointer, out),
                    (v, w) => push(pointer, v, w, out),
                }
                pointer.truncate(len);
            }
        }
        _ => push(pointer, Some(a), Some(b), out),
    }
}

fn push(pointer: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Difference>) {
    out.push(Difference {
        pointer: pointer.to_string(),
        embedded: short(a),
        real: short(b),
    });
}

/// A value in at most 60 characters.
pub fn short(value: Option<&Value>) -> String {
    let Some(value) = value else {
        return "absent".into();
    };
    let text = value.to_string();
    if text.chars().count() <= 60 {
        text
    } else {
        format!("{}…", text.chars().take(57).collect::<String>())
    }
}

/// A pointer cut to its first `depth` segments, array indices as `*`: the
/// field a difference is reported under.
pub fn field(pointer: &str, depth: usize) -> String {
    let segments: Vec<&str> = pointer
        .split('/')
        .skip(1)
        .take(depth)
        .map(|s| {
            if s.bytes().all(|b| b.is_ascii_digit()) {
                "*"
            } else {
                s
            }
        })
        .collect();
    if segments.is_empty() {
        "(body)".into()
    } else {
        format!("/{}", segments.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_differences_in_order() {
        let a = json!({"a": 1, "b": {"c": [1, 2]}, "z": "x"});
        let b = json!({"a": 1, "b": {"c": [1, 3, 4]}});
        let d = differences(&a, &b);
        let shown: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["/b/c/1: 2 ≠ 3", "/b/c/2: absent ≠ 4", "/z: \"x\" ≠ absent"]
        );
        assert_eq!(field("/items/3/metadata/labels", 3), "/items/*/metadata");
    }
}
