//! Mutating admission policy: default resource requests for containers.
//!
//! For Pods, and workloads with a pod template (ReplicationController,
//! Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob), every
//! container and init container that does not request a configured resource
//! gets the default request for it, as an RFC 6902 JSON Patch. A resource the
//! container has a limit for is left alone: Kubernetes defaults that request
//! to the limit, and a default above the limit would make the pod invalid.
//! Ephemeral containers cannot have resources and are skipped. Objects
//! needing no change are allowed without a mutation; containers whose
//! `resources` cannot be patched (not an object) are left alone with a
//! warning.
//!
//! Pods and Jobs are only changed on CREATE (their pod spec is immutable
//! afterwards); other workloads on CREATE and UPDATE. Subresource requests
//! and other operations are allowed unchanged.
//!
//! Settings (required): `{"cpu": "100m", "memory": "128Mi"}`, Kubernetes
//! quantities that are not negative; optionally also `"ephemeral-storage"`.

use std::fmt::Write as _;

use gantry_sdk::{AdmissionRequest, Mutation, Policy, Value, Verdict, json};
use serde::Deserialize;
use serde_json::Map;

/// The policy's settings: the default request for each resource.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default CPU request, e.g. `100m`.
    pub cpu: String,
    /// Default memory request, e.g. `128Mi`.
    pub memory: String,
    /// Default ephemeral storage request, if any.
    #[serde(rename = "ephemeral-storage", default)]
    pub ephemeral_storage: Option<String>,
}

impl Settings {
    /// Parse and check settings.
    pub fn parse(settings: &Value) -> Result<Self, String> {
        if !settings.is_object() {
            return Err(format!(
                "invalid settings: expected an object like {{\"cpu\": \"100m\", \"memory\": \"128Mi\"}}, got {settings}"
            ));
        }
        let settings: Settings = serde_json::from_value(settings.clone())
            .map_err(|e| format!("invalid settings: {e}"))?;
        for (resource, quantity) in settings.defaults() {
            check_request_quantity(quantity)
                .map_err(|e| format!("invalid settings: {resource}: {e}"))?;
        }
        Ok(settings)
    }

    /// The default requests, by resource name.
    pub fn defaults(&self) -> Vec<(&'static str, &str)> {
        let mut defaults = vec![("cpu", self.cpu.as_str()), ("memory", self.memory.as_str())];
        if let Some(storage) = &self.ephemeral_storage {
            defaults.push(("ephemeral-storage", storage.as_str()));
        }
        defaults
    }
}

/// Check that `text` is a Kubernetes quantity (`resource.Quantity`) usable
/// as a request: `<number><suffix>`, where the number is unsigned or `+`,
/// with digits and at most one `.`, and the suffix is a binary SI suffix
/// (`Ki` … `Ei`), a decimal SI suffix (`m`, none, `k`, `M` … `E`) or a decimal
/// exponent (`e3`, `E-2`).
pub fn check_request_quantity(text: &str) -> Result<(), String> {
    let invalid = || format!("{text:?} is not a Kubernetes quantity (e.g. \"100m\", \"128Mi\")");
    let bytes = text.as_bytes();
    let mut at = 0;
    match bytes.first() {
        Some(b'-') => return Err(format!("{text:?} is negative")),
        Some(b'+') => at += 1,
        _ => {}
    }
    let digits_from = |at: usize| {
        bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let whole = digits_from(at);
    at += whole;
    let mut fraction = 0;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        fraction = digits_from(at);
        at += fraction;
    }
    if whole + fraction == 0 {
        return Err(invalid());
    }
    // Everything so far is ASCII, so `at` is a character boundary.
    match &text[at..] {
        "" | "m" | "k" | "M" | "G" | "T" | "P" | "E" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            Ok(())
        }
        exponent if exponent.starts_with(['e', 'E']) => {
            let exponent = &exponent[1..];
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                Ok(())
            } else {
                Err(invalid())
            }
        }
        _ => Err(invalid()),
    }
}

/// Escape one reference token of a JSON pointer (RFC 6901): `~` becomes
/// `~0`, `/` becomes `~1`.
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Whether the pod spec of `group`/`kind` may change on UPDATE (it may
/// not for Pods and Jobs).
fn pod_spec_mutable(group: &str, kind: &str) -> bool {
    !matches!((group, kind), ("", "Pod") | ("batch", "Job"))
}

/// The JSON pointer made of `tokens`.
fn pointer<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    tokens.into_iter().fold(String::new(), |mut out, token| {
        // `write!` to a `String` cannot fail.
        let _ = write!(out, "/{}", escape_token(token));
        out
    })
}

/// Whether `map` has a non-null entry `key`.
fn has(map: Option<&Map<String, Value>>, key: &str) -> bool {
    map.and_then(|m| m.get(key)).is_some_and(|v| !v.is_null())
}

/// The patch operations defaulting the requests of the pod spec at
/// `spec_path`, and warnings about containers that cannot be patched.
pub fn patch_pod_spec(
    spec: &Value,
    spec_path: &[&str],
    defaults: &[(&str, &str)],
) -> (Vec<Value>, Vec<String>) {
    let mut ops = Vec::new();
    let mut warnings = Vec::new();
    for list in ["containers", "initContainers"] {
        let containers = match spec.get(list) {
            None | Some(Value::Null) => continue,
            Some(Value::Array(containers)) => containers,
            Some(_) => {
                warnings.push(format!("{list} is not a list; left unchanged"));
                continue;
            }
        };
        for (index, container) in containers.iter().enumerate() {
            let index = index.to_string();
            let name = container.get("name").and_then(Value::as_str).unwrap_or("");
            let Some(container) = container.as_object() else {
                warnings.push(format!("{list}[{index}] is not an object; left unchanged"));
                continue;
            };
            let resources = match container.get("resources") {
                None | Some(Value::Null) => None,
                Some(Value::Object(resources)) => Some(resources),
                Some(_) => {
                    warnings.push(format!(
                        "container {name:?}: resources is not an object; left unchanged"
                    ));
                    continue;
                }
            };
            let requests = match resources.and_then(|r| r.get("requests")) {
                None | Some(Value::Null) => None,
                Some(Value::Object(requests)) => Some(requests),
                Some(_) => {
                    warnings.push(format!(
                        "container {name:?}: resources.requests is not an object; left unchanged"
                    ));
                    continue;
                }
            };
            let limits = resources
                .and_then(|r| r.get("limits"))
                .and_then(Value::as_object);
            let missing: Map<String, Value> = defaults
                .iter()
                .filter(|(resource, _)| !has(requests, resource) && !has(limits, resource))
                .map(|(resource, quantity)| (resource.to_string(), json!(quantity)))
                .collect();
            if missing.is_empty() {
                continue;
            }
            let mut path: Vec<&str> = spec_path
                .iter()
                .copied()
                .chain([list, index.as_str()])
                .collect();
            if resources.is_none() {
                path.push("resources");
                ops.push(json!({"op": "add", "path": pointer(path),
                                "value": {"requests": missing}}));
            } else if requests.is_none() {
                path.extend(["resources", "requests"]);
                ops.push(json!({"op": "add", "path": pointer(path), "value": missing}));
            } else {
                for (resource, quantity) in missing {
                    let path =
                        path.iter()
                            .copied()
                            .chain(["resources", "requests", resource.as_str()]);
                    ops.push(json!({"op": "add", "path": pointer(path), "value": quantity}));
                }
            }
        }
    }
    (ops, warnings)
}

/// The policy.
pub struct DefaultResources;

impl Policy for DefaultResources {
    fn validate(request: AdmissionRequest) -> Verdict {
        let settings = match Settings::parse(&request.settings) {
            Ok(settings) => settings,
            Err(e) => return Verdict::deny(e),
        };
        let operation = request.operation();
        if !matches!(operation, "CREATE" | "UPDATE") {
            return Verdict::allow();
        }
        let sub_resource = request.request.get("subResource").and_then(Value::as_str);
        if sub_resource.is_some_and(|s| !s.is_empty()) {
            return Verdict::allow();
        }
        let Some(object) = request.object() else {
            return Verdict::allow();
        };
        let Some((group, kind)) = request.group_kind() else {
            return Verdict::allow();
        };
        let Some(spec_path) = gantry_sdk::pod_spec_path(&group, &kind) else {
            return Verdict::allow();
        };
        if operation == "UPDATE" && !pod_spec_mutable(&group, &kind) {
            return Verdict::allow();
        }
        let Some(spec) = object.pointer(&pointer(spec_path.iter().copied())) else {
            return Verdict::allow();
        };
        let (ops, warnings) = patch_pod_spec(spec, spec_path, &settings.defaults());
        let mut verdict = Verdict::allow();
        if !ops.is_empty() {
            verdict.mutation = Some(Mutation::JsonPatch(Value::Array(ops)));
        }
        verdict.warnings = warnings;
        verdict
    }

    fn validate_settings(settings: &Value) -> Result<(), String> {
        Settings::parse(settings).map(drop)
    }
}

gantry_sdk::export_policy!(DefaultResources);

#[cfg(test)]
// Test helpers take `json!` literals by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
mod tests {
    use super::*;

    fn settings() -> Value {
        json!({"cpu": "100m", "memory": "128Mi"})
    }

    fn review(operation: &str, object: Value) -> AdmissionRequest {
        AdmissionRequest {
            request: json!({"operation": operation, "object": object}),
            settings: settings(),
        }
    }

    fn pod(containers: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": containers}})
    }

    /// The patch of `verdict`, applied to `object` with an independent
    /// RFC 6902 implementation.
    fn apply(verdict: &Verdict, object: &Value) -> Value {
        assert!(verdict.allowed, "{verdict:?}");
        let Some(Mutation::JsonPatch(patch)) = &verdict.mutation else {
            panic!("expected a JSON patch: {verdict:?}");
        };
        let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &patch).expect("patch applies");
        patched
    }

    #[test]
    fn adds_requests_to_containers_without_resources() {
        let object = pod(json!([{"name": "app", "image": "nginx"}]));
        let verdict = DefaultResources::validate(review("CREATE", object.clone()));
        assert_eq!(
            verdict.mutation,
            Some(Mutation::JsonPatch(json!([{
                "op": "add", "path": "/spec/containers/0/resources",
                "value": {"requests": {"cpu": "100m", "memory": "128Mi"}}
            }])))
        );
        let patched = apply(&verdict, &object);
        assert_eq!(
            patched["spec"]["containers"][0],
            json!({"name": "app", "image": "nginx",
                   "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}})
        );
        // Defaulting is idempotent: the patched pod needs nothing more.
        assert_eq!(
            DefaultResources::validate(review("CREATE", patched)),
            Verdict::allow()
        );
    }

    #[test]
    fn fills_in_only_what_is_missing() {
        let object = pod(json!([
            {"name": "complete", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "limits-only", "resources": {"limits": {"memory": "64Mi"}}},
            {"name": "cpu-only", "resources": {"requests": {"cpu": "2"}}},
            {"name": "null-requests", "resources": {"requests": null}},
            {"name": "null-resources", "resources": null},
            {"name": "null-cpu", "resources": {"requests": {"cpu": null, "memory": "1Gi"}}},
            {"name": "limited", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
        ]));
        let verdict = DefaultResources::validate(review("CREATE", object.clone()));
        assert_eq!(
            verdict.mutation,
            Some(Mutation::JsonPatch(json!([
                {"op": "add", "path": "/spec/containers/1/resources/requests",
                 "value": {"cpu": "100m"}},
                {"op": "add", "path": "/spec/containers/2/resources/requests/memory",
                 "value": "128Mi"},
                {"op": "add", "path": "/spec/containers/3/resources/requests",
                 "value": {"cpu": "100m", "memory": "128Mi"}},
                {"op": "add", "path": "/spec/containers/4/resources",
                 "value": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
                {"op": "add", "path": "/spec/containers/5/resources/requests/cpu",
                 "value": "100m"}
            ])))
        );
        let patched = apply(&verdict, &object);
        let containers = patched["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers[0], object["spec"]["containers"][0]);
        assert_eq!(
            containers[1]["resources"],
            json!({"limits": {"memory": "64Mi"}, "requests": {"cpu": "100m"}})
        );
        assert_eq!(
            containers[2]["resources"]["requests"],
            json!({"cpu": "2", "memory": "128Mi"})
        );
        for i in [3, 4] {
            assert_eq!(
                containers[i]["resources"]["requests"],
                json!({"cpu": "100m", "memory": "128Mi"})
            );
        }
        assert_eq!(
            containers[5]["resources"]["requests"],
            json!({"cpu": "100m", "memory": "1Gi"})
        );
        assert_eq!(containers[6], object["spec"]["containers"][6]);
    }

    #[test]
    fn objects_needing_nothing_are_allowed_unchanged() {
        let object = pod(json!([
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        ]));
        assert_eq!(
            DefaultResources::validate(review("CREATE", object)),
            Verdict::allow()
        );
        assert_eq!(
            DefaultResources::validate(review("CREATE", pod(json!([])))),
            Verdict::allow()
        );
    }

    #[test]
    fn patches_init_containers_but_not_ephemeral_ones() {
        let object = json!({"apiVersion": "v1", "kind": "Pod", "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1"}}}],
            "initContainers": [{"name": "setup"}],
            "ephemeralContainers": [{"name": "debug"}]
        }});
        let verdict = DefaultResources::validate(review("CREATE", object.clone()));
        let patched = apply(&verdict, &object);
        assert_eq!(
            patched["spec"]["initContainers"][0]["resources"]["requests"],
            json!({"cpu": "100m", "memory": "128Mi"})
        );
        assert_eq!(
            patched["spec"]["ephemeralContainers"],
            object["spec"]["ephemeralContainers"]
        );
    }

    #[test]
    fn patches_workload_pod_templates() {
        let template = json!({"metadata": {"labels": {"app": "x"}},
                              "spec": {"containers": [{"name": "app"}]}});
        for (api_version, kind, object, path) in [
            (
                "apps/v1",
                "Deployment",
                json!({"replicas": 1, "template": template}),
                "/spec/template/spec",
            ),
            (
                "apps/v1",
                "StatefulSet",
                json!({"template": template}),
                "/spec/template/spec",
            ),
            (
                "apps/v1",
                "DaemonSet",
                json!({"template": template}),
                "/spec/template/spec",
            ),
            (
                "apps/v1",
                "ReplicaSet",
                json!({"template": template}),
                "/spec/template/spec",
            ),
            (
                "v1",
                "ReplicationController",
                json!({"template": template}),
                "/spec/template/spec",
            ),
            (
                "batch/v1",
                "Job",
                json!({"template": template}),
                "/spec/template/spec",
            ),
            (
                "batch/v1",
                "CronJob",
                json!({"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}),
                "/spec/jobTemplate/spec/template/spec",
            ),
        ] {
            let object = json!({"apiVersion": api_version, "kind": kind,
                                "metadata": {"name": "w"}, "spec": object});
            let verdict = DefaultResources::validate(review("CREATE", object.clone()));
            let patched = apply(&verdict, &object);
            assert_eq!(
                patched.pointer(&format!("{path}/containers/0/resources/requests")),
                Some(&json!({"cpu": "100m", "memory": "128Mi"})),
                "{kind}"
            );
        }
    }

    #[test]
    fn updates_only_where_the_pod_spec_may_change() {
        let template = json!({"spec": {"containers": [{"name": "app"}]}});
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                                "spec": {"template": template}});
        let verdict = DefaultResources::validate(review("UPDATE", deployment.clone()));
        apply(&verdict, &deployment);
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": template}});
        assert_eq!(
            DefaultResources::validate(review("UPDATE", job)),
            Verdict::allow()
        );
        let pod = pod(json!([{"name": "app"}]));
        assert_eq!(
            DefaultResources::validate(review("UPDATE", pod.clone())),
            Verdict::allow()
        );
        for operation in ["DELETE", "CONNECT", ""] {
            assert_eq!(
                DefaultResources::validate(review(operation, pod.clone())),
                Verdict::allow()
            );
        }
        let mut status = review("UPDATE", deployment);
        status.request["subResource"] = json!("status");
        assert_eq!(DefaultResources::validate(status), Verdict::allow());
    }

    #[test]
    fn optional_ephemeral_storage_default() {
        let object =
            pod(json!([{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1"}}}]));
        let mut request = review("CREATE", object.clone());
        request.settings["ephemeral-storage"] = json!("1Gi");
        let verdict = DefaultResources::validate(request);
        assert_eq!(
            verdict.mutation,
            Some(Mutation::JsonPatch(json!([{
                "op": "add", "path": "/spec/containers/0/resources/requests/ephemeral-storage",
                "value": "1Gi"
            }])))
        );
        apply(&verdict, &object);
    }

    #[test]
    fn json_pointer_tokens_are_escaped() {
        assert_eq!(escape_token("cpu"), "cpu");
        assert_eq!(escape_token("example.com/gpu"), "example.com~1gpu");
        assert_eq!(escape_token("a~b"), "a~0b");
        // `~` first, so an escaped `/` is not escaped again.
        assert_eq!(escape_token("~/~1"), "~0~1~01");
        assert_eq!(pointer(["spec", "a/b", "c~d"]), "/spec/a~1b/c~0d");
        // The patch addresses a key with both characters correctly.
        let defaults = [("vendor.example/fast~disk", "1")];
        let spec = json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]});
        let (ops, warnings) = patch_pod_spec(&spec, &["spec"], &defaults);
        assert!(warnings.is_empty());
        assert_eq!(
            ops[0]["path"],
            "/spec/containers/0/resources/requests/vendor.example~1fast~0disk"
        );
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).unwrap();
        let mut object = json!({"spec": spec});
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(
            object["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "vendor.example/fast~disk": "1"})
        );
    }

    #[test]
    fn unpatchable_containers_are_left_alone_with_a_warning() {
        let object = pod(json!([
            "not a container",
            {"name": "weird", "resources": "lots"},
            {"name": "odd", "resources": {"requests": ["cpu"]}},
            {"name": "fine"}
        ]));
        let verdict = DefaultResources::validate(review("CREATE", object.clone()));
        assert_eq!(
            verdict.warnings,
            [
                "containers[0] is not an object; left unchanged",
                "container \"weird\": resources is not an object; left unchanged",
                "container \"odd\": resources.requests is not an object; left unchanged",
            ]
        );
        let patched = apply(&verdict, &object);
        assert_eq!(
            patched["spec"]["containers"][3]["resources"]["requests"]["cpu"],
            "100m"
        );
        let verdict = DefaultResources::validate(review(
            "CREATE",
            json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": {"name": "a"}}}),
        ));
        assert!(verdict.allowed && verdict.mutation.is_none());
        assert_eq!(
            verdict.warnings,
            ["containers is not a list; left unchanged"]
        );
    }

    #[test]
    fn other_kinds_and_missing_objects_are_allowed() {
        for object in [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "spec": {"containers": [{"name": "a"}]}}),
            json!({"apiVersion": "example.com/v1", "kind": "Pod", "spec": {"containers": [{"name": "a"}]}}),
            json!({"apiVersion": "v1", "kind": "Pod"}),
            json!({"apiVersion": "v1", "kind": "Pod", "spec": "nope"}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": null}}),
            json!("Pod"),
            json!(42),
            Value::Null,
        ] {
            assert_eq!(
                DefaultResources::validate(review("CREATE", object.clone())),
                Verdict::allow(),
                "{object}"
            );
        }
        let no_object = AdmissionRequest {
            request: json!({"operation": "CREATE"}),
            settings: settings(),
        };
        assert_eq!(DefaultResources::validate(no_object), Verdict::allow());
    }

    #[test]
    fn kind_falls_back_to_the_request() {
        let request = AdmissionRequest {
            request: json!({
                "operation": "CREATE",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "object": {"spec": {"containers": [{"name": "a"}]}}
            }),
            settings: settings(),
        };
        assert!(DefaultResources::validate(request).mutation.is_some());
    }

    #[test]
    fn quantities_are_checked() {
        for good in [
            "0", "1", "100m", "0.5", ".5", "1.", "+1", "128Mi", "1Gi", "2Ki", "1Ei", "1k", "5M",
            "1G", "1T", "1P", "1E", "1e3", "1E3", "1e-3", "1e+3", "1.5e2",
        ] {
            assert_eq!(check_request_quantity(good), Ok(()), "{good}");
        }
        for bad in [
            "", " 1", "1 ", "m", ".", "+", "1.2.3", "1mi", "1MI", "1Kb", "1K", "1e", "1e+",
            "1e1.5", "1Mi1", "0x10", "1_000", "١", "1µ", "Mi",
        ] {
            let err = check_request_quantity(bad).unwrap_err();
            assert!(err.contains("is not a Kubernetes quantity"), "{bad}: {err}");
        }
        assert_eq!(
            check_request_quantity("-1"),
            Err("\"-1\" is negative".into())
        );
    }

    #[test]
    fn settings_are_checked() {
        assert_eq!(DefaultResources::validate_settings(&settings()), Ok(()));
        assert_eq!(
            DefaultResources::validate_settings(
                &json!({"cpu": "1", "memory": "1Gi", "ephemeral-storage": "2Gi"})
            ),
            Ok(())
        );
        for (bad, expected) in [
            (Value::Null, "expected an object"),
            (json!({}), "missing field `cpu`"),
            (json!({"cpu": "100m"}), "missing field `memory`"),
            (json!({"memory": "128Mi"}), "missing field `cpu`"),
            (json!({"cpu": 1, "memory": "128Mi"}), "invalid type"),
            (json!({"cpu": null, "memory": "128Mi"}), "invalid type"),
            (
                json!({"cpu": "lots", "memory": "128Mi"}),
                "cpu: \"lots\" is not a Kubernetes quantity",
            ),
            (
                json!({"cpu": "100m", "memory": "-1Mi"}),
                "memory: \"-1Mi\" is negative",
            ),
            (
                json!({"cpu": "1", "memory": "1", "ephemeral-storage": "1GB"}),
                "ephemeral-storage: \"1GB\" is not",
            ),
            (
                json!({"cpu": "1", "memory": "1", "gpu": "1"}),
                "unknown field `gpu`",
            ),
            (json!(["100m", "128Mi"]), "expected an object"),
            (json!("100m"), "expected an object"),
        ] {
            let err = DefaultResources::validate_settings(&bad).unwrap_err();
            assert!(err.starts_with("invalid settings: "), "{bad}: {err}");
            assert!(err.contains(expected), "{bad}: {err}");
        }
    }

    #[test]
    fn bad_settings_deny_requests() {
        let mut request = review("CREATE", pod(json!([{"name": "a"}])));
        request.settings = json!({"cpu": "1 core", "memory": "1Gi"});
        let verdict = DefaultResources::validate(request);
        assert!(!verdict.allowed);
        assert!(
            verdict
                .message
                .unwrap()
                .starts_with("invalid settings: cpu: ")
        );
    }
}
