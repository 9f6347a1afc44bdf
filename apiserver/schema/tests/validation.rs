//! Validation of custom resources: one test per keyword (valid and invalid), with
//! kube's exact messages.

use gantry_schema::{FieldErrorKind, StructuralSchema};
use serde_json::{Value, json};

/// A root schema `{type: object, properties: {spec: {type: object, properties: {x: <x>}}}}`.
// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn schema_with(x: Value) -> StructuralSchema {
    StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"x": x}}}
    }))
    .unwrap_or_else(|e| {
        panic!(
            "schema rejected: {:?}",
            e.iter()
                .map(gantry_schema::FieldError::message)
                .collect::<Vec<_>>()
        )
    })
}

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn messages(s: &StructuralSchema, x: Value) -> Vec<String> {
    s.validate(&json!({"spec": {"x": x}}))
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect()
}

#[test]
fn type_integer_rejects_string_and_fraction() {
    let s = schema_with(json!({"type": "integer"}));
    assert!(messages(&s, json!(3)).is_empty());
    assert!(
        messages(&s, json!(3.0)).is_empty(),
        "an integral float is an integer"
    );
    assert_eq!(
        messages(&s, json!("7")),
        vec![
            r#"spec.x: Invalid value: "string": spec.x in body must be of type integer: "string""#
        ]
    );
    assert_eq!(
        messages(&s, json!(1.5)),
        vec![
            r#"spec.x: Invalid value: "number": spec.x in body must be of type integer: "number""#
        ]
    );
    let errs = s.validate(&json!({"spec": {"x": "7"}}));
    assert_eq!(errs[0].kind, FieldErrorKind::TypeInvalid);
    assert_eq!(errs[0].reason(), "FieldValueTypeInvalid");
    assert_eq!(errs[0].field, "spec.x");
}

#[test]
fn type_checks_for_each_json_type() {
    for (t, good, bad, bad_name) in [
        ("string", json!("a"), json!(1), "integer"),
        ("number", json!(1.5), json!(true), "boolean"),
        ("number", json!(2), json!("2"), "string"),
        ("boolean", json!(false), json!("false"), "string"),
        ("object", json!({}), json!([]), "array"),
    ] {
        let s = schema_with(json!({"type": t}));
        assert!(messages(&s, good).is_empty(), "{t}");
        assert_eq!(
            messages(&s, bad),
            vec![format!(
                r#"spec.x: Invalid value: "{bad_name}": spec.x in body must be of type {t}: "{bad_name}""#
            )]
        );
    }
    let s = schema_with(json!({"type": "array", "items": {"type": "string"}}));
    assert!(messages(&s, json!(["a"])).is_empty());
    assert_eq!(
        messages(&s, json!(["a", 2])),
        vec![
            r#"spec.x[1]: Invalid value: "integer": spec.x[1] in body must be of type string: "integer""#
        ]
    );
}

#[test]
fn nullable_and_null() {
    let s = schema_with(json!({"type": "string"}));
    assert_eq!(
        messages(&s, Value::Null),
        vec![r#"spec.x: Invalid value: "null": spec.x in body must be of type string: "null""#]
    );
    let s = schema_with(json!({"type": "string", "nullable": true}));
    assert!(messages(&s, Value::Null).is_empty());
}

#[test]
fn required_fields() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "required": ["size"], "properties": {"size": {"type": "integer"}}}},
        "required": ["spec"]
    }))
    .unwrap();
    let errs = s.validate(&json!({"spec": {}}));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].message(), "spec.size: Required value");
    assert_eq!(errs[0].reason(), "FieldValueRequired");
    assert_eq!(s.validate(&json!({}))[0].message(), "spec: Required value");
    assert!(s.validate(&json!({"spec": {"size": 1}})).is_empty());
}

#[test]
fn enum_values() {
    let s = schema_with(json!({"type": "string", "enum": ["a", "b"]}));
    assert!(messages(&s, json!("a")).is_empty());
    assert_eq!(
        messages(&s, json!("x")),
        vec![r#"spec.x: Unsupported value: "x": supported values: "a", "b""#]
    );
    let s = schema_with(json!({"type": "integer", "enum": [1, 2]}));
    assert!(messages(&s, json!(2)).is_empty());
    let errs = s.validate(&json!({"spec": {"x": 3}}));
    assert_eq!(
        errs[0].message(),
        r#"spec.x: Unsupported value: 3: supported values: "1", "2""#
    );
    assert_eq!(errs[0].reason(), "FieldValueNotSupported");
}

#[test]
fn minimum_maximum_and_exclusive() {
    let s = schema_with(json!({"type": "integer", "minimum": 1, "maximum": 5}));
    assert!(messages(&s, json!(1)).is_empty());
    assert!(messages(&s, json!(5)).is_empty());
    assert_eq!(
        messages(&s, json!(7)),
        vec!["spec.x: Invalid value: 7: spec.x in body should be less than or equal to 5"]
    );
    assert_eq!(
        messages(&s, json!(0)),
        vec!["spec.x: Invalid value: 0: spec.x in body should be greater than or equal to 1"]
    );
    let s = schema_with(
        json!({"type": "number", "minimum": 1, "exclusiveMinimum": true, "maximum": 2.5, "exclusiveMaximum": true}),
    );
    assert!(messages(&s, json!(1.5)).is_empty());
    assert!(messages(&s, json!(2.0)).is_empty());
    assert_eq!(
        messages(&s, json!(1)),
        vec!["spec.x: Invalid value: 1: spec.x in body should be greater than 1"]
    );
    // kube-openapi compares integer data with the bound truncated to int64 (2.5 -> 2)
    assert_eq!(
        messages(&s, json!(2)),
        vec!["spec.x: Invalid value: 2: spec.x in body should be less than 2"]
    );
    assert_eq!(
        messages(&s, json!(2.5)),
        vec!["spec.x: Invalid value: 2.5: spec.x in body should be less than 2.5"]
    );
}

#[test]
fn multiple_of() {
    let s = schema_with(json!({"type": "integer", "multipleOf": 3}));
    assert!(messages(&s, json!(9)).is_empty());
    assert_eq!(
        messages(&s, json!(10)),
        vec!["spec.x: Invalid value: 10: spec.x in body should be a multiple of 3"]
    );
    let s = schema_with(json!({"type": "number", "multipleOf": 0.5}));
    assert!(messages(&s, json!(1.5)).is_empty());
    assert_eq!(
        messages(&s, json!(1.25)),
        vec!["spec.x: Invalid value: 1.25: spec.x in body should be a multiple of 0.5"]
    );
}

#[test]
fn string_lengths_and_pattern() {
    let s = schema_with(
        json!({"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"}),
    );
    assert!(messages(&s, json!("abc")).is_empty());
    let errs = s.validate(&json!({"spec": {"x": "abcdef"}}));
    assert_eq!(
        errs[0].message(),
        "spec.x: Too long: may not be more than 4 bytes"
    );
    assert_eq!(errs[0].reason(), "FieldValueTooLong");
    assert_eq!(
        messages(&s, json!("a")),
        vec![r#"spec.x: Invalid value: "a": spec.x in body should be at least 2 chars long"#]
    );
    assert_eq!(
        messages(&s, json!("AB1")),
        vec![r#"spec.x: Invalid value: "AB1": spec.x in body should match '^[a-z]+$'"#]
    );
    // lengths count characters: 4 chars (8 bytes) is not too long; only the pattern fails
    assert_eq!(
        messages(&s, json!("éééé")),
        vec![r#"spec.x: Invalid value: "éééé": spec.x in body should match '^[a-z]+$'"#]
    );
}

#[test]
fn formats_only_some_checked() {
    let s = schema_with(json!({"type": "string", "format": "date-time"}));
    assert!(messages(&s, json!("2024-05-01T10:00:00Z")).is_empty());
    assert_eq!(
        messages(&s, json!("yesterday")),
        vec![
            r#"spec.x: Invalid value: "yesterday": spec.x in body must be of type date-time: "yesterday""#
        ]
    );
    let s = schema_with(json!({"type": "string", "format": "byte"}));
    assert!(messages(&s, json!("aGk=")).is_empty());
    assert_eq!(messages(&s, json!("%%%")).len(), 1);
    // int32 / int64 and unknown formats are stripped by kube and never checked
    let s = schema_with(json!({"type": "integer", "format": "int32"}));
    assert!(messages(&s, json!(9_000_000_000_i64)).is_empty());
    let s = schema_with(json!({"type": "string", "format": "my-own-format"}));
    assert!(messages(&s, json!("anything")).is_empty());
}

#[test]
fn items_counts_and_unique() {
    let s = schema_with(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}),
    );
    assert!(messages(&s, json!([1])).is_empty());
    let errs = s.validate(&json!({"spec": {"x": [1, 2, 3]}}));
    assert_eq!(
        errs[0].message(),
        "spec.x: Too many: 3: must have at most 2 items"
    );
    assert_eq!(errs[0].reason(), "FieldValueTooMany");
    assert_eq!(
        messages(&s, json!([])),
        vec!["spec.x: Invalid value: 0: spec.x in body should have at least 1 items"]
    );
    let s = schema_with(json!({"type": "array", "items": {"type": "integer"}, "maxItems": 1}));
    assert_eq!(
        messages(&s, json!([1, 2])),
        vec!["spec.x: Too many: 2: must have at most 1 item"]
    );
}

#[test]
fn properties_counts() {
    let s = schema_with(
        json!({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1, "maxProperties": 2}),
    );
    assert!(messages(&s, json!({"a": "b"})).is_empty());
    assert_eq!(
        messages(&s, json!({"a": "1", "b": "2", "c": "3"})),
        vec!["spec.x: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        messages(&s, json!({})),
        vec!["spec.x: Invalid value: 0: spec.x in body should have at least 1 properties"]
    );
}

#[test]
fn additional_properties_schema_and_false() {
    let s = schema_with(json!({"type": "object", "additionalProperties": {"type": "integer"}}));
    assert!(messages(&s, json!({"a": 1})).is_empty());
    assert_eq!(
        messages(&s, json!({"a": "no"})),
        vec![
            r#"spec.x.a: Invalid value: "string": spec.x.a in body must be of type integer: "string""#
        ]
    );
    let s = schema_with(json!({"type": "object", "additionalProperties": false}));
    assert!(messages(&s, json!({})).is_empty());
    assert_eq!(
        messages(&s, json!({"k": 1})),
        vec![r#"spec.x: Invalid value: "k": spec.x.k in body is a forbidden property"#]
    );
}

#[test]
fn int_or_string() {
    let s = schema_with(json!({"x-kubernetes-int-or-string": true}));
    assert!(messages(&s, json!(80)).is_empty());
    assert!(messages(&s, json!("http")).is_empty());
    assert_eq!(
        messages(&s, json!(true)),
        vec![
            r#"spec.x: Invalid value: "boolean": spec.x in body must be of type integer,string: "boolean""#
        ]
    );
    assert_eq!(messages(&s, json!(1.5)).len(), 1);
    // the kubebuilder form with anyOf
    let s = schema_with(
        json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+%$"}),
    );
    assert!(messages(&s, json!(3)).is_empty());
    assert!(messages(&s, json!("50%")).is_empty());
    assert_eq!(
        messages(&s, json!("fifty")),
        vec![r#"spec.x: Invalid value: "fifty": spec.x in body should match '^[0-9]+%$'"#]
    );
}

#[test]
fn preserve_unknown_fields_accepts_anything_below() {
    let s = schema_with(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    assert!(messages(&s, json!({"any": {"thing": [1, "x"]}})).is_empty());
    let s = schema_with(json!({"x-kubernetes-preserve-unknown-fields": true}));
    assert!(messages(&s, json!(42)).is_empty());
    assert!(messages(&s, json!("str")).is_empty());
}

#[test]
fn embedded_resource_requires_api_version_and_kind() {
    let s = schema_with(
        json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
    );
    assert!(
        messages(
            &s,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
        )
        .is_empty()
    );
    let mut m = messages(&s, json!({"metadata": {}}));
    m.sort();
    assert_eq!(
        m,
        vec![
            "spec.x.apiVersion: Required value: must not be empty",
            "spec.x.kind: Required value: must not be empty"
        ]
    );
    assert_eq!(
        messages(&s, json!({"apiVersion": "a/b/c", "kind": "Pod"})),
        vec![r#"spec.x.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#]
    );
    assert_eq!(
        messages(
            &s,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a/b%"}})
        ),
        vec![
            r#"spec.x.metadata.name: Invalid value: "a/b%": may not contain '/'"#,
            r#"spec.x.metadata.name: Invalid value: "a/b%": may not contain '%'"#,
        ]
    );
    let m = messages(&s, json!({"apiVersion": "v1", "kind": "Not_Valid"}));
    assert_eq!(m.len(), 1);
    assert!(m[0].starts_with(r#"spec.x.kind: Invalid value: "Not_Valid": may have mixed case, but should otherwise match: a DNS-1035 label"#), "{}", m[0]);
}

#[test]
fn list_type_set_and_map_uniqueness() {
    let s = schema_with(
        json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}),
    );
    assert!(messages(&s, json!(["a", "b"])).is_empty());
    let errs = s.validate(&json!({"spec": {"x": ["a", "b", "a", "a"]}}));
    assert_eq!(errs.len(), 1, "only the first repetition is reported");
    assert_eq!(errs[0].message(), r#"spec.x[2]: Duplicate value: "a""#);
    assert_eq!(errs[0].reason(), "FieldValueDuplicate");

    let s = schema_with(json!({
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}
    }));
    assert!(messages(&s, json!([{"type": "A"}, {"type": "B"}])).is_empty());
    assert_eq!(
        messages(
            &s,
            json!([{"type": "A", "status": "1"}, {"type": "A", "status": "2"}])
        ),
        vec![r#"spec.x[1]: Duplicate value: map[string]interface {}{"type":"A"}"#]
    );
}

#[test]
fn all_of_any_of_one_of_not() {
    let s = schema_with(json!({"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 10}]}));
    assert!(messages(&s, json!(5)).is_empty());
    assert_eq!(
        messages(&s, json!(11)),
        vec![
            "spec.x: Invalid value: 11: spec.x in body should be less than or equal to 10",
            r#"<nil>: Invalid value: "": "spec.x" must validate all the schemas (allOf)"#,
        ]
    );
    let s = schema_with(json!({"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]}));
    assert!(messages(&s, json!("bee")).is_empty());
    let m = messages(&s, json!("cat"));
    assert_eq!(
        m[0],
        r#"<nil>: Invalid value: "": "spec.x" must validate at least one schema (anyOf)"#
    );
    assert_eq!(m.len(), 2, "the best failing alternative is reported too");
    let s = schema_with(json!({"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 10}]}));
    assert!(messages(&s, json!(20)).is_empty());
    assert_eq!(
        messages(&s, json!(7)),
        vec![
            r#"<nil>: Invalid value: "": "spec.x" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ]
    );
    let s = schema_with(json!({"type": "string", "not": {"enum": ["forbidden"]}}));
    assert!(messages(&s, json!("ok")).is_empty());
    assert_eq!(
        messages(&s, json!("forbidden")),
        vec![r#"<nil>: Invalid value: "": "spec.x" must not validate the schema (not)"#]
    );
}

#[test]
fn errors_in_nested_arrays_and_objects_have_full_paths() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}}
        }}}
    }))
    .unwrap();
    let errs = s.validate(
        &json!({"spec": {"items": [{"name": "ok"}, {"name": "ok"}, {"name": "toolong"}]}}),
    );
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "spec.items[2].name");
}

#[test]
fn validate_value_on_sub_schema() {
    let s = schema_with(json!({"type": "integer", "maximum": 3}));
    let spec = s.at(&["spec"]).unwrap();
    let errs = spec.validate_value(&json!({"x": 4}), "spec");
    assert_eq!(
        errs[0].message(),
        "spec.x: Invalid value: 4: x in body should be less than or equal to 3"
    );
}

#[test]
fn root_metadata_name_restrictions_apply() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}}
    }))
    .unwrap();
    assert!(
        s.validate(&json!({"metadata": {"name": "short", "labels": {"a": "b"}}}))
            .is_empty()
    );
    let errs = s.validate(&json!({"metadata": {"name": "much-too-long"}}));
    assert_eq!(
        errs[0].message(),
        "metadata.name: Too long: may not be more than 5 bytes"
    );
}
