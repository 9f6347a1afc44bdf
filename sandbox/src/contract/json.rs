//! JSON text of the objects a request carries, written as `serde_json`
//! writes it (compact, the same escapes), but faster where requests are
//! large: a string's plain runs are found eight bytes at a time and copied
//! whole, where `serde_json` looks up every byte in a table, and the text
//! is built as a `String` from `str` slices, with no UTF-8 check after. Writing a
//! 500 KiB parent was a third of a sandboxed call's time in `perf`
//! (docs/benchmarks.md). `metadata.managedFields` of the object itself is
//! left out as it is written, without a copy of the object.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.

use serde_json::Value;

/// `object` as compact JSON text, without its own `metadata.managedFields`.
pub(crate) fn object_text(object: &Value) -> String {
    let mut out = String::with_capacity(256);
    match object {
        Value::Object(map) => {
            out.push('{');
            let mut first = true;
            for (key, value) in map {
                if !first {
                    out.push(',');
                }
                first = false;
                write_str(&mut out, key);
                out.push(':');
                match value {
                    Value::Object(meta) if key == "metadata" => {
                        write_object(&mut out, meta, |k| k == "managedFields");
                    }
                    _ => write_value(&mut out, value),
                }
            }
            out.push('}');
        }
        other => write_value(&mut out, other),
    }
    out
}

/// `value` as compact JSON text.
pub(crate) fn text(value: &Value) -> String {
    let mut out = String::with_capacity(64);
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        // serde_json's own spelling of numbers: its `Display` is the one its
        // serializer writes.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map, |_| false),
    }
}

fn write_object(
    out: &mut String,
    map: &serde_json::Map<String, Value>,
    skip: impl Fn(&str) -> bool,
) {
    out.push('{');
    let mut first = true;
    for (key, value) in map {
        if skip(key) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_str(out, key);
        out.push(':');
        write_value(out, value);
    }
    out.push('}');
}

/// Bytes JSON escapes: the control characters, `"` and `\`.
fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

const ONES: u64 = u64::MAX / 255;
const HIGHS: u64 = ONES << 7;

/// Whether any byte of `chunk` needs escaping: the lowest set high bit
/// marks the first such byte (bits above it may be false positives).
fn escapes_in(chunk: u64) -> u64 {
    let control = chunk.wrapping_sub(ONES * 0x20) & !chunk;
    let quote = chunk ^ (ONES * u64::from(b'"'));
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = chunk ^ (ONES * u64::from(b'\\'));
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    (control | quote | backslash) & HIGHS
}

/// Index of the first byte of `bytes` at or after `from` that needs
/// escaping, or `bytes.len()`.
fn next_escape(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while i + 8 <= bytes.len() {
        let chunk = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("eight bytes"));
        let found = escapes_in(chunk);
        if found != 0 {
            return i + found.trailing_zeros() as usize / 8;
        }
        i += 8;
    }
    while i < bytes.len() && !needs_escape(bytes[i]) {
        i += 1;
    }
    i
}

fn write_str(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    // A quarter more than the string: the rest of a large object then fits
    // without growing the text, which would copy the string again.
    out.reserve(bytes.len() + bytes.len() / 4 + 2);
    out.push('"');
    let mut start = 0;
    loop {
        // `at` is the index of an ASCII byte, or the end: a char boundary.
        let at = next_escape(bytes, start);
        out.push_str(&s[start..at]);
        let Some(&byte) = bytes.get(at) else {
            break;
        };
        match byte {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x09 => out.push_str("\\t"),
            0x0A => out.push_str("\\n"),
            0x0C => out.push_str("\\f"),
            0x0D => out.push_str("\\r"),
            _ => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xF)]));
            }
        }
        start = at + 1;
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Strings with every byte class at every offset of an eight-byte chunk.
    fn tricky_strings() -> Vec<String> {
        let mut strings = vec![String::new()];
        let specials = [
            "\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{0}", "\u{1f}", "\u{7f}", "/", "é",
            "€", "𝄞", "x",
        ];
        for special in specials {
            for prefix in 0..17 {
                for suffix in [0, 1, 7, 8, 9] {
                    strings.push(format!(
                        "{}{special}{}",
                        "a".repeat(prefix),
                        "b".repeat(suffix)
                    ));
                }
            }
        }
        // Every byte value, and pairs of specials side by side.
        strings.push((0u8..=0x7f).map(char::from).collect());
        strings.push("\"\"\\\\\n\n\u{1}\u{1}".repeat(5));
        strings
    }

    #[test]
    fn writes_what_serde_json_writes() {
        for s in tricky_strings() {
            let value = Value::String(s.clone());
            assert_eq!(text(&value), value.to_string(), "{s:?}");
        }
        let value = json!({
            "a": [1, -2, 3.5, 1e300, 0.1, u64::MAX, i64::MIN, true, false, null, {}, []],
            "nested": {"k\"ey": "v\nalue", "empty": ""},
            "unicode": "ünïcødé 𝄞 \u{2028}",
        });
        assert_eq!(text(&value), value.to_string());
        for s in tricky_strings() {
            let value = json!({ s.clone(): [s.clone(), {"x": s}] });
            assert_eq!(text(&value), value.to_string());
        }
    }

    #[test]
    fn leaves_out_the_objects_own_managed_fields_only() {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "managedFields": [{"manager": "x"}], "labels": {"l": "1"}},
            "data": {"metadata": {"managedFields": "kept: not the object's own"}},
        });
        let mut expected = object.clone();
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(object_text(&object), expected.to_string());
        assert_eq!(object_text(&json!([1, 2])), "[1,2]");
        assert_eq!(object_text(&json!({"metadata": 1})), r#"{"metadata":1}"#);
    }
}
