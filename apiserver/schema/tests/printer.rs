//! additionalPrinterColumns: JSONPath evaluation (including filters) and cell formatting.

use chrono::{TimeZone, Utc};
use gantry_schema::{
    printer_column_value, printer_column_value_at, validate_printer_column,
    validate_printer_column_json_path,
};
use serde_json::{Value, json};

fn obj() -> Value {
    json!({
        "metadata": {"name": "m", "creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"b": "2", "a": "<1>"}},
        "spec": {"size": 3, "ratio": 0.5, "whole": 2.0, "enabled": true, "image": "memcached:1.6"},
        "status": {"conditions": [
            {"type": "Available", "status": "False", "reason": "Scaling"},
            {"type": "Ready", "status": "True", "reason": "AllGood"}
        ]}
    })
}

#[test]
fn simple_paths_by_type() {
    let o = obj();
    assert_eq!(
        printer_column_value(&o, ".spec.size", "integer", ""),
        json!(3)
    );
    assert_eq!(
        printer_column_value(&o, ".spec.ratio", "number", "float"),
        json!(0.5)
    );
    assert_eq!(
        printer_column_value(&o, ".spec.whole", "number", ""),
        json!(2)
    );
    assert_eq!(
        printer_column_value(&o, ".spec.ratio", "integer", ""),
        json!(0),
        "float truncated to int64"
    );
    assert_eq!(
        printer_column_value(&o, ".spec.enabled", "boolean", ""),
        json!(true)
    );
    assert_eq!(
        printer_column_value(&o, ".spec.image", "string", ""),
        json!("memcached:1.6")
    );
    assert_eq!(
        printer_column_value(&o, ".spec.size", "string", ""),
        json!("3")
    );
}

#[test]
fn mismatches_and_missing_values_are_null() {
    let o = obj();
    assert_eq!(
        printer_column_value(&o, ".spec.image", "integer", ""),
        Value::Null
    );
    assert_eq!(
        printer_column_value(&o, ".spec.size", "boolean", ""),
        Value::Null
    );
    assert_eq!(
        printer_column_value(&o, ".spec.nothing", "string", ""),
        Value::Null
    );
    assert_eq!(
        printer_column_value(
            &o,
            ".status.conditions[?(@.type==\"Gone\")].status",
            "string",
            ""
        ),
        Value::Null
    );
}

#[test]
fn filter_expressions_select_the_condition() {
    let o = obj();
    assert_eq!(
        printer_column_value(
            &o,
            r#".status.conditions[?(@.type=="Ready")].status"#,
            "string",
            ""
        ),
        json!("True")
    );
    assert_eq!(
        printer_column_value(
            &o,
            ".status.conditions[?(@.type=='Available')].reason",
            "string",
            ""
        ),
        json!("Scaling")
    );
    assert_eq!(
        printer_column_value(&o, ".status.conditions[0].type", "string", ""),
        json!("Available")
    );
    assert_eq!(
        printer_column_value(&o, ".status.conditions[*].type", "string", ""),
        json!("Available"),
        "first match"
    );
}

#[test]
fn maps_and_lists_print_as_go_json() {
    let o = obj();
    assert_eq!(
        printer_column_value(&o, ".metadata.labels", "string", ""),
        json!(r#"{"a":"\u003c1\u003e","b":"2"}"#)
    );
}

#[test]
fn dates_render_as_age() {
    let o = obj();
    let now = Utc.with_ymd_and_hms(2024, 1, 1, 0, 5, 0).unwrap();
    assert_eq!(
        printer_column_value_at(&o, ".metadata.creationTimestamp", "date", "", now),
        json!("5m")
    );
    let now = Utc.with_ymd_and_hms(2024, 1, 4, 2, 0, 0).unwrap();
    assert_eq!(
        printer_column_value_at(&o, ".metadata.creationTimestamp", "date", "", now),
        json!("3d2h")
    );
    assert_eq!(
        printer_column_value_at(&o, ".spec.image", "date", "", now),
        json!("<invalid>")
    );
}

#[test]
fn json_path_validation() {
    assert!(validate_printer_column_json_path(".spec.size").is_ok());
    assert!(
        validate_printer_column_json_path(r#".status.conditions[?(@.type=="Ready")].status"#)
            .is_ok()
    );
    assert_eq!(
        validate_printer_column_json_path("spec.size").unwrap_err(),
        "must be a simple json path starting with ."
    );
    assert_eq!(
        validate_printer_column_json_path("").unwrap_err(),
        "must not be empty"
    );
    assert!(validate_printer_column_json_path(".spec[").is_err());
}

#[test]
fn column_definition_validation() {
    let errs = validate_printer_column(
        &json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size"}),
        "c",
    );
    assert!(errs.is_empty());
    let errs = validate_printer_column(
        &json!({"name": "", "type": "int", "format": "x", "jsonPath": "spec"}),
        "c",
    );
    let m: Vec<String> = errs
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect();
    assert_eq!(
        m,
        vec![
            "c.name: Required value",
            r#"c.type: Unsupported value: "int": supported values: "boolean", "date", "integer", "number", "string""#,
            r#"c.format: Unsupported value: "x": supported values: "byte", "date", "date-time", "double", "float", "int32", "int64", "password""#,
            r#"c.JSONPath: Invalid value: "spec": must be a simple json path starting with ."#,
        ]
    );
}
