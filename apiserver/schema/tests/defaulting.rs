//! Defaulting: absent fields, nested levels, array items, additionalProperties, and
//! null handling as kube does it.

use gantry_schema::StructuralSchema;
use serde_json::json;

fn schema() -> StructuralSchema {
    StructuralSchema::new(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "default": {},
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "mode": {"type": "string", "default": "fast"},
                    "nullableWithDefault": {"type": "string", "nullable": true, "default": "d"},
                    "plain": {"type": "string"},
                    "nullablePlain": {"type": "string", "nullable": true},
                    "template": {
                        "type": "object",
                        "properties": {"port": {"type": "integer", "default": 8080}}
                    },
                    "ports": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "protocol": {"type": "string", "default": "TCP"},
                                "port": {"type": "integer"}
                            }
                        }
                    },
                    "tags": {"type": "array", "items": {"type": "string", "default": "untagged"}},
                    "limits": {
                        "type": "object",
                        "additionalProperties": {"type": "object", "properties": {"max": {"type": "integer", "default": 5}}}
                    }
                }
            }
        }
    }))
    .unwrap_or_else(|e| panic!("{:?}", e.iter().map(gantry_schema::FieldError::message).collect::<Vec<_>>()))
}

#[test]
fn defaults_absent_fields_and_recurses_into_defaulted_objects() {
    let s = schema();
    let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}});
    s.default(&mut obj);
    // spec was defaulted to {} and then its own properties were defaulted
    assert_eq!(
        obj["spec"],
        json!({"replicas": 1, "mode": "fast", "nullableWithDefault": "d"})
    );
}

#[test]
fn keeps_present_values() {
    let s = schema();
    let mut obj = json!({"spec": {"replicas": 3, "mode": "slow"}});
    s.default(&mut obj);
    assert_eq!(obj["spec"]["replicas"], 3);
    assert_eq!(obj["spec"]["mode"], "slow");
}

#[test]
fn defaults_at_nested_levels_and_in_array_items() {
    let s = schema();
    let mut obj = json!({"spec": {"template": {}, "ports": [{"port": 80}, {"port": 443, "protocol": "UDP"}]}});
    s.default(&mut obj);
    assert_eq!(obj["spec"]["template"], json!({"port": 8080}));
    assert_eq!(
        obj["spec"]["ports"],
        json!([{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "UDP"}])
    );
}

#[test]
fn defaults_inside_additional_properties_values() {
    let s = schema();
    let mut obj = json!({"spec": {"limits": {"cpu": {}, "mem": {"max": 9}}}});
    s.default(&mut obj);
    assert_eq!(
        obj["spec"]["limits"],
        json!({"cpu": {"max": 5}, "mem": {"max": 9}})
    );
}

#[test]
fn null_handling() {
    let s = schema();
    let mut obj = json!({"spec": {
        "replicas": null,            // not nullable, has default -> defaulted
        "nullableWithDefault": null, // nullable -> kept as null
        "plain": null,               // not nullable, no default -> pruned
        "nullablePlain": null,       // nullable, no default -> kept
        "tags": [null, "a"]          // null item of non-nullable items with default -> defaulted
    }});
    s.default(&mut obj);
    let spec = &obj["spec"];
    assert_eq!(spec["replicas"], 1);
    assert!(
        spec["nullableWithDefault"].is_null()
            && spec
                .as_object()
                .unwrap()
                .contains_key("nullableWithDefault")
    );
    assert!(!spec.as_object().unwrap().contains_key("plain"));
    assert!(spec.as_object().unwrap().contains_key("nullablePlain"));
    assert_eq!(spec["tags"], json!(["untagged", "a"]));
}

#[test]
fn null_spec_is_defaulted() {
    let s = schema();
    let mut obj = json!({"spec": null});
    s.default(&mut obj);
    assert_eq!(obj["spec"]["replicas"], 1);
}

#[test]
fn prune_nulls_alone_does_not_default() {
    let s = schema();
    let mut obj = json!({"spec": {"plain": null, "replicas": null}});
    s.prune_nulls(&mut obj);
    assert_eq!(obj, json!({"spec": {"replicas": null}}));
}

#[test]
fn defaulting_is_idempotent() {
    let s = schema();
    let mut once = json!({"spec": {"ports": [{}]}});
    s.default(&mut once);
    let mut twice = once.clone();
    s.default(&mut twice);
    assert_eq!(once, twice);
}
