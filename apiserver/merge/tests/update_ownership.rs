//! Ownership tracking for non-apply writes.

mod common;

use common::*;
use gantry_merge::{
    FieldSet, ManagedFieldsEntry, Path, Schema, UpdateError, UpdateOptions, update,
    validate_managed_fields,
};
use serde_json::{Value, json};

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": "default", "uid": "u1", "resourceVersion": "1",
                        "creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"app": "x"}},
           "data": data})
}

#[test]
fn create_gives_the_creator_every_field_except_stripped_metadata() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let mf = upd(
        &schema,
        None,
        &[],
        &cm(json!({"a": "1"})),
        "kubectl-create",
        0,
    );
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].operation.as_deref(), Some("Update"));
    assert_eq!(mf[0].api_version.as_deref(), Some("v1"));
    assert_eq!(mf[0].time, Some(time(0)));
    assert_eq!(
        mf[0].fields_v1.as_ref().unwrap().0,
        json!({
            "f:data": {".": {}, "f:a": {}},
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}}
        })
    );
}

#[test]
fn update_takes_changed_fields_from_others_and_keeps_the_rest() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let v1 = cm(json!({"a": "1", "b": "2"}));
    let mf = upd(&schema, None, &[], &v1, "creator", 0);
    let v2 = cm(json!({"a": "changed", "b": "2", "c": "3"}));
    let mf2 = upd(&schema, Some(&v1), &mf, &v2, "editor", 10);
    let creator = set_of(&mf2, "creator", "Update");
    let editor = set_of(&mf2, "editor", "Update");
    assert!(!creator.has(&Path::fields(["data", "a"])));
    assert!(creator.has(&Path::fields(["data", "b"])));
    assert!(editor.has(&Path::fields(["data", "a"])));
    assert!(editor.has(&Path::fields(["data", "c"])));
    assert!(!editor.has(&Path::fields(["data", "b"])));
    // Sorted by operation then time: creator (t=0) before editor (t=10).
    assert_eq!(
        managers(&mf2),
        vec![
            ("creator".into(), "Update".into()),
            ("editor".into(), "Update".into())
        ]
    );
}

#[test]
fn removed_fields_leave_every_manager_and_empty_entries_are_dropped() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let v1 = cm(json!({"a": "1"}));
    let mut mf = upd(&schema, None, &[], &v1, "creator", 0);
    let v2 = cm(json!({"a": "1", "b": "2"}));
    mf = upd(&schema, Some(&v1), &mf, &v2, "adder", 1);
    // Someone else deletes b: adder owned only b, so its entry disappears.
    let mf3 = upd(&schema, Some(&v2), &mf, &v1, "remover", 2);
    assert_eq!(managers(&mf3), vec![("creator".into(), "Update".into())]);
}

#[test]
fn unchanged_update_records_nothing() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let v1 = cm(json!({"a": "1"}));
    let mf = upd(&schema, None, &[], &v1, "creator", 0);
    let mut v1b = v1.clone();
    // Only server-owned metadata moves: not tracked.
    v1b["metadata"]["resourceVersion"] = json!("2");
    v1b["metadata"]["generation"] = json!(2);
    let mf2 = upd(&schema, Some(&v1), &mf, &v1b, "someone", 5);
    assert_eq!(mf2, mf);
}

#[test]
fn update_entries_are_per_api_version_and_subresource() {
    let schema = Schema::builtin("apps/v1", "Deployment");
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"replicas": 1}, "status": {"replicas": 0}});
    let mf = upd(&schema, None, &[], &d, "ctrl", 0);
    let mut d2 = d.clone();
    d2["status"]["replicas"] = json!(1);
    let ignored = FieldSet::from_paths([Path::fields(["spec"])]);
    let mf2 = update(
        Some(&d),
        &d2,
        &UpdateOptions {
            manager: "ctrl",
            subresource: Some("status"),
            api_version: "apps/v1",
            schema: &schema,
            now: time(1),
            managed_fields: &mf,
            new_managed_fields: None,
            ignored: &ignored,
        },
    )
    .unwrap();
    let subs: Vec<Option<String>> = mf2.iter().map(|e| e.subresource.clone()).collect();
    assert_eq!(subs, vec![None, Some("status".into())]);
    assert_eq!(
        mf2[1].fields_v1.as_ref().unwrap().0,
        json!({"f:status": {"f:replicas": {}}})
    );
}

fn update_sending(
    schema: &Schema,
    live: &Value,
    live_mf: &[ManagedFieldsEntry],
    sent: &[ManagedFieldsEntry],
) -> Vec<ManagedFieldsEntry> {
    update(
        Some(live),
        live,
        &UpdateOptions {
            manager: "resetter",
            subresource: None,
            api_version: "v1",
            schema,
            now: time(3),
            managed_fields: live_mf,
            new_managed_fields: Some(sent),
            ignored: &FieldSet::new(),
        },
    )
    .unwrap()
}

#[test]
fn managed_fields_sent_by_the_client_replace_the_live_ones() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let v1 = cm(json!({"a": "1"}));
    let mf = upd(&schema, None, &[], &v1, "creator", 0);
    // `[{}]` with no other change clears managedFields (kube's documented reset).
    assert!(update_sending(&schema, &v1, &mf, &[ManagedFieldsEntry::default()]).is_empty());
    // An empty list means "not sent": live entries are kept.
    assert_eq!(update_sending(&schema, &v1, &mf, &[]), mf);
    // Edited entries are taken as they are.
    let mut edited = mf.clone();
    edited[0].manager = Some("renamed".into());
    let out = update_sending(&schema, &v1, &mf, &edited);
    assert_eq!(managers(&out), vec![("renamed".into(), "Update".into())]);
}

#[test]
fn more_than_ten_update_managers_are_bucketed_into_ancient_changes() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let mut obj = cm(json!({}));
    let mut mf = upd(&schema, None, &[], &obj, "creator", 0);
    for i in 0..11 {
        let mut next = obj.clone();
        next["data"][format!("k{i}")] = json!("v");
        mf = upd(&schema, Some(&obj), &mf, &next, &format!("m{i}"), 10 + i);
        obj = next;
    }
    assert_eq!(mf.len(), 10);
    let names: Vec<String> = mf.iter().map(|e| e.manager.clone().unwrap()).collect();
    assert!(names.contains(&"ancient-changes".to_string()), "{names:?}");
    assert!(!names.contains(&"creator".to_string()));
    assert!(!names.contains(&"m0".to_string()));
    let bucket = set_of(&mf, "ancient-changes", "Update");
    assert!(bucket.has(&Path::fields(["data", "k0"])));
}

#[test]
fn hostile_update_inputs() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let err = update(
        None,
        &json!([1]),
        &UpdateOptions {
            manager: "x",
            subresource: None,
            api_version: "v1",
            schema: &schema,
            now: time(0),
            managed_fields: &[],
            new_managed_fields: None,
            ignored: &FieldSet::new(),
        },
    )
    .unwrap_err();
    assert!(matches!(err, UpdateError::Invalid(ref m) if m.contains("got array")));
    let bad = vec![ManagedFieldsEntry {
        manager: Some("x".into()),
        operation: Some("Merge".into()),
        ..Default::default()
    }];
    let err = validate_managed_fields(&bad).unwrap_err();
    assert!(
        err.to_string().contains("must be `Apply` or `Update`"),
        "{err}"
    );
}
