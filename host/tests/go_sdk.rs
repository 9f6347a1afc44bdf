//! The Go SDK (`go-sdk/`): its own Go tests and those of the Go plugins
//! (`go test`, natively), and its policy world (`gantry.dev/go-sdk/policy`):
//! a policy built with the standard Go toolchain (`fixtures/go-policy`)
//! denies with a code, warns, mutates with a whole object, and checks its
//! settings, through the same runtime calls as the webhooks make.

use std::sync::{Arc, OnceLock};

use gantry::runtime::{CallError, Limits, PolicyPlugin, Runtime};
use gantry_sdk::{AdmissionRequest, Mutation, json};
use serde_json::Value;

/// `go test ./...` of the SDK (its arena, encoding, request and response,
/// converter loop, HTTP client natively), of the Go plugins' logic, and of
/// the benchmarks' controller-runtime peer.
#[test]
fn the_go_sdk_and_go_plugins_pass_their_go_tests() {
    let root = gantry::toolchain::source_workspace_root();
    for dir in [
        "go-sdk",
        "plugins/memcached-go",
        "plugins/guestbook",
        "plugins/myresource-converter-go",
        "benches/peers/controller-runtime",
    ] {
        let out = std::process::Command::new("go")
            .args(["test", "./..."])
            .current_dir(root.join(dir))
            .env("GOTOOLCHAIN", gantry::toolchain::go::GO_TOOLCHAIN)
            .env("GOFLAGS", "-mod=readonly")
            .output()
            .expect("go runs");
        assert!(
            out.status.success(),
            "go test in {dir}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn policy() -> &'static Arc<PolicyPlugin> {
    static POLICY: OnceLock<Arc<PolicyPlugin>> = OnceLock::new();
    POLICY.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/go-policy");
        let path = gantry::toolchain::build_any(&dir, &gantry::toolchain::BuildOptions::default())
            .expect("the Go policy builds");
        let bytes = std::fs::read(path).unwrap();
        let runtime = Runtime::with_defaults().unwrap();
        runtime
            .load_policy("go-policy", &bytes)
            .expect("a policy component")
    })
}

fn limits() -> Limits {
    Limits {
        deadline: std::time::Duration::from_secs(10),
        ..Limits::default()
    }
}

fn pod_request(image: &str, settings: Value) -> AdmissionRequest {
    AdmissionRequest {
        request: json!({
            "uid": "u1", "operation": "CREATE", "namespace": "default", "name": "web",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "web", "image": image}]}}
        }),
        settings,
    }
}

#[test]
fn a_go_policy_denies_with_its_code_and_message() {
    let verdict = policy()
        .validate_blocking(&pod_request("nginx:latest", Value::Null), &limits())
        .unwrap();
    assert!(!verdict.allowed);
    assert_eq!(
        verdict.message.as_deref(),
        Some("container web uses the tag latest")
    );
    assert_eq!(verdict.code, Some(422));
    assert_eq!(verdict.mutation, None);

    // Its settings change the decision.
    let verdict = policy()
        .validate_blocking(
            &pod_request("nginx:latest", json!({"forbiddenTag": "dev"})),
            &limits(),
        )
        .unwrap();
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(verdict.code, None);
}

#[test]
fn a_go_policy_mutates_the_whole_object_and_warns() {
    let verdict = policy()
        .validate_blocking(&pod_request("nginx", json!({"label": "team"})), &limits())
        .unwrap();
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(verdict.warnings, ["container web has no tag"]);
    let Some(Mutation::MutatedObject(pod)) = &verdict.mutation else {
        panic!("a mutated object: {verdict:?}")
    };
    assert_eq!(
        pod["metadata"]["labels"],
        json!({"app": "web", "team": "added"})
    );
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx");
    assert!(pod.get("status").is_none(), "no empty status: {pod}");

    // Other kinds pass untouched.
    let mut config_map = pod_request("nginx:latest", Value::Null);
    config_map.request["kind"] = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
    let verdict = policy().validate_blocking(&config_map, &limits()).unwrap();
    assert!(verdict.allowed && verdict.mutation.is_none() && verdict.warnings.is_empty());
}

#[test]
fn a_go_policy_checks_its_settings() {
    let check = |settings: Value| policy().validate_settings_blocking(&settings, &limits());
    check(Value::Null).expect("no settings");
    check(json!({"forbiddenTag": "dev", "label": "team"})).expect("good settings");
    let message = |result: Result<(), CallError>| match result {
        Err(CallError::Plugin(e)) => e.message,
        other => panic!("a refusal, got {other:?}"),
    };
    assert_eq!(
        message(check(json!({"forbiddenTag": ""}))),
        "settings.forbiddenTag must not be empty"
    );
    assert!(
        message(check(json!({"label": 7})))
            .starts_with("invalid settings: json: cannot unmarshal number"),
    );
}
