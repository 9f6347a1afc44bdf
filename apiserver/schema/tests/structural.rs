//! Schema checks at CRD create/update: non-structural schemas and invalid keywords are
//! rejected with kube's paths and messages.

use gantry_schema::StructuralSchema;
use serde_json::{Value, json};

const BASE: &str = "spec.versions[0].schema.openAPIV3Schema";

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn errors(schema: Value) -> Vec<String> {
    match StructuralSchema::new_at(&schema, BASE) {
        Ok(_) => Vec::new(),
        Err(errs) => errs
            .iter()
            .map(gantry_schema::FieldError::message)
            .collect(),
    }
}

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn spec_with(x: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": x}}}})
}

#[test]
fn accepts_a_plain_structural_schema() {
    assert!(errors(spec_with(json!({"type": "string"}))).is_empty());
    let s = StructuralSchema::new(&spec_with(json!({"type": "string"}))).unwrap();
    assert_eq!(s.type_name(), "object");
    assert_eq!(s.at(&["spec", "x"]).unwrap().type_name(), "string");
    assert!(s.at(&["status"]).is_none());
}

#[test]
fn missing_type_is_rejected() {
    assert_eq!(
        errors(json!({"type": "object", "properties": {"spec": {"properties": {}}}})),
        vec![format!(
            "{BASE}.properties[spec].type: Required value: must not be empty for specified object fields"
        )]
    );
    assert_eq!(
        errors(json!({"properties": {}})),
        vec![format!(
            "{BASE}.type: Required value: must not be empty at the root"
        )]
    );
    assert_eq!(
        errors(spec_with(json!({"type": "array", "items": {}}))),
        vec![format!(
            "{BASE}.properties[spec].properties[x].items.type: Required value: must not be empty for specified array items"
        )]
    );
    // allowed without a type:
    assert!(errors(spec_with(json!({"x-kubernetes-int-or-string": true}))).is_empty());
    assert!(
        errors(spec_with(
            json!({"x-kubernetes-preserve-unknown-fields": true})
        ))
        .is_empty()
    );
}

#[test]
fn root_must_be_object_and_array_needs_items() {
    assert_eq!(
        errors(json!({"type": "string"})),
        vec![format!(
            r#"{BASE}.type: Invalid value: "string": must be object at the root"#
        )]
    );
    assert_eq!(
        errors(spec_with(json!({"type": "array"}))),
        vec![format!(
            "{BASE}.properties[spec].properties[x].items: Required value: must be specified"
        )]
    );
}

#[test]
fn additional_properties_with_properties_is_rejected() {
    let e = errors(spec_with(
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
    ));
    assert_eq!(
        e,
        vec![format!(
            "{BASE}.properties[spec].properties[x].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )]
    );
    assert_eq!(
        errors(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        vec![format!(
            "{BASE}.additionalProperties: Forbidden: must not be used at the root"
        )]
    );
}

#[test]
fn unsupported_keywords_are_rejected() {
    assert_eq!(
        errors(spec_with(json!({"$ref": "#/definitions/x"}))),
        vec![format!(
            "{BASE}.properties[spec].properties[x].$ref: Forbidden: $ref is not supported"
        )]
    );
    assert_eq!(
        errors(spec_with(json!({"type": "string", "uniqueItems": true}))),
        vec![format!(
            "{BASE}.properties[spec].properties[x].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        )]
    );
    let e = errors(spec_with(json!({"type": "null"})));
    assert!(e.contains(&format!(
        "{BASE}.properties[spec].properties[x].type: Forbidden: type cannot be set to null, use nullable as an alternative"
    )));
    assert!(e.contains(&format!(
        r#"{BASE}.properties[spec].properties[x].type: Unsupported value: "null": supported values: "array", "boolean", "integer", "number", "object", "string""#
    )));
    assert_eq!(
        errors(spec_with(
            json!({"type": "array", "items": [{"type": "string"}]})
        ))
        .first()
        .cloned(),
        Some(format!(
            "{BASE}.properties[spec].properties[x].items: Forbidden: items must be a schema object and not an array"
        ))
    );
}

#[test]
fn invalid_regex_is_rejected_at_new() {
    let e = errors(spec_with(json!({"type": "string", "pattern": "([a-z]"})));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with(&format!(
            r#"{BASE}.properties[spec].properties[x].pattern: Invalid value: "([a-z]": must be a valid regular expression, but isn't: error parsing regexp: "#
        )),
        "{}",
        e[0]
    );
}

#[test]
fn invalid_regex_does_not_hide_structural_errors() {
    let e = errors(json!({"type": "object", "properties": {
        "a": {"type": "string", "pattern": "("},
        "b": {"properties": {}}
    }}));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("properties[a].pattern"));
    assert!(e[1].contains("properties[b].type: Required value"));
}

#[test]
fn junctors_must_only_hold_value_validations() {
    let e = errors(spec_with(
        json!({"type": "string", "anyOf": [{"type": "string", "pattern": "^a"}]}),
    ));
    assert_eq!(
        e,
        vec![format!(
            "{BASE}.properties[spec].properties[x].anyOf[0].type: Forbidden: must be empty to be structural"
        )]
    );
    let e = errors(spec_with(
        json!({"type": "string", "allOf": [{"default": "a", "description": "d", "nullable": true}]}),
    ));
    assert_eq!(e.len(), 3, "{e:?}");
    // a property used in a junctor must exist structurally
    let e = errors(spec_with(
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"properties": {"b": {"pattern": "x"}}}]}),
    ));
    assert_eq!(
        e,
        vec![format!(
            "{BASE}.properties[spec].properties[x].properties[b]: Required value: because it is defined in {BASE}.properties[spec].properties[x].oneOf[0].properties[b]"
        )]
    );
    // the int-or-string anyOf pattern is allowed
    assert!(errors(spec_with(json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}))).is_empty());
}

#[test]
fn root_metadata_may_only_restrict_name() {
    assert!(
        errors(json!({"type": "object", "properties": {"metadata": {"type": "object"}}}))
            .is_empty()
    );
    assert!(
        errors(json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}}))
            .is_empty()
    );
    assert_eq!(
        errors(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}})
        ),
        vec![format!(
            "{BASE}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        )]
    );
    assert_eq!(
        errors(json!({"type": "object", "properties": {"metadata": {"type": "string"}}})),
        vec![format!(
            r#"{BASE}.properties[metadata].type: Invalid value: "string": must be object"#
        )]
    );
    assert_eq!(
        errors(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {"name": "x"}}}})
        ),
        vec![format!(
            "{BASE}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        )]
    );
}

#[test]
fn list_map_keys_must_be_required_or_defaulted_scalars() {
    let list = |item_props: Value, required: Value| {
        spec_with(json!({
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": required, "properties": item_props}
        }))
    };
    assert!(errors(list(json!({"name": {"type": "string"}}), json!(["name"]))).is_empty());
    assert!(
        errors(list(
            json!({"name": {"type": "string", "default": "x"}}),
            json!([])
        ))
        .is_empty()
    );
    assert_eq!(
        errors(list(json!({"name": {"type": "string"}}), json!([]))),
        vec![format!(
            "{BASE}.properties[spec].properties[x].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        )]
    );
    assert_eq!(
        errors(list(json!({"name": {"type": "object"}}), json!(["name"]))),
        vec![format!(
            r#"{BASE}.properties[spec].properties[x].items.properties[name].type: Invalid value: "object": must be a scalar type if parent array's x-kubernetes-list-type is map"#
        )]
    );
    assert_eq!(
        errors(list(json!({"other": {"type": "string"}}), json!([]))),
        vec![format!(
            r#"{BASE}.properties[spec].properties[x].x-kubernetes-list-map-keys: Invalid value: []interface {{}}{{"name"}}: entries must all be names of item properties"#
        )]
    );
    assert_eq!(
        errors(spec_with(
            json!({"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "string"}})
        )),
        vec![
            format!(
                "{BASE}.properties[spec].properties[x].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            ),
            format!(
                r#"{BASE}.properties[spec].properties[x].items.type: Invalid value: "string": must be object if parent array's x-kubernetes-list-type is map"#
            ),
        ]
    );
    assert_eq!(
        errors(spec_with(
            json!({"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}})
        )),
        vec![format!(
            r#"{BASE}.properties[spec].properties[x].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#
        )]
    );
}

#[test]
fn defaults_must_validate_and_be_pruned() {
    assert_eq!(
        errors(spec_with(
            json!({"type": "integer", "maximum": 10, "default": 11})
        )),
        vec![format!(
            "{BASE}.properties[spec].properties[x].default: Invalid value: 11:  in body should be less than or equal to 10"
        )]
    );
    assert_eq!(
        errors(spec_with(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}})
        )),
        vec![format!(
            r#"{BASE}.properties[spec].properties[x].default: Invalid value: map[string]interface {{}}{{"a":"x", "b":1}}: must not have unknown fields"#
        )]
    );
    assert_eq!(
        errors(spec_with(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": 5}})
        )),
        vec![format!(
            r#"{BASE}.properties[spec].properties[x].default.a: Invalid value: "integer": a in body must be of type string: "integer""#
        )]
    );
    assert!(errors(spec_with(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "default": {"b": 1}}))).is_empty());
}

#[test]
fn embedded_resource_rules() {
    assert!(errors(spec_with(json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}))).is_empty());
    assert_eq!(
        errors(spec_with(
            json!({"type": "object", "x-kubernetes-embedded-resource": true})
        )),
        vec![format!(
            "{BASE}.properties[spec].properties[x].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
        )]
    );
    assert_eq!(
        errors(spec_with(
            json!({"type": "string", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true})
        )),
        vec![format!(
            r#"{BASE}.properties[spec].properties[x].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true"#
        )]
    );
}

#[test]
fn malformed_keyword_types_are_reported() {
    let e = errors(spec_with(json!({"type": 5})));
    assert_eq!(
        e,
        vec![format!(
            "{BASE}.properties[spec].properties[x].type: Invalid value: 5: must be a string"
        )]
    );
    let e = errors(json!("not a schema"));
    assert_eq!(
        e,
        vec![format!(
            r#"{BASE}: Invalid value: "not a schema": must be a JSON object (a schema)"#
        )]
    );
}

#[test]
fn default_path_prefix_is_open_api_v3_schema() {
    let errs = StructuralSchema::new(&json!({"type": "string"})).unwrap_err();
    assert_eq!(errs[0].field, "openAPIV3Schema.type");
}
