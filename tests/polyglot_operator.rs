//! The JavaScript, Python and Go memcached plugins, served from a local
//! HTTP server, the Rust one, pulled from a loopback OCI registry, and the C
//! one, inline in its ConfigMap, in service in the operator on each backend (the
//! embedded API server and a real one): each binding's parents converge, and a version whose download
//! does not match its pin is refused while the old one keeps serving.
//!
//! The first run installs the JavaScript and Python toolchains into the
//! user's cache (`~/.cache/gantry/toolchains`), which needs the npm registry
//! and PyPI.

use std::time::{Duration, Instant};

/// How long the first convergence of the five bindings may take: the debug
/// build compiles the 12 MB JavaScript, 16 MB Go and 18 MB Python components
/// first, and with both backends' tests at once on two shared cores that
/// took more than 3 minutes (115 s for one backend alone).
const COMPILE_WAIT: Duration = Duration::from_mins(6);

use gantry::controller::OperatorOptions;
use gantry::delivery::source::{FetchSettings, oci};
use gantry::toolchain::{c, example_plugin, go, js, python, source_workspace_root};
use gantry_tests::sources::{FileServer, Registry};
use gantry_tests::{
    BINDINGS_NS, Backend, Env, backends, condition, eventually, eventually_within, get_json,
    widget_crd,
};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};

/// A binding ConfigMap whose plugin comes from its `source`.
async fn bind_remote(env: &Env, name: &str, binding_yaml: &str) {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(BINDINGS_NS.into());
    cm.metadata.labels = Some([("gantry.dev/plugin".to_string(), "true".to_string())].into());
    cm.data = Some([("binding.yaml".to_string(), binding_yaml.to_string())].into());
    gantry::dev::apply_binding(&env.client, &cm)
        .await
        .expect("apply binding");
}

fn binding(name: &str, api_version: &str, kind: &str, source: &str) -> String {
    format!(
        "name: {name}\nparent: {{apiVersion: {api_version}, kind: {kind}}}\nchildren:\n- {{apiVersion: apps/v1, kind: Deployment}}\nconfig: {{image: \"memcached:1.6.26-alpine\"}}\n{source}"
    )
}

fn parent(api_version: &str, kind: &str, name: &str, size: i64) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"size": size, "containerPort": 11211}})
}

/// The memcached components of each language.
struct Components {
    rust: Vec<u8>,
    js: Vec<u8>,
    py: Vec<u8>,
    c: Vec<u8>,
    go: Vec<u8>,
}

/// Build the five memcached components (timed).
fn components() -> Components {
    let dir = |name: &str| source_workspace_root().join("plugins").join(name);
    let timed = |what: &str, build: &dyn Fn() -> Vec<u8>| {
        let started = Instant::now();
        let bytes = build();
        eprintln!(
            "{what}: {} bytes, built in {:?}",
            bytes.len(),
            started.elapsed()
        );
        bytes
    };
    let rust = timed("rust", &|| {
        example_plugin("memcached").expect("Rust plugin")
    });
    let js = timed("js", &|| {
        std::fs::read(js::build_plugin(&dir("memcached-js")).expect("JS plugin")).unwrap()
    });
    let py = timed("python", &|| {
        std::fs::read(python::build_plugin(&dir("memcached-py")).expect("Python plugin")).unwrap()
    });
    let c = timed("c", &|| {
        std::fs::read(c::build_plugin(&dir("memcached-c")).expect("C plugin")).unwrap()
    });
    let go = timed("go", &|| {
        std::fs::read(go::build_plugin(&dir("memcached-go")).expect("Go plugin")).unwrap()
    });
    Components {
        rust,
        js,
        py,
        c,
        go,
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_python_and_go_from_http_rust_from_oci_and_c_inline_reconcile_in_the_operator(
    backend: Backend,
) {
    let Components {
        rust,
        js,
        py,
        c,
        go,
    } = tokio::task::spawn_blocking(components).await.unwrap();
    let c_digest = gantry::runtime::digest(&c);
    let go_digest = gantry::runtime::digest(&go);
    let (rust_digest, js_digest, py_digest) = (
        gantry::runtime::digest(&rust),
        gantry::runtime::digest(&js),
        gantry::runtime::digest(&py),
    );
    assert!(
        js.len() > 1 << 20 && py.len() > 1 << 20 && go.len() > 1 << 20,
        "too big for a ConfigMap"
    );

    let server = FileServer::start().await;
    server.put("memcached-js.wasm", js.clone());
    server.put("memcached-py.wasm", py.clone());
    server.put("memcached-go.wasm", go.clone());
    let registry = Registry::start().await;
    let cache = tempfile::tempdir().unwrap();
    let fetch = FetchSettings {
        cache_dir: Some(cache.path().to_path_buf()),
        backoff_base: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        ..FetchSettings::default()
    };
    let env = Env::start_with(
        backend,
        OperatorOptions {
            plugin_sources: fetch.clone(),
            ..OperatorOptions::default()
        },
    )
    .await;

    // Parent kinds: Memcached for Rust, JsMemcached, PyMemcached, CMemcached.
    for crd in
        gantry::manifest::read_objects(&gantry::examples::source_dir("memcached").join("crd.yaml"))
            .unwrap()
    {
        env.apply(crd).await;
    }
    env.apply(widget_crd("JsMemcached", "jsmemcacheds", true))
        .await;
    env.apply(widget_crd("PyMemcached", "pymemcacheds", true))
        .await;
    env.apply(widget_crd("CMemcached", "cmemcacheds", true))
        .await;
    env.apply(widget_crd("GoMemcached", "gomemcacheds", true))
        .await;
    for name in [
        "gomemcacheds.test.gantry.dev",
        "cmemcacheds.test.gantry.dev",
        "memcacheds.cache.example.com",
        "jsmemcacheds.test.gantry.dev",
        "pymemcacheds.test.gantry.dev",
    ] {
        gantry::dev::wait_for_crd(&env.client, name).await.unwrap();
    }

    let started = Instant::now();
    let js_url = server.url("memcached-js.wasm");
    let js_binding = binding(
        "memcached-js",
        "test.gantry.dev/v1",
        "JsMemcached",
        &format!("sha256: {js_digest}\nsource: {{url: \"{js_url}\"}}\n"),
    );
    bind_remote(&env, "memcached-js", &js_binding).await;
    bind_remote(
        &env,
        "memcached-py",
        &binding(
            "memcached-py",
            "test.gantry.dev/v1",
            "PyMemcached",
            &format!(
                "sha256: {py_digest}\nsource: {{url: \"{}\"}}\n",
                server.url("memcached-py.wasm")
            ),
        ),
    )
    .await;
    bind_remote(
        &env,
        "memcached-go",
        &binding(
            "memcached-go",
            "test.gantry.dev/v1",
            "GoMemcached",
            &format!(
                "sha256: {go_digest}\nsource: {{url: \"{}\"}}\n",
                server.url("memcached-go.wasm")
            ),
        ),
    )
    .await;
    // C: small enough to sit in the ConfigMap.
    env.bind(
        "memcached-c",
        &binding("memcached-c", "test.gantry.dev/v1", "CMemcached", ""),
        &c,
    )
    .await;
    let mut kinds = vec![
        (
            "test.gantry.dev/v1",
            "CMemcached",
            "cmemcacheds",
            "c",
            c_digest.clone(),
        ),
        (
            "test.gantry.dev/v1",
            "JsMemcached",
            "jsmemcacheds",
            "js",
            js_digest.clone(),
        ),
        (
            "test.gantry.dev/v1",
            "PyMemcached",
            "pymemcacheds",
            "py",
            py_digest.clone(),
        ),
        (
            "test.gantry.dev/v1",
            "GoMemcached",
            "gomemcacheds",
            "go",
            go_digest.clone(),
        ),
    ];
    let mut oci_ref = None;
    if let Some(registry) = &registry {
        let reference = format!("{}/plugins/memcached:v1", registry.host);
        let pushed = oci::push(rust.clone(), &reference, true, &fetch)
            .await
            .expect("push the Rust plugin");
        bind_remote(
            &env,
            "memcached-rust",
            &binding(
                "memcached-rust",
                "cache.example.com/v1alpha1",
                "Memcached",
                &format!("source: {{oci: \"oci://{reference}\"}}\n"),
            ),
        )
        .await;
        kinds.push((
            "cache.example.com/v1alpha1",
            "Memcached",
            "memcacheds",
            "rust",
            rust_digest.clone(),
        ));
        oci_ref = Some(pushed.reference);
    }

    let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));
    for (api_version, kind, _, lang, _) in &kinds {
        env.apply(parent(api_version, kind, &format!("mc-{lang}"), 2))
            .await;
    }
    for (api_version, kind, plural, lang, digest) in &kinds {
        let name = format!("mc-{lang}");
        let parents = env.api(api_version, kind, plural, Some("default"));
        // Compiling the 12 MB JavaScript, 16 MB Go and 18 MB Python components takes
        // a while on a loaded machine: this waits for correctness, not speed.
        let deployment =
            eventually_within(COMPILE_WAIT, &format!("{lang}: the Deployment"), || async {
                get_json(&deployments, &name).await
            })
            .await;
        assert_eq!(deployment["spec"]["replicas"], 2, "{lang}");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "memcached:1.6.26-alpine"
        );
        let synced = eventually(&format!("{lang}: Synced by its plugin"), || async {
            let p = get_json(&parents, &name).await?;
            (p.pointer("/status/gantry/pluginDigest")? == digest.as_str()
                && condition(&p, "Synced")?["status"] == "True")
                .then_some(p)
        })
        .await;
        assert_eq!(synced["status"]["readyReplicas"], 0, "{lang}");
        assert_eq!(condition(&synced, "Ready").unwrap()["reason"], "Scaling");
    }
    eprintln!(
        "{} bindings fetched, compiled and converged in {:?}",
        kinds.len(),
        started.elapsed()
    );
    let annotations = |cm: ConfigMap| cm.metadata.annotations.unwrap_or_default();
    let js_cm = annotations(
        env.binding_annotated("memcached-js", "gantry.dev/plugin-digest", &js_digest)
            .await,
    );
    assert_eq!(js_cm["gantry.dev/plugin-source"], js_url);
    if let Some(oci_ref) = &oci_ref {
        // The tag was resolved; the digest in service is recorded.
        let rust_cm = annotations(
            env.binding_annotated("memcached-rust", "gantry.dev/plugin-digest", &rust_digest)
                .await,
        );
        assert_eq!(&rust_cm["gantry.dev/plugin-source"], oci_ref);
    }
    assert_eq!(server.hits("memcached-js.wasm"), 1);
    assert!(cache.path().join("sha256").join(&js_digest).is_file());

    // A new version whose download does not match its pin (a pin not in the
    // cache: the cache is keyed by digest, so a cached pin needs no
    // download): refused with a Warning Event; the JavaScript plugin keeps
    // serving.
    let v2_pin = gantry::runtime::digest(b"memcached-js v2");
    bind_remote(
        &env,
        "memcached-js",
        &binding(
            "memcached-js",
            "test.gantry.dev/v1",
            "JsMemcached",
            &format!(
                "sha256: {v2_pin}\nsource: {{url: \"{}\"}}\n",
                server.url("memcached-py.wasm")
            ),
        ),
    )
    .await;
    let warning = eventually("PluginFetchFailed on the ConfigMap", || async {
        env.events_for(BINDINGS_NS, "memcached-js")
            .await
            .into_iter()
            .find(|e| e["reason"] == "PluginFetchFailed")
    })
    .await;
    assert_eq!(warning["type"], "Warning");
    let note = warning["note"].as_str().unwrap();
    assert!(note.contains(&py_digest) && note.contains("pins"), "{note}");
    assert!(note.contains("previous version keeps serving"), "{note}");
    env.apply(parent("test.gantry.dev/v1", "JsMemcached", "mc-js", 4))
        .await;
    env.apply(parent("test.gantry.dev/v1", "JsMemcached", "mc-js2", 1))
        .await;
    let jsmemcacheds = env.api(
        "test.gantry.dev/v1",
        "JsMemcached",
        "jsmemcacheds",
        Some("default"),
    );
    eventually("the old JS version scales mc-js", || async {
        let d = get_json(&deployments, "mc-js").await?;
        (d["spec"]["replicas"] == 4).then_some(())
    })
    .await;
    eventually("the old JS version serves a new parent", || async {
        let p = get_json(&jsmemcacheds, "mc-js2").await?;
        get_json(&deployments, "mc-js2").await?;
        (p.pointer("/status/gantry/pluginDigest")? == js_digest.as_str()).then_some(())
    })
    .await;
    assert_eq!(
        annotations(env.binding("memcached-js").await)["gantry.dev/plugin-digest"],
        js_digest
    );
    // Both downloads of the JS plugin are counted, the refused one as failed.
    let metrics = env.metrics.render();
    for line in [
        "gantry_plugin_fetches_total{binding=\"memcached-js\",outcome=\"ok\"} 1",
        "gantry_plugin_fetches_total{binding=\"memcached-js\",outcome=\"failed\"} 1",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
    env.stop().await;
}
