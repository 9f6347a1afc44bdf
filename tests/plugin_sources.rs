//! Plugin sources: HTTP downloads against a local server, OCI artifacts
//! against Debian's docker-registry on loopback; both verified, cached by
//! digest, retried, size-capped.

use std::time::{Duration, Instant};

use gantry::delivery::source::{FetchError, FetchSettings, Fetcher, PluginSource, oci};
use gantry_tests::sources::{FileServer, Registry};
use gantry_tests::{Backend, backends};

fn settings(cache: &tempfile::TempDir) -> FetchSettings {
    FetchSettings {
        cache_dir: Some(cache.path().to_path_buf()),
        backoff_base: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        ..FetchSettings::default()
    }
}

fn url_source(url: String) -> PluginSource {
    PluginSource::Url {
        url,
        insecure: false,
    }
}

/// Bytes that stand for a component (the fetcher does not parse them).
fn component(size: usize, seed: u8) -> Vec<u8> {
    let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
    bytes.extend(
        (0..=u8::MAX)
            .cycle()
            .take(size)
            .map(|i| i.wrapping_mul(31).wrapping_add(seed)),
    );
    bytes
}

#[tokio::test]
async fn http_downloads_are_verified_cached_retried_and_capped() {
    let server = FileServer::start().await;
    let cache = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(settings(&cache));
    let bytes = component(12 << 20, 1);
    let digest = gantry::runtime::digest(&bytes);
    server.put("p.wasm", bytes.clone());

    // Two 503s, then the file: retried with backoff.
    server.fail_next(2);
    let started = Instant::now();
    let first = fetcher
        .fetch(&url_source(server.url("p.wasm")), Some(&digest))
        .await
        .expect("fetched after retries");
    let download = started.elapsed();
    assert_eq!(
        (first.component.bytes().len(), first.component.digest()),
        (bytes.len(), &digest[..])
    );
    assert!(!first.from_cache);
    assert_eq!(server.hits("p.wasm"), 3);
    let cached = cache.path().join("sha256").join(&digest);
    assert_eq!(std::fs::read(&cached).unwrap(), bytes);

    // Again: from the disk cache, no request.
    let started = Instant::now();
    let again = fetcher
        .fetch(&url_source(server.url("p.wasm")), Some(&digest))
        .await
        .unwrap();
    eprintln!(
        "12 MiB over loopback HTTP with 2 retries: {download:?}; from the disk cache: {:?}",
        started.elapsed()
    );
    assert!(again.from_cache);
    assert_eq!(server.hits("p.wasm"), 3);

    // A tampered cache entry is dropped and downloaded again.
    std::fs::write(&cached, b"tampered").unwrap();
    let healed = fetcher
        .fetch(&url_source(server.url("p.wasm")), Some(&digest))
        .await
        .unwrap();
    assert!(!healed.from_cache);
    assert_eq!(server.hits("p.wasm"), 4);

    // A pin that does not match: refused, nothing cached, no retry.
    let other = component(1000, 2);
    server.put("other.wasm", other);
    let wrong = "0".repeat(64);
    let err = fetcher
        .fetch(&url_source(server.url("other.wasm")), Some(&wrong))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::DigestMismatch { .. }), "{err}");
    assert!(!err.is_transient());
    assert_eq!(server.hits("other.wasm"), 1);
    assert!(!cache.path().join("sha256").join(&wrong).exists());

    // 404: not retried.
    let err = fetcher
        .fetch(
            &url_source(server.url("missing.wasm")),
            Some(&digest[..].replace('a', "b")),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Status { status: 404, .. }),
        "{err}"
    );
    assert_eq!(server.hits("missing.wasm"), 1);

    // Always 503: gives up after the configured tries, transiently.
    server.fail_next(usize::MAX);
    let err = fetcher
        .fetch(&url_source(server.url("flaky.wasm")), Some(&wrong))
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::GaveUp { attempts: 4, .. }),
        "{err}"
    );
    assert!(err.is_transient());
    assert_eq!(server.hits("flaky.wasm"), 4);
    server.fail_next(0);

    // Larger than the cap: refused while streaming.
    let small = Fetcher::new(FetchSettings {
        max_bytes: 1 << 20,
        cache_dir: None,
        ..settings(&cache)
    });
    let big = component(2 << 20, 3);
    let big_digest = gantry::runtime::digest(&big);
    server.put("big.wasm", big);
    let err = small
        .fetch(&url_source(server.url("big.wasm")), Some(&big_digest))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::TooLarge { .. }), "{err}");

    // Redirects: followed on loopback, never downgraded to plain http
    // elsewhere.
    server.redirect("moved.wasm", &server.url("p.wasm"));
    let moved = Fetcher::new(FetchSettings {
        cache_dir: None,
        ..settings(&cache)
    })
    .fetch(&url_source(server.url("moved.wasm")), Some(&digest))
    .await
    .expect("a loopback redirect is followed");
    assert_eq!(moved.component.bytes().len(), bytes.len());
    server.redirect("away.wasm", "http://plugins.example.com/p.wasm");
    let err = small
        .fetch(&url_source(server.url("away.wasm")), Some(&digest))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not https"), "{err}");
    assert_eq!(
        server.hits("away.wasm"),
        1,
        "a refused redirect is not retried"
    );

    // Nothing listening: a transport error, transient.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/p.wasm", closed.local_addr().unwrap());
    drop(closed);
    let err = small
        .fetch(&url_source(dead), Some(&big_digest))
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn oci_artifacts_are_pushed_resolved_verified_and_cached() {
    let Some(mut registry) = Registry::start().await else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let settings = settings(&cache);
    let fetcher = Fetcher::new(settings.clone());
    let bytes = component(8 << 20, 4);
    let digest = gantry::runtime::digest(&bytes);

    let reference = format!("{}/plugins/memcached:v1", registry.host);
    let started = Instant::now();
    let pushed = oci::push(bytes.clone(), &reference, true, &settings)
        .await
        .expect("push");
    eprintln!(
        "pushed 8 MiB in {:?}: {}",
        started.elapsed(),
        pushed.reference
    );
    assert_eq!(pushed.component_sha256, digest);
    assert!(pushed.reference.starts_with(&format!(
        "oci://{}/plugins/memcached@sha256:",
        registry.host
    )));

    // By tag, without a pin: resolved to the manifest digest.
    let by_tag = PluginSource::Oci {
        reference: reference.clone(),
        insecure: true,
    };
    let started = Instant::now();
    let pulled = fetcher.fetch(&by_tag, None).await.expect("pull by tag");
    eprintln!(
        "pulled 8 MiB from the loopback registry in {:?}",
        started.elapsed()
    );
    assert_eq!(pulled.component.bytes(), bytes);
    assert_eq!(pulled.component.digest(), digest);
    assert!(!pulled.from_cache);
    assert_eq!(pulled.resolved.as_deref(), Some(pushed.reference.as_str()));

    // The CNCF Wasm artifact layout.
    let client = oci::client(&reference, true, &settings);
    let (manifest, _) = client
        .pull_image_manifest(
            &reference.parse().unwrap(),
            &oci_client::secrets::RegistryAuth::Anonymous,
        )
        .await
        .unwrap();
    assert_eq!(manifest.config.media_type, oci::WASM_CONFIG_MEDIA_TYPE);
    assert_eq!(manifest.layers.len(), 1);
    assert_eq!(manifest.layers[0].media_type, "application/wasm");

    // Again, unpinned: the tag is resolved, the layer comes from the cache.
    let again = fetcher.fetch(&by_tag, None).await.unwrap();
    assert!(again.from_cache);
    assert_eq!(again.resolved.as_deref(), Some(pushed.reference.as_str()));

    // A pin the layer does not match: refused before downloading.
    let err = fetcher
        .fetch(&by_tag, Some(&"1".repeat(64)))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::DigestMismatch { .. }), "{err}");

    // A tag that does not exist: refused, not retried for ever.
    let missing = PluginSource::Oci {
        reference: format!("{}/plugins/memcached:nope", registry.host),
        insecure: true,
    };
    let err = fetcher.fetch(&missing, None).await.unwrap_err();
    assert!(!err.is_transient(), "{err}");

    // Too large for the cap: refused from the manifest's size.
    let small = Fetcher::new(FetchSettings {
        max_bytes: 1 << 20,
        cache_dir: None,
        ..settings.clone()
    });
    let err = small.fetch(&by_tag, None).await.unwrap_err();
    assert!(matches!(err, FetchError::TooLarge { .. }), "{err}");

    // Pinned and cached, by digest or by tag: served from the cache with
    // the registry gone (an operator restart does not need it).
    let by_digest = PluginSource::Oci {
        reference: pushed.reference.trim_start_matches("oci://").to_string(),
        insecure: true,
    };
    registry.kill();
    let offline = fetcher.fetch(&by_digest, Some(&digest)).await.unwrap();
    assert!(offline.from_cache);
    assert_eq!(offline.component.bytes(), bytes);
    assert_eq!(offline.resolved.as_deref(), Some(pushed.reference.as_str()));
    let offline = fetcher.fetch(&by_tag, Some(&digest)).await.unwrap();
    assert!(offline.from_cache);
    // Unpinned, a tag needs the registry: a transient failure.
    let err = fetcher.fetch(&by_tag, None).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn an_oci_image_that_is_not_a_wasm_artifact_is_refused() {
    use oci_client::client::{Config, ImageLayer};
    use oci_client::secrets::RegistryAuth;
    let Some(registry) = Registry::start().await else {
        return;
    };
    let reference: oci_client::Reference = format!("{}/images/tarball:v1", registry.host)
        .parse()
        .unwrap();
    let client = oci::client(&reference.whole(), true, &FetchSettings::default());
    let layers = vec![ImageLayer::new(
        b"not wasm".to_vec(),
        "application/vnd.oci.image.layer.v1.tar".to_string(),
        None,
    )];
    let config = Config {
        data: b"{}".to_vec().into(),
        media_type: "application/vnd.oci.image.config.v1+json".to_string(),
        annotations: None,
    };
    client
        .push(&reference, &layers, config, &RegistryAuth::Anonymous, None)
        .await
        .expect("push an image");
    let cache = tempfile::tempdir().unwrap();
    let err = Fetcher::new(settings(&cache))
        .fetch(
            &PluginSource::Oci {
                reference: reference.whole(),
                insecure: true,
            },
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::NotWasmArtifact(_)), "{err}");
    assert!(err.to_string().contains("application/wasm"), "{err}");

    // The older wasm-to-oci layout is still read.
    let legacy: oci_client::Reference = format!("{}/plugins/legacy:v1", registry.host)
        .parse()
        .unwrap();
    let bytes = component(1000, 5);
    let layers = vec![ImageLayer::new(
        bytes.clone(),
        oci::LEGACY_WASM_LAYER_MEDIA_TYPE.to_string(),
        None,
    )];
    let config = Config {
        data: b"{}".to_vec().into(),
        media_type: oci_client::manifest::WASM_CONFIG_MEDIA_TYPE.to_string(),
        annotations: None,
    };
    client
        .push(&legacy, &layers, config, &RegistryAuth::Anonymous, None)
        .await
        .expect("push a legacy artifact");
    let fetched = Fetcher::new(settings(&cache))
        .fetch(
            &PluginSource::Oci {
                reference: legacy.whole(),
                insecure: true,
            },
            None,
        )
        .await
        .expect("legacy layout");
    assert_eq!(fetched.component.bytes(), bytes);
}

#[tokio::test]
async fn plugin_push_publishes_a_component_that_binds_by_digest() {
    use clap::Parser;
    let Some(registry) = Registry::start().await else {
        return;
    };
    let component = gantry::toolchain::example_plugin("memcached").expect("Rust plugin");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memcached.wasm");
    std::fs::write(&file, &component).unwrap();
    let reference = format!("oci://{}/plugins/memcached:cli", registry.host);
    let run = |args: Vec<String>| {
        // The CLI runs its own runtime: call it from a plain thread.
        std::thread::spawn(move || {
            let cli = gantry::cli::Cli::parse_from(args);
            format!("{:?}", gantry::cli::run(cli))
        })
        .join()
        .unwrap()
    };
    let gantry = |rest: &[&str]| {
        std::iter::once("gantry")
            .chain(rest.iter().copied())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let ok = format!("{:?}", std::process::ExitCode::SUCCESS);
    let file_arg = file.to_str().unwrap();
    assert_eq!(run(gantry(&["plugin", "push", file_arg, &reference])), ok);

    // What was pushed binds: by tag, verified against the component's digest.
    let cache = tempfile::tempdir().unwrap();
    let fetched = Fetcher::new(settings(&cache))
        .fetch(
            &PluginSource::Oci {
                reference: reference.trim_start_matches("oci://").to_string(),
                insecure: true,
            },
            Some(&gantry::runtime::digest(&component)),
        )
        .await
        .expect("pull what plugin push published");
    assert_eq!(fetched.component.bytes(), component);

    // `plugin run` takes the artifact itself.
    let parent = gantry::examples::source_dir("memcached").join("example.yaml");
    assert_eq!(
        run(gantry(&[
            "plugin",
            "run",
            "--plugin",
            &reference,
            "--parent",
            parent.to_str().unwrap(),
            "--no-cache",
        ])),
        ok
    );

    // So does `policy run`, for a policy.
    let policy = gantry::toolchain::example_plugin("disallow-privileged").expect("policy");
    let policy_file = dir.path().join("disallow-privileged.wasm");
    std::fs::write(&policy_file, &policy).unwrap();
    let policy_reference = format!("oci://{}/policies/disallow-privileged:cli", registry.host);
    assert_eq!(
        run(gantry(&[
            "plugin",
            "push",
            policy_file.to_str().unwrap(),
            &policy_reference
        ])),
        ok
    );
    let request = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../host/tests/fixtures/admission/pod-privileged-create.json");
    assert_eq!(
        run(gantry(&[
            "policy",
            "run",
            "--plugin",
            &policy_reference,
            "--request",
            request.to_str().unwrap(),
            "--no-cache",
        ])),
        ok
    );

    // Not a component; not a tag; no registry host: refused before pushing.
    let module = dir.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    assert_ne!(
        run(gantry(&[
            "plugin",
            "push",
            module.to_str().unwrap(),
            &reference
        ])),
        ok
    );
    let by_digest = format!("{reference}@sha256:{}", "a".repeat(64));
    assert_ne!(run(gantry(&["plugin", "push", file_arg, &by_digest])), ok);
    assert_ne!(
        run(gantry(&["plugin", "push", file_arg, "oci://memcached:v1"])),
        ok
    );
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_download_does_not_hold_up_other_bindings(backend: Backend) {
    use gantry_tests::{BINDINGS_NS, Env, eventually, get_json};
    let server = FileServer::start().await;
    server.stall("stuck.wasm");
    let cache = tempfile::tempdir().unwrap();
    let env = Env::start_with(
        backend,
        gantry::controller::OperatorOptions {
            plugin_sources: settings(&cache),
            ..Default::default()
        },
    )
    .await;
    // A binding whose plugin never arrives...
    let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
    cm.metadata.name = Some("stuck".into());
    cm.metadata.namespace = Some(BINDINGS_NS.into());
    cm.metadata.labels = Some([("gantry.dev/plugin".to_string(), "true".to_string())].into());
    let binding = format!(
        "name: stuck\nparent: {{apiVersion: test.gantry.dev/v1, kind: Widget}}\nsha256: {}\nsource: {{url: \"{}\"}}\n",
        "c".repeat(64),
        server.url("stuck.wasm")
    );
    cm.data = Some([("binding.yaml".to_string(), binding)].into());
    gantry::dev::apply_binding(&env.client, &cm).await.unwrap();
    eventually("the stuck download started", || async {
        (server.hits("stuck.wasm") > 0).then_some(())
    })
    .await;
    // ...while another binding goes into service and reconciles.
    env.install_example("memcached").await;
    env.apply(serde_json::json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": "default"},
        "spec": {"size": 1, "containerPort": 11211}
    }))
    .await;
    let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));
    eventually("memcached reconciles beside a hanging download", || async {
        get_json(&deployments, "mc").await
    })
    .await;
    eventually("memcached counted in service", || async {
        (env.metrics.active_bindings() == 1).then_some(())
    })
    .await;
    assert_eq!(server.hits("stuck.wasm"), 1, "still on its first try");
    env.stop().await;
}

/// `component` with a custom section of `size` bytes that do not
/// compress: still the same component to the runtime, but too large for a
/// ConfigMap.
fn padded(component: &[u8], size: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut payload = vec![3u8];
    payload.extend_from_slice(b"pad");
    payload.extend((0..size).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state.to_le_bytes()[0]
    }));
    let mut out = component.to_vec();
    out.push(0); // a custom section
    let mut length = payload.len();
    loop {
        let byte = u8::try_from(length & 0x7f).unwrap();
        length >>= 7;
        if length == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend(payload);
    out
}

/// `plugin apply --registry`: a component no ConfigMap holds is pushed to
/// the registry, bound by manifest digest and sha256 pin, and served; the
/// registry is remembered, so the next apply (a new version) needs no flag.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_apply_publishes_to_the_registry_named_once(backend: Backend) {
    use clap::Parser;
    let Some(registry) = Registry::start().await else {
        return;
    };
    let env = gantry_tests::Env::start(backend).await;
    env.install_example("memcached").await;
    let memcached = gantry::toolchain::example_plugin("memcached").expect("Rust plugin");
    let dir = tempfile::tempdir().unwrap();
    let binding = gantry::examples::source_dir("memcached").join("binding.yaml");
    let kubeconfig = env.server.kubeconfig().to_path_buf();
    let apply = |seed: u64, extra: &[&str]| {
        let file = dir.path().join(format!("memcached-{seed}.wasm"));
        std::fs::write(&file, padded(&memcached, 2 << 20, seed)).unwrap();
        let mut args: Vec<String> = ["gantry", "plugin", "apply"]
            .iter()
            .map(|s| (*s).to_string())
            .collect();
        args.push(file.display().to_string());
        for arg in [
            "--binding",
            binding.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--namespace",
            gantry_tests::BINDINGS_NS,
        ]
        .iter()
        .chain(extra)
        {
            args.push((*arg).to_string());
        }
        let digest = gantry::runtime::digest(&std::fs::read(&file).unwrap());
        // The CLI runs its own runtime: call it from a plain thread.
        let code = std::thread::spawn(move || {
            format!("{:?}", gantry::cli::run(gantry::cli::Cli::parse_from(args)))
        });
        (code, digest)
    };
    let ok = format!("{:?}", std::process::ExitCode::SUCCESS);
    let registry_flag = format!("oci://{}/plugins", registry.host);
    for (seed, extra) in [(1, vec!["--registry", registry_flag.as_str()]), (2, vec![])] {
        let (code, digest) = apply(seed, &extra);
        let code = tokio::task::spawn_blocking(move || code.join().unwrap())
            .await
            .unwrap();
        assert_eq!(code, ok, "apply {seed}");
        let cm = env.binding("memcached").await;
        let document = &cm.data.as_ref().unwrap()["binding.yaml"];
        let spec: serde_json::Value = serde_yaml::from_str(document).unwrap();
        assert_eq!(spec["sha256"], digest.as_str(), "{document}");
        let oci = spec["source"]["oci"].as_str().unwrap();
        assert!(
            oci.starts_with(&format!(
                "oci://{}/plugins/memcached@sha256:",
                registry.host
            )),
            "{oci}"
        );
        assert!(cm.binary_data.unwrap_or_default().is_empty());
        gantry_tests::eventually("the new digest in service", || async {
            let cm = env.binding("memcached").await;
            (cm.metadata.annotations?.get("gantry.dev/plugin-digest")? == &digest).then_some(())
        })
        .await;
    }
}
