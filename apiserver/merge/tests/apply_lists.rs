//! Server-side apply over list-maps, sets, atomic lists and maps, CRD schemas, and
//! hostile applied configurations.

mod common;

use common::*;
use gantry_merge::{
    ApplyError, ApplyOptions, FieldSet, ManagedFieldsEntry, Path, PathElement, Schema, apply,
};
use serde_json::{Value, json};

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": containers}})
}

fn container_names(obj: &Value) -> Vec<String> {
    obj["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn list_map_elements_of_other_managers_are_left_intact() {
    let schema = Schema::builtin("v1", "Pod");
    let a = ssa(
        &schema,
        None,
        &[],
        &pod(json!([{"name": "a", "image": "A:1"}])),
        "alice",
        false,
        0,
    )
    .unwrap();
    let b = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &pod(json!([{"name": "b", "image": "B:1"}])),
        "bob",
        false,
        1,
    )
    .unwrap();
    assert_eq!(container_names(&b.object), vec!["a", "b"]);
    // alice changes her image; bob's container is untouched.
    let a2 = ssa(
        &schema,
        Some(&b.object),
        &b.managed_fields,
        &pod(json!([{"name": "a", "image": "A:2"}])),
        "alice",
        false,
        2,
    )
    .unwrap();
    assert_eq!(
        a2.object["spec"]["containers"],
        json!([{"name": "a", "image": "A:2"}, {"name": "b", "image": "B:1"}])
    );
    let key_b = PathElement::key([("name", json!("b"))]);
    let bob = set_of(&a2.managed_fields, "bob", "Apply");
    assert!(bob.has(&Path(vec![
        PathElement::field("spec"),
        PathElement::field("containers"),
        key_b.clone(),
        PathElement::field("image"),
    ])));
    // bob's entry serialises the element with its `.` marker.
    let fv1 = fields_of(&a2.managed_fields, "bob", "Apply").unwrap();
    assert_eq!(
        fv1,
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
    );
}

#[test]
fn list_map_order_keeps_live_order_and_appends_new_elements() {
    let schema = Schema::builtin("v1", "Pod");
    let live = pod(json!([{"name": "x"}, {"name": "y"}, {"name": "z"}]));
    let mf = upd(&schema, None, &[], &live, "creator", 0);
    let out = ssa(
        &schema,
        Some(&live),
        &mf,
        &pod(json!([{"name": "y"}, {"name": "new"}])),
        "alice",
        false,
        1,
    )
    .unwrap();
    // structured-merge-diff's order: live elements stay in place, new ones follow.
    assert_eq!(container_names(&out.object), vec!["x", "y", "z", "new"]);
}

#[test]
fn sets_merge_by_value_and_prune_by_value() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let cm = |fins: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": fins}});
    let a = ssa(
        &schema,
        None,
        &[],
        &cm(json!(["a.io/x"])),
        "alice",
        false,
        0,
    )
    .unwrap();
    let b = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &cm(json!(["b.io/y"])),
        "bob",
        false,
        1,
    )
    .unwrap();
    assert_eq!(
        b.object["metadata"]["finalizers"],
        json!(["a.io/x", "b.io/y"])
    );
    assert_eq!(
        fields_of(&b.managed_fields, "bob", "Apply").unwrap(),
        json!({"f:metadata": {"f:finalizers": {"v:\"b.io/y\"": {}}}})
    );
    // alice stops applying her finalizer: it goes, bob's stays.
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let a2 = ssa(
        &schema,
        Some(&b.object),
        &b.managed_fields,
        &cfg,
        "alice",
        false,
        2,
    )
    .unwrap();
    assert_eq!(a2.object["metadata"]["finalizers"], json!(["b.io/y"]));
}

#[test]
fn atomic_lists_are_owned_whole_and_conflict_whole() {
    let schema = Schema::builtin("v1", "Pod");
    let a = ssa(
        &schema,
        None,
        &[],
        &pod(json!([{"name": "c", "args": ["1", "2"]}])),
        "alice",
        false,
        0,
    )
    .unwrap();
    let args = Path(vec![
        PathElement::field("spec"),
        PathElement::field("containers"),
        PathElement::key([("name", json!("c"))]),
        PathElement::field("args"),
    ]);
    assert!(set_of(&a.managed_fields, "alice", "Apply").has(&args));
    let err = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &pod(json!([{"name": "c", "args": ["3"]}])),
        "bob",
        false,
        1,
    )
    .unwrap_err();
    let ApplyError::Conflicts(c) = err else {
        panic!()
    };
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].field, ".spec.containers[name=\"c\"].args");
    let forced = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &pod(json!([{"name": "c", "args": ["3"]}])),
        "bob",
        true,
        1,
    )
    .unwrap();
    assert_eq!(forced.object["spec"]["containers"][0]["args"], json!(["3"]));
    assert!(!set_of(&forced.managed_fields, "alice", "Apply").has(&args));
}

#[test]
fn atomic_maps_are_replaced_whole() {
    let schema = Schema::builtin("v1", "Pod");
    let with_sel = |sel: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"nodeSelector": sel}})
    };
    let a = ssa(
        &schema,
        None,
        &[],
        &with_sel(json!({"disk": "ssd", "zone": "a"})),
        "alice",
        false,
        0,
    )
    .unwrap();
    let a2 = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &with_sel(json!({"zone": "b"})),
        "alice",
        false,
        1,
    )
    .unwrap();
    assert_eq!(a2.object["spec"]["nodeSelector"], json!({"zone": "b"}));
    assert_eq!(
        fields_of(&a2.managed_fields, "alice", "Apply").unwrap(),
        json!({"f:spec": {"f:nodeSelector": {}}})
    );
}

#[test]
fn granular_maps_merge_key_by_key() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
    let a = ssa(
        &schema,
        None,
        &[],
        &cm(json!({"a": "1"})),
        "alice",
        false,
        0,
    )
    .unwrap();
    let b = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &cm(json!({"b": "2"})),
        "bob",
        false,
        1,
    )
    .unwrap();
    assert_eq!(b.object["data"], json!({"a": "1", "b": "2"}));
}

fn crd_schema() -> Schema {
    Schema::from_openapi(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "items": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["id"],
                        "items": {"type": "object", "properties": {
                            "id": {"type": "string"}, "value": {"type": "string"}}}
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }
    }))
}

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

#[test]
fn crd_schema_drives_apply() {
    let schema = crd_schema();
    let a = ssa(
        &schema,
        None,
        &[],
        &widget(
            json!({"items": [{"id": "1", "value": "a"}], "tags": ["t1"], "args": ["x"],
                       "config": {"deep": {"k": 1}}}),
        ),
        "alice",
        false,
        0,
    )
    .unwrap();
    assert_eq!(
        fields_of(&a.managed_fields, "alice", "Apply").unwrap(),
        json!({"f:spec": {
            "f:args": {},
            // `config` is a declared property (not a member); its unknown keys are.
            "f:config": {"f:deep": {".": {}, "f:k": {}}},
            "f:items": {"k:{\"id\":\"1\"}": {".": {}, "f:id": {}, "f:value": {}}},
            "f:tags": {"v:\"t1\"": {}}
        }})
    );
    let b = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &widget(json!({"items": [{"id": "2", "value": "b"}], "tags": ["t2"], "config": {"other": true}})),
        "bob",
        false,
        1,
    )
    .unwrap();
    assert_eq!(
        b.object["spec"]["items"],
        json!([{"id": "1", "value": "a"}, {"id": "2", "value": "b"}])
    );
    assert_eq!(b.object["spec"]["tags"], json!(["t1", "t2"]));
    assert_eq!(
        b.object["spec"]["config"],
        json!({"deep": {"k": 1}, "other": true})
    );
    // Untyped lists are atomic: a different list under preserve-unknown-fields conflicts.
    let err = ssa(
        &schema,
        Some(&b.object),
        &b.managed_fields,
        &widget(json!({"args": ["y"]})),
        "bob",
        false,
        2,
    )
    .unwrap_err();
    assert!(matches!(err, ApplyError::Conflicts(ref c) if c[0].field == ".spec.args"));
}

fn apply_with_ignored(
    schema: &Schema,
    live: Option<&Value>,
    mf: &[ManagedFieldsEntry],
    applied: &Value,
    manager: &str,
    subresource: Option<&str>,
    ignored: &FieldSet,
) -> Result<gantry_merge::Merged, ApplyError> {
    apply(
        live,
        applied,
        &ApplyOptions {
            manager,
            force: false,
            subresource,
            api_version: "example.com/v1",
            schema,
            now: time(0),
            managed_fields: mf,
            ignored,
        },
    )
}

#[test]
fn ignored_status_is_not_owned_on_main_resource_and_status_apply_is_separate() {
    let schema = crd_schema();
    let status_path = FieldSet::from_paths([Path::fields(["status"])]);
    let mut cfg = widget(json!({"replicas": 1}));
    cfg["status"] = json!({"phase": "Ready"});
    let a = apply_with_ignored(&schema, None, &[], &cfg, "alice", None, &status_path).unwrap();
    assert_eq!(
        fields_of(&a.managed_fields, "alice", "Apply").unwrap(),
        json!({"f:spec": {"f:replicas": {}}})
    );
    // The caller resets ignored fields as kube's strategy does.
    let mut obj = a.object.clone();
    gantry_merge::reset_ignored(&mut obj, None, &status_path);
    assert!(obj.get("status").is_none());

    // A status apply by the controller: separate entry with subresource "status".
    let spec_path = FieldSet::from_paths([Path::fields(["spec"])]);
    let mut st =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    st["status"] = json!({"phase": "Ready"});
    let s = apply_with_ignored(
        &schema,
        Some(&obj),
        &a.managed_fields,
        &st,
        "alice",
        Some("status"),
        &spec_path,
    )
    .unwrap();
    let entries: Vec<(Option<String>, Option<String>)> = s
        .managed_fields
        .iter()
        .map(|e| (e.manager.clone(), e.subresource.clone()))
        .collect();
    assert_eq!(
        entries,
        vec![
            (Some("alice".into()), None),
            (Some("alice".into()), Some("status".into()))
        ]
    );
    assert_eq!(s.object["status"]["phase"], "Ready");
    assert_eq!(s.object["spec"]["replicas"], 1);
}

#[test]
fn hostile_applied_configs_are_rejected_with_clear_errors() {
    let schema = Schema::builtin("v1", "Pod");
    let live = pod(json!([{"name": "a", "image": "A"}]));
    let mf = upd(&schema, None, &[], &live, "creator", 0);
    let snapshot = (live.clone(), mf.clone());
    let cases: Vec<(Value, &str)> = vec![
        (json!([1, 2]), "must be a JSON object, got array"),
        (json!("x"), "must be a JSON object, got string"),
        (
            pod(json!([{"image": "no-name"}])),
            "element 0: associative list with keys has an element that omits key field \"name\"",
        ),
        (
            pod(json!([{"name": "a"}, {"name": "a"}])),
            ".spec.containers: duplicate entries for key [name=\"a\"]",
        ),
        (pod(json!(["not-a-map"])), "is not a map"),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": ["x", "x"]}}),
            ".metadata.finalizers: duplicate entries for key \"x\"",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "managedFields": [{"manager": "x"}]}}),
            "metadata.managedFields must be nil",
        ),
        (
            json!({"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "p"}}),
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1",
        ),
    ];
    for (cfg, want) in cases {
        let err = apply(
            Some(&live),
            &cfg,
            &ApplyOptions {
                manager: "alice",
                force: true,
                subresource: None,
                api_version: "v1",
                schema: &schema,
                now: time(1),
                managed_fields: &mf,
                ignored: &FieldSet::new(),
            },
        )
        .unwrap_err();
        let ApplyError::Invalid(msg) = &err else {
            panic!("expected Invalid for {cfg}, got {err:?}");
        };
        assert!(msg.contains(want), "{msg:?} should contain {want:?}");
    }
    assert_eq!((live, mf), snapshot);
}

#[test]
fn undecodable_live_managed_fields_is_an_error() {
    let schema = Schema::builtin("v1", "Pod");
    let bad = vec![ManagedFieldsEntry {
        manager: Some("x".into()),
        operation: Some("Update".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
            json!({"zz:bad": {}}),
        )),
        ..Default::default()
    }];
    let err = ssa(
        &schema,
        Some(&pod(json!([]))),
        &bad,
        &pod(json!([])),
        "alice",
        false,
        0,
    )
    .unwrap_err();
    assert!(matches!(err, ApplyError::ManagedFields(_)), "{err:?}");
}

#[test]
fn large_sets_and_list_maps_merge_correctly() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let fins: Vec<Value> = (0..3000).map(|i| json!(format!("f/{i}"))).collect();
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": fins}});
    let a = ssa(&schema, None, &[], &cfg, "alice", false, 0).unwrap();
    let again = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &cfg,
        "alice",
        false,
        1,
    )
    .unwrap();
    assert!(again.is_noop());
    let half: Vec<Value> = (0..1500).map(|i| json!(format!("f/{i}"))).collect();
    let cfg2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": half}});
    let b = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &cfg2,
        "alice",
        false,
        2,
    )
    .unwrap();
    assert_eq!(
        b.object["metadata"]["finalizers"].as_array().unwrap().len(),
        1500
    );
}

#[test]
fn list_map_order_follows_applied_order_for_shared_elements() {
    // structured-merge-diff: shared elements take the applied order, live-only elements
    // are emitted where the walk meets them.
    let schema = Schema::builtin("v1", "Pod");
    let live = pod(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let mf = upd(&schema, None, &[], &live, "creator", 0);
    let out = ssa(
        &schema,
        Some(&live),
        &mf,
        &pod(json!([{"name": "c"}, {"name": "a"}])),
        "alice",
        false,
        1,
    )
    .unwrap();
    assert_eq!(container_names(&out.object), vec!["b", "c", "a"]);
}
