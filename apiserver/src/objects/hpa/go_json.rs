//! JSON text with keys in a Go struct's field order (kube's annotations are
//! `json.Marshal` output; `serde_json`'s maps sort their keys).

use serde_json::Value;

/// A JSON object's text, its fields in the given order, absent ones left out.
pub fn object(fields: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{}:{v}", Value::from(*k))))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A JSON array's text of items already written.
pub fn array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

/// The text of `v` at `pointer` in `obj`, if set (not null).
pub fn field(obj: &Value, pointer: &str) -> Option<String> {
    obj.pointer(pointer)
        .filter(|v| !v.is_null())
        .map(Value::to_string)
}
