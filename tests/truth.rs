//! What Gantry tells the user is the current fact:
//! Events show their current message, a trap's condition starts with the
//! panic message, and parents of a binding that no longer finalizes, or is
//! gone, lose its finalizer and say they are no longer reconciled.

use gantry::toolchain::example_plugin;
use gantry_tests::{
    BINDINGS_NS, Backend, Env, backends, condition, eventually, get_json, hostile_binding,
    widget_crd,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::{Value, json};

async fn env_with_widgets(backend: Backend) -> Env {
    let env = Env::start(backend).await;
    env.apply(widget_crd("Widget", "widgets", true)).await;
    gantry::dev::wait_for_crd(&env.client, "widgets.test.gantry.dev")
        .await
        .unwrap();
    env
}

fn widget(name: &str) -> Value {
    json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": "default"}, "spec": {}})
}

/// `component` with a custom section named `tag` appended: the same
/// plugin, another digest.
fn retagged(component: &[u8], tag: &str) -> Vec<u8> {
    let mut section = vec![u8::try_from(tag.len()).unwrap()];
    section.extend_from_slice(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0); // custom section
    out.push(u8::try_from(section.len()).unwrap());
    out.extend(section);
    out
}

async fn widget_json(env: &Env, name: &str) -> Option<Value> {
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    get_json(&widgets, name).await
}

fn finalizers(widget: &Value) -> Vec<String> {
    serde_json::from_value(widget["metadata"]["finalizers"].clone()).unwrap_or_default()
}

/// After a swap, the loaded Event names the new digest: a new message is a
/// new Event, not a repeat of the old one.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_shows_the_new_digest(backend: Backend) {
    let env = env_with_widgets(backend).await;
    let ok = json!({"behaviour": "ok"});
    let yaml = hostile_binding(
        "widgets",
        "test.gantry.dev/v1 Widget",
        &["v1 ConfigMap"],
        &ok,
        "",
    );
    let first = retagged(&example_plugin("hostile").unwrap(), "first");
    let second = retagged(&first, "second");
    let notes = || async {
        env.events_for(BINDINGS_NS, "widgets")
            .await
            .into_iter()
            .filter(|e| e["reason"] == "PluginLoaded")
            .filter_map(|e| e["note"].as_str().map(str::to_string))
            .collect::<Vec<String>>()
    };
    env.bind("widgets", &yaml, &first).await;
    let digest = gantry::runtime::digest(&first);
    eventually("the first version in service", || async {
        notes()
            .await
            .iter()
            .any(|n| n.contains(&digest))
            .then_some(())
    })
    .await;
    env.bind("widgets", &yaml, &second).await;
    let digest = gantry::runtime::digest(&second);
    let notes = eventually("an Event naming the second version", || async {
        let notes = notes().await;
        notes.iter().any(|n| n.contains(&digest)).then_some(notes)
    })
    .await;
    assert_eq!(notes.len(), 2, "one Event per version: {notes:?}");
    env.stop().await;
}

/// A trap's condition says the panic message first, not a wasm backtrace.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_condition_starts_with_the_panic_message(backend: Backend) {
    let env = env_with_widgets(backend).await;
    let panic = json!({"behaviour": "panic"});
    env.bind(
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &panic,
            // Meant to fail on every parent: not shadow-run, or this first
            // version would be refused.
            "rollout: {shadow: false}\n",
        ),
        &example_plugin("hostile").unwrap(),
    )
    .await;
    env.apply(widget("w")).await;
    let synced = eventually("Synced=False PluginTrapped", || async {
        let w = widget_json(&env, "w").await?;
        let synced = condition(&w, "Synced")?.clone();
        (synced["reason"] == "PluginTrapped").then_some(synced)
    })
    .await;
    let message = synced["message"].as_str().unwrap();
    assert!(
        message.starts_with("plugin trapped: hostile plugin panics on purpose"),
        "{message}"
    );
    assert!(!message.contains("wasm backtrace"), "{message}");
    env.stop().await;
}

/// A finalizing binding switched to `finalize: false` removes its
/// finalizer from its parents; once deleted, its parents say so and hold
/// nothing back: a parent deleted then goes at once.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parents_lose_the_finalizer_of_a_binding_that_no_longer_finalizes(backend: Backend) {
    let env = env_with_widgets(backend).await;
    let ok = json!({"behaviour": "ok"});
    let plugin = example_plugin("hostile").unwrap();
    let finalizing = hostile_binding(
        "widgets",
        "test.gantry.dev/v1 Widget",
        &["v1 ConfigMap"],
        &ok,
        "finalize: true\n",
    );
    env.bind("widgets", &finalizing, &plugin).await;
    env.apply(widget("a")).await;
    env.apply(widget("b")).await;
    for name in ["a", "b"] {
        eventually("the finalizer", || async {
            finalizers(&widget_json(&env, name).await?)
                .contains(&"gantry.dev/widgets".to_string())
                .then_some(())
        })
        .await;
    }

    // Switched to finalize: false: the finalizer goes, with an Event.
    let plain = hostile_binding(
        "widgets",
        "test.gantry.dev/v1 Widget",
        &["v1 ConfigMap"],
        &ok,
        "",
    );
    env.bind("widgets", &plain, &plugin).await;
    eventually("the finalizer removed from a", || async {
        (!finalizers(&widget_json(&env, "a").await?).contains(&"gantry.dev/widgets".to_string()))
            .then_some(())
    })
    .await;
    eventually("an Event saying why", || async {
        env.event("default", "a", "FinalizerRemoved").await
    })
    .await;

    // Finalizing again, then the binding is deleted: parents let go and
    // say they are no longer reconciled.
    env.bind("widgets", &finalizing, &plugin).await;
    eventually("the finalizer back on b", || async {
        finalizers(&widget_json(&env, "b").await?)
            .contains(&"gantry.dev/widgets".to_string())
            .then_some(())
    })
    .await;
    Api::<ConfigMap>::namespaced(env.client.clone(), BINDINGS_NS)
        .delete("widgets", &DeleteParams::default())
        .await
        .unwrap();
    let b = eventually("b let go", || async {
        let b = widget_json(&env, "b").await?;
        let released = !finalizers(&b).contains(&"gantry.dev/widgets".to_string());
        let synced = condition(&b, "Synced")?;
        (released && synced["reason"] == "BindingRemoved").then_some(b)
    })
    .await;
    assert_eq!(condition(&b, "Synced").unwrap()["status"], "Unknown");
    assert_eq!(condition(&b, "Ready").unwrap()["status"], "Unknown");
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    widgets.delete("b", &DeleteParams::default()).await.unwrap();
    eventually("b gone", || async {
        widget_json(&env, "b").await.is_none().then_some(())
    })
    .await;
    env.stop().await;
}
