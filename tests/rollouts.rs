//! Shadow runs: a new version of a binding answers
//! every parent beside the running one before it serves; one that fails
//! where the running one succeeds, or changes more parents than the binding
//! allows, is refused, and the running version keeps serving.

use gantry::toolchain::example_plugin;
use gantry_tests::{
    BINDINGS_NS, Backend, Env, backends, condition, eventually, get_json, hostile_binding,
    serve_widgets, widget_crd,
};
use serde_json::{Value, json};

const PARENT: &str = "test.gantry.dev/v1 Widget";

/// The operator with `count` widgets reconciled by the hostile plugin's
/// `ok`, all `Synced=True`.
async fn serving(backend: Backend, count: usize, rollout: &str) -> Env {
    let env = Env::start(backend).await;
    env.apply(widget_crd("Widget", "widgets", true)).await;
    gantry::dev::wait_for_crd(&env.client, "widgets.test.gantry.dev")
        .await
        .unwrap();
    bind(&env, &json!({"behaviour": "ok"}), rollout).await;
    for i in 0..count {
        env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
            "metadata": {"name": format!("w-{i}"), "namespace": "default"}, "spec": {}}))
            .await;
    }
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    eventually("every widget Synced", || async {
        for i in 0..count {
            let w = get_json(&widgets, &format!("w-{i}")).await?;
            (condition(&w, "Synced")?["status"] == "True").then_some(())?;
        }
        Some(())
    })
    .await;
    env
}

async fn bind(env: &Env, config: &Value, extra: &str) {
    env.bind(
        "widgets",
        &hostile_binding("widgets", PARENT, &["v1 ConfigMap"], config, extra),
        &example_plugin("hostile").unwrap(),
    )
    .await;
}

/// The notes of the binding's Events with `reason`.
async fn notes(env: &Env, reason: &str) -> Vec<String> {
    env.events_for(BINDINGS_NS, "widgets")
        .await
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .filter_map(|e| e["note"].as_str().map(str::to_string))
        .collect()
}

/// The `PluginLoaded` note that says `text`, once there is one.
async fn loaded_with(env: &Env, text: &str) -> String {
    eventually(&format!("PluginLoaded saying {text}"), || async {
        notes(env, "PluginLoaded")
            .await
            .into_iter()
            .find(|n| n.contains(text))
    })
    .await
}

async fn refusal(env: &Env) -> String {
    eventually("ShadowRunFailed", || async {
        notes(env, "ShadowRunFailed").await.into_iter().next()
    })
    .await
}

/// Every parent of the binding is still `Synced=True`, with its child as
/// the first version made it.
async fn still_served_by_the_first_version(env: &Env, count: usize) {
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for i in 0..count {
        let w = get_json(&widgets, &format!("w-{i}")).await.unwrap();
        assert_eq!(condition(&w, "Synced").unwrap()["status"], "True", "w-{i}");
        let child = get_json(&maps, &format!("w-{i}-fine")).await.unwrap();
        assert!(child.get("data").is_none(), "w-{i}-fine changed: {child}");
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_panics_everywhere_is_refused(backend: Backend) {
    let env = serving(backend, 3, "").await;
    bind(&env, &json!({"behaviour": "panic"}), "").await;
    let note = refusal(&env).await;
    assert!(
        note.contains("shadow run on 3 parents: 0 unchanged, 0 changed, 3 failed"),
        "{note}"
    );
    assert!(note.contains("hostile plugin panics on purpose"), "{note}");
    assert!(
        note.contains("the previous version keeps serving"),
        "{note}"
    );
    still_served_by_the_first_version(&env, 3).await;
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_failing_on_one_parent_of_fifty_is_refused_naming_it(backend: Backend) {
    let env = serving(backend, 50, "").await;
    bind(
        &env,
        &json!({"behaviour": "fail-for", "names": ["w-17"]}),
        "",
    )
    .await;
    let note = refusal(&env).await;
    assert!(
        note.contains("shadow run on 50 parents: 49 unchanged, 0 changed, 1 failed"),
        "{note}"
    );
    assert!(note.contains("default/w-17: "), "{note}");
    assert!(note.contains("the hostile plugin fails for w-17"), "{note}");
    still_served_by_the_first_version(&env, 50).await;
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_changed_parents_refuses_a_version_that_changes_too_much(backend: Backend) {
    let capped = "rollout: {maxChangedParents: 1}\n";
    let env = serving(backend, 3, capped).await;
    let changing = json!({"behaviour": "ok", "value": "v2"});
    bind(&env, &changing, capped).await;
    let note = refusal(&env).await;
    assert!(note.contains("3 changed"), "{note}");
    assert!(note.contains("maxChangedParents (1)"), "{note}");
    still_served_by_the_first_version(&env, 3).await;

    // Allowed to change them all, it goes into service and says so.
    bind(&env, &changing, "rollout: {maxChangedParents: \"100%\"}\n").await;
    let loaded = loaded_with(&env, "3 changed").await;
    assert!(
        loaded.contains("shadow run on 3 parents: 0 unchanged, 3 changed, 0 failed"),
        "{loaded}"
    );
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("the children changed", || async {
        let child = get_json(&maps, "w-0-fine").await?;
        (child["data"]["value"] == "v2").then_some(())
    })
    .await;
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_version_failing_on_every_parent_is_refused(backend: Backend) {
    let env = Env::start(backend).await;
    let widgets = serve_widgets(&env).await;
    for i in 0..3 {
        env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
            "metadata": {"name": format!("w-{i}"), "namespace": "default"}, "spec": {}}))
            .await;
    }
    bind(&env, &json!({"behaviour": "panic"}), "").await;
    let note = refusal(&env).await;
    assert!(
        note.contains(
            "shadow run on 3 parents no version served yet: 0 answered, 3 failed; the new version fails on every parent"
        ),
        "{note}"
    );
    assert!(note.contains("hostile plugin panics on purpose"), "{note}");
    let w = get_json(&widgets, "w-0").await.unwrap();
    assert!(
        w.get("status").is_none(),
        "a refused version reconciled: {w}"
    );

    // A version that answers on some parent serves.
    bind(
        &env,
        &json!({"behaviour": "fail-for", "names": ["w-1"]}),
        "",
    )
    .await;
    let loaded = loaded_with(&env, "no version served yet").await;
    assert!(
        loaded.contains("shadow run on 3 parents no version served yet: 2 answered, 1 failed"),
        "{loaded}"
    );
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_watching_other_kinds_is_shadow_run_on_caches_of_its_own(backend: Backend) {
    let env = serving(backend, 3, "").await;
    // The new version also reads Secrets: its requests come from caches
    // of its own, the running version's from its caches.
    let reads_secrets = "related:\n- {apiVersion: v1, kind: Secret, selector: {matchLabels: {widget-input: \"yes\"}}}\n";
    bind(&env, &json!({"behaviour": "panic"}), reads_secrets).await;
    let note = refusal(&env).await;
    assert!(
        note.contains("shadow run on 3 parents: 0 unchanged, 0 changed, 3 failed"),
        "{note}"
    );
    still_served_by_the_first_version(&env, 3).await;

    // The same code watching more kinds serves, each parent unchanged,
    // and the new controller reconciles over the caches it was tried on.
    bind(
        &env,
        &json!({"behaviour": "ok", "value": "v2"}),
        reads_secrets,
    )
    .await;
    let loaded = loaded_with(&env, "3 changed").await;
    assert!(
        loaded.contains("shadow run on 3 parents: 0 unchanged, 3 changed, 0 failed"),
        "{loaded}"
    );
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("every child changed by the new controller", || async {
        for i in 0..3 {
            let child = get_json(&maps, &format!("w-{i}-fine")).await?;
            (child["data"]["value"] == "v2").then_some(())?;
        }
        Some(())
    })
    .await;
    env.stop().await;
}
