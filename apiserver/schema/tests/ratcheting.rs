//! Update validation with kube's ratcheting: unchanged invalid values are tolerated,
//! changed ones are not.

use gantry_schema::StructuralSchema;
use serde_json::json;

fn schema() -> StructuralSchema {
    StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer", "maximum": 5},
            "name": {"type": "string", "maxLength": 3},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "required": ["name"], "properties": {
                          "name": {"type": "string"}, "port": {"type": "integer", "maximum": 100}}}},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 2}}
        }}}
    }))
    .unwrap()
}

// Takes what `validate` returns, so each call reads as one expression.
#[allow(clippy::needless_pass_by_value)]
fn msgs(errs: Vec<gantry_schema::FieldError>) -> Vec<String> {
    errs.iter()
        .map(gantry_schema::FieldError::message)
        .collect()
}

#[test]
fn unchanged_invalid_fields_are_ratcheted() {
    let s = schema();
    let old = json!({"metadata": {"resourceVersion": "1"}, "spec": {"size": 9, "name": "ok"}});
    let new = json!({"metadata": {"resourceVersion": "2"}, "spec": {"size": 9, "name": "ok2"}});
    assert!(s.validate_update(&new, &old).is_empty());
    assert_eq!(
        s.validate(&new).len(),
        1,
        "plain validation still reports it"
    );
    // changing the invalid field is validated
    let changed = json!({"spec": {"size": 8, "name": "ok"}});
    assert_eq!(
        msgs(s.validate_update(&changed, &old)),
        vec!["spec.size: Invalid value: 8: spec.size in body should be less than or equal to 5"]
    );
}

#[test]
fn list_map_items_correlate_by_key_other_lists_do_not() {
    let s = schema();
    let old = json!({"spec": {"ports": [{"name": "a", "port": 500}, {"name": "b", "port": 1}], "tags": ["long"]}});
    // reorder + change b; a (invalid) unchanged -> ratcheted
    let new = json!({"spec": {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 500}], "tags": ["long", "x"]}});
    assert_eq!(
        msgs(s.validate_update(&new, &old)),
        vec![r"spec.tags[0]: Too long: may not be more than 2 bytes"],
        "tags (atomic list) changed as a whole, so its items are validated"
    );
    let new = json!({"spec": {"ports": [{"name": "a", "port": 501}], "tags": ["long"]}});
    assert_eq!(
        msgs(s.validate_update(&new, &old)),
        vec![
            "spec.ports[0].port: Invalid value: 501: spec.ports[0].port in body should be less than or equal to 100"
        ]
    );
}

#[test]
fn schema_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<StructuralSchema>();
    let s = std::sync::Arc::new(schema());
    let s2 = s.clone();
    let h = std::thread::spawn(move || s2.validate(&json!({"spec": {"size": 1}})).len());
    assert_eq!(h.join().unwrap(), 0);
}
