//! The operator end to end on each API server backend: bindings from
//! ConfigMaps, reconcile with server-side apply, prune, status, finalizers,
//! plugin swaps, and no writes on a resync that changes nothing.

use std::time::Duration;

use gantry::toolchain::example_plugin;
use gantry_tests::{
    BINDINGS_NS, Backend, Env, GC_WAIT, backends, condition, eventually, eventually_within,
    get_json, hostile_binding, serve_widgets, widget_crd,
};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn memcached(name: &str, size: i64) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
           "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

/// Widgets reconciled by the hostile plugin, whose config picks what it does.
fn widget_binding(behaviour: &str, children: &[&str], resync: u64) -> String {
    hostile_binding(
        "widgets",
        "test.gantry.dev/v1 Widget",
        children,
        &json!({"behaviour": behaviour}),
        &format!("resyncSeconds: {resync}\n"),
    )
}

async fn widget_env(backend: Backend, behaviour: &str, children: &[&str], resync: u64) -> Env {
    let env = Env::start(backend).await;
    env.apply(widget_crd("Widget", "widgets", true)).await;
    gantry::dev::wait_for_crd(&env.client, "widgets.test.gantry.dev")
        .await
        .unwrap();
    let mut binding = widget_binding(behaviour, children, resync);
    if behaviour == "loop" {
        // Meant to fail on every parent: a shadow run of this first version
        // would refuse it once a Widget exists.
        binding.push_str("rollout: {shadow: false}\n");
    }
    env.bind("widgets", &binding, &example_plugin("hostile").unwrap())
        .await;
    env
}

fn widget(name: &str) -> Value {
    json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_children_status_and_repairs(backend: Backend) {
    let env = Env::start(backend).await;
    env.install_example("memcached").await;
    env.apply(memcached("mc", 2)).await;
    let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));
    let parents = env.api(
        "cache.example.com/v1alpha1",
        "Memcached",
        "memcacheds",
        Some("default"),
    );

    let deployment = eventually("the Deployment", || async {
        get_json(&deployments, "mc").await
    })
    .await;
    let parent = get_json(&parents, "mc").await.unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["metadata"]["labels"]["gantry.dev/binding"],
        "memcached"
    );
    let owner = &deployment["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("Memcached"), Some("mc"))
    );
    assert_eq!(owner["uid"], parent["metadata"]["uid"]);
    assert_eq!(
        (
            owner["controller"].as_bool(),
            owner["blockOwnerDeletion"].as_bool()
        ),
        (Some(true), Some(true))
    );
    let managers: Vec<&str> = deployment["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"gantry/memcached"), "{managers:?}");

    // Status: plugin status, conditions, observedGeneration, digest.
    let parent = eventually("status", || async {
        let p = get_json(&parents, "mc").await?;
        (p.pointer("/status/observedGeneration") == Some(&json!(1))).then_some(p)
    })
    .await;
    assert_eq!(parent["status"]["readyReplicas"], 0);
    assert_eq!(condition(&parent, "Synced").unwrap()["status"], "True");
    // The plugin's own metric, labelled with its binding
    // and version.
    let digest = parent["status"]["gantry"]["pluginDigest"].as_str().unwrap();
    let metrics = env.metrics.render();
    assert!(
        metrics.contains(&format!(
            "gantry_plugin_metric_deployments_rendered_total{{binding=\"memcached\",digest=\"{digest}\"}}"
        )),
        "{metrics}"
    );
    assert_eq!(condition(&parent, "Available").unwrap()["status"], "False");
    assert_eq!(
        condition(&parent, "Ready").unwrap()["status"],
        "False",
        "not ready while scaling"
    );
    assert_eq!(condition(&parent, "Ready").unwrap()["reason"], "Scaling");
    let digest = gantry::runtime::digest(&example_plugin("memcached").unwrap());
    assert_eq!(parent["status"]["gantry"]["pluginDigest"], digest.as_str());
    env.binding_annotated("memcached", "gantry.dev/plugin-digest", &digest)
        .await;

    // Spec change: children follow, generation and observedGeneration advance.
    env.apply(memcached("mc", 4)).await;
    eventually("replicas 4", || async {
        (get_json(&deployments, "mc").await?["spec"]["replicas"] == 4).then_some(())
    })
    .await;
    eventually("observedGeneration 2", || async {
        let p = get_json(&parents, "mc").await?;
        (p["metadata"]["generation"] == 2 && p["status"]["observedGeneration"] == 2).then_some(())
    })
    .await;

    // Another manager's field on the child survives our re-applies; an
    // edit of a field we own is reverted.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mc", "namespace": "default", "annotations": {"team": "cache"}}});
    deployments
        .patch(
            "mc",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(&other),
        )
        .await
        .unwrap();
    deployments
        .patch(
            "mc",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 9}})),
        )
        .await
        .unwrap();
    eventually("replicas restored", || async {
        (get_json(&deployments, "mc").await?["spec"]["replicas"] == 4).then_some(())
    })
    .await;
    env.apply(memcached("mc", 3)).await;
    eventually("replicas 3", || async {
        (get_json(&deployments, "mc").await?["spec"]["replicas"] == 3).then_some(())
    })
    .await;
    let deployment = get_json(&deployments, "mc").await.unwrap();
    assert_eq!(
        deployment["metadata"]["annotations"]["team"], "cache",
        "the other manager's field survives"
    );

    // A deleted child comes back.
    let old_uid = deployment["metadata"]["uid"].clone();
    deployments
        .delete("mc", &DeleteParams::default())
        .await
        .unwrap();
    eventually("Deployment recreated", || async {
        let d = get_json(&deployments, "mc").await?;
        (d["metadata"]["uid"] != old_uid).then_some(())
    })
    .await;
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_that_changes_nothing_writes_nothing(backend: Backend) {
    let env = widget_env(backend, "ok", &["v1 ConfigMap"], 1).await;
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for i in 0..3 {
        env.apply(widget(&format!("w{i}"))).await;
    }
    for i in 0..3 {
        eventually("children and status", || async {
            let w = get_json(&widgets, &format!("w{i}")).await?;
            (condition(&w, "Synced")?["status"] == "True"
                && get_json(&maps, &format!("w{i}-fine")).await.is_some())
            .then_some(())
        })
        .await;
    }
    let before = writes_settled(&env).await;
    let skipped_before = env.metrics.binding("widgets").skipped_applies;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(env.writes(), before, "resyncs wrote to the API server");
    assert!(
        env.metrics.binding("widgets").skipped_applies >= skipped_before + 3,
        "resyncs did happen"
    );
    env.stop().await;
}

/// Wait until the API server's write count holds still for a while (a
/// slow machine needs longer); the count then.
async fn writes_settled(env: &Env) -> u64 {
    let mut last = env.writes();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = env.writes();
        if now == last {
            break;
        }
        last = now;
    }
    last
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_parent_converges_in_one_reconcile_writing_each_child_and_the_status_once(
    backend: Backend,
) {
    let env = Env::start(backend).await;
    env.install_example("fanout").await;
    gantry::dev::wait_for_crd(&env.client, "fanouts.bench.gantry.dev")
        .await
        .unwrap();
    let fanouts = env.api("bench.gantry.dev/v1", "Fanout", "fanouts", Some("default"));
    eventually("the binding serves", || async {
        (env.metrics.binding("fanout").plugin_loads > 0).then_some(())
    })
    .await;
    let before = writes_settled(&env).await;
    let reconciles_before = env.metrics.binding("fanout").reconciles;
    env.apply(
        json!({"apiVersion": "bench.gantry.dev/v1", "kind": "Fanout",
                     "metadata": {"name": "f", "namespace": "default"}, "spec": {"value": "v"}}),
    )
    .await;
    eventually("three children observed in status", || async {
        let f = get_json(&fanouts, "f").await?;
        (f["status"]["children"] == 3 && condition(&f, "Synced")?["status"] == "True").then_some(())
    })
    .await;
    let writes = writes_settled(&env).await - before;
    assert_eq!(
        writes, 6,
        "the parent's create, three children, one status write and one Normal Event saying so"
    );
    assert_eq!(
        env.metrics.binding("fanout").reconciles - reconciles_before,
        1,
        "the events of its own writes call for no other reconcile"
    );
    env.stop().await;
}

/// A parent changed while its reconcile fails is reconciled again at once,
/// as when that reconcile succeeds: the backoff (ten minutes here) is for
/// failures that nothing has changed since, and a lasting error waits for
/// a change that has already come.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_during_a_failing_reconcile_is_reconciled_without_waiting_for_the_backoff(
    backend: Backend,
) {
    let env = Env::start(backend).await;
    let widgets = serve_widgets(&env).await;
    let binding = format!(
        // No shadow run: a Widget created while the binding loads would
        // be shadow-run, fail, and keep this version from serving.
        "{}backoff: {{baseMs: 600000, maxMs: 600000}}\nlimits: {{deadlineMs: 30000}}\nrollout: {{shadow: false}}\n",
        widget_binding("ok", &["v1 ConfigMap"], 0)
    );
    env.bind("widgets", &binding, &example_plugin("hostile").unwrap())
        .await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    for (name, retryable) in [("retried", true), ("lasting", false)] {
        let failing = json!({"behaviour": "slow-error", "millis": 4000, "retryable": retryable});
        let mut parent = widget(name);
        parent["spec"]["hostile"] = failing;
        env.apply(parent).await;
        eventually("the failing reconcile runs", || async {
            (env.metrics.binding("widgets").in_flight > 0).then_some(())
        })
        .await;
        widgets
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"hostile": {"behaviour": "ok"}}})),
            )
            .await
            .unwrap();
        let child = format!("{name}-fine");
        // The child is applied before the status is written: wait for both.
        eventually_within(Duration::from_mins(1), "the change reconciled", || async {
            get_json(&maps, &child).await?;
            let w = get_json(&widgets, name).await?;
            (condition(&w, "Synced")?["status"] == "True").then_some(())
        })
        .await;
    }
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_no_longer_desired_are_pruned_and_failures_prune_nothing(backend: Backend) {
    let env = widget_env(backend, "ok", &["v1 ConfigMap"], 300).await;
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    env.apply(widget("w")).await;
    eventually("w-fine", || async { get_json(&maps, "w-fine").await }).await;
    // An unrelated ConfigMap with our label but no owner is never touched.
    let stranger = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stranger", "namespace": "default", "labels": {"gantry.dev/binding": "widgets"}}});
    env.apply(stranger).await;

    // The plugin now fails: Synced=False, Warning Event, nothing pruned,
    // retried. (A shadow run would refuse this version; it is turned off
    // to put a failing version into service.)
    let hostile = example_plugin("hostile").unwrap();
    env.bind(
        "widgets",
        &format!(
            "{}rollout: {{shadow: false}}\n",
            widget_binding("error", &["v1 ConfigMap"], 300)
        ),
        &hostile,
    )
    .await;
    let w = eventually("Synced=False", || async {
        let w = get_json(&widgets, "w").await?;
        (condition(&w, "Synced")?["status"] == "False").then_some(w)
    })
    .await;
    assert_eq!(condition(&w, "Synced").unwrap()["reason"], "Refused");
    assert!(
        condition(&w, "Synced").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("the hostile plugin refuses")
    );
    eventually("retries with backoff", || async {
        (env.metrics.binding("widgets").reconcile_errors >= 3).then_some(())
    })
    .await;
    assert!(
        get_json(&maps, "w-fine").await.is_some(),
        "a failed reconcile pruned a child"
    );
    let events = env.events_for("default", "w").await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "Warning" && e["reason"] == "Refused"),
        "{events:?}"
    );

    // Guardrails: a child kind the binding does not declare applies nothing.
    env.bind(
        "widgets",
        &widget_binding("chatty", &["apps/v1 Deployment"], 300),
        &hostile,
    )
    .await;
    eventually("GuardrailViolation", || async {
        let w = get_json(&widgets, "w").await?;
        (condition(&w, "Synced")?["reason"] == "GuardrailViolation").then_some(())
    })
    .await;
    assert!(get_json(&maps, "w-chatty").await.is_none());

    // Back to a working plugin that wants another child: the old one is pruned.
    env.bind(
        "widgets",
        &widget_binding("chatty", &["v1 ConfigMap"], 300),
        &hostile,
    )
    .await;
    eventually("w-chatty", || async { get_json(&maps, "w-chatty").await }).await;
    eventually("w-fine pruned", || async {
        get_json(&maps, "w-fine").await.is_none().then_some(())
    })
    .await;
    assert!(
        get_json(&maps, "stranger").await.is_some(),
        "an object we do not own was pruned"
    );
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_controlled_by_others_are_never_touched(backend: Backend) {
    let env = widget_env(backend, "ok", &["v1 ConfigMap"], 300).await;
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w-fine", "namespace": "default"}, "data": {"owner": "someone"}});
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(theirs).unwrap(),
    )
    .await
    .unwrap();
    env.apply(widget("w")).await;
    let w = eventually("ChildNotOwned", || async {
        let w = get_json(&widgets, "w").await?;
        (condition(&w, "Synced")?["reason"] == "ChildNotOwned").then_some(w)
    })
    .await;
    assert!(
        condition(&w, "Synced").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("controlled by nobody")
    );
    let cm = get_json(&maps, "w-fine").await.unwrap();
    assert_eq!(cm["data"]["owner"], "someone");
    assert!(cm["metadata"].get("ownerReferences").is_none());
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_the_plugin_re_reconciles_and_a_bad_swap_keeps_the_old_one(backend: Backend) {
    let env = widget_env(backend, "ok", &["v1 ConfigMap", "apps/v1 Deployment"], 300).await;
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));
    env.apply(widget("w")).await;
    eventually("w-fine", || async { get_json(&maps, "w-fine").await }).await;

    // New logic: the memcached plugin, on the same parents.
    let memcached = example_plugin("memcached").unwrap();
    let digest = gantry::runtime::digest(&memcached);
    let binding = "name: widgets\nparent: {apiVersion: test.gantry.dev/v1, kind: Widget}\nchildren:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: apps/v1, kind: Deployment}\n";
    env.bind("widgets", binding, &memcached).await;
    eventually("Deployment from the new plugin", || async {
        get_json(&deployments, "w").await
    })
    .await;
    eventually("old child pruned", || async {
        get_json(&maps, "w-fine").await.is_none().then_some(())
    })
    .await;
    let w = eventually("digest recorded", || async {
        let w = get_json(&widgets, "w").await?;
        (w.pointer("/status/gantry/pluginDigest")? == digest.as_str()).then_some(w)
    })
    .await;
    assert_eq!(condition(&w, "Synced").unwrap()["status"], "True");

    // A bad version: refused with a Warning Event, the old one keeps serving.
    env.bind("widgets", binding, b"definitely not wasm").await;
    let events = eventually("Warning on the ConfigMap", || async {
        let events = env.events_for(BINDINGS_NS, "widgets").await;
        events
            .iter()
            .any(|e| e["reason"] == "PluginLoadFailed")
            .then_some(events)
    })
    .await;
    let warning = events
        .iter()
        .find(|e| e["reason"] == "PluginLoadFailed")
        .unwrap();
    assert_eq!(warning["type"], "Warning");
    assert!(
        warning["note"]
            .as_str()
            .unwrap()
            .contains("not a WebAssembly binary"),
        "{warning}"
    );
    assert_eq!(
        env.binding("widgets").await.metadata.annotations.unwrap()["gantry.dev/plugin-digest"],
        digest
    );
    env.apply(widget("w2")).await;
    eventually("old version still serves new parents", || async {
        get_json(&deployments, "w2").await
    })
    .await;
    assert!(env.metrics.binding("widgets").plugin_load_failures >= 1);

    // A config the plugin rejects is refused the same way.
    let bad_config = format!("{binding}config: {{image: \"\"}}\n");
    env.bind("widgets", &bad_config, &memcached).await;
    eventually("InvalidConfig", || async {
        env.events_for(BINDINGS_NS, "widgets")
            .await
            .iter()
            .any(|e| e["reason"] == "InvalidConfig")
            .then_some(())
    })
    .await;

    // Deleting the binding stops reconciling and deletes nothing.
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(env.client.clone(), BINDINGS_NS)
        .delete("widgets", &DeleteParams::default())
        .await
        .unwrap();
    eventually("binding out of service", || async {
        (env.metrics.active_bindings() == 0).then_some(())
    })
    .await;
    env.apply(widget("w3")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        get_json(&deployments, "w3").await.is_none(),
        "a deleted binding still reconciles"
    );
    assert!(
        get_json(&deployments, "w").await.is_some(),
        "deleting a binding deleted children"
    );
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_plugin_does_not_stop_other_bindings(backend: Backend) {
    let env = widget_env(backend, "loop", &["v1 ConfigMap"], 300).await;
    env.install_example("memcached").await;
    let widgets = env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"));
    env.apply(widget("w")).await;
    env.apply(memcached("mc", 1)).await;
    let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));
    eventually("memcached reconciles beside a looping plugin", || async {
        get_json(&deployments, "mc").await
    })
    .await;
    let w = eventually("PluginTimeout", || async {
        let w = get_json(&widgets, "w").await?;
        (condition(&w, "Synced")?["reason"] == "PluginTimeout").then_some(w)
    })
    .await;
    assert!(
        condition(&w, "Synced").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("deadline")
    );
    assert!(
        env.metrics
            .binding("widgets")
            .plugin_failures
            .get("timeout")
            .copied()
            .unwrap_or(0)
            >= 1
    );
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bindings_for_one_parent_kind_refuse_the_newer(backend: Backend) {
    let env = widget_env(backend, "ok", &["v1 ConfigMap"], 300).await;
    let hostile = example_plugin("hostile").unwrap();
    let second =
        widget_binding("ok", &["v1 ConfigMap"], 300).replace("name: widgets", "name: widgets-two");
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.bind("widgets-two", &second, &hostile).await;
    let events = eventually("ParentKindClaimed", || async {
        let events = env.events_for(BINDINGS_NS, "widgets-two").await;
        events
            .iter()
            .any(|e| e["reason"] == "ParentKindClaimed")
            .then_some(events)
    })
    .await;
    assert!(events.iter().all(|e| e["reason"] != "PluginLoaded"));
    assert!(
        env.events_for(BINDINGS_NS, "widgets")
            .await
            .iter()
            .all(|e| e["reason"] != "ParentKindClaimed")
    );
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_without_status_subresource_gets_a_warning_not_a_hot_loop(backend: Backend) {
    let env = Env::start(backend).await;
    env.apply(widget_crd("Gadget", "gadgets", false)).await;
    gantry::dev::wait_for_crd(&env.client, "gadgets.test.gantry.dev")
        .await
        .unwrap();
    let binding = "name: gadgets\nparent: {apiVersion: test.gantry.dev/v1, kind: Gadget}\nchildren:\n- {apiVersion: v1, kind: ConfigMap}\n";
    env.bind("gadgets", binding, &example_plugin("hostile").unwrap())
        .await;
    env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "default"}})).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("child applied", || async {
        get_json(&maps, "g-fine").await
    })
    .await;
    eventually("NoStatusSubresource", || async {
        env.events_for("default", "g")
            .await
            .iter()
            .any(|e| e["reason"] == "NoStatusSubresource")
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reconciles = env.metrics.binding("gadgets").reconciles;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        env.metrics.binding("gadgets").reconciles <= reconciles + 1,
        "hot loop: {} → {}",
        reconciles,
        env.metrics.binding("gadgets").reconciles
    );
    env.stop().await;
}

/// Make `ready` replicas of the StatefulSet `orders` run, as far as its
/// status shows. The embedded server has no StatefulSet controller, so its
/// status is set directly. On a real cluster the controller owns that
/// status and there is no kubelet: mark its Pods Running and Ready, as a
/// kubelet would, and let the controller count them (for 0, it deletes
/// them itself once scaled down).
async fn replicas_run(env: &Env, backend: Backend, ready: usize) {
    match backend {
        Backend::Embedded => {
            let sets = env.api("apps/v1", "StatefulSet", "statefulsets", Some("default"));
            let status = json!({"status": {"replicas": ready, "readyReplicas": ready}});
            sets.patch_status("orders", &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap();
        }
        Backend::Node => unreachable!("#[backends] runs embedded and real"),
        Backend::Real => {
            let pods = env.api("v1", "Pod", "pods", Some("default"));
            let running = json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}});
            // OrderedReady: the controller makes orders-1 once orders-0 is ready.
            for i in 0..ready {
                let name = format!("orders-{i}");
                eventually(&format!("Pod {name}"), || async {
                    get_json(&pods, &name).await
                })
                .await;
                pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&running))
                    .await
                    .unwrap();
            }
        }
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_deletion_waits_for_the_plugin_to_finalize(backend: Backend) {
    let env = Env::start(backend).await;
    env.install_example("database").await;
    env.apply(
        json!({"apiVersion": "db.example.com/v1alpha1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "default"}, "spec": {"replicas": 2}}),
    )
    .await;
    let databases = env.api(
        "db.example.com/v1alpha1",
        "Database",
        "databases",
        Some("default"),
    );
    let sets = env.api("apps/v1", "StatefulSet", "statefulsets", Some("default"));
    let services = env.api("v1", "Service", "services", Some("default"));
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("three children", || async {
        Some((
            get_json(&sets, "orders").await?,
            get_json(&services, "orders").await?,
            get_json(&maps, "orders-config").await?,
        ))
    })
    .await;
    let db = get_json(&databases, "orders").await.unwrap();
    assert_eq!(db["metadata"]["finalizers"], json!(["gantry.dev/database"]));

    // Pretend two replicas run, then delete: the finalizer holds the object
    // while the plugin drains the StatefulSet.
    replicas_run(&env, backend, 2).await;
    eventually("Ready", || async {
        let db = get_json(&databases, "orders").await?;
        (condition(&db, "Ready")?["status"] == "True").then_some(())
    })
    .await;
    databases
        .delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    eventually("scaled to zero while deleting", || async {
        (get_json(&sets, "orders").await?["spec"]["replicas"] == 0).then_some(())
    })
    .await;
    // The status is written after the children: wait for it too. On the
    // real backend kube's statefulset controller may report no replica
    // running so soon after the scale-down that the plugin finalizes
    // before `Draining` can be read; the Database is then already gone,
    // which the steps below check, and the test says so.
    let held = eventually("Ready=False Draining while held", || async {
        match get_json(&databases, "orders").await {
            Some(db) => (condition(&db, "Ready")?["reason"] == "Draining").then_some(Some(db)),
            None => matches!(backend, Backend::Real).then_some(None),
        }
    })
    .await;
    match held {
        Some(db) => assert!(
            db["metadata"]["deletionTimestamp"].is_string(),
            "held by the finalizer"
        ),
        None => eprintln!(
            "real backend: the drain finished before Draining could be read (kube's statefulset controller was quick)"
        ),
    }

    replicas_run(&env, backend, 0).await;
    eventually("Database gone", || async {
        get_json(&databases, "orders").await.is_none().then_some(())
    })
    .await;
    eventually_within(GC_WAIT, "children collected", || async {
        (get_json(&sets, "orders").await.is_none() && get_json(&services, "orders").await.is_none())
            .then_some(())
    })
    .await;
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn related_objects_reach_the_plugin_and_their_changes_trigger_it(backend: Backend) {
    let env = Env::start(backend).await;
    env.apply(widget_crd("Widget", "widgets", true)).await;
    gantry::dev::wait_for_crd(&env.client, "widgets.test.gantry.dev")
        .await
        .unwrap();
    let binding = "name: widgets\nparent: {apiVersion: test.gantry.dev/v1, kind: Widget}\nchildren:\n- {apiVersion: v1, kind: ConfigMap}\nrelated:\n- apiVersion: v1\n  kind: Secret\n  selector: {matchLabels: {widget-input: \"yes\"}}\nconfig: {behaviour: echo}\n";
    env.bind("widgets", binding, &example_plugin("hostile").unwrap())
        .await;
    let secret = |name: &str, label: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default", "labels": {"widget-input": label}}});
    env.apply(secret("a", "yes")).await;
    env.apply(secret("ignored", "no")).await;
    env.apply(widget("w")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("echo sees secret a", || async {
        let cm = get_json(&maps, "w-echo").await?;
        (cm["data"]["related"] == "a").then_some(())
    })
    .await;
    env.apply(secret("b", "yes")).await;
    eventually("a reconcile triggered by secret b", || async {
        let cm = get_json(&maps, "w-echo").await?;
        (cm["data"]["related"] == "a,b" && cm["data"]["trigger"] == "related-changed:b")
            .then_some(())
    })
    .await;
    // The child it owns is observed on the next call.
    env.apply(
        widget("w")
            .as_object()
            .cloned()
            .map(|mut w| {
                w.insert("spec".into(), json!({"size": 2}));
                Value::Object(w)
            })
            .unwrap(),
    )
    .await;
    eventually("echo observes its own child", || async {
        let cm = get_json(&maps, "w-echo").await?;
        (cm["data"]["observed"] == "w-echo" && cm["data"]["trigger"] == "parent-changed")
            .then_some(())
    })
    .await;
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_for_a_kind_not_served_is_refused_until_it_is(backend: Backend) {
    let env = Env::start(backend).await;
    let binding = "name: widgets\nparent: {apiVersion: test.gantry.dev/v1, kind: Widget}\nchildren:\n- {apiVersion: v1, kind: ConfigMap}\n";
    env.bind("widgets", binding, &example_plugin("hostile").unwrap())
        .await;
    let events = eventually("UnknownKind", || async {
        let events = env.events_for(BINDINGS_NS, "widgets").await;
        events
            .iter()
            .any(|e| e["reason"] == "UnknownKind")
            .then_some(events)
    })
    .await;
    let note = events
        .iter()
        .find(|e| e["reason"] == "UnknownKind")
        .unwrap()["note"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(note.contains("test.gantry.dev/v1/Widget"), "{note}");
    // Once the CRD exists, the binding goes into service by itself.
    env.apply(widget_crd("Widget", "widgets", true)).await;
    gantry::dev::wait_for_crd(&env.client, "widgets.test.gantry.dev")
        .await
        .unwrap();
    env.apply(widget("w")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("reconciled after the CRD appeared", || async {
        get_json(&maps, "w-fine").await
    })
    .await;
    env.stop().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_from_the_plugin_is_honoured_without_writes(backend: Backend) {
    let env = widget_env(backend, "requeue", &["v1 ConfigMap"], 300).await;
    env.apply(widget("w")).await;
    let maps = env.api("v1", "ConfigMap", "configmaps", Some("default"));
    eventually("w-fine", || async { get_json(&maps, "w-fine").await }).await;
    let start = env.metrics.binding("widgets").reconciles;
    eventually("requeued reconciles (resync is 300 s)", || async {
        (env.metrics.binding("widgets").reconciles >= start + 4).then_some(())
    })
    .await;
    let skipped = env.metrics.binding("widgets").skipped_applies;
    assert!(
        skipped >= 3,
        "requeued reconciles rewrote the child: {skipped} skipped"
    );
    env.stop().await;
}

/// `resyncSeconds: 0` turns the periodic resync off: a converged parent
/// is not reconciled again until something changes.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_seconds_zero_turns_resync_off(backend: Backend) {
    let env = Env::start(backend).await;
    serve_widgets(&env).await;
    env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"}, "spec": {}}))
        .await;
    let hostile = example_plugin("hostile").unwrap();
    let bind = |resync: u64| {
        hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &["v1 ConfigMap"],
            &json!({"behaviour": "ok"}),
            &format!("resyncSeconds: {resync}\n"),
        )
    };
    let reconciles = || env.metrics.binding("widgets").reconciles;
    let quiet = Duration::from_millis(2500);

    // Every second: the count grows.
    env.bind("widgets", &bind(1), &hostile).await;
    eventually("a first reconcile", || async {
        (reconciles() > 0).then_some(())
    })
    .await;
    let before = reconciles();
    tokio::time::sleep(quiet).await;
    assert!(reconciles() >= before + 2, "resyncSeconds: 1 resyncs");

    // Never: the count stands still once the new controller has begun.
    env.bind("widgets", &bind(0), &hostile).await;
    eventually("the version without resync in service", || async {
        (env.metrics.binding("widgets").plugin_loads >= 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = reconciles();
    tokio::time::sleep(quiet).await;
    assert_eq!(reconciles(), before, "resyncSeconds: 0 still resyncs");
    env.stop().await;
}

/// Widgets served by one reconcile slot, through a plugin that takes
/// `millis` a call; without resync.
async fn one_slot_widgets(env: &Env, millis: u64) -> Api<DynamicObject> {
    let widgets = serve_widgets(env).await;
    let binding = hostile_binding(
        "widgets",
        "test.gantry.dev/v1 Widget",
        &["v1 ConfigMap"],
        &json!({"behaviour": "sleep", "millis": millis}),
        "resyncSeconds: 0\nmaxConcurrentReconciles: 1\nrollout: {shadow: false}\n",
    );
    env.bind("widgets", &binding, &example_plugin("hostile").unwrap())
        .await;
    eventually("the binding serves", || async {
        (env.metrics.binding("widgets").plugin_loads > 0).then_some(())
    })
    .await;
    widgets
}

/// Parents waiting for a reconcile slot are served in the order they
/// became due, as a work queue serves them: none is passed over again and
/// again while later ones go first. One slot, a plugin that takes 100 ms,
/// and 24 Widgets created one after another: the order of their status
/// writes follows the order of their creation.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parents_waiting_for_a_slot_are_reconciled_in_the_order_they_came(backend: Backend) {
    let env = Env::start(backend).await;
    let widgets = one_slot_widgets(&env, 100).await;
    let names: Vec<String> = (0..24).map(|i| format!("w{i:02}")).collect();
    for name in &names {
        env.apply(widget(name)).await;
        // Apart enough that each comes on its own (events that come
        // together have no order to keep), close enough to queue up
        // behind the 100 ms reconciles.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The resourceVersion each status write left, in the order created.
    let written: Vec<u64> = eventually("every Widget synced", || async {
        let mut versions = Vec::new();
        for name in &names {
            let w = get_json(&widgets, name).await?;
            condition(&w, "Synced").filter(|c| c["status"] == "True")?;
            versions.push(w["metadata"]["resourceVersion"].as_str()?.parse().ok()?);
        }
        Some(versions)
    })
    .await;
    let pairs = names.len() * (names.len() - 1) / 2;
    let inversions: usize = (0..written.len())
        .map(|i| written[i + 1..].iter().filter(|&&w| w < written[i]).count())
        .sum();
    // Served in no order, about half the pairs would be inverted.
    assert!(
        inversions * 10 <= pairs,
        "{inversions} of {pairs} pairs reconciled out of order: {written:?}"
    );
    env.stop().await;
}

/// A parent that changes while its reconcile waits for a slot is
/// reconciled once, at its latest: the waiting reconcile reads the parent
/// when its slot frees, so the changes call for no second reconcile. One
/// slot, a plugin that takes 400 ms, three Widgets, and the last one
/// changed three times while the others hold the slot.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_changed_while_it_waits_for_a_slot_is_reconciled_once(backend: Backend) {
    let env = Env::start(backend).await;
    let widgets = one_slot_widgets(&env, 400).await;
    for name in ["w0", "w1", "w2"] {
        env.apply(widget(name)).await;
    }
    for size in 2..=4 {
        let mut changed = widget("w2");
        changed["spec"]["size"] = json!(size);
        env.apply(changed).await;
    }
    eventually("every Widget synced at its latest generation", || async {
        for name in ["w0", "w1", "w2"] {
            let w = get_json(&widgets, name).await?;
            let synced = condition(&w, "Synced").filter(|c| c["status"] == "True")?;
            (synced["observedGeneration"] == w["metadata"]["generation"]).then_some(())?;
        }
        Some(())
    })
    .await;
    // Time for a second reconcile of w2, were one due.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        env.metrics.binding("widgets").reconciles,
        3,
        "one reconcile per Widget"
    );
    env.stop().await;
}
