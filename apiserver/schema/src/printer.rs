//! `additionalPrinterColumns`: column validation (CRD create/update) and Table cells,
//! as kube's CRD table convertor builds them.

use serde_json::Value;

use crate::error::{FieldError, FieldErrorKind};
use crate::jsonpath::JsonPath;
use crate::path::child;

const COLUMN_TYPES: [&str; 5] = ["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: [&str; 8] = [
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// Checks a column's `jsonPath` as kube does on CRD create/update (`validateSimpleJSONPath`:
/// non-empty, starts with `.`) and that the table convertor can parse it. `Err` holds
/// the detail for a `FieldError` at `...jsonPath`.
///
/// # Errors
///
/// What is wrong with the path: empty, not starting with `.`, or not parseable.
pub fn validate_printer_column_json_path(json_path: &str) -> Result<(), String> {
    if json_path.is_empty() {
        return Err("must not be empty".into());
    }
    if !json_path.starts_with('.') {
        return Err("must be a simple json path starting with .".into());
    }
    JsonPath::parse(json_path)
        .map(|_| ())
        .map_err(|e| format!("unrecognized column definition {json_path:?}: {e}"))
}

/// `ValidateCustomResourceColumn` for one `additionalPrinterColumns` entry (JSON as in
/// the CRD), with errors under `path` (e.g. `spec.versions[0].additionalPrinterColumns[1]`).
pub fn validate_printer_column(column: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let get = |k: &str| column.get(k).and_then(Value::as_str).unwrap_or("");
    if get("name").is_empty() {
        errs.push(FieldError::new(
            FieldErrorKind::Required,
            child(path, "name"),
            None,
            "",
        ));
    }
    let t = get("type");
    let quoted = |l: &[&str]| {
        l.iter()
            .map(|s| crate::gofmt::quote(s))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if t.is_empty() {
        errs.push(FieldError::new(
            FieldErrorKind::Required,
            child(path, "type"),
            None,
            format!("must be one of {}", COLUMN_TYPES.join(",")),
        ));
    } else if !COLUMN_TYPES.contains(&t) {
        errs.push(FieldError::new(
            FieldErrorKind::NotSupported,
            child(path, "type"),
            Some(Value::String(t.into())),
            format!("supported values: {}", quoted(&COLUMN_TYPES)),
        ));
    }
    let f = get("format");
    if !f.is_empty() && !COLUMN_FORMATS.contains(&f) {
        errs.push(FieldError::new(
            FieldErrorKind::NotSupported,
            child(path, "format"),
            Some(Value::String(f.into())),
            format!("supported values: {}", quoted(&COLUMN_FORMATS)),
        ));
    }
    let jp = get("jsonPath");
    if jp.is_empty() {
        errs.push(FieldError::new(
            FieldErrorKind::Required,
            child(path, "JSONPath"),
            None,
            "",
        ));
    } else if let Err(detail) = validate_printer_column_json_path(jp) {
        errs.push(FieldError::new(
            FieldErrorKind::Invalid,
            child(path, "JSONPath"),
            Some(Value::String(jp.into())),
            detail,
        ));
    }
    errs
}

/// The Table cell for a printer column: evaluates `json_path` on `obj` (first match) and
/// formats it by `column_type` (`integer`, `number`, `string`, `boolean`, `date`) as
/// kube does. Missing values and type mismatches give `Value::Null`; `date` gives a
/// human duration since now such as `5m`. `format` is accepted for completeness
/// (kube ignores it when building cells).
pub fn printer_column_value(
    obj: &Value,
    json_path: &str,
    column_type: &str,
    format: &str,
) -> Value {
    printer_column_value_at(obj, json_path, column_type, format, chrono::Utc::now())
}

/// Like [`printer_column_value`] with an explicit "now" for `date` columns.
pub fn printer_column_value_at(
    obj: &Value,
    json_path: &str,
    column_type: &str,
    _format: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    let Ok(path) = JsonPath::parse(json_path) else {
        return Value::Null;
    };
    let Some(value) = path.find(obj).into_iter().next() else {
        return Value::Null;
    };
    if value.is_null() {
        return Value::Null;
    }
    match column_type {
        "string" => Value::String(print_result(value)),
        "integer" => match value {
            Value::Number(n) => match n.as_i64() {
                Some(i) => Value::from(i),
                // As kube's `int64(f)`: the fraction is dropped.
                #[allow(clippy::cast_possible_truncation)]
                None => n.as_f64().map_or(Value::Null, |f| Value::from(f as i64)),
            },
            _ => Value::Null,
        },
        "number" => match value {
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Value::from(i),
                // Integral and below 2^53: exact as an i64.
                #[allow(clippy::cast_possible_truncation)]
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
                    Value::from(f as i64)
                }
                (None, Some(f)) => Value::from(f),
                _ => Value::Null,
            },
            _ => Value::Null,
        },
        "boolean" => match value {
            Value::Bool(b) => Value::Bool(*b),
            _ => Value::Null,
        },
        "date" => match value {
            Value::String(s) => Value::String(human_date(s, now)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// jsonpath `PrintResults` of one value: maps and lists as JSON, scalars with `%v`.
fn print_result(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => crate::gofmt::go_json(v),
        other => crate::gofmt::plain_v(other),
    }
}

/// `ConvertToHumanReadableDateType` of a metav1.Time query parameter.
fn human_date(s: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    if s.is_empty() || s == "null" {
        return "<unknown>".into();
    }
    match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(t) => human_duration(now.signed_duration_since(t.with_timezone(&chrono::Utc))),
        Err(_) => "<invalid>".into(),
    }
}

/// apimachinery `duration.HumanDuration`.
pub(crate) fn human_duration(d: chrono::TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kube() {
        let d = chrono::TimeDelta::seconds;
        assert_eq!(human_duration(d(5)), "5s");
        assert_eq!(human_duration(d(119)), "119s");
        assert_eq!(human_duration(d(150)), "2m30s");
        assert_eq!(human_duration(d(600)), "10m");
        assert_eq!(human_duration(d(3 * 3600 + 60)), "3h1m");
        assert_eq!(human_duration(d(10 * 3600)), "10h");
        assert_eq!(human_duration(d(3 * 86400 + 3600)), "3d1h");
        assert_eq!(human_duration(d(30 * 86400)), "30d");
        assert_eq!(human_duration(d(3 * 365 * 86400)), "3y");
        assert_eq!(human_duration(d(-5)), "<invalid>");
    }
}
