//! Server-side apply: create, no-op, conflicts, force, shared ownership, removal.

mod common;

use common::*;
use gantry_merge::{ApplyError, Path, PathElement, conflict_causes, conflict_message};
use serde_json::{Value, json};

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

#[test]
fn create_on_apply_owns_exactly_the_applied_fields() {
    let schema = deployment_schema();
    let applied = deployment(2, "nginx:1");
    let out = ssa(&schema, None, &[], &applied, "kubectl", false, 0).unwrap();
    assert_eq!(out.object, applied);
    assert!(out.object_changed);
    assert_eq!(out.managed_fields.len(), 1);
    let e = &out.managed_fields[0];
    assert_eq!(e.manager.as_deref(), Some("kubectl"));
    assert_eq!(e.operation.as_deref(), Some("Apply"));
    assert_eq!(e.api_version.as_deref(), Some("apps/v1"));
    assert_eq!(e.fields_type.as_deref(), Some("FieldsV1"));
    assert_eq!(e.time, Some(time(0)));
    assert_eq!(e.subresource, None);
    // What kube-apiserver records for this apply (name/namespace/apiVersion/kind stripped,
    // selector atomic, ports keyed by containerPort+protocol with the TCP default).
    let expected = json!({
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {},
                    "f:image": {},
                    "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                        ".": {},
                        "f:containerPort": {}
                    }}
                }}}
            }
        }
    });
    assert_eq!(e.fields_v1.as_ref().unwrap().0, expected);
}

#[test]
fn reapplying_the_same_config_is_a_noop() {
    let schema = deployment_schema();
    let applied = deployment(2, "nginx:1");
    let first = ssa(&schema, None, &[], &applied, "kubectl", false, 0).unwrap();
    let second = ssa(
        &schema,
        Some(&first.object),
        &first.managed_fields,
        &applied,
        "kubectl",
        false,
        100,
    )
    .unwrap();
    assert!(second.is_noop());
    assert!(!second.object_changed);
    assert!(!second.managed_fields_changed);
    assert_eq!(second.object, first.object);
    // Time is not bumped on a no-op.
    assert_eq!(second.managed_fields, first.managed_fields);
}

#[test]
fn changed_apply_bumps_time_and_reports_change() {
    let schema = deployment_schema();
    let first = ssa(
        &schema,
        None,
        &[],
        &deployment(2, "nginx:1"),
        "kubectl",
        false,
        0,
    )
    .unwrap();
    let second = ssa(
        &schema,
        Some(&first.object),
        &first.managed_fields,
        &deployment(3, "nginx:1"),
        "kubectl",
        false,
        100,
    )
    .unwrap();
    assert!(second.object_changed);
    assert!(
        !second.managed_fields_changed,
        "same fields, only time differs"
    );
    assert_eq!(second.object["spec"]["replicas"], 3);
    assert_eq!(second.managed_fields[0].time, Some(time(100)));
}

#[test]
fn apply_conflicts_with_update_manager_on_different_value() {
    let schema = deployment_schema();
    let first = ssa(
        &schema,
        None,
        &[],
        &deployment(2, "nginx:1"),
        "kubectl",
        false,
        0,
    )
    .unwrap();
    // A controller scales the deployment with a plain update.
    let mut scaled = first.object.clone();
    scaled["spec"]["replicas"] = json!(5);
    let mf = upd(
        &schema,
        Some(&first.object),
        &first.managed_fields,
        &scaled,
        "hpa",
        10,
    );
    assert!(set_of(&mf, "hpa", "Update").has(&Path::fields(["spec", "replicas"])));
    assert!(
        !set_of(&mf, "kubectl", "Apply").has(&Path::fields(["spec", "replicas"])),
        "update takes ownership away from the applier"
    );
    // kubectl applies a different replica count: conflict with hpa.
    let live_before = scaled.clone();
    let err = ssa(
        &schema,
        Some(&scaled),
        &mf,
        &deployment(3, "nginx:1"),
        "kubectl",
        false,
        20,
    )
    .unwrap_err();
    assert_eq!(scaled, live_before);
    let ApplyError::Conflicts(conflicts) = &err else {
        panic!("expected conflicts, got {err:?}");
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager, "hpa");
    assert_eq!(conflicts[0].field, ".spec.replicas");
    assert_eq!(
        conflict_message(conflicts),
        "Apply failed with 1 conflict: conflict with \"hpa\" using apps/v1: .spec.replicas"
    );
    assert_eq!(err.to_string(), conflict_message(conflicts));
    let causes = conflict_causes(conflicts);
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason.as_deref(), Some("FieldManagerConflict"));
    assert_eq!(
        causes[0].message.as_deref(),
        Some("conflict with \"hpa\" using apps/v1")
    );
    assert_eq!(causes[0].field.as_deref(), Some(".spec.replicas"));

    // Applying the value hpa set is not a conflict: ownership is shared.
    let shared = ssa(
        &schema,
        Some(&scaled),
        &mf,
        &deployment(5, "nginx:1"),
        "kubectl",
        false,
        30,
    )
    .unwrap();
    assert!(!shared.object_changed);
    assert!(
        set_of(&shared.managed_fields, "hpa", "Update").has(&Path::fields(["spec", "replicas"]))
    );
    assert!(
        set_of(&shared.managed_fields, "kubectl", "Apply").has(&Path::fields(["spec", "replicas"]))
    );
}

#[test]
fn force_apply_takes_ownership() {
    let schema = deployment_schema();
    let first = ssa(
        &schema,
        None,
        &[],
        &deployment(2, "nginx:1"),
        "kubectl",
        false,
        0,
    )
    .unwrap();
    let mut scaled = first.object.clone();
    scaled["spec"]["replicas"] = json!(5);
    let mf = upd(
        &schema,
        Some(&first.object),
        &first.managed_fields,
        &scaled,
        "hpa",
        10,
    );
    let forced = ssa(
        &schema,
        Some(&scaled),
        &mf,
        &deployment(3, "nginx:1"),
        "kubectl",
        true,
        20,
    )
    .unwrap();
    assert_eq!(forced.object["spec"]["replicas"], 3);
    assert!(
        set_of(&forced.managed_fields, "kubectl", "Apply").has(&Path::fields(["spec", "replicas"]))
    );
    // hpa owned nothing else, so its entry is gone.
    assert_eq!(
        managers(&forced.managed_fields),
        vec![("kubectl".to_string(), "Apply".to_string())]
    );
}

#[test]
fn two_appliers_conflict_and_message_lists_each() {
    let schema = deployment_schema();
    let a = ssa(
        &schema,
        None,
        &[],
        &deployment(2, "nginx:1"),
        "alice",
        false,
        0,
    )
    .unwrap();
    let err = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &deployment(3, "nginx:2"),
        "bob",
        false,
        5,
    )
    .unwrap_err();
    let ApplyError::Conflicts(c) = err else {
        panic!()
    };
    let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            ".spec.replicas",
            ".spec.template.spec.containers[name=\"nginx\"].image"
        ]
    );
    assert_eq!(
        conflict_message(&c),
        "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"nginx\"].image"
    );
    // Apply managers are printed without "using".
    assert_eq!(c[0].manager_display(), "\"alice\"");
}

#[test]
fn stop_applying_removes_field_unless_someone_else_owns_it() {
    let schema = deployment_schema();
    let mut cfg = deployment(2, "nginx:1");
    cfg["metadata"]["labels"] = json!({"app": "web", "tier": "fe", "team": "x"});
    let a = ssa(&schema, None, &[], &cfg, "alice", false, 0).unwrap();
    // bob co-owns `team` with the same value.
    let bob_cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"team": "x"}}});
    let b = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &bob_cfg,
        "bob",
        false,
        1,
    )
    .unwrap();
    assert!(b.managed_fields_changed);
    // alice stops applying tier and team.
    let out = ssa(
        &schema,
        Some(&b.object),
        &b.managed_fields,
        &deployment(2, "nginx:1"),
        "alice",
        false,
        2,
    )
    .unwrap();
    assert_eq!(
        out.object["metadata"]["labels"],
        json!({"app": "web", "team": "x"})
    );
    let alice = set_of(&out.managed_fields, "alice", "Apply");
    let team = Path::fields(["metadata", "labels", "team"]);
    assert!(!alice.has(&team));
    assert!(set_of(&out.managed_fields, "bob", "Apply").has(&team));
}

#[test]
fn stop_applying_a_list_map_element_removes_it() {
    let schema = deployment_schema();
    let mut two = deployment(1, "nginx:1");
    two["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "busybox"}));
    let a = ssa(&schema, None, &[], &two, "alice", false, 0).unwrap();
    let out = ssa(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &deployment(1, "nginx:1"),
        "alice",
        false,
        1,
    )
    .unwrap();
    let names: Vec<&str> = out.object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["nginx"]);
    let sidecar = Path(vec![
        PathElement::field("spec"),
        PathElement::field("template"),
        PathElement::field("spec"),
        PathElement::field("containers"),
        PathElement::key([("name", json!("sidecar"))]),
    ]);
    assert!(!set_of(&out.managed_fields, "alice", "Apply").has(&sidecar));
}

#[test]
fn removed_field_owned_by_updater_stays() {
    let schema = deployment_schema();
    let mut cfg = deployment(2, "nginx:1");
    cfg["metadata"]["annotations"] = json!({"note": "a"});
    let a = ssa(&schema, None, &[], &cfg, "alice", false, 0).unwrap();
    // A controller rewrites the annotation (takes ownership).
    let mut changed = a.object.clone();
    changed["metadata"]["annotations"]["note"] = json!("b");
    let mf = upd(
        &schema,
        Some(&a.object),
        &a.managed_fields,
        &changed,
        "ctrl",
        1,
    );
    // alice drops the annotation from her config: it stays (ctrl owns it).
    let out = ssa(
        &schema,
        Some(&changed),
        &mf,
        &deployment(2, "nginx:1"),
        "alice",
        false,
        2,
    )
    .unwrap();
    assert_eq!(out.object["metadata"]["annotations"]["note"], "b");
}

#[test]
fn managed_fields_serialize_like_kube() {
    let schema = deployment_schema();
    let out = ssa(
        &schema,
        None,
        &[],
        &deployment(1, "nginx:1"),
        "kubectl",
        false,
        5,
    )
    .unwrap();
    let mut v = serde_json::to_value(&out.managed_fields).unwrap();
    v[0]["fieldsV1"] = json!("elided");
    assert_eq!(
        v,
        json!([{
            "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": "elided",
            "manager": "kubectl",
            "operation": "Apply",
            "time": "2024-01-01T00:00:05Z"
        }])
    );
}
