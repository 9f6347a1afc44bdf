//! Go `fmt` renderings of JSON values, so messages match kube's byte for byte.
//!
//! Hand-rolled: the exact Go verbs (`%v` for floats, `%q`, `%#v` for
//! `map[string]interface {}`) have no Rust crate equivalent.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.

use serde_json::{Number, Value};

/// Go's `%v` of a float64 (strconv 'g' with shortest precision: exponent form when
/// exp < -4 or exp >= 6, e.g. `1e+06`).
pub(crate) fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "1.2345e6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent present");
    let exp: i32 = exp.parse().expect("numeric exponent");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    // %g with shortest precision switches to %e when exp < -4 || exp >= 6.
    if !(-4..6).contains(&exp) {
        let mut m = digits[..1].to_string();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{m}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let mut out = String::from(sign);
    match usize::try_from(point) {
        Ok(point) if point > 0 && point >= digits.len() => {
            out.push_str(&digits);
            for _ in 0..(point - digits.len()) {
                out.push('0');
            }
        }
        Ok(point) if point > 0 => {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
        _ => {
            out.push_str("0.");
            for _ in 0..(-point) {
                out.push('0');
            }
            out.push_str(&digits);
        }
    }
    out
}

/// Go's `%v` of a JSON number as kube decodes it (int64 when integral, else float64).
pub(crate) fn number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Go's `strconv.Quote`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%#v` of an `interface{}` holding a decoded JSON value.
pub(crate) fn sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(sharp_v).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", quote(k), sharp_v(&m[*k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
    }
}

/// Go's `%v` of an `interface{}` holding a decoded JSON value (as jsonpath prints it).
pub(crate) fn plain_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(plain_v).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", k, plain_v(&m[*k])))
                .collect();
            format!("map[{}]", items.join(" "))
        }
    }
}

/// The value part of `field.Error.ErrorBody()`: simple types with `%v`, strings with
/// `%q`, everything else with `%#v`.
pub(crate) fn error_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        other => sharp_v(other),
    }
}

/// Go `json.Marshal` of a decoded value: sorted keys, HTML-safe escaping.
pub(crate) fn go_json(v: &Value) -> String {
    if crate::parse::json_depth(v) > crate::MAX_DEPTH {
        return "null".into();
    }
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_json_number(n)),
        Value::String(s) => write_json_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                write_json(&m[k], out);
            }
            out.push('}');
        }
    }
}

fn go_json_number(n: &serde_json::Number) -> String {
    if n.is_f64() {
        let f = n.as_f64().unwrap_or(0.0);
        if f.fract() == 0.0 && f.abs() < 1e21 {
            // Integral and below 1e21: fits an i128 exactly.
            #[allow(clippy::cast_possible_truncation)]
            return format!("{}", f as i128);
        }
    }
    n.to_string()
}

fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_go() {
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(5.0), "5");
        assert_eq!(float(1e21), "1e+21");
        assert_eq!(float(1e6), "1e+06");
        assert_eq!(float(1_234_567.0), "1.234567e+06");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(0.00001), "1e-05");
        assert_eq!(float(-2.25), "-2.25");
        assert_eq!(float(123_456.0), "123456");
    }

    #[test]
    fn sharp_v_prints_maps_and_slices() {
        assert_eq!(
            sharp_v(&json!({"b": 1, "a": "x"})),
            r#"map[string]interface {}{"a":"x", "b":1}"#
        );
        assert_eq!(
            sharp_v(&json!([1, null])),
            "[]interface {}{1, interface {}(nil)}"
        );
        assert_eq!(quote("a\"b\n"), r#""a\"b\n""#);
        assert_eq!(plain_v(&json!({"a": [1, "x"]})), "map[a:[1 x]]");
    }
}
