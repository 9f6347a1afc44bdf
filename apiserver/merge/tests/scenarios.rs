//! Multi-manager scenarios: kubectl applying while controllers write.

mod common;

use common::*;
use gantry_merge::{ApplyError, FieldSet, Path, Schema, reset_ignored};
use serde_json::{Value, json};

fn app(image: &str, extra_env: bool) -> Value {
    let mut env = vec![json!({"name": "MODE", "value": "prod"})];
    if extra_env {
        env.push(json!({"name": "DEBUG", "value": "1"}));
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "web", "image": image, "env": env}
            ]}}
        }
    })
}

#[test]
fn kubectl_and_controller_share_an_object() {
    let schema = Schema::builtin("apps/v1", "Deployment");
    let k1 = ssa(&schema, None, &[], &app("web:1", true), "kubectl", false, 0).unwrap();

    // The controller injects a sidecar and an annotation, and writes status.
    let mut ctrl = k1.object.clone();
    ctrl["metadata"]["annotations"] = json!({"ctrl.io/rev": "1"});
    ctrl["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "proxy", "image": "proxy:1"}));
    let mf = upd(
        &schema,
        Some(&k1.object),
        &k1.managed_fields,
        &ctrl,
        "controller",
        10,
    );

    // kubectl re-applies the same config: nothing changes, no conflict.
    let again = ssa(
        &schema,
        Some(&ctrl),
        &mf,
        &app("web:1", true),
        "kubectl",
        false,
        20,
    )
    .unwrap();
    assert!(again.is_noop());
    assert_eq!(again.object, ctrl);

    // kubectl bumps the image and drops DEBUG: the sidecar and annotation survive.
    let k2 = ssa(
        &schema,
        Some(&ctrl),
        &mf,
        &app("web:2", false),
        "kubectl",
        false,
        30,
    )
    .unwrap();
    let containers = &k2.object["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], "web:2");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "MODE", "value": "prod"}])
    );
    assert_eq!(containers[1]["name"], "proxy");
    assert_eq!(k2.object["metadata"]["annotations"]["ctrl.io/rev"], "1");

    // The controller changes the image; kubectl's next apply of its own image conflicts.
    let mut ctrl2 = k2.object.clone();
    ctrl2["spec"]["template"]["spec"]["containers"][0]["image"] = json!("web:patched");
    let mf2 = upd(
        &schema,
        Some(&k2.object),
        &k2.managed_fields,
        &ctrl2,
        "controller",
        40,
    );
    let err = ssa(
        &schema,
        Some(&ctrl2),
        &mf2,
        &app("web:2", false),
        "kubectl",
        false,
        50,
    )
    .unwrap_err();
    let ApplyError::Conflicts(c) = err else {
        panic!()
    };
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].field,
        ".spec.template.spec.containers[name=\"web\"].image"
    );
    assert_eq!(c[0].manager, "controller");
    assert_eq!(c[0].operation, "Update");
}

#[test]
fn applier_giving_up_an_element_removes_it_unless_the_element_itself_is_owned() {
    let schema = Schema::builtin("apps/v1", "Deployment");
    let k1 = ssa(&schema, None, &[], &app("web:1", true), "kubectl", false, 0).unwrap();
    // A controller edits the DEBUG value: it owns `.value` of the element, not the element.
    let mut ctrl = k1.object.clone();
    ctrl["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] = json!("2");
    let mf = upd(
        &schema,
        Some(&k1.object),
        &k1.managed_fields,
        &ctrl,
        "controller",
        1,
    );
    // As in structured-merge-diff, the element (a member of kubectl's last set that
    // nobody else owns as such) is removed with everything in it.
    let out = ssa(
        &schema,
        Some(&ctrl),
        &mf,
        &app("web:1", false),
        "kubectl",
        false,
        2,
    )
    .unwrap();
    let env = &out.object["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env, &json!([{"name": "MODE", "value": "prod"}]));

    // When another applier owns the element itself, it stays.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "web", "env": [{"name": "DEBUG", "value": "1"}]}]}}}});
    let o = ssa(
        &schema,
        Some(&k1.object),
        &k1.managed_fields,
        &other,
        "other",
        false,
        3,
    )
    .unwrap();
    let out = ssa(
        &schema,
        Some(&o.object),
        &o.managed_fields,
        &app("web:1", false),
        "kubectl",
        false,
        4,
    )
    .unwrap();
    let env = &out.object["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(
        env,
        &json!([{"name": "MODE", "value": "prod"}, {"name": "DEBUG", "value": "1"}])
    );
}

#[test]
fn reset_ignored_restores_or_removes_paths() {
    let ignored = FieldSet::from_paths([Path::fields(["status"]), Path::fields(["spec", "x"])]);
    let live = json!({"spec": {"x": 1, "y": 1}, "status": {"phase": "Old"}});
    let mut new = json!({"spec": {"x": 2, "y": 2}, "status": {"phase": "New"}});
    reset_ignored(&mut new, Some(&live), &ignored);
    assert_eq!(
        new,
        json!({"spec": {"x": 1, "y": 2}, "status": {"phase": "Old"}})
    );
    let mut created = json!({"spec": {"x": 2}, "status": {"phase": "New"}});
    reset_ignored(&mut created, None, &ignored);
    assert_eq!(created, json!({"spec": {}}));
}

fn client_side_applied(replicas: i64) -> (Value, Vec<gantry_merge::ManagedFieldsEntry>) {
    let schema = Schema::builtin("apps/v1", "Deployment");
    let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "paused": false}});
    let mut obj = cfg.clone();
    obj["metadata"]["annotations"] =
        json!({gantry_merge::LAST_APPLIED_ANNOTATION: format!("{cfg}\n")});
    let mf = upd(&schema, None, &[], &obj, "kubectl-client-side-apply", 0);
    (obj, mf)
}

#[test]
fn kubectl_moves_from_client_side_to_server_side_apply_without_conflicts() {
    let schema = Schema::builtin("apps/v1", "Deployment");
    let (obj, mf) = client_side_applied(2);
    let ssa_cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}});
    // Another manager name gets the conflict.
    let err = ssa(&schema, Some(&obj), &mf, &ssa_cfg, "other", false, 1).unwrap_err();
    assert!(
        err.to_string().contains("kubectl-client-side-apply"),
        "{err}"
    );
    // `kubectl` is allowed: the fields still hold their last-applied values.
    let out = ssa(&schema, Some(&obj), &mf, &ssa_cfg, "kubectl", false, 1).unwrap();
    assert_eq!(out.object["spec"]["replicas"], 3);
    assert!(
        set_of(&out.managed_fields, "kubectl", "Apply").has(&Path::fields(["spec", "replicas"]))
    );
    // The annotation now records the server-side applied config.
    let ann = out.object["metadata"]["annotations"][gantry_merge::LAST_APPLIED_ANNOTATION]
        .as_str()
        .unwrap();
    let recorded: Value = serde_json::from_str(ann).unwrap();
    assert_eq!(recorded, ssa_cfg);
    assert!(ann.ends_with('\n'));
}

#[test]
fn kubectl_upgrade_still_conflicts_on_fields_changed_since_last_apply() {
    let schema = Schema::builtin("apps/v1", "Deployment");
    let (obj, mf) = client_side_applied(2);
    let mut scaled = obj.clone();
    scaled["spec"]["replicas"] = json!(7);
    let mf = upd(&schema, Some(&obj), &mf, &scaled, "hpa", 1);
    let ssa_cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3, "paused": true}});
    let err = ssa(&schema, Some(&scaled), &mf, &ssa_cfg, "kubectl", false, 2).unwrap_err();
    let ApplyError::Conflicts(c) = err else {
        panic!()
    };
    // paused (unchanged since last apply) is allowed; replicas (changed by hpa) is not.
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].manager, "hpa");
    assert_eq!(c[0].field, ".spec.replicas");
}
