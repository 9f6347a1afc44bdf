//! Schemas from CRD OpenAPI and for built-in kinds.

mod common;

use std::collections::BTreeMap;

use common::*;
use gantry_merge::{ListKind, Path, PathElement, Schema};
use serde_json::json;

#[test]
fn from_openapi_reads_every_extension() {
    let s = Schema::from_openapi(&json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"type": "object", "properties": {
                        "port": {"type": "integer"},
                        "protocol": {"type": "string", "default": "TCP"}}}
                },
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "plain": {"type": "array", "items": {"type": "string"}},
                "sel": {"type": "object", "x-kubernetes-map-type": "atomic",
                        "additionalProperties": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "inner": {"type": "object", "x-kubernetes-embedded-resource": true,
                          "x-kubernetes-preserve-unknown-fields": true}
            }}
        }
    }));
    let spec = s.field("spec").unwrap();
    let mut defaults = BTreeMap::new();
    defaults.insert("protocol".to_string(), json!("TCP"));
    assert!(matches!(
        spec.field("ports").unwrap(),
        Schema::List { kind: ListKind::Map { keys, defaults: d }, .. }
            if keys == &vec!["port".to_string(), "protocol".to_string()] && d == &defaults
    ));
    assert!(matches!(
        spec.field("tags").unwrap(),
        Schema::List {
            kind: ListKind::Set,
            ..
        }
    ));
    assert!(matches!(
        spec.field("plain").unwrap(),
        Schema::List {
            kind: ListKind::Atomic,
            ..
        }
    ));
    assert!(matches!(
        spec.field("sel").unwrap(),
        Schema::Map { atomic: true, .. }
    ));
    assert!(matches!(
        spec.field("labels").unwrap(),
        Schema::Map { atomic: false, elements: Some(e), .. } if **e == Schema::Scalar
    ));
    assert_eq!(spec.field("port").unwrap(), &Schema::Scalar);
    assert!(matches!(
        spec.field("raw").unwrap(),
        Schema::Map { elements: Some(e), .. } if **e == Schema::Untyped
    ));
    let inner = spec.field("inner").unwrap();
    assert_eq!(inner.field("metadata"), Some(&Schema::object_meta()));
    assert_eq!(inner.field("apiVersion"), Some(&Schema::Scalar));
    // The root always knows ObjectMeta.
    assert_eq!(s.field("metadata"), Some(&Schema::object_meta()));
}

#[test]
fn list_map_key_default_is_used_for_identity() {
    let schema = Schema::builtin("v1", "Service");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                     "spec": {"ports": [{"port": 80}, {"port": 80, "protocol": "UDP"}]}});
    let out = ssa(&schema, None, &[], &svc, "alice", false, 0).unwrap();
    let fv1 = fields_of(&out.managed_fields, "alice", "Apply").unwrap();
    assert_eq!(
        fv1,
        json!({"f:spec": {"f:ports": {
            "k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}},
            "k:{\"port\":80,\"protocol\":\"UDP\"}": {".": {}, "f:port": {}, "f:protocol": {}}
        }}})
    );
}

#[test]
fn builtin_workloads_know_pod_template_lists() {
    let tmpl =
        |containers: serde_json::Value| json!({"template": {"spec": {"containers": containers}}});
    for (api, kind, spec_path) in [
        ("apps/v1", "Deployment", vec!["spec"]),
        ("apps/v1", "StatefulSet", vec!["spec"]),
        ("apps/v1", "DaemonSet", vec!["spec"]),
        ("apps/v1", "ReplicaSet", vec!["spec"]),
        ("batch/v1", "Job", vec!["spec"]),
        ("batch/v1", "CronJob", vec!["spec", "jobTemplate", "spec"]),
    ] {
        let schema = Schema::builtin(api, kind);
        let mut obj = json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}});
        let mut cur = &mut obj;
        for p in &spec_path {
            cur = cur
                .as_object_mut()
                .unwrap()
                .entry(p.to_string())
                .or_insert(json!({}));
        }
        *cur = tmpl(
            json!([{"name": "a", "image": "i", "env": [{"name": "E", "value": "v"}],
                            "volumeMounts": [{"name": "v", "mountPath": "/m"}]}]),
        );
        let out = ssa(&schema, None, &[], &obj, "alice", false, 0).unwrap();
        let set = set_of(&out.managed_fields, "alice", "Apply");
        let mut path: Vec<PathElement> = spec_path.iter().map(|p| PathElement::field(*p)).collect();
        path.extend([
            PathElement::field("template"),
            PathElement::field("spec"),
            PathElement::field("containers"),
            PathElement::key([("name", json!("a"))]),
        ]);
        let mut env = path.clone();
        env.extend([
            PathElement::field("env"),
            PathElement::key([("name", json!("E"))]),
        ]);
        let mut mount = path.clone();
        mount.extend([
            PathElement::field("volumeMounts"),
            PathElement::key([("mountPath", json!("/m"))]),
        ]);
        assert!(set.has(&Path(path)), "{kind}");
        assert!(set.has(&Path(env)), "{kind}");
        assert!(set.has(&Path(mount)), "{kind}");
    }
}

#[test]
fn builtin_metadata_and_conditions() {
    let schema = Schema::builtin("apps/v1", "StatefulSet");
    let obj = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "s", "ownerReferences": [{"uid": "u1", "name": "o", "kind": "K", "apiVersion": "v1"}]},
        "spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    });
    let out = ssa(&schema, None, &[], &obj, "alice", false, 0).unwrap();
    assert_eq!(
        fields_of(&out.managed_fields, "alice", "Apply").unwrap(),
        json!({
            "f:metadata": {"f:ownerReferences": {"k:{\"uid\":\"u1\"}": {
                ".": {}, "f:apiVersion": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}}},
            "f:spec": {"f:volumeClaimTemplates": {}},
            "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}
        })
    );
}

#[test]
fn before_first_apply_owns_preexisting_fields() {
    let schema = Schema::builtin("v1", "ConfigMap");
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}});
    let err = ssa(&schema, Some(&live), &[], &cfg, "alice", false, 0).unwrap_err();
    assert!(
        err.to_string()
            .contains("conflict with \"before-first-apply\" using v1: .data.a"),
        "{err}"
    );
}

#[test]
fn generated_builtins_cover_many_kinds() {
    // RBAC rules are atomic lists; webhooks are keyed by name.
    let role = Schema::builtin("rbac.authorization.k8s.io/v1", "Role");
    assert!(matches!(
        role.field("rules"),
        Some(Schema::List {
            kind: ListKind::Atomic,
            ..
        })
    ));
    let vwc = Schema::builtin(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
    );
    assert!(matches!(
        vwc.field("webhooks"),
        Some(Schema::List { kind: ListKind::Map { keys, .. }, .. }) if keys == &vec!["name".to_string()]
    ));
    // Atomic structs (+structType=atomic): env secretKeyRef and imagePullSecrets elements.
    let schema = Schema::builtin("v1", "Pod");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "imagePullSecrets": [{"name": "regcred"}],
        "containers": [{"name": "c", "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]
    }});
    let out = ssa(&schema, None, &[], &pod, "alice", false, 0).unwrap();
    assert_eq!(
        fields_of(&out.managed_fields, "alice", "Apply").unwrap(),
        json!({"f:spec": {
            "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:env": {"k:{\"name\":\"P\"}": {
                ".": {}, "f:name": {}, "f:valueFrom": {"f:secretKeyRef": {}}}}, "f:name": {}}},
            "f:imagePullSecrets": {"k:{\"name\":\"regcred\"}": {}}
        }})
    );
    // Unknown kinds still get ObjectMeta and keyed conditions.
    let unknown = Schema::builtin("example.com/v1", "Thing");
    assert_eq!(unknown.field("metadata"), Some(&Schema::object_meta()));
    assert!(matches!(
        unknown.field("status").and_then(|s| s.field("conditions")),
        Some(Schema::List {
            kind: ListKind::Map { .. },
            ..
        })
    ));
    // Shared instances are cached.
    assert!(std::sync::Arc::ptr_eq(
        &Schema::builtin_shared("v1", "Pod"),
        &Schema::builtin_shared("v1", "Pod")
    ));
}
