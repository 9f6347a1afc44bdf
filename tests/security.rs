//! The security model end to end (docs/security.md): what a hostile plugin
//! or binding must not get done through the operator (the sandbox itself is
//! tested in `host/tests/sandbox.rs`).

use std::time::{Duration, Instant};

use gantry::toolchain::example_plugin;
use gantry_tests::{
    BINDINGS_NS, Backend, Env, backends, condition, eventually, get_json, hostile_binding,
    widget_crd,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::{Value, json};

/// Rollout settings of a version meant to fail.
const NO_SHADOW: &str = "rollout: {shadow: false}\n";

async fn env_with(backend: Backend, crds: &[Value]) -> Env {
    let env = Env::start(backend).await;
    for crd in crds {
        env.apply(crd.clone()).await;
        let name = crd["metadata"]["name"].as_str().unwrap();
        gantry::dev::wait_for_crd(&env.client, name).await.unwrap();
    }
    env
}

/// An environment serving Widgets and Gadgets.
async fn widgets_and_gadgets(backend: Backend) -> Env {
    env_with(
        backend,
        &[
            widget_crd("Widget", "widgets", true),
            widget_crd("Gadget", "gadgets", true),
        ],
    )
    .await
}

async fn bind(env: &Env, cm: &str, yaml: &str) {
    env.bind(cm, yaml, &example_plugin("hostile").unwrap())
        .await;
}

fn widget(name: &str) -> Value {
    json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
           "metadata": {"name": name, "namespace": "default"}, "spec": {}})
}

fn gadget(name: &str) -> Value {
    json!({"apiVersion": "test.gantry.dev/v1", "kind": "Gadget",
           "metadata": {"name": name, "namespace": "default"}, "spec": {}})
}

/// A cluster-scoped test kind `Plan` (plural `plans`).
fn plan_crd() -> Value {
    let mut crd = widget_crd("Plan", "plans", true);
    crd["spec"]["scope"] = "Cluster".into();
    crd
}

/// The `Synced` condition of the widget `name` once its reason is `reason`.
async fn synced_with_reason(env: &Env, name: &str, reason: &str) -> Value {
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    eventually(&format!("Synced reason {reason}"), || async {
        let w = get_json(&widgets, name).await?;
        let synced = condition(&w, "Synced")?.clone();
        (synced["reason"] == reason).then_some(synced)
    })
    .await
}

/// A child labelled as a binding (or any `gantry.dev/` label or
/// annotation) is refused, so a plugin cannot put a binding of its own
/// into service.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_cannot_create_a_binding(backend: Backend) {
    let env = env_with(backend, &[widget_crd("Widget", "widgets", true)]).await;
    let evil = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "evil", "labels": {"gantry.dev/plugin": "true"}},
        "data": {"binding.yaml": "name: evil"}});
    let config = json!({"behaviour": "children", "children": [evil]});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &config,
            // Meant to fail on every parent: without this, the first
            // version would be refused by its shadow run.
            NO_SHADOW,
        ),
    )
    .await;
    env.apply(widget("w")).await;
    let synced = synced_with_reason(&env, "w", "GuardrailViolation").await;
    assert!(
        synced["message"]
            .as_str()
            .unwrap()
            .contains("labels in gantry.dev/ are Gantry's own"),
        "{synced}"
    );
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(get_json(&maps, "evil").await.is_none());
    env.stop().await;
}

/// A cluster-scoped parent cannot place a child in the operator's
/// namespace, where bindings and policies live.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_child_lands_in_the_operators_namespace(backend: Backend) {
    let env = env_with(backend, &[plan_crd()]).await;
    let placed = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "placed", "namespace": BINDINGS_NS}, "data": {"x": "y"}});
    let config = json!({"behaviour": "children", "children": [placed]});
    bind(
        &env,
        "plans",
        &hostile_binding(
            "plans",
            "test.gantry.dev/v1 Plan",
            &["v1 ConfigMap"],
            &config,
            // Meant to fail on every parent: without this, the first
            // version would be refused by its shadow run.
            NO_SHADOW,
        ),
    )
    .await;
    env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Plan",
        "metadata": {"name": "p"}, "spec": {}}))
        .await;
    let plans = env.api("test.gantry.dev/v1", "Plan", "plans", None);
    let synced = eventually("GuardrailViolation", || async {
        let p = get_json(&plans, "p").await?;
        let synced = condition(&p, "Synced")?.clone();
        (synced["reason"] == "GuardrailViolation").then_some(synced)
    })
    .await;
    assert!(
        synced["message"]
            .as_str()
            .unwrap()
            .contains("is the operator's own"),
        "{synced}"
    );
    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), BINDINGS_NS);
    assert!(maps.get_opt("placed").await.unwrap().is_none());
    env.stop().await;
}

/// Finalizers a plugin sets on a child are dropped.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_on_children_are_dropped(backend: Backend) {
    let env = env_with(backend, &[widget_crd("Widget", "widgets", true)]).await;
    let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/never-removed"]}});
    let config = json!({"behaviour": "children", "children": [child]});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &config,
            "",
        ),
    )
    .await;
    env.apply(widget("w")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let held = eventually("the child", || async { get_json(&maps, "held").await }).await;
    assert!(held.pointer("/metadata/finalizers").is_none(), "{held}");
    env.stop().await;
}

/// A binding whose children include its parent kind (in any
/// version) is refused.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_cannot_create_its_own_parents(backend: Backend) {
    let env = env_with(backend, &[widget_crd("Widget", "widgets", true)]).await;
    let config = json!({"behaviour": "ok"});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["test.gantry.dev/v1 Widget"],
            &config,
            "",
        ),
    )
    .await;
    let event = eventually("InvalidBinding", || async {
        env.event(BINDINGS_NS, "widgets", "InvalidBinding").await
    })
    .await;
    assert!(
        event["note"]
            .as_str()
            .unwrap()
            .contains("cannot create its own parents"),
        "{event}"
    );
    env.stop().await;
}

/// Too many conditions are a contract violation, not minutes of
/// work for the executor.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_conditions_are_a_contract_violation(backend: Backend) {
    let env = env_with(backend, &[widget_crd("Widget", "widgets", true)]).await;
    let config = json!({"behaviour": "conditions", "count": 100_000});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &config,
            // Meant to fail on every parent: without this, the first
            // version would be refused by its shadow run.
            NO_SHADOW,
        ),
    )
    .await;
    env.apply(widget("w")).await;
    let synced = synced_with_reason(&env, "w", "PluginContractViolation").await;
    assert!(
        synced["message"]
            .as_str()
            .unwrap()
            .contains("100000 conditions, more than the limit of 64"),
        "{synced}"
    );
    env.stop().await;
}

/// Events of one type and reason in one response are one Event.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_events_are_aggregated(backend: Backend) {
    let env = env_with(backend, &[widget_crd("Widget", "widgets", true)]).await;
    let config = json!({"behaviour": "events", "count": 20});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &config,
            "",
        ),
    )
    .await;
    env.apply(widget("w")).await;
    let event = eventually("the Many event", || async {
        env.event("default", "w", "Many").await
    })
    .await;
    assert!(
        event["note"]
            .as_str()
            .unwrap()
            .contains("and 19 more Many events"),
        "{event}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let many = env
        .events_for("default", "w")
        .await
        .into_iter()
        .filter(|e| e["reason"] == "Many")
        .count();
    assert_eq!(many, 1, "one Event for 20 of one reason");
    env.stop().await;
}

/// `requeue-after-ms: 0` is not a hot loop.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_requeue_is_not_a_hot_loop(backend: Backend) {
    let env = env_with(backend, &[widget_crd("Widget", "widgets", true)]).await;
    let config = json!({"behaviour": "requeue-zero"});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &config,
            "",
        ),
    )
    .await;
    env.apply(widget("w")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("w-fine", || async { get_json(&maps, "w-fine").await }).await;
    let before = env.metrics.binding("widgets").reconciles;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = env.metrics.binding("widgets").reconciles - before;
    eprintln!("requeue-after-ms 0: {calls} reconciles in 3 s");
    // A floor of 1 s: about 3; without one, hundreds.
    assert!(calls <= 6, "{calls} reconciles in 3 s");
    assert!(calls >= 1, "the requeue is still honoured");
    env.stop().await;
}

/// A plugin sleeping in `validate-config` holds up only its own
/// binding, not the loading of others.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_validate_config_does_not_hold_up_other_bindings(backend: Backend) {
    let env = widgets_and_gadgets(backend).await;
    let slow = json!({"behaviour": "sleep-config", "millis": 20_000});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &slow,
            "limits: {deadlineMs: 30000}\n",
        ),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let ok = json!({"behaviour": "ok"});
    bind(
        &env,
        "gadgets",
        &hostile_binding(
            "gadgets",
            "test.gantry.dev/v1 Gadget",
            &["v1 ConfigMap"],
            &ok,
            "",
        ),
    )
    .await;
    env.apply(gadget("g")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("g-fine", || async { get_json(&maps, "g-fine").await }).await;
    let took = started.elapsed();
    eprintln!("a binding loaded beside a 20 s validate-config in {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    env.stop().await;
}

/// Deleting a binding whose reconcile is still running does not
/// hold up the next binding.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_busy_binding_does_not_hold_up_others(backend: Backend) {
    let env = widgets_and_gadgets(backend).await;
    let slow = json!({"behaviour": "sleep", "millis": 20_000});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &slow,
            "limits: {deadlineMs: 30000}\n",
        ),
    )
    .await;
    eventually("in service", || async {
        env.event(BINDINGS_NS, "widgets", "PluginLoaded").await
    })
    .await;
    env.apply(widget("w")).await;
    // Its reconcile starts and sleeps for 20 s.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bindings: Api<ConfigMap> = Api::namespaced(env.client.clone(), BINDINGS_NS);
    bindings
        .delete("widgets", &DeleteParams::default())
        .await
        .unwrap();
    let started = Instant::now();
    let ok = json!({"behaviour": "ok"});
    bind(
        &env,
        "gadgets",
        &hostile_binding(
            "gadgets",
            "test.gantry.dev/v1 Gadget",
            &["v1 ConfigMap"],
            &ok,
            "",
        ),
    )
    .await;
    env.apply(gadget("g")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("g-fine", || async { get_json(&maps, "g-fine").await }).await;
    let took = started.elapsed();
    eprintln!("a binding loaded right after deleting a busy one in {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    env.stop().await;
}

/// A binding refused because another claims its parent kind
/// (here through another version of the kind) goes into service once the
/// claimant is deleted.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_binding_goes_into_service_when_the_claimant_goes(backend: Backend) {
    // Widgets served as v1 (stored) and as v2.
    let mut crd = widget_crd("Widget", "widgets", true);
    let mut v2 = crd["spec"]["versions"][0].clone();
    v2["name"] = "v2".into();
    v2["storage"] = false.into();
    crd["spec"]["versions"].as_array_mut().unwrap().push(v2);
    let env = env_with(backend, &[crd]).await;
    let ok = json!({"behaviour": "ok"});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &ok,
            "",
        ),
    )
    .await;
    eventually("first in service", || async {
        env.event(BINDINGS_NS, "widgets", "PluginLoaded").await
    })
    .await;
    bind(
        &env,
        "widgets-two",
        &hostile_binding(
            "widgets-two",
            "test.gantry.dev/v2 Widget",
            &["v1 ConfigMap"],
            &ok,
            "",
        ),
    )
    .await;
    eventually("ParentKindClaimed", || async {
        env.event(BINDINGS_NS, "widgets-two", "ParentKindClaimed")
            .await
    })
    .await;
    let bindings: Api<ConfigMap> = Api::namespaced(env.client.clone(), BINDINGS_NS);
    bindings
        .delete("widgets", &DeleteParams::default())
        .await
        .unwrap();
    eventually("second in service", || async {
        env.event(BINDINGS_NS, "widgets-two", "PluginLoaded").await
    })
    .await;
    env.apply(widget("w")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let child = eventually("w-fine", || async { get_json(&maps, "w-fine").await }).await;
    assert_eq!(
        child["metadata"]["labels"]["gantry.dev/binding"],
        "widgets-two"
    );
    env.stop().await;
}

/// A version being prepared claims its parent kind; when a newer
/// version of its binding moves to another kind, the binding that waited
/// for that claim goes into service.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_claim_is_released(backend: Backend) {
    let env = widgets_and_gadgets(backend).await;
    // Its validate-config sleeps, so it stays in preparation, claiming Widget.
    let slow = json!({"behaviour": "sleep-config", "millis": 20_000});
    bind(
        &env,
        "first",
        &hostile_binding(
            "first",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &slow,
            "limits: {deadlineMs: 30000}\n",
        ),
    )
    .await;
    let ok = json!({"behaviour": "ok"});
    bind(
        &env,
        "waiting",
        &hostile_binding(
            "waiting",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &ok,
            "",
        ),
    )
    .await;
    eventually("ParentKindClaimed", || async {
        env.event(BINDINGS_NS, "waiting", "ParentKindClaimed").await
    })
    .await;
    // The first binding's next version reconciles Gadgets instead.
    bind(
        &env,
        "first",
        &hostile_binding(
            "first",
            "test.gantry.dev/v1 Gadget",
            &["v1 ConfigMap"],
            &ok,
            "",
        ),
    )
    .await;
    eventually("the waiting binding in service", || async {
        env.event(BINDINGS_NS, "waiting", "PluginLoaded").await
    })
    .await;
    env.apply(widget("w")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let child = eventually("w-fine", || async { get_json(&maps, "w-fine").await }).await;
    assert_eq!(child["metadata"]["labels"]["gantry.dev/binding"], "waiting");
    env.stop().await;
}

/// Pruning tells kinds apart by group, not only by Kind name.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_tells_groups_apart(backend: Backend) {
    let env = env_with(
        backend,
        &[
            widget_crd("Widget", "widgets", true),
            widget_crd("ConfigMap", "configmaps", false),
        ],
    )
    .await;
    let core = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same"}});
    let custom = json!({"apiVersion": "test.gantry.dev/v1", "kind": "ConfigMap",
        "metadata": {"name": "same"}, "spec": {}});
    let children = ["v1 ConfigMap", "test.gantry.dev/v1 ConfigMap"];
    let both = json!({"behaviour": "children", "children": [core, custom]});
    bind(
        &env,
        "widgets",
        &hostile_binding("widgets", "test.gantry.dev/v1 Widget", &children, &both, ""),
    )
    .await;
    env.apply(widget("w")).await;
    let customs = env.api(
        "test.gantry.dev/v1",
        "ConfigMap",
        "configmaps",
        Some("default"),
    );
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("both children", || async {
        get_json(&customs, "same").await?;
        get_json(&maps, "same").await
    })
    .await;
    // The plugin no longer wants the custom one.
    let only_core = json!({"behaviour": "children", "children": [core]});
    bind(
        &env,
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &children,
            &only_core,
            "",
        ),
    )
    .await;
    eventually("the custom ConfigMap pruned", || async {
        get_json(&customs, "same").await.is_none().then_some(())
    })
    .await;
    assert!(get_json(&maps, "same").await.is_some());
    env.stop().await;
}

/// A policy binding: the hostile policy with `settings`, on Pods.
fn policy(name: &str, settings: &Value) -> String {
    format!(
        "name: {name}\nrules:\n  - {{apiGroups: [\"\"], apiVersions: [v1], resources: [pods], operations: [CREATE]}}\nsettings: {settings}\ntimeoutSeconds: 30\nlimits: {{deadlineMs: 25000}}\n"
    )
}

/// A policy sleeping in `validate-settings` holds up only its own
/// binding, not the loading of other policies.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_validate_settings_does_not_hold_up_other_policies(backend: Backend) {
    let env = Env::start(backend).await;
    let policies = gantry::policy::Policies::default();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(gantry::policy::manager::run_policy_manager(
        env.client.clone(),
        gantry::runtime::Runtime::with_defaults().unwrap(),
        BINDINGS_NS,
        policies.clone(),
        gantry::delivery::source::FetchSettings::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let component = example_plugin("hostile-policy").unwrap();
    let install = |name: &'static str, settings: Value| {
        let cm = gantry::dev::policy_config_map(
            name,
            BINDINGS_NS,
            &policy(name, &settings),
            &component,
            false,
        )
        .unwrap();
        let client = env.client.clone();
        async move { gantry::dev::apply_binding(&client, &cm).await.unwrap() }
    };
    install(
        "slow",
        json!({"behaviour": "sleep-settings", "millis": 20_000}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    install("quick", json!({"behaviour": "allow"})).await;
    eventually("quick in service", || async {
        policies.get("quick").map(|_| ())
    })
    .await;
    let took = started.elapsed();
    eprintln!("a policy loaded beside a 20 s validate-settings in {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(policies.get("slow").is_none());
    let _ = stop.send(());
    manager.await.unwrap().unwrap();
    env.stop().await;
}
