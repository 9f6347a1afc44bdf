//! Admission policy: cap the replica count of workloads.
//!
//! Denies Deployments, StatefulSets, ReplicaSets and ReplicationControllers,
//! and `Scale` subresource objects (`kubectl scale`), whose `spec.replicas`
//! exceeds the configured maximum. An absent `spec.replicas` counts as the
//! API server's default: 1 for workloads, 0 for `Scale`. A `spec.replicas`
//! that is not an integer is denied. Other kinds, and requests without an
//! object (DELETE), are allowed.
//!
//! Settings (required): `{"max": 10}`, an integer ≥ 0.

use gantry_sdk::{AdmissionRequest, Policy, Value, Verdict};

/// The policy's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The most replicas a workload may ask for.
    pub max: u64,
}

impl Settings {
    /// Parse and check settings.
    pub fn parse(settings: &Value) -> Result<Self, String> {
        let Some(fields) = settings.as_object() else {
            return Err(format!(
                "invalid settings: expected an object like {{\"max\": 10}}, got {settings}"
            ));
        };
        if let Some(unknown) = fields.keys().find(|k| *k != "max") {
            return Err(format!(
                "invalid settings: unknown field {unknown:?}, expected \"max\""
            ));
        }
        match fields.get("max") {
            None => Err("invalid settings: \"max\" is required".into()),
            Some(max) => match max.as_u64() {
                Some(max) => Ok(Settings { max }),
                None => Err(format!(
                    "invalid settings: \"max\" must be an integer >= 0, got {max}"
                )),
            },
        }
    }
}

/// The replica count the API server assumes when `spec.replicas` is absent,
/// for the kinds this policy caps.
pub fn default_replicas(group: &str, kind: &str) -> Option<i64> {
    match (group, kind) {
        ("apps", "Deployment" | "StatefulSet" | "ReplicaSet") | ("", "ReplicationController") => {
            Some(1)
        }
        ("autoscaling", "Scale") => Some(0),
        _ => None,
    }
}

/// The policy.
pub struct CapReplicas;

impl Policy for CapReplicas {
    fn validate(request: AdmissionRequest) -> Verdict {
        let settings = match Settings::parse(&request.settings) {
            Ok(settings) => settings,
            Err(e) => return Verdict::deny(e),
        };
        let Some(object) = request.object() else {
            return Verdict::allow();
        };
        let Some((group, kind)) = request.group_kind() else {
            return Verdict::allow();
        };
        let Some(default) = default_replicas(&group, &kind) else {
            return Verdict::allow();
        };
        let replicas = match object.pointer("/spec/replicas") {
            None | Some(Value::Null) => default,
            Some(value) => match value.as_i64() {
                Some(replicas) => replicas,
                None => {
                    return Verdict::deny(format!(
                        "{kind}: spec.replicas must be an integer, got {value}"
                    ));
                }
            },
        };
        // Negative counts are for the API server's validation to reject.
        if u64::try_from(replicas).is_ok_and(|r| r > settings.max) {
            Verdict::deny(format!(
                "{kind} asks for {replicas} replicas; at most {} are allowed",
                settings.max
            ))
        } else {
            Verdict::allow()
        }
    }

    fn validate_settings(settings: &Value) -> Result<(), String> {
        Settings::parse(settings).map(drop)
    }
}

gantry_sdk::export_policy!(CapReplicas);

#[cfg(test)]
// Test helpers take `json!` literals by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
mod tests {
    use gantry_sdk::json;

    use super::*;

    fn admit(object: Value, max: u64) -> Verdict {
        CapReplicas::validate(AdmissionRequest {
            request: json!({"operation": "UPDATE", "object": object}),
            settings: json!({ "max": max }),
        })
    }

    fn workload(api_version: &str, kind: &str, replicas: Value) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"},
               "spec": {"replicas": replicas, "template": {}}})
    }

    #[test]
    fn caps_every_workload_kind() {
        for (api_version, kind) in [
            ("apps/v1", "Deployment"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "ReplicaSet"),
            ("v1", "ReplicationController"),
        ] {
            assert_eq!(
                admit(workload(api_version, kind, json!(5)), 5),
                Verdict::allow()
            );
            assert_eq!(
                admit(workload(api_version, kind, json!(6)), 5),
                Verdict::deny(format!("{kind} asks for 6 replicas; at most 5 are allowed"))
            );
        }
    }

    #[test]
    fn caps_the_scale_subresource() {
        let scale = |replicas| {
            CapReplicas::validate(AdmissionRequest {
                request: json!({
                    "operation": "UPDATE",
                    "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                    "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                    "subResource": "scale",
                    "object": {"apiVersion": "autoscaling/v1", "kind": "Scale",
                               "metadata": {"name": "web", "namespace": "default"},
                               "spec": {"replicas": replicas}}
                }),
                settings: json!({"max": 3}),
            })
        };
        assert!(scale(json!(3)).allowed);
        assert_eq!(
            scale(json!(100)).message.as_deref(),
            Some("Scale asks for 100 replicas; at most 3 are allowed")
        );
        // Scale omits a zero replica count.
        assert!(scale(Value::Null).allowed);
    }

    #[test]
    fn absent_replicas_count_as_the_default() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "w"}, "spec": {}});
        assert!(admit(deployment.clone(), 1).allowed);
        assert_eq!(
            admit(deployment, 0).message.as_deref(),
            Some("Deployment asks for 1 replicas; at most 0 are allowed")
        );
        let no_spec = json!({"apiVersion": "apps/v1", "kind": "StatefulSet"});
        assert!(!admit(no_spec, 0).allowed);
        let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "spec": {}});
        assert!(admit(scale, 0).allowed);
    }

    #[test]
    fn zero_max_allows_scaling_to_zero() {
        assert!(admit(workload("apps/v1", "Deployment", json!(0)), 0).allowed);
        assert!(!admit(workload("apps/v1", "Deployment", json!(1)), 0).allowed);
    }

    #[test]
    fn huge_and_negative_counts() {
        let max = u64::from(u32::MAX);
        assert!(
            admit(workload("apps/v1", "Deployment", json!(i64::MAX)), max)
                .message
                .is_some()
        );
        assert!(admit(workload("apps/v1", "Deployment", json!(-1)), 0).allowed);
        // Beyond i64: not a replica count anyone can have.
        let verdict = admit(workload("apps/v1", "Deployment", json!(u64::MAX)), max);
        assert_eq!(
            verdict.message.as_deref(),
            Some("Deployment: spec.replicas must be an integer, got 18446744073709551615")
        );
    }

    #[test]
    fn malformed_replicas_are_denied() {
        for bad in [
            json!("10"),
            json!(2.5),
            json!(true),
            json!([1]),
            json!({"n": 1}),
        ] {
            let verdict = admit(workload("apps/v1", "Deployment", bad.clone()), 100);
            assert_eq!(
                verdict.message,
                Some(format!(
                    "Deployment: spec.replicas must be an integer, got {bad}"
                ))
            );
        }
    }

    #[test]
    fn other_kinds_and_missing_objects_are_allowed() {
        // DaemonSets and Jobs have no replica count; look-alikes from other
        // groups are not ours to judge.
        assert!(admit(workload("apps/v1", "DaemonSet", json!(50)), 1).allowed);
        assert!(admit(workload("batch/v1", "Job", json!(50)), 1).allowed);
        assert!(admit(workload("example.com/v1", "Deployment", json!(50)), 1).allowed);
        assert!(admit(workload("v1", "ConfigMap", json!(50)), 1).allowed);
        assert!(admit(json!("Deployment"), 1).allowed);
        assert!(admit(json!(null), 1).allowed);
        let delete = AdmissionRequest {
            request: json!({"operation": "DELETE",
                            "oldObject": workload("apps/v1", "Deployment", json!(50))}),
            settings: json!({"max": 1}),
        };
        assert!(CapReplicas::validate(delete).allowed);
    }

    #[test]
    fn kind_falls_back_to_the_request() {
        let request = AdmissionRequest {
            request: json!({
                "operation": "CREATE",
                "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "object": {"metadata": {"name": "w"}, "spec": {"replicas": 9}}
            }),
            settings: json!({"max": 2}),
        };
        assert!(!CapReplicas::validate(request).allowed);
    }

    #[test]
    fn settings_are_checked() {
        assert_eq!(Settings::parse(&json!({"max": 0})), Ok(Settings { max: 0 }));
        assert_eq!(
            Settings::parse(&json!({"max": 250})),
            Ok(Settings { max: 250 })
        );
        assert_eq!(CapReplicas::validate_settings(&json!({"max": 3})), Ok(()));
        for (bad, expected) in [
            (Value::Null, "expected an object"),
            (json!({}), "\"max\" is required"),
            (json!({"max": -1}), "must be an integer >= 0, got -1"),
            (json!({"max": 2.5}), "must be an integer >= 0, got 2.5"),
            (json!({"max": 3.0}), "must be an integer >= 0, got 3.0"),
            (json!({"max": "3"}), "must be an integer >= 0, got \"3\""),
            (json!({"max": null}), "must be an integer >= 0, got null"),
            (json!({"max": 3, "min": 1}), "unknown field \"min\""),
            (json!([3]), "expected an object"),
            (json!(3), "expected an object"),
        ] {
            let err = CapReplicas::validate_settings(&bad).unwrap_err();
            assert!(err.starts_with("invalid settings: "), "{bad}: {err}");
            assert!(err.contains(expected), "{bad}: {err}");
        }
    }

    #[test]
    fn bad_settings_deny_requests() {
        let verdict = CapReplicas::validate(AdmissionRequest {
            request: json!({"operation": "CREATE",
                            "object": workload("apps/v1", "Deployment", json!(1))}),
            settings: json!({"max": -5}),
        });
        assert!(!verdict.allowed);
        assert!(verdict.message.unwrap().starts_with("invalid settings: "));
    }
}
