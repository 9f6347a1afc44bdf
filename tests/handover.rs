//! A plugin hands a Deployment's `spec.replicas` to a
//! `HorizontalPodAutoscaler` by no longer setting it. Without `handOver`
//! server-side apply removes the field and the Deployment falls to its
//! default of 1 replica; with it the count stays until the autoscaler
//! writes it, and the plugin's later applies leave the autoscaler's count
//! alone. On the embedded server the simulated HPA scales (from the load
//! annotated on it); the real control plane runs no HPA controller, so the
//! test writes the Deployment's scale as that controller would.

use gantry::toolchain::example_plugin;
use gantry_apiserver::simulate::{Settings, Simulation};
use gantry_tests::{
    Backend, Env, backends, eventually, get_json, hostile_binding, serve_widgets, widget_crd,
};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// A Deployment `name` labelled `step`, with `replicas` when given.
fn deployment(name: &str, step: &str, replicas: Option<i32>) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"step": step}},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}});
    if let Some(replicas) = replicas {
        d["spec"]["replicas"] = json!(replicas);
    }
    d
}

/// An HPA of the Deployment `name`: 2 to 8 replicas, 50% CPU.
fn autoscaler(name: &str) -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": 2, "maxReplicas": 8,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 50}}}]}})
}

/// Have the parent `name` of `kind` want `children`.
async fn want(env: &Env, kind: &str, name: &str, children: &[Value]) {
    env.apply(json!({"apiVersion": "test.gantry.dev/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"hostile": {"behaviour": "children", "children": children}}}))
        .await;
}

/// The Deployment `name` once it carries the label `step`.
async fn at_step(deployments: &Api<DynamicObject>, name: &str, step: &str) -> Value {
    eventually(&format!("{name} at step {step}"), || async {
        let d = get_json(deployments, name).await?;
        (d["metadata"]["labels"]["step"] == step).then_some(d)
    })
    .await
}

/// The managers owning `spec.replicas` of `d`.
fn replica_owners(d: &Value) -> Vec<String> {
    d["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m.pointer("/fieldsV1/f:spec/f:replicas").is_some())
        .map(|m| m["manager"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_over_replica_count_stays_until_the_autoscaler_takes_it(backend: Backend) {
    let env = Env::start(backend).await;
    let _simulation = (backend == Backend::Embedded)
        .then(|| Simulation::start(env.client.clone(), Settings::default()));
    serve_widgets(&env).await;
    env.apply(widget_crd("Gadget", "gadgets", true)).await;
    gantry::dev::wait_for_crd(&env.client, "gadgets.test.gantry.dev")
        .await
        .unwrap();
    let hostile = example_plugin("hostile").unwrap();
    let children = [
        "apps/v1 Deployment",
        "autoscaling/v2 HorizontalPodAutoscaler",
    ];
    let quiet = "resyncSeconds: 0\nrollout: {shadow: false}\n";
    env.bind(
        "gadgets",
        &hostile_binding(
            "gadgets",
            "test.gantry.dev/v1 Gadget",
            &children,
            &json!({}),
            quiet,
        ),
        &hostile,
    )
    .await;
    let hand_over = format!(
        "{quiet}handOver:\n  - {{apiVersion: apps/v1, kind: Deployment, fields: [spec.replicas]}}\n"
    );
    env.bind(
        "widgets",
        &hostile_binding(
            "widgets",
            "test.gantry.dev/v1 Widget",
            &children,
            &json!({}),
            &hand_over,
        ),
        &hostile,
    )
    .await;
    let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));

    // Both parents start at 3 replicas, then stop setting them; the one
    // handing them over adds its autoscaler.
    for (kind, name) in [("Gadget", "plain"), ("Widget", "handed")] {
        want(&env, kind, name, &[deployment(name, "1", Some(3))]).await;
        let d = at_step(&deployments, name, "1").await;
        assert_eq!(d["spec"]["replicas"], 3);
    }
    want(&env, "Gadget", "plain", &[deployment("plain", "2", None)]).await;
    want(
        &env,
        "Widget",
        "handed",
        &[deployment("handed", "2", None), autoscaler("handed")],
    )
    .await;
    // Without handOver, server-side apply removed the field: the default.
    let plain = at_step(&deployments, "plain", "2").await;
    assert_eq!(plain["spec"]["replicas"], 1, "{plain}");
    // With it, the count stayed, held by the hand-over manager alone.
    let handed = at_step(&deployments, "handed", "2").await;
    assert_eq!(handed["spec"]["replicas"], 3, "{handed}");
    assert_eq!(
        replica_owners(&handed),
        ["gantry-handover/widgets"],
        "{handed}"
    );

    // The autoscaler takes the count.
    let autoscaler_manager = if backend == Backend::Embedded {
        let hpas = env.api(
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            Some("default"),
        );
        // The Deployment at step 2 may be applied before the autoscaler.
        eventually("the autoscaler applied", || async {
            get_json(&hpas, "handed").await.map(|_| ())
        })
        .await;
        // Three Pods' worth of load, against a 50% target: 6 replicas.
        hpas.patch(
            "handed",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "simulate.gantry.dev/load": "300"}}})),
        )
        .await
        .unwrap();
        gantry_apiserver::simulate::FIELD_MANAGER
    } else {
        let manager = "kube-controller-manager";
        deployments
            .patch_scale(
                "handed",
                &PatchParams {
                    field_manager: Some(manager.into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(json!({"spec": {"replicas": 6}})),
            )
            .await
            .unwrap();
        manager
    };
    let scaled = eventually("the autoscaler's 6 replicas", || async {
        let d = get_json(&deployments, "handed").await?;
        (d["spec"]["replicas"] == 6).then_some(d)
    })
    .await;
    assert_eq!(replica_owners(&scaled), [autoscaler_manager], "{scaled}");

    // The plugin's next apply leaves the autoscaler's count alone.
    want(
        &env,
        "Widget",
        "handed",
        &[deployment("handed", "3", None), autoscaler("handed")],
    )
    .await;
    let later = at_step(&deployments, "handed", "3").await;
    assert_eq!(later["spec"]["replicas"], 6, "{later}");
    assert_eq!(replica_owners(&later), [autoscaler_manager], "{later}");
    env.stop().await;
}
