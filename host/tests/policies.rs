//! The example admission policies, built as components from `plugins/` and
//! run in the real sandbox.

// The helpers take `json!` literals by value so each call reads as data.
#![allow(clippy::needless_pass_by_value)]

use std::sync::Arc;

use gantry::runtime::{CallError, Limits, PolicyPlugin, Runtime};
use gantry::toolchain::example_plugin;
use gantry_sdk::{AdmissionRequest, Mutation, Verdict, json};
use serde_json::Value;

fn load(name: &str) -> Arc<PolicyPlugin> {
    let runtime = Runtime::with_defaults().expect("runtime");
    let bytes = example_plugin(name).expect("example plugin builds");
    runtime.load_policy(name, &bytes).expect("policy loads")
}

fn validate(policy: &PolicyPlugin, operation: &str, object: Value, settings: Value) -> Verdict {
    let request = AdmissionRequest {
        request: json!({"uid": "1", "operation": operation, "object": object}),
        settings,
    };
    policy
        .validate_blocking(&request, &Limits::default())
        .expect("policy runs")
}

fn invalid_settings(policy: &PolicyPlugin, settings: Value) -> String {
    match policy.validate_settings_blocking(&settings, &Limits::default()) {
        Err(CallError::Plugin(error)) => {
            assert_eq!(error.reason, "InvalidSettings");
            error.message
        }
        other => panic!("expected settings {settings} to be rejected, got {other:?}"),
    }
}

fn deployment(replicas: i64, pod_spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec}
        }
    })
}

#[test]
fn disallow_privileged_in_the_sandbox() {
    let policy = load("disallow-privileged");
    let privileged = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "hostPID": true,
            "containers": [{"name": "app", "image": "busybox",
                            "securityContext": {"privileged": true}}],
            "volumes": [{"name": "root", "hostPath": {"path": "/"}},
                        {"name": "logs", "hostPath": {"path": "/var/log/pods"}}]
        }
    });
    let verdict = validate(&policy, "CREATE", privileged.clone(), Value::Null);
    assert!(!verdict.allowed);
    assert_eq!(
        verdict.message.as_deref(),
        Some(
            "Pod is not allowed to run privileged: hostPID is enabled; container \"app\" is \
             privileged; volume \"root\" uses hostPath \"/\"; volume \"logs\" uses hostPath \
             \"/var/log/pods\""
        )
    );
    // The exempted log directory is no longer named.
    let verdict = validate(
        &policy,
        "CREATE",
        privileged,
        json!({"allowHostPathPrefixes": ["/var/log"]}),
    );
    let message = verdict.message.unwrap();
    assert!(
        message.contains("\"root\"") && !message.contains("\"logs\""),
        "{message}"
    );

    let clean = deployment(
        3,
        json!({"containers": [{"name": "app", "image": "nginx",
                               "securityContext": {"privileged": false}}]}),
    );
    assert_eq!(
        validate(&policy, "CREATE", clean, Value::Null),
        Verdict::allow()
    );

    policy
        .validate_settings_blocking(
            &json!({"allowHostPathPrefixes": ["/var/log"]}),
            &Limits::default(),
        )
        .expect("valid settings");
    let message = invalid_settings(&policy, json!({"allowHostPathPrefixes": ["var/log"]}));
    assert!(message.contains("must be an absolute path"), "{message}");
}

#[test]
fn cap_replicas_in_the_sandbox() {
    let policy = load("cap-replicas");
    let settings = json!({"max": 5});
    let spec = json!({"containers": [{"name": "app", "image": "nginx"}]});
    let verdict = validate(
        &policy,
        "UPDATE",
        deployment(12, spec.clone()),
        settings.clone(),
    );
    assert_eq!(
        verdict,
        Verdict::deny("Deployment asks for 12 replicas; at most 5 are allowed")
    );
    assert!(validate(&policy, "UPDATE", deployment(5, spec), settings.clone()).allowed);
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                       "metadata": {"name": "web", "namespace": "default"},
                       "spec": {"replicas": 6}});
    assert!(!validate(&policy, "UPDATE", scale, settings).allowed);

    policy
        .validate_settings_blocking(&json!({"max": 0}), &Limits::default())
        .expect("valid settings");
    for (bad, expected) in [
        (json!({}), "\"max\" is required"),
        (json!({"max": -1}), "integer >= 0"),
        (json!({"max": 1.5}), "integer >= 0"),
    ] {
        let message = invalid_settings(&policy, bad);
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn default_resources_in_the_sandbox() {
    let policy = load("default-resources");
    let settings = json!({"cpu": "100m", "memory": "128Mi"});
    let object = deployment(
        1,
        json!({
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [
                {"name": "app", "image": "nginx", "resources": {"limits": {"memory": "64Mi"}}},
                {"name": "sidecar", "image": "envoy",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
            ]
        }),
    );
    let verdict = validate(&policy, "CREATE", object.clone(), settings.clone());
    assert!(verdict.allowed, "{verdict:?}");
    let Some(Mutation::JsonPatch(patch)) = verdict.mutation else {
        panic!("expected a JSON patch: {verdict:?}");
    };
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("an RFC 6902 patch");
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).expect("the patch applies cleanly");
    let pod_spec = &patched["spec"]["template"]["spec"];
    assert_eq!(
        pod_spec["initContainers"][0]["resources"],
        json!({"requests": {"cpu": "100m", "memory": "128Mi"}})
    );
    assert_eq!(
        pod_spec["containers"][0]["resources"],
        json!({"limits": {"memory": "64Mi"}, "requests": {"cpu": "100m"}})
    );
    assert_eq!(
        pod_spec["containers"][1],
        object["spec"]["template"]["spec"]["containers"][1]
    );
    // Nothing left to default: allowed without a mutation.
    assert_eq!(
        validate(&policy, "CREATE", patched, settings),
        Verdict::allow()
    );

    let message = invalid_settings(&policy, json!({"cpu": "100m", "memory": "lots"}));
    assert!(message.contains("not a Kubernetes quantity"), "{message}");
    let message = invalid_settings(&policy, json!({"cpu": "100m"}));
    assert!(message.contains("missing field `memory`"), "{message}");
}
