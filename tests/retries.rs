//! Failed reconciles are retried with the binding's backoff until they
//! succeed or the parent changes: traps, timeouts, guardrail refusals and
//! the plugin's retryable errors alike. Only an error the plugin itself
//! calls permanent waits for a change.

use std::time::Duration;

use gantry::toolchain::example_plugin;
use gantry_tests::{
    Backend, Env, backends, condition, eventually, eventually_within, get_json, hostile_binding,
    serve_widgets,
};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// Attempts each failing parent must reach: one failure and its retries.
const ATTEMPTS: u64 = 4;

/// How often the Event `reason` was recorded on `name`: its series count,
/// or 1 for an Event seen once.
async fn occurrences(env: &Env, name: &str, reason: &str) -> u64 {
    env.event("default", name, reason).await.map_or(0, |e| {
        e.pointer("/series/count")
            .and_then(Value::as_u64)
            .unwrap_or(1)
    })
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traps_timeouts_and_guardrail_refusals_are_retried_until_they_succeed(backend: Backend) {
    let env = Env::start(backend).await;
    let widgets = serve_widgets(&env).await;
    // No resync: whatever runs again after a failure is a retry. The
    // operator's own backoff in tests is 200 ms to 2 s; the binding's wins.
    let binding = hostile_binding(
        "widgets",
        "test.gantry.dev/v1 Widget",
        &["v1 ConfigMap"],
        &json!({"behaviour": "ok"}),
        "resyncSeconds: 0\nbackoff: {baseMs: 100, maxMs: 400}\nlimits: {deadlineMs: 300}\nrollout: {shadow: false}\n",
    );
    env.bind("widgets", &binding, &example_plugin("hostile").unwrap())
        .await;
    let outside = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "elsewhere", "namespace": "kube-system"}});
    let failing = [
        ("trap", json!({"behaviour": "panic"}), "PluginTrapped"),
        ("timeout", json!({"behaviour": "loop"}), "PluginTimeout"),
        (
            "guardrail",
            json!({"behaviour": "children", "children": [outside]}),
            "GuardrailViolation",
        ),
    ];
    let permanent = json!({"behaviour": "fail-for", "names": ["permanent"]});
    for (name, hostile) in failing
        .iter()
        .map(|(name, hostile, _)| (*name, hostile))
        .chain([("permanent", &permanent)])
    {
        env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"hostile": hostile}}))
            .await;
    }
    for (name, _, reason) in &failing {
        eventually_within(
            Duration::from_mins(1),
            &format!("{name}: {ATTEMPTS} attempts ({reason})"),
            || async { (occurrences(&env, name, reason).await >= ATTEMPTS).then_some(()) },
        )
        .await;
    }
    // Meanwhile the error the plugin calls permanent was not retried.
    assert_eq!(occurrences(&env, "permanent", "Refused").await, 1);

    // Fixed: the next retry succeeds, and the retries end.
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for (name, _, _) in &failing {
        widgets
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"hostile": {"behaviour": "ok"}}})),
            )
            .await
            .unwrap();
    }
    let mut attempts = Vec::new();
    for (name, _, reason) in &failing {
        eventually(&format!("{name} reconciled"), || async {
            get_json(&maps, &format!("{name}-fine")).await?;
            let w = get_json(&widgets, name).await?;
            (condition(&w, "Synced")?["status"] == "True").then_some(())
        })
        .await;
        attempts.push(occurrences(&env, name, reason).await);
    }
    // Longer than the longest backoff, several times over.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for ((name, _, reason), attempts) in failing.iter().zip(attempts) {
        assert_eq!(
            occurrences(&env, name, reason).await,
            attempts,
            "{name} retried after it succeeded"
        );
    }
    env.stop().await;
}
