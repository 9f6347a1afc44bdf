//! The admission webhook server over HTTPS, with the example policies and
//! the hostile one in the real sandbox: recorded AdmissionReviews in,
//! AdmissionReviews out.

mod webhook_support;

use std::time::{Duration, Instant};

use gantry::runtime::Runtime;
use serde_json::{Value, json};
use webhook_support::{Webhooks, fixture, load, patch_of, pods_policy};

const DISALLOW_PRIVILEGED: &str = "name: disallow-privileged\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE, UPDATE]}\nsettings: {allowHostPathPrefixes: [/var/log]}\n";
const CAP_REPLICAS: &str = "name: cap-replicas\nrules:\n- {apiGroups: [apps], apiVersions: [v1], resources: [deployments, deployments/scale], operations: [CREATE, UPDATE]}\nsettings: {max: 5}\n";
const DEFAULT_RESOURCES: &str = "name: default-resources\nmutating: true\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}\nsettings: {cpu: 100m, memory: 128Mi}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_reviews_get_the_policies_answers() {
    let runtime = Runtime::with_defaults().unwrap();
    let webhooks = Webhooks::start(vec![
        load(&runtime, "disallow-privileged", DISALLOW_PRIVILEGED),
        load(&runtime, "cap-replicas", CAP_REPLICAS),
        load(&runtime, "default-resources", DEFAULT_RESOURCES),
        load(
            &runtime,
            "require-labels",
            &pods_policy("require-labels", "settings: {labels: [app]}\n"),
        ),
    ])
    .await;

    let privileged = fixture("pod-privileged-create.json");
    let response = webhooks.review("disallow-privileged", &privileged).await;
    assert_eq!(
        response,
        json!({
            "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
            "allowed": false,
            "status": {"metadata": {}, "status": "Failure", "code": 403, "reason": "Forbidden",
                       "message": "Pod is not allowed to run privileged: hostNetwork is enabled; container \"shell\" is privileged; volume \"host\" uses hostPath \"/etc\""}
        })
    );
    // The same pod has no app label: require-labels names what is missing.
    let response = webhooks.review("require-labels", &privileged).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"]["message"],
        "missing required labels: app"
    );

    let scale = fixture("deployment-scale-update.json");
    let response = webhooks.review("cap-replicas", &scale).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"]["message"],
        "Scale asks for 12 replicas; at most 5 are allowed"
    );

    let pod = fixture("pod-without-requests-create.json");
    let response = webhooks.review("default-resources", &pod).await;
    assert_eq!(response["allowed"], true);
    let patch = patch_of(&response).expect("a JSON patch");
    let mut patched = pod["request"]["object"].clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_eq!(
        patched["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "100m", "memory": "128Mi"}})
    );
    assert_eq!(
        patched["spec"]["containers"][1],
        pod["request"]["object"]["spec"]["containers"][1]
    );
    // A clean pod passes disallow-privileged without a patch or a status.
    assert_eq!(
        webhooks.review("disallow-privileged", &pod).await,
        json!({"uid": "3c1d6a38-2a55-4f3e-bb0c-6f9e5c0d7d42", "allowed": true})
    );
    // DELETE has no object: allowed.
    let delete = fixture("configmap-delete.json");
    assert_eq!(
        webhooks.review("require-labels", &delete).await["allowed"],
        true
    );

    let metrics = webhooks.policies.metrics();
    assert_eq!(metrics.evaluations("disallow-privileged", "denied"), 1);
    assert_eq!(metrics.evaluations("default-resources", "mutated"), 1);
    let text = metrics.render();
    assert!(
        text.contains("gantry_policy_denials_total{policy=\"cap-replicas\",mode=\"enforce\"} 1"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_and_unknown_policies_are_refused_with_http_errors() {
    let runtime = Runtime::with_defaults().unwrap();
    let webhooks = Webhooks::start(vec![load(
        &runtime,
        "hostile-policy",
        &pods_policy("allow", ""),
    )])
    .await;
    let (status, body) = webhooks
        .post("/policies/allow", b"{not json".to_vec())
        .await;
    assert_eq!(status, 400, "{body:?}");
    let mut v1beta1 = fixture("pod-privileged-create.json");
    v1beta1["apiVersion"] = "admission.k8s.io/v1beta1".into();
    let (status, body) = webhooks
        .post("/policies/allow", v1beta1.to_string().into_bytes())
        .await;
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("admission.k8s.io/v1"));
    let (status, body) = webhooks
        .post(
            "/policies/nobody",
            fixture("pod-privileged-create.json")
                .to_string()
                .into_bytes(),
        )
        .await;
    assert_eq!(status, 404);
    assert!(String::from_utf8_lossy(&body).contains("nobody"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_mode_allows_and_counts_what_it_would_deny() {
    let runtime = Runtime::with_defaults().unwrap();
    let webhooks = Webhooks::start(vec![
        load(
            &runtime,
            "hostile-policy",
            &pods_policy("watcher", "mode: monitor\nsettings: {behaviour: deny}\n"),
        ),
        load(
            &runtime,
            "hostile-policy",
            &pods_policy(
                "changer",
                "mode: monitor\nmutating: true\nsettings: {behaviour: mutate}\n",
            ),
        ),
    ])
    .await;
    let review = fixture("pod-privileged-create.json");
    let uid = review["request"]["uid"].clone();
    assert_eq!(
        webhooks.review("watcher", &review).await,
        json!({"uid": uid, "allowed": true})
    );
    assert_eq!(
        webhooks.review("changer", &review).await,
        json!({"uid": uid, "allowed": true}),
        "monitor mode never mutates"
    );
    let metrics = webhooks.policies.metrics();
    assert_eq!(metrics.evaluations("watcher", "denied"), 1);
    assert!(
        metrics
            .render()
            .contains("gantry_policy_denials_total{policy=\"watcher\",mode=\"monitor\"} 1")
    );
    assert_eq!(metrics.evaluations("changer", "mutated"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_mutating_policies_may_mutate() {
    let runtime = Runtime::with_defaults().unwrap();
    let webhooks = Webhooks::start(vec![
        load(
            &runtime,
            "hostile-policy",
            &pods_policy("sneaky", "settings: {behaviour: mutate}\n"),
        ),
        load(
            &runtime,
            "hostile-policy",
            &pods_policy(
                "labeller",
                "mutating: true\nsettings: {behaviour: mutate}\n",
            ),
        ),
    ])
    .await;
    let review = fixture("pod-without-requests-create.json");
    let response = webhooks.review("sneaky", &review).await;
    assert_eq!(response["allowed"], false);
    assert!(response.get("patch").is_none());
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not marked mutating"),
        "{response}"
    );
    assert_eq!(
        webhooks
            .policies
            .metrics()
            .errors("sneaky", "mutation_not_allowed"),
        1
    );

    let response = webhooks.review("labeller", &review).await;
    assert_eq!(response["allowed"], true);
    let patch = serde_json::to_value(patch_of(&response).unwrap()).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/labels/hostile", "value": "yes"}])
    );
}

/// Loop and memory bomb run into their limits; each failure is answered
/// by the policy's failurePolicy, and the server answers every other
/// request meanwhile and afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_policies_fail_per_failure_policy_and_the_server_keeps_answering() {
    let runtime = Runtime::with_defaults().unwrap();
    let limits = "limits: {deadlineMs: 300, memoryMiB: 32}\n";
    let webhooks = Webhooks::start(vec![
        load(
            &runtime,
            "hostile-policy",
            &pods_policy(
                "loop-fail",
                &format!("{limits}settings: {{behaviour: loop}}\n"),
            ),
        ),
        load(
            &runtime,
            "hostile-policy",
            &pods_policy(
                "loop-ignore",
                &format!("{limits}failurePolicy: Ignore\nsettings: {{behaviour: loop}}\n"),
            ),
        ),
        load(
            &runtime,
            "hostile-policy",
            &pods_policy(
                "bomb-fail",
                &format!("{limits}settings: {{behaviour: memory-bomb}}\n"),
            ),
        ),
        load(
            &runtime,
            "hostile-policy",
            &pods_policy(
                "bomb-ignore",
                &format!("{limits}failurePolicy: Ignore\nsettings: {{behaviour: memory-bomb}}\n"),
            ),
        ),
        load(
            &runtime,
            "hostile-policy",
            &pods_policy("panic-fail", "settings: {behaviour: panic}\n"),
        ),
        load(&runtime, "disallow-privileged", DISALLOW_PRIVILEGED),
    ])
    .await;
    let review = fixture("pod-privileged-create.json");

    let started = Instant::now();
    let (loop_fail, loop_ignore, bomb_fail, bomb_ignore, panic_fail, good) = tokio::join!(
        webhooks.review("loop-fail", &review),
        webhooks.review("loop-ignore", &review),
        webhooks.review("bomb-fail", &review),
        webhooks.review("bomb-ignore", &review),
        webhooks.review("panic-fail", &review),
        async {
            // A well-behaved policy answers while the hostile ones run.
            let t = Instant::now();
            let response = webhooks.review("disallow-privileged", &review).await;
            (response, t.elapsed())
        },
    );
    let message = |r: &Value| r["status"]["message"].as_str().unwrap_or("").to_string();
    assert_eq!(loop_fail["allowed"], false);
    assert_eq!(loop_fail["status"]["code"], 500);
    assert!(message(&loop_fail).contains("deadline"), "{loop_fail}");
    assert!(
        message(&loop_fail).contains("failurePolicy Fail"),
        "{loop_fail}"
    );
    assert_eq!(loop_ignore["allowed"], true);
    assert!(
        loop_ignore["warnings"][0]
            .as_str()
            .unwrap()
            .contains("allowed by failurePolicy Ignore"),
        "{loop_ignore}"
    );
    assert_eq!(bomb_fail["allowed"], false);
    assert!(message(&bomb_fail).contains("memory limit"), "{bomb_fail}");
    assert_eq!(bomb_ignore["allowed"], true);
    assert_eq!(panic_fail["allowed"], false);
    assert!(
        message(&panic_fail).contains("panics on purpose"),
        "{panic_fail}"
    );
    assert_eq!(
        good.0["allowed"], false,
        "the good policy judged: {}",
        good.0
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "deadlines bound every answer: {:?}",
        started.elapsed()
    );

    // Still answering, hostile and good alike.
    assert_eq!(
        webhooks.review("loop-ignore", &review).await["allowed"],
        true
    );
    assert_eq!(
        webhooks
            .review(
                "disallow-privileged",
                &fixture("pod-without-requests-create.json")
            )
            .await["allowed"],
        true
    );
    let metrics = webhooks.policies.metrics();
    assert_eq!(metrics.errors("loop-fail", "timeout"), 1);
    assert_eq!(metrics.errors("bomb-fail", "out_of_memory"), 1);
    assert_eq!(metrics.errors("panic-fail", "trap"), 1);
    assert_eq!(metrics.evaluations("loop-ignore", "error"), 2);
}

/// A call that reaches a replica still loading the policy waits for it
/// instead of failing: the leader may have written the webhook
/// configuration before this replica serves the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_for_a_policy_still_loading_waits_for_it() {
    let runtime = Runtime::with_defaults().unwrap();
    let webhooks = Webhooks::start(vec![]).await;
    let policy = load(&runtime, "disallow-privileged", DISALLOW_PRIVILEGED);
    let policies = webhooks.policies.clone();
    let arrives = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        policies.insert(policy);
    });
    let pod = fixture("pod-without-requests-create.json");
    let response = webhooks.review("disallow-privileged", &pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    arrives.await.unwrap();
}
