//! End-to-end with a realistic operator-sdk Memcached CRD schema.

use gantry_schema::{StructuralSchema, printer_column_value};
use serde_json::{Value, json};

fn memcached_schema() -> Value {
    json!({
        "description": "Memcached is the Schema for the memcacheds API",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "description": "MemcachedSpec defines the desired state of Memcached",
                "properties": {
                    "size": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 10, "default": 1},
                    "containerPort": {"type": "integer", "format": "int32", "default": 11211}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "conditions": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                        "items": {
                            "type": "object",
                            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
                            "properties": {
                                "lastTransitionTime": {"type": "string", "format": "date-time"},
                                "message": {"type": "string", "maxLength": 32768},
                                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                                "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                                           "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
                                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                                "type": {"type": "string", "maxLength": 316,
                                         "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"}
                            }
                        }
                    }
                }
            }
        }
    })
}

fn condition(t: &str, status: &str) -> Value {
    json!({"type": t, "status": status, "reason": "Reconciled", "message": "ok", "lastTransitionTime": "2024-01-01T00:00:00Z"})
}

#[test]
fn create_flow_prune_default_validate() {
    let s = StructuralSchema::new_at(
        &memcached_schema(),
        "spec.versions[0].schema.openAPIV3Schema",
    )
    .unwrap();
    assert!(s.at(&["status"]).is_some(), "has a status");
    let mut obj = json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "sample", "namespace": "default"},
        "spec": {"unknownKnob": true}
    });
    assert_eq!(s.prune(&mut obj), vec!["spec.unknownKnob"]);
    s.default(&mut obj);
    assert_eq!(obj["spec"], json!({"size": 1, "containerPort": 11211}));
    assert!(s.validate(&obj).is_empty());
    assert_eq!(
        printer_column_value(&obj, ".spec.size", "integer", ""),
        json!(1)
    );
}

#[test]
fn size_bounds() {
    let s = StructuralSchema::new(&memcached_schema()).unwrap();
    let msgs = |size: Value| -> Vec<String> {
        s.validate(&json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "spec": {"size": size}}))
            .iter()
            .map(gantry_schema::FieldError::message)
            .collect()
    };
    assert!(msgs(json!(10)).is_empty());
    assert_eq!(
        msgs(json!(11)),
        vec!["spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"]
    );
    assert_eq!(
        msgs(json!(0)),
        vec!["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]
    );
    assert_eq!(
        msgs(json!("3")),
        vec![
            r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#
        ]
    );
}

#[test]
fn status_conditions() {
    let s = StructuralSchema::new(&memcached_schema()).unwrap();
    let with = |conds: Value| -> Vec<String> {
        s.validate(&json!({"spec": {"size": 2}, "status": {"conditions": conds}}))
            .iter()
            .map(gantry_schema::FieldError::message)
            .collect()
    };
    assert!(
        with(json!([
            condition("Available", "True"),
            condition("Degraded", "False")
        ]))
        .is_empty()
    );
    assert_eq!(
        with(json!([
            condition("Available", "True"),
            condition("Available", "False")
        ])),
        vec![
            r#"status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Available"}"#
        ]
    );
    assert_eq!(
        with(json!([condition("Available", "Maybe")])),
        vec![
            r#"status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#
        ]
    );
    let mut missing = condition("Available", "True");
    missing.as_object_mut().unwrap().remove("reason");
    assert_eq!(
        with(json!([missing])),
        vec!["status.conditions[0].reason: Required value"]
    );
    let mut bad_time = condition("Available", "True");
    bad_time["lastTransitionTime"] = json!("now");
    assert_eq!(
        with(json!([bad_time])),
        vec![
            r#"status.conditions[0].lastTransitionTime: Invalid value: "now": status.conditions[0].lastTransitionTime in body must be of type date-time: "now""#
        ]
    );
}

#[test]
fn default_out_of_range_rejects_the_crd() {
    let mut schema = memcached_schema();
    schema["properties"]["spec"]["properties"]["size"]["default"] = json!(20);
    let errs =
        StructuralSchema::new_at(&schema, "spec.versions[0].schema.openAPIV3Schema").unwrap_err();
    assert_eq!(
        errs.iter()
            .map(gantry_schema::FieldError::message)
            .collect::<Vec<_>>(),
        vec![
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].default: Invalid value: 20:  in body should be less than or equal to 10"
        ]
    );
}
