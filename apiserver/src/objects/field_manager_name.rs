//! kube's `ValidateFieldManager` (apimachinery meta/v1 validation): at most 128
//! bytes, printable characters only; 422 on the request's options kind.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.

use crate::error::{ApiError, Cause};

/// kube's `FieldManagerMaxLength`.
pub const MAX_LEN: usize = 128;

/// Checks `?fieldManager=` of a create/update/patch; `options` is
/// `CreateOptions`, `UpdateOptions` or `PatchOptions`.
pub fn validate(manager: &str, options: &str) -> Result<(), ApiError> {
    let mut causes = vec![];
    if manager.len() > MAX_LEN {
        causes.push(Cause::new(
            "FieldValueTooLong",
            format!("Too long: may not be more than {MAX_LEN} bytes"),
            "fieldManager",
        ));
    }
    for (i, c) in manager.char_indices() {
        if !is_print(c) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!(
                    "Invalid value: {}: invalid character U+{:04X} (at position {i})",
                    go_quote(manager),
                    u32::from(c)
                ),
                "fieldManager",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("meta.k8s.io", options, "", causes))
    }
}

/// Go's `unicode.IsPrint`, near enough: no control, format, separator other than
/// the ASCII space, private-use or noncharacter code points.
fn is_print(c: char) -> bool {
    c == ' '
        || !(c.is_control()
            || c.is_whitespace()
            || matches!(c,
                '\u{AD}' | '\u{600}'..='\u{605}' | '\u{61C}' | '\u{6DD}' | '\u{70F}'
                | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}' | '\u{E000}'..='\u{F8FF}' | '\u{FFFE}' | '\u{FFFF}'
                | '\u{F0000}'..='\u{10FFFF}'))
}

/// Go's `%q` of a string (as kube prints an invalid value).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_print(c) => out.push(c),
            c if u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_printable() {
        assert_eq!(go_quote("a\u{1}b\t\"\u{200b}"), r#""a\x01b\t\"\u200b""#);
        assert!(validate("kubectl-client-side-apply", "PatchOptions").is_ok());
        assert!(validate("héllo wörld", "PatchOptions").is_ok());
        assert!(validate("a\u{7f}", "PatchOptions").is_err());
    }
}
