//! Hostile input: deep nesting, huge arrays, invalid regexes — clear errors, no stack
//! overflow, nothing lost.

use gantry_schema::{JsonPath, MAX_DEPTH, StructuralSchema, printer_column_value};
use serde_json::{Value, json};

/// `{"a": {"a": ... leaf}}` nested `depth` times, built without recursion.
fn nested_object(depth: usize, leaf: Value) -> Value {
    let mut v = leaf;
    for _ in 0..depth {
        let mut m = serde_json::Map::new();
        m.insert("a".into(), v);
        v = Value::Object(m);
    }
    v
}

/// Drops a deep value without recursing (`serde_json`'s Drop is recursive).
fn drop_deep(v: Value) {
    let mut stack = vec![v];
    while let Some(mut x) = stack.pop() {
        match &mut x {
            Value::Object(m) => stack.extend(std::mem::take(m).into_iter().map(|(_, v)| v)),
            Value::Array(a) => stack.append(a),
            _ => {}
        }
    }
}

#[test]
fn deeply_nested_schema_is_rejected_with_a_clear_error() {
    let mut schema = json!({"type": "string"});
    for _ in 0..(MAX_DEPTH + 5) {
        schema = json!({"type": "object", "properties": {"a": schema}});
    }
    let errs = StructuralSchema::new(&schema).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0]
            .message()
            .contains("must not be nested more than 100 levels deep"),
        "{}",
        errs[0].message()
    );
    drop_deep(schema);

    let huge = nested_object(100_000, json!({"type": "string"}));
    let errs = StructuralSchema::new(&huge).unwrap_err();
    assert!(errs[0].message().contains("levels deep"));
    drop_deep(huge);
}

#[test]
fn deeply_nested_objects_do_not_overflow() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                "properties": {"tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}}
    }))
    .unwrap();
    let mut obj = nested_object(50_000, json!(1));
    obj = {
        let mut m = serde_json::Map::new();
        m.insert("spec".into(), obj);
        Value::Object(m)
    };
    let errs = s.validate(&obj);
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].message(),
        r#"spec: Invalid value: "": object must not be nested more than 100 levels deep"#
    );
    s.default(&mut obj);
    assert!(s.prune(&mut obj).is_empty(), "preserved subtree is kept");
    assert!(JsonPath::parse("..a").unwrap().find(&obj).len() > 1000);
    assert_eq!(
        printer_column_value(&obj, ".spec", "string", ""),
        json!("null"),
        "too deep to render"
    );
    drop_deep(obj);

    // a schema-less subtree (additionalProperties: true) is pruned iteratively
    let s = StructuralSchema::new(&json!({
        "type": "object", "properties": {"spec": {"type": "object", "additionalProperties": true}}
    }))
    .unwrap();
    let mut deep_list = json!(1);
    for _ in 0..50_000 {
        deep_list = Value::Array(vec![deep_list]);
    }
    let mut x = serde_json::Map::new();
    x.insert("x".into(), deep_list);
    let mut spec = serde_json::Map::new();
    spec.insert("spec".into(), Value::Object(x));
    let mut obj = Value::Object(spec);
    assert!(s.prune(&mut obj).is_empty());
    drop_deep(obj);
}

#[test]
fn huge_arrays_are_validated() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "maxItems": 1000, "items": {"type": "integer", "minimum": 0}},
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}}
        }}}
    }))
    .unwrap();
    let items: Vec<i64> = (0..200_000).collect();
    let errs = s.validate(&json!({"spec": {"items": items}}));
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].message(),
        "spec.items: Too many: 200000: must have at most 1000 items"
    );
    let set: Vec<i64> = (0..3_000).chain([5]).collect();
    let errs = s.validate(&json!({"spec": {"set": set}}));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].message(), "spec.set[3000]: Duplicate value: 5");
}

#[test]
fn invalid_regex_is_rejected() {
    for bad in ["(", "[a-", "a{2,1}", "(?<!x)y"] {
        let r = StructuralSchema::new(
            &json!({"type": "object", "properties": {"s": {"type": "string", "pattern": bad}}}),
        );
        let errs = r
            .err()
            .unwrap_or_else(|| panic!("pattern {bad:?} accepted"));
        assert!(
            errs[0]
                .message()
                .contains("must be a valid regular expression"),
            "{}",
            errs[0].message()
        );
        assert!(
            !errs[0].message().contains('\n'),
            "single-line message: {}",
            errs[0].message()
        );
    }
}

#[test]
fn garbage_values_do_not_panic() {
    let s = StructuralSchema::new(
        &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "n": {"type": "number", "multipleOf": 0.1, "maximum": 1e308},
            "i": {"type": "integer", "multipleOf": 0.5}
        }}}}),
    )
    .unwrap();
    for v in [
        json!(f64::MAX),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(-0.0),
        json!("x"),
        json!([]),
        json!({}),
    ] {
        let _ = s.validate(&json!({"spec": {"n": v.clone(), "i": v}}));
    }
    let _ = s.validate(&json!("not an object"));
    let _ = s.validate(&Value::Null);
    let mut x = json!([1, 2]);
    s.default(&mut x);
    let _ = s.prune(&mut x);
}

#[test]
fn huge_list_maps_validate_and_ratchet_in_linear_time() {
    let s = StructuralSchema::new(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "entries": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"}, "v": {"type": "integer", "maximum": 10}}}}
        }}}
    }))
    .unwrap();
    let n = 100_000;
    let entries: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("e{i}"), "v": 50}))
        .collect();
    let old = json!({"spec": {"entries": entries}});
    assert_eq!(s.validate(&old).len(), n, "every entry exceeds the maximum");
    let mut new = old.clone();
    new["spec"]["entries"][7]["v"] = json!(60);
    new["spec"]["entries"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "e0", "v": 1}));
    let errs = s.validate_update(&new, &old);
    let msgs: Vec<String> = errs
        .iter()
        .map(gantry_schema::FieldError::message)
        .collect();
    assert_eq!(
        msgs,
        vec![
            "spec.entries[7].v: Invalid value: 60: spec.entries[7].v in body should be less than or equal to 10",
            r#"spec.entries[100000]: Duplicate value: map[string]interface {}{"name":"e0"}"#,
        ]
    );
}
