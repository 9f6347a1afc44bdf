//! Strategic merge patch.

use gantry_merge::{PatchError, Schema, strategic_merge_patch};
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {"spec": {
                "containers": [
                    {"name": "app", "image": "app:1", "args": ["a", "b"],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                    {"name": "side", "image": "side:1"}
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "tolerations": [{"key": "k1"}]
            }}
        }
    })
}

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn patch(p: Value) -> Result<Value, PatchError> {
    strategic_merge_patch(&deployment(), &p, &Schema::builtin("apps/v1", "Deployment"))
}

fn containers(v: &Value) -> &Value {
    &v["spec"]["template"]["spec"]["containers"]
}

#[test]
fn list_maps_merge_by_key_and_scalars_replace() {
    let out = patch(json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
        {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]},
        {"name": "new", "image": "new:1"}
    ]}}}}))
    .unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
    let c = containers(&out);
    assert_eq!(c[0]["image"], "app:2");
    assert_eq!(c[0]["args"], json!(["a", "b"]));
    assert_eq!(
        c[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
    );
    assert_eq!(c[1], json!({"name": "side", "image": "side:1"}));
    assert_eq!(c[2], json!({"name": "new", "image": "new:1"}));
}

#[test]
fn atomic_lists_are_replaced_and_sets_merge() {
    let out = patch(json!({
        "metadata": {"finalizers": ["z", "x"]},
        "spec": {"template": {"spec": {"tolerations": [{"key": "k2"}],
            "containers": [{"name": "app", "args": ["c"]}]}}}
    }))
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "k2"}])
    );
    assert_eq!(containers(&out)[0]["args"], json!(["c"]));
    assert_eq!(out["metadata"]["finalizers"], json!(["x", "y", "z"]));
}

#[test]
fn null_deletes_and_patch_directives() {
    let out = patch(json!({
        "metadata": {"labels": {"a": null}},
        "spec": {
            "strategy": {"$patch": "replace", "type": "Recreate"},
            "template": {"spec": {"containers": [
                {"name": "side", "$patch": "delete"},
                {"name": "app", "env": [{"name": "A", "$patch": "delete"}]}
            ]}}
        }
    }))
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let c = containers(&out);
    assert_eq!(c.as_array().unwrap().len(), 1);
    assert_eq!(c[0]["env"], json!([{"name": "B", "value": "2"}]));
}

#[test]
fn replace_directive_in_a_list_replaces_the_whole_list() {
    let out = patch(json!({"spec": {"template": {"spec": {"containers": [
        {"$patch": "replace"}, {"name": "only", "image": "o:1"}
    ]}}}}))
    .unwrap();
    assert_eq!(containers(&out), &json!([{"name": "only", "image": "o:1"}]));
}

#[test]
fn retain_keys_delete_from_primitive_list_and_set_element_order() {
    let out = patch(json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]},
        "spec": {
            "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
            "template": {"spec": {
                "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "app:3"}]
            }}
        }
    }))
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let names: Vec<&str> = containers(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["side", "app"]);
    assert_eq!(containers(&out)[1]["image"], "app:3");
}

#[test]
fn new_values_have_directives_and_nulls_processed() {
    let out =
        patch(json!({"spec": {"paused": {"$patch": "replace", "x": 1}, "minReadySeconds": null}}))
            .unwrap();
    assert_eq!(out["spec"]["paused"], json!({"x": 1}));
    assert!(out["spec"].get("minReadySeconds").is_none());
}

#[test]
fn hostile_patches_fail_without_touching_the_original() {
    let original = deployment();
    let schema = Schema::builtin("apps/v1", "Deployment");
    let cases: Vec<(Value, &str)> = vec![
        (json!([1]), "must be a JSON object"),
        (
            json!({"spec": {"$patch": "explode"}}),
            "unknown patch type: explode in map",
        ),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
            "does not contain declared merge key: name",
        ),
        (
            json!({"spec": {"template": {"spec": {"containers": ["str"]}}}}),
            "is not a map",
        ),
        (
            json!({"spec": {"$retainKeys": "type"}}),
            "$retainKeys must be a list",
        ),
        (
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
            "must be a list",
        ),
    ];
    for (p, want) in cases {
        let err = strategic_merge_patch(&original, &p, &schema).unwrap_err();
        assert!(err.to_string().contains(want), "{p}: {err}");
    }
    assert_eq!(original, deployment());
    let err = strategic_merge_patch(&json!("x"), &json!({}), &schema).unwrap_err();
    assert!(matches!(err, PatchError::NotAnObject(_)));
}

#[test]
fn set_element_order_interleaves_server_only_elements_by_live_position() {
    let schema = Schema::builtin("v1", "Pod");
    let live =
        json!({"spec": {"containers": [{"name": "a"}, {"name": "injected"}, {"name": "b"}]}});
    let out = strategic_merge_patch(
        &live,
        &json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
            "containers": [{"name": "c", "image": "c:1"}]
        }}),
        &schema,
    )
    .unwrap();
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["a", "injected", "b", "c"]);
    // Reordering only: b before a, the server-only element stays ahead of what follows it.
    let out = strategic_merge_patch(
        &live,
        &json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}),
        &schema,
    )
    .unwrap();
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["injected", "b", "a"]);
}
