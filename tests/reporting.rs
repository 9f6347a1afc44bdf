//! A reconcile that changes something says so: one info log line (children
//! created, updated, pruned; status written) and Normal Events on the
//! parent, a few at a time; a reconcile that changes nothing is silent.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use gantry::controller::report::{BURST, REFILL};
use gantry::toolchain::example_plugin;
use gantry_tests::{Backend, Env, backends, eventually, get_json, hostile_binding, serve_widgets};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// What the operator logs at info level, in every test of this binary.
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .init();
        logs
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The "reconciled" lines about `parent` (namespace/name).
fn reconciled_lines(parent: &str) -> Vec<String> {
    let logs = logs().lock().unwrap();
    String::from_utf8_lossy(&logs)
        .lines()
        .filter(|l| l.contains("reconciled: ") && l.contains(&format!("parent={parent}")))
        .map(str::to_string)
        .collect()
}

/// Normal Events about `name`, each counted as often as it was recorded.
async fn normal_events(env: &Env, name: &str) -> Vec<(String, String, u64)> {
    env.events_for("default", name)
        .await
        .into_iter()
        .filter(|e| e["type"] == "Normal")
        .map(|e| {
            let count = e
                .pointer("/series/count")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["note"].as_str().unwrap_or_default().to_string(),
                count,
            )
        })
        .collect()
}

fn widgets_binding(resync: u64) -> String {
    hostile_binding(
        "widgets",
        "test.gantry.dev/v1 Widget",
        &["v1 ConfigMap"],
        &json!({"behaviour": "ok"}),
        &format!("resyncSeconds: {resync}\nrollout: {{shadow: false}}\n"),
    )
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_is_logged_once_and_told_in_normal_events(backend: Backend) {
    logs();
    let env = Env::start(backend).await;
    let widgets = serve_widgets(&env).await;
    let hostile = example_plugin("hostile").unwrap();
    env.bind("widgets", &widgets_binding(1), &hostile).await;
    let name = format!("said-{}", backend.name());
    let parent = format!("default/{name}");
    let child = format!("{name}-fine");
    env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"}, "spec": {}}))
        .await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("the Normal Event of the creation", || async {
        normal_events(&env, &name)
            .await
            .into_iter()
            .find(|(reason, note, _)| {
                reason == "ChildrenCreated" && *note == format!("created ConfigMap {child}")
            })
    })
    .await;
    let lines = reconciled_lines(&parent);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&format!(
            "reconciled: created ConfigMap {child}; status written"
        )),
        "{lines:?}"
    );
    for field in [
        "binding=widgets",
        "created=1",
        "updated=0",
        "pruned=0",
        "status=true",
    ] {
        assert!(lines[0].contains(field), "{field} in {lines:?}");
    }

    // Resyncs every second that change nothing say nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(reconciled_lines(&parent).len(), 1);

    // An update, then the plugin wants another child: updated, pruned.
    let set = |hostile: Value| {
        let widgets = widgets.clone();
        let name = name.clone();
        async move {
            widgets
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"hostile": hostile}})),
                )
                .await
                .unwrap();
        }
    };
    set(json!({"behaviour": "ok", "value": "1"})).await;
    eventually("the update", || async {
        let map = get_json(&maps, &child).await?;
        (map["data"]["value"] == "1").then_some(())
    })
    .await;
    set(json!({"behaviour": "chatty"})).await;
    eventually("the prune", || async {
        normal_events(&env, &name)
            .await
            .into_iter()
            .find(|(reason, note, _)| {
                reason == "ChildrenPruned" && *note == format!("pruned ConfigMap {child}")
            })
    })
    .await;
    let events = normal_events(&env, &name).await;
    assert!(
        events
            .iter()
            .any(|(reason, note, _)| reason == "ChildrenUpdated"
                && *note == format!("updated ConfigMap {child}")),
        "{events:?}"
    );
    let lines = reconciled_lines(&parent);
    assert!(
        lines.iter().any(|l| l.contains(&format!(
            "reconciled: created ConfigMap {name}-chatty; pruned ConfigMap {child}; status written"
        ))),
        "{lines:?}"
    );
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn normal_events_are_rate_limited_per_parent_and_the_log_is_not(backend: Backend) {
    logs();
    let env = Env::start(backend).await;
    serve_widgets(&env).await;
    env.bind(
        "widgets",
        &widgets_binding(0),
        &example_plugin("hostile").unwrap(),
    )
    .await;
    let name = format!("busy-{}", backend.name());
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let edits = 2 * BURST;
    let started = std::time::Instant::now();
    for value in 0..=edits {
        env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"hostile": {"behaviour": "ok", "value": value.to_string()}}}))
            .await;
        eventually("the edit applied", || async {
            let map = get_json(&maps, &format!("{name}-fine")).await?;
            (map["data"]["value"].as_str()? == value.to_string()).then_some(())
        })
        .await;
    }
    // Every edit was logged: one creation and `edits` updates.
    let lines = eventually("a line per edit", || async {
        let lines = reconciled_lines(&format!("default/{name}"));
        (lines
            .iter()
            .filter(|l| l.contains("reconciled: updated"))
            .count()
            >= usize::try_from(edits).unwrap())
        .then_some(lines)
    })
    .await;
    assert!(lines[0].contains("reconciled: created"), "{lines:?}");
    // The Events stop at the parent's burst.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let told: u64 = normal_events(&env, &name)
        .await
        .iter()
        .map(|(_, _, count)| count)
        .sum();
    // The budget refills one Event per period the edits took.
    let refills = started.elapsed().as_secs() / REFILL.as_secs();
    assert!(
        (2..=u64::from(BURST) + refills).contains(&told),
        "{told} Normal Events for {edits} edits in {:?}",
        started.elapsed()
    );
    env.stop().await;
}
