//! `FieldsV1` encoding/decoding and set algebra.

use gantry_merge::{FieldSet, FieldsError, Path, PathElement};
use serde_json::json;

/// The managedFields of a Deployment created with `kubectl apply` (client side), as
/// kube-apiserver writes them (from the Kubernetes server-side apply documentation).
fn kubectl_client_side_sample() -> serde_json::Value {
    json!({
        "f:metadata": {
            "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
            "f:labels": {".": {}, "f:app": {}}
        },
        "f:spec": {
            "f:progressDeadlineSeconds": {},
            "f:replicas": {},
            "f:selector": {},
            "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
            "f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {},
                        "f:image": {},
                        "f:imagePullPolicy": {},
                        "f:name": {},
                        "f:ports": {
                            ".": {},
                            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}
                        }
                    }},
                    "f:finalizers": {"v:\"a.io/x\"": {}},
                    "f:list": {"i:0": {}}
                }
            }
        }
    })
}

#[test]
fn real_sample_round_trips_exactly() {
    let sample = kubectl_client_side_sample();
    let set = FieldSet::from_fields_v1(&sample).unwrap();
    assert_eq!(set.to_fields_v1(), sample);
    // The string form is byte-identical too (keys sorted like kube writes them).
    assert_eq!(
        serde_json::to_string(&set.to_fields_v1()).unwrap(),
        serde_json::to_string(&sample).unwrap()
    );
}

#[test]
fn decoded_members_and_leaves() {
    let set = FieldSet::from_fields_v1(&kubectl_client_side_sample()).unwrap();
    let labels = Path::fields(["metadata", "labels"]);
    assert!(set.has(&labels), "`.` marks the node itself as a member");
    assert!(set.has(&Path::fields(["metadata", "labels", "app"])));
    assert!(
        !set.has(&Path::fields(["spec"])),
        "no `.`: spec is not a member"
    );
    let port = Path(vec![
        PathElement::field("spec"),
        PathElement::field("template"),
        PathElement::field("spec"),
        PathElement::field("containers"),
        PathElement::key([("name", json!("nginx"))]),
        PathElement::field("ports"),
        PathElement::key([("protocol", json!("TCP")), ("containerPort", json!(80))]),
    ]);
    assert!(set.has(&port));
    assert_eq!(
        port.to_string(),
        ".spec.template.spec.containers[name=\"nginx\"].ports[containerPort=80,protocol=\"TCP\"]"
    );
    let leaves = set.leaves();
    assert!(leaves.contains(&Path::fields(["spec", "replicas"])));
    assert!(!leaves.contains(&labels), "labels has members below it");
    assert_eq!(set.len(), set.paths().len());
}

#[test]
fn set_algebra() {
    let a = FieldSet::from_paths([
        Path::fields(["a", "b"]),
        Path::fields(["a", "c"]),
        Path::fields(["x"]),
    ]);
    let b = FieldSet::from_paths([Path::fields(["a", "c"]), Path::fields(["y"])]);
    assert_eq!(
        a.union(&b).paths(),
        vec![
            Path::fields(["x"]),
            Path::fields(["y"]),
            Path::fields(["a", "b"]),
            Path::fields(["a", "c"])
        ]
    );
    assert_eq!(a.intersection(&b).paths(), vec![Path::fields(["a", "c"])]);
    assert_eq!(
        a.difference(&b).paths(),
        vec![Path::fields(["x"]), Path::fields(["a", "b"])]
    );
    // A member removes only itself in a difference, its whole subtree in a recursive one.
    let prefix = FieldSet::from_paths([Path::fields(["a"])]);
    assert_eq!(a.difference(&prefix), a);
    assert_eq!(
        a.recursive_difference(&prefix).paths(),
        vec![Path::fields(["x"])]
    );
    assert!(FieldSet::new().is_empty());
    assert_eq!(
        FieldSet::from_fields_v1(&json!({})).unwrap(),
        FieldSet::new()
    );
}

#[test]
fn key_fields_are_sorted_and_values_compact() {
    let s = FieldSet::from_paths([Path(vec![
        PathElement::field("ports"),
        PathElement::key([("protocol", json!("UDP")), ("port", json!(53))]),
    ])]);
    assert_eq!(
        s.to_fields_v1(),
        json!({"f:ports": {"k:{\"port\":53,\"protocol\":\"UDP\"}": {}}})
    );
    let v = FieldSet::from_paths([Path(vec![
        PathElement::field("s"),
        PathElement::Value(json!({"a": [1, 2]})),
    ])]);
    assert_eq!(v.to_fields_v1(), json!({"f:s": {"v:{\"a\":[1,2]}": {}}}));
    assert_eq!(FieldSet::from_fields_v1(&v.to_fields_v1()).unwrap(), v);
}

#[test]
fn bad_fields_v1_is_rejected() {
    for bad in [
        json!([]),
        json!({"f:a": 1}),
        json!({"zz": {}}),
        json!({"q:a": {}}),
        json!({"k:[1]": {}}),
        json!({"k:{}": {}}),
        json!({"k:{bad json": {}}),
        json!({"v:nope": {}}),
        json!({"i:-1": {}}),
    ] {
        let err = FieldSet::from_fields_v1(&bad).unwrap_err();
        assert!(
            matches!(
                err,
                FieldsError::NotAnObject(_) | FieldsError::BadKey { .. }
            ),
            "{bad}: {err:?}"
        );
    }
}
