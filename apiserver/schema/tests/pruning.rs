//! Pruning of unknown fields, preserve-unknown-fields subtrees, embedded resources and
//! metadata.

use gantry_schema::StructuralSchema;
use serde_json::json;

fn schema() -> StructuralSchema {
    StructuralSchema::new(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer"},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                             "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "properties": {"spec": {"type": "object", "properties": {"image": {"type": "string"}}}}},
                    "raw": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }
    }))
    .unwrap_or_else(|e| panic!("{:?}", e.iter().map(gantry_schema::FieldError::message).collect::<Vec<_>>()))
}

#[test]
fn drops_unknown_fields_and_reports_paths() {
    let s = schema();
    let mut obj = json!({
        "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
        "spec": {"size": 1, "bogus": true, "items": [{"name": "a", "extra": 1}, {"name": "b"}]},
        "status": {"ready": true, "junk": "x"},
        "topLevel": 1
    });
    let dropped = s.prune(&mut obj);
    assert_eq!(
        dropped,
        vec![
            "spec.bogus",
            "spec.items[0].extra",
            "status.junk",
            "topLevel"
        ]
    );
    assert_eq!(
        obj,
        json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"size": 1, "items": [{"name": "a"}, {"name": "b"}]},
            "status": {"ready": true}
        })
    );
}

#[test]
fn preserve_unknown_fields_keeps_subtree_but_prunes_known_children() {
    let s = schema();
    let mut obj = json!({"spec": {"free": {"anything": {"deep": [1, 2]}, "known": {"a": "x", "b": "dropped"}}}});
    let dropped = s.prune(&mut obj);
    assert_eq!(dropped, vec!["spec.free.known.b"]);
    assert_eq!(
        obj["spec"]["free"],
        json!({"anything": {"deep": [1, 2]}, "known": {"a": "x"}})
    );
}

#[test]
fn additional_properties_values_are_kept() {
    let s = schema();
    let mut obj = json!({"spec": {"labels": {"a": "1", "b": "2"}}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj["spec"]["labels"], json!({"a": "1", "b": "2"}));
}

#[test]
fn embedded_resources_keep_type_and_object_meta() {
    let s = schema();
    let mut obj = json!({"spec": {
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}, "bogusMeta": 1},
                     "spec": {"image": "nginx", "other": 1}, "unknown": 2},
        "raw": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}
    }});
    let dropped = s.prune(&mut obj);
    assert_eq!(
        dropped,
        vec![
            "spec.template.metadata.bogusMeta",
            "spec.template.spec.other",
            "spec.template.unknown"
        ]
    );
    assert_eq!(
        obj["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"image": "nginx"}})
    );
    assert_eq!(obj["spec"]["raw"]["data"], json!({"k": "v"}));
}

#[test]
fn root_metadata_is_pruned_to_object_meta_fields() {
    let s = schema();
    let mut obj = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"x": "y"}, "annotations": {},
                                      "finalizers": ["f"], "ownerReferences": [], "color": "red"}});
    let dropped = s.prune(&mut obj);
    assert_eq!(dropped, vec!["metadata.color"]);
    assert_eq!(obj["metadata"].as_object().unwrap().len(), 6);
}

#[test]
fn schema_less_root_keeps_only_type_and_metadata() {
    let s = StructuralSchema::new(&json!({"type": "object"})).unwrap();
    let mut obj =
        json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n"}, "spec": {"a": 1}});
    assert_eq!(s.prune(&mut obj), vec!["spec"]);
    assert_eq!(
        obj,
        json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n"}})
    );
}

#[test]
fn preserve_unknown_fields_at_root_keeps_everything() {
    let s = StructuralSchema::new(
        &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    )
    .unwrap();
    let mut obj = json!({"spec": {"a": {"b": 1}}, "status": 5});
    let before = obj.clone();
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, before);
}
