//! `gantry plugin serve` and the harnesses on it: a plugin project in
//! service on a fresh embedded API server for a test. In Rust through
//! `gantry-envtest` (the memcached example: a Memcached gets its
//! Deployment), in Go through `gantry.dev/go-sdk/gantrytest` (its own test
//! serves the Guestbook example); and a project whose binding the operator
//! refuses ends the command with the refusal.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, PostParams};

const GANTRY: &str = env!("CARGO_BIN_EXE_gantry");

/// The memcached component, built as the other tests build it.
fn memcached_wasm(dir: &tempfile::TempDir) -> PathBuf {
    let bytes = gantry::toolchain::example_plugin("memcached").expect("memcached builds");
    let path = dir.path().join("memcached.wasm");
    std::fs::write(&path, bytes).unwrap();
    path
}

fn memcached_project() -> PathBuf {
    gantry::toolchain::source_workspace_root().join("plugins/memcached")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_test_gets_the_plugin_in_service_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = memcached_wasm(&dir);
    let started = Instant::now();
    let env = gantry_envtest::Env::builder(memcached_project())
        .gantry(GANTRY)
        .plugin(&wasm)
        .start()
        .expect("the plugin serves");
    eprintln!("memcached in service in {:?}", started.elapsed());
    assert_eq!(env.binding(), "memcached");
    assert_eq!(env.namespace(), "gantry-system");
    assert_eq!(
        env.sha256(),
        gantry::runtime::digest(&std::fs::read(&wasm).unwrap())
    );
    let client = env.client().await.unwrap();
    let memcached: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "cache", "namespace": "default"}, "spec": {"size": 2}}))
    .unwrap();
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "cache.example.com",
        "v1alpha1",
        "Memcached",
    ));
    let parents: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    parents
        .create(&PostParams::default(), &memcached)
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment = gantry_envtest::wait_for(Duration::from_mins(1), async || {
        deployments.get_opt("cache").await.ok().flatten()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", env.log()));
    assert_eq!(deployment.spec.unwrap().replicas, Some(2));
    let owner = &deployment.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Memcached", "cache")
    );

    // Dropped, the server goes: its address answers no more.
    let server = env.server().trim_start_matches("https://").to_string();
    drop(env);
    assert!(
        std::net::TcpStream::connect(&server).is_err(),
        "{server} still answers"
    );
}

#[test]
fn a_refused_binding_ends_serve_with_the_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = memcached_wasm(&dir);
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let binding = std::fs::read_to_string(memcached_project().join("binding.yaml")).unwrap();
    // The plugin's validate-config refuses an empty image.
    std::fs::write(
        project.join("binding.yaml"),
        binding.replace("image: memcached:1.6.26-alpine", "image: \" \""),
    )
    .unwrap();
    std::fs::copy(
        memcached_project().join("crd.yaml"),
        project.join("crd.yaml"),
    )
    .unwrap();
    let out = Command::new(GANTRY)
        .args(["plugin", "serve"])
        .arg(&project)
        .arg("--plugin")
        .arg(&wasm)
        .args(["--timeout-secs", "60"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("refused by the operator: InvalidConfig")
            && stderr.contains("config.image must not be empty"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no ready line");

    let gone = Command::new(GANTRY)
        .args(["plugin", "serve"])
        .arg(dir.path().join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(gone.status.code(), Some(2), "{gone:?}");
}

/// The Go harness's own test, with this gantry: `gantrytest.Start` on the
/// Guestbook example, a Guestbook created, its frontend Deployment seen.
#[test]
fn a_go_test_gets_the_plugin_in_service_and_its_children() {
    let root = gantry::toolchain::source_workspace_root();
    let out = Command::new("go")
        .args([
            "test",
            "-count=1",
            "-v",
            "-run",
            "TestGuestbookServesAndReconciles",
            "./gantrytest/",
        ])
        .current_dir(root.join("go-sdk"))
        .env("GANTRY", GANTRY)
        .env("GOTOOLCHAIN", gantry::toolchain::go::GO_TOOLCHAIN)
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .expect("go runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("--- PASS: TestGuestbookServesAndReconciles"),
        "the test ran and passed (not skipped):\n{report}"
    );
    eprintln!("{report}");
}
