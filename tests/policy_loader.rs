//! Admission policies go into service through the same loader as reconcile
//! bindings, and so behave alike: the oldest ConfigMap of a name wins after
//! a restart, the other waits and goes into service when the name is free,
//! and a policy's component may come from a URL or an OCI registry.

use std::time::Duration;

use gantry::delivery::source::{FetchSettings, oci};
use gantry::policy::Policies;
use gantry::toolchain::example_plugin;
use gantry_tests::sources::{FileServer, Registry};
use gantry_tests::{BINDINGS_NS, Backend, Env, backends, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use tokio::sync::oneshot;

const RULES: &str = "rules:\n- {apiGroups: [''], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}\n";

/// The policy manager running against `env`'s API server; stops when the
/// sender is dropped or fired.
fn start_policies(env: &Env, sources: FetchSettings) -> (Policies, oneshot::Sender<()>) {
    let policies = Policies::default();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(gantry::policy::manager::run_policy_manager(
        env.client.clone(),
        gantry::runtime::Runtime::with_defaults().unwrap(),
        BINDINGS_NS,
        policies.clone(),
        sources,
        async move {
            let _ = stopped.await;
        },
    ));
    (policies, stop)
}

/// A `policy.yaml` of require-labels named `name`, with `extra` lines.
fn policy(name: &str, extra: &str) -> String {
    format!("name: {name}\n{RULES}settings: {{labels: [team]}}\n{extra}")
}

async fn create(env: &Env, cm: &ConfigMap) {
    Api::<ConfigMap>::namespaced(env.client.clone(), BINDINGS_NS)
        .create(&PostParams::default(), cm)
        .await
        .expect("create the policy ConfigMap");
}

/// Two ConfigMaps that both name policy `same`, found at start: the older
/// one serves though its name sorts last; the newer waits as
/// `PolicyNameTaken` and goes into service once the older is deleted.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_policy_of_a_name_wins_and_the_other_waits(backend: Backend) {
    let env = Env::start(backend).await;
    let component = example_plugin("require-labels").unwrap();
    let older = gantry::dev::policy_config_map(
        "zz-older",
        BINDINGS_NS,
        &policy("same", ""),
        &component,
        true,
    )
    .unwrap();
    create(&env, &older).await;
    // Creation timestamps have a resolution of one second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let newer = gantry::dev::policy_config_map(
        "aa-newer",
        BINDINGS_NS,
        &policy("same", ""),
        &component,
        true,
    )
    .unwrap();
    create(&env, &newer).await;

    let (policies, _stop) = start_policies(&env, FetchSettings::default());
    eventually("the older policy in service", || async {
        env.event(BINDINGS_NS, "zz-older", "PolicyLoaded").await
    })
    .await;
    let taken = eventually("the newer one refused", || async {
        env.event(BINDINGS_NS, "aa-newer", "PolicyNameTaken").await
    })
    .await;
    assert!(
        taken["note"]
            .as_str()
            .is_some_and(|n| n.contains("ConfigMap zz-older")),
        "{taken}"
    );
    assert_eq!(policies.get("same").unwrap().config_map, "zz-older");

    Api::<ConfigMap>::namespaced(env.client.clone(), BINDINGS_NS)
        .delete("zz-older", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the newer policy in service", || async {
        env.event(BINDINGS_NS, "aa-newer", "PolicyLoaded").await
    })
    .await;
    eventually("the newer one serves", || async {
        (policies.get("same")?.config_map == "aa-newer").then_some(())
    })
    .await;
    env.stop().await;
}

/// A policy whose component comes from a URL (pinned) and one from an OCI
/// registry (a tag, resolved to its digest): both go into service, and the
/// ConfigMap and the Event say where from. A URL whose bytes do not match
/// the pin is refused.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_come_from_urls_and_oci_registries(backend: Backend) {
    let env = Env::start(backend).await;
    let component = example_plugin("require-labels").unwrap();
    let digest = gantry::runtime::digest(&component);
    let files = FileServer::start().await;
    files.put("require-labels.wasm", component.clone());
    let cache = tempfile::tempdir().unwrap();
    let sources = FetchSettings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..FetchSettings::default()
    };
    let (policies, _stop) = start_policies(&env, sources.clone());

    let by_url = policy(
        "by-url",
        &format!(
            "sha256: {digest}\nsource: {{url: \"{}\"}}\n",
            files.url("require-labels.wasm")
        ),
    );
    let cm = gantry::dev::policy_config_map("by-url", BINDINGS_NS, &by_url, &[], false).unwrap();
    let mut cm = cm;
    cm.binary_data = None;
    create(&env, &cm).await;
    let loaded = eventually("the URL policy in service", || async {
        env.event(BINDINGS_NS, "by-url", "PolicyLoaded").await
    })
    .await;
    let note = loaded["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("sha256:{digest} from http://127.0.0.1")),
        "{note}"
    );
    assert!(policies.get("by-url").is_some());
    let annotations = env.binding("by-url").await.metadata.annotations.unwrap();
    assert_eq!(annotations["gantry.dev/policy-digest"], digest);
    assert_eq!(
        annotations["gantry.dev/policy-source"],
        files.url("require-labels.wasm")
    );

    let wrong = policy(
        "wrong-pin",
        &format!(
            "sha256: {}\nsource: {{url: \"{}\"}}\n",
            "0".repeat(64),
            files.url("require-labels.wasm")
        ),
    );
    let mut cm =
        gantry::dev::policy_config_map("wrong-pin", BINDINGS_NS, &wrong, &[], false).unwrap();
    cm.binary_data = None;
    create(&env, &cm).await;
    eventually("the mismatch refused", || async {
        env.event(BINDINGS_NS, "wrong-pin", "PluginFetchFailed")
            .await
    })
    .await;
    assert!(policies.get("wrong-pin").is_none());

    if let Some(registry) = Registry::start().await {
        let reference = format!("{}/policies/require-labels:v1", registry.host);
        let pushed = oci::push(component.clone(), &reference, true, &sources)
            .await
            .expect("push");
        let by_oci = policy(
            "by-oci",
            &format!("source: {{oci: \"oci://{reference}\"}}\n"),
        );
        let mut cm =
            gantry::dev::policy_config_map("by-oci", BINDINGS_NS, &by_oci, &[], false).unwrap();
        cm.binary_data = None;
        create(&env, &cm).await;
        eventually("the OCI policy in service", || async {
            env.event(BINDINGS_NS, "by-oci", "PolicyLoaded").await
        })
        .await;
        let annotations = env.binding("by-oci").await.metadata.annotations.unwrap();
        assert_eq!(annotations["gantry.dev/policy-source"], pushed.reference);
        assert_eq!(annotations["gantry.dev/policy-digest"], digest);
    }
    env.stop().await;
}

/// A new version of a policy judges the requests the running one judged
/// last before it serves: one that fails where the running one answered
/// is refused, and the running one keeps serving.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_version_failing_on_recent_reviews_is_refused(backend: Backend) {
    let env = Env::start(backend).await;
    let (policies, _stop) = start_policies(&env, FetchSettings::default());
    let component = example_plugin("hostile-policy").unwrap();
    let version = |behaviour: &str| {
        gantry::dev::policy_config_map(
            "hostile",
            BINDINGS_NS,
            &format!("name: hostile\n{RULES}settings: {{behaviour: {behaviour}}}\n"),
            &component,
            true,
        )
        .unwrap()
    };
    gantry::dev::apply_binding(&env.client, &version("allow"))
        .await
        .unwrap();
    eventually("the policy in service", || async {
        policies.get("hostile").map(|_| ())
    })
    .await;
    for name in ["a", "b", "c"] {
        let request = serde_json::json!({"uid": name, "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "namespace": "default", "name": name,
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}}});
        let decision = policies.evaluate("hostile", request).await.unwrap();
        assert!(decision.response.allowed);
    }

    gantry::dev::apply_binding(&env.client, &version("panic"))
        .await
        .unwrap();
    let note = eventually("ShadowRunFailed", || async {
        env.event(BINDINGS_NS, "hostile", "ShadowRunFailed")
            .await
            .and_then(|e| e["note"].as_str().map(str::to_string))
    })
    .await;
    assert!(
        note.contains("shadow run on 3 recent reviews: 0 unchanged, 0 changed, 3 failed"),
        "{note}"
    );
    assert!(note.contains("CREATE ConfigMap default/a: "), "{note}");
    assert!(note.contains("hostile policy panics on purpose"), "{note}");
    let serving = policies.get("hostile").unwrap();
    assert_eq!(
        serving.spec.settings["behaviour"], "allow",
        "the running version was replaced"
    );

    // A version that answers otherwise (but answers) serves, and says so.
    gantry::dev::apply_binding(&env.client, &version("deny"))
        .await
        .unwrap();
    let loaded = eventually("the denying version in service", || async {
        let policy = policies.get("hostile")?;
        (policy.spec.settings["behaviour"] == "deny").then_some(())?;
        env.events_for(BINDINGS_NS, "hostile")
            .await
            .into_iter()
            .filter(|e| e["reason"] == "PolicyLoaded")
            .find_map(|e| {
                let note = e["note"].as_str()?;
                note.contains("3 changed").then(|| note.to_string())
            })
    })
    .await;
    assert!(
        loaded.contains("shadow run on 3 recent reviews: 0 unchanged, 3 changed, 0 failed"),
        "{loaded}"
    );
    env.stop().await;
}
