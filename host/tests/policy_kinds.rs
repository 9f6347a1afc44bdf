//! Policy rules may name kinds; discovery on the API server turns them into
//! the resources a webhook configuration carries.

use gantry::policy::spec::{parse_spec, resolve_kinds};
use gantry_test_support::{Backend, Cluster, backends};

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_resolve_to_served_resources_and_unknown_kinds_are_refused(backend: Backend) {
    let server = Cluster::start(backend).await;
    let client = server.client();

    let spec = parse_spec(
        "name: k\nrules:\n\
         - {apiGroups: [apps], apiVersions: [v1], kinds: [Deployment, Deployment/scale], operations: [CREATE]}\n\
         - {apiGroups: [''], apiVersions: ['*'], kinds: [Pod], operations: [CREATE]}\n",
    )
    .unwrap();
    let mut rules = spec.rules.clone();
    resolve_kinds(&client, &mut rules).await.unwrap();
    assert_eq!(rules[0].resources, ["deployments", "deployments/scale"]);
    assert_eq!(rules[1].resources, ["pods"]);
    assert!(rules[0].matches("CREATE", "apps", "v1", "deployments", "", true));
    // What goes into the webhook configuration names resources only.
    let written = serde_json::to_value(&rules[0]).unwrap();
    assert!(written.get("kinds").is_none(), "{written}");

    let mut unknown = parse_spec(
        "name: k\nrules:\n- {apiGroups: [apps], apiVersions: [v1], kinds: [Gadget], operations: [CREATE]}\n",
    )
    .unwrap()
    .rules;
    let err = resolve_kinds(&client, &mut unknown).await.unwrap_err();
    assert!(
        err.contains("rules[0].kinds: Gadget is not served"),
        "{err}"
    );
    server.shutdown().await;
}

/// A policy whose kind is not served yet is refused with a Warning Event,
/// and goes into service by itself once a CRD serves the kind.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_waits_for_its_kind_to_be_served(backend: Backend) {
    use std::time::{Duration, Instant};

    use gantry::policy::{Policies, manager::run_policy_manager};
    use k8s_openapi::api::core::v1::Event;
    use kube::Api;
    use serde_json::json;

    const NS: &str = "gantry-system";
    let server = Cluster::start(backend).await;
    let client = server.client();
    gantry::dev::ensure_namespace(&client, NS).await.unwrap();
    let plugin = gantry::toolchain::example_plugin("require-labels").unwrap();
    let policy = "name: gadgets\nrules:\n- {apiGroups: [example.com], apiVersions: [v1], kinds: [Gadget], operations: [CREATE]}\nsettings: {labels: [team]}\n";
    let cm = gantry::dev::policy_config_map("gadgets", NS, policy, &plugin, true).unwrap();
    gantry::dev::apply_binding(&client, &cm).await.unwrap();

    let runtime = gantry::runtime::Runtime::with_defaults().unwrap();
    let policies = Policies::default();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(run_policy_manager(
        client.clone(),
        runtime,
        NS,
        policies.clone(),
        gantry::delivery::source::FetchSettings::default(),
        async move {
            let _ = stop_rx.await;
        },
    ));

    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(30);
    let warning = loop {
        let list = events
            .list(&kube::api::ListParams::default())
            .await
            .unwrap();
        if let Some(e) = list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("PolicyKindNotServed"))
        {
            break e;
        }
        assert!(Instant::now() < deadline, "no PolicyKindNotServed event");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        warning
            .message
            .unwrap_or_default()
            .contains("Gadget is not served"),
    );
    assert!(policies.get("gadgets").is_none());

    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    gantry::dev::apply_object(&client, &crd).await.unwrap();
    gantry::dev::wait_for_crd(&client, "gadgets.example.com")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let loaded = loop {
        if let Some(loaded) = policies.get("gadgets") {
            break loaded;
        }
        assert!(
            Instant::now() < deadline,
            "the policy never went into service"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(loaded.spec.rules[0].resources, ["gadgets"]);
    let _ = stop_tx.send(());
    manager.await.unwrap().unwrap();
    server.shutdown().await;
}
