//! `gantry plugin crd` and `gantry plugin apply`:
//! a project made by `gantry plugin new` goes into service on a cluster
//! where `gantry run` serves, with the CRD derived from its Rust types; a
//! version the operator refuses is reported with the refusal; a policy
//! goes into service the same way; a Go component too large for a
//! ConfigMap is published to gantry dev's plugin store; an edit rolls out
//! with another apply.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gantry_test_support::output_text as text;
use std::sync::OnceLock;

use common::{Backend, NAMESPACE, backends, gantry_run, wait_for, wait_for_within};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

const GANTRY: &str = env!("CARGO_BIN_EXE_gantry");

/// A Rust project made by `gantry plugin new`, once per test binary.
fn scaffold() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("hello");
        let out = Command::new(GANTRY)
            .args(["plugin", "new", "--lang", "rust", "hello", "--dir"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The versions this tree is tested with.
        let workspace = gantry::toolchain::source_workspace_root();
        std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
        root
    })
    .path()
    .join("hello")
    .leak()
}

/// `gantry ARGS`, off the executor, with the workspace's target directory.
async fn gantry(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(GANTRY);
        command.args(&args);
        if std::env::var_os("CARGO_TARGET_DIR").is_none() {
            let target = gantry::toolchain::source_workspace_root().join("target");
            command.env("CARGO_TARGET_DIR", target);
        }
        command.output().unwrap()
    })
    .await
    .unwrap()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn plugin_crd_derives_the_schema_defaults_status_and_columns_from_the_rust_types() {
    let out = Command::new(GANTRY)
        .args(["plugin", "crd"])
        .arg(scaffold())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let crds = gantry::manifest::parse_objects(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_greeting_crd(&crds);
}

/// The Greeting CRD both scaffolds derive: schema with validation and a
/// default, the status subresource keeping the host's fields, and columns.
fn assert_greeting_crd(crds: &[Value]) {
    assert_eq!(crds.len(), 1, "{crds:?}");
    let crd = &crds[0];
    assert_eq!(crd["kind"], "CustomResourceDefinition");
    assert_eq!(crd["metadata"]["name"], "greetings.example.com");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1");
    assert_eq!(version["subresources"]["status"], json!({}));
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Who", "Message"]);
    let schema = &version["schema"]["openAPIV3Schema"]["properties"];
    assert_eq!(schema["spec"]["required"], json!(["who"]));
    assert_eq!(schema["spec"]["properties"]["who"]["minLength"], 1);
    assert_eq!(schema["spec"]["properties"]["punctuation"]["default"], "!");
    let status = &schema["status"]["properties"];
    for field in ["message", "conditions", "observedGeneration", "gantry"] {
        assert!(
            status.get(field).is_some(),
            "status.{field} missing: {status}"
        );
    }
    assert_eq!(
        status["gantry"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
}

/// Go: the same CRD from the types' kubebuilder markers, by controller-gen.
#[test]
fn plugin_crd_derives_the_go_crd_from_kubebuilder_markers() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hello-go");
    let out = Command::new(GANTRY)
        .args(["plugin", "new", "--lang", "go", "hello-go", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = Command::new(GANTRY)
        .args(["plugin", "crd"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let crds = gantry::manifest::parse_objects(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_greeting_crd(&crds);
}

#[test]
fn plugin_crd_says_so_when_a_project_ships_none() {
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("app.js"), "").unwrap();
    std::fs::write(empty.path().join("package.json"), "{}").unwrap();
    let out = Command::new(GANTRY)
        .args(["plugin", "crd"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(text(&out).contains("ships no CRD"), "{}", text(&out));
}

/// A cluster of `backend` with the operator's namespace and `gantry run`
/// serving it (`extra` flags added), logging into the returned directory.
async fn serving(
    backend: Backend,
    extra: &[&str],
) -> (
    common::Cluster,
    kube::Client,
    PathBuf,
    tempfile::TempDir,
    common::Process,
) {
    let (cluster, client, kubeconfig) = common::cluster(backend, None).await;
    gantry::dev::ensure_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut args = vec!["--health-addr", "off", "--metrics-addr", "off"];
    args.extend_from_slice(extra);
    let operator = gantry_run(
        &kubeconfig,
        &logs.path().join("gantry.log"),
        &args,
        &[],
        false,
    );
    (cluster, client, kubeconfig, logs, operator)
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_plugin_goes_into_service_with_plugin_apply_and_a_refused_version_says_why(
    backend: Backend,
) {
    let (_cluster, client, kubeconfig, logs, _operator) = serving(backend, &[]).await;
    let apply = |extra: &[&str]| {
        let mut args = strings(&["plugin", "apply"]);
        args.push(scaffold().display().to_string());
        args.extend(strings(&["--namespace", NAMESPACE, "--kubeconfig"]));
        args.push(kubeconfig.display().to_string());
        args.extend(strings(extra));
        args
    };

    // The CRD from the types, then the binding; the operator answers.
    let out = gantry(apply(&[])).await;
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("binding hello: plugin sha256:"), "{said}");
    assert!(
        said.contains("in service for example.com/v1/Greeting"),
        "{said}"
    );

    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Greeting"),
        "greetings",
    );
    let greetings: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let params = PatchParams::apply("test").force();
    // The schema holds: an empty `who` is refused by the API server.
    let invalid = json!({"apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "nobody", "namespace": "default"}, "spec": {"who": ""}});
    let refused = greetings
        .patch("nobody", &params, &Patch::Apply(&invalid))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 422),
        "{refused:?}"
    );
    let world = json!({"apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "world", "namespace": "default"}, "spec": {"who": "World"}});
    greetings
        .patch("world", &params, &Patch::Apply(&world))
        .await
        .unwrap();
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let message = wait_for("the greeting ConfigMap", async || {
        config_maps
            .get_opt("world-greeting")
            .await
            .ok()??
            .data?
            .remove("message")
    })
    .await;
    assert_eq!(message, "Hello, World!");
    // The default came from the schema, and status kept the host's fields.
    let greeting = wait_for("the Greeting's status", async || {
        let g = serde_json::to_value(greetings.get("world").await.ok()?).ok()?;
        g["status"]["conditions"].as_array()?;
        Some(g)
    })
    .await;
    assert_eq!(greeting["spec"]["punctuation"], "!");
    assert_eq!(greeting["status"]["message"], "Hello, World!");
    assert_eq!(greeting["status"]["observedGeneration"], 1);

    // The same version again: already in service.
    let out = gantry(apply(&[])).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("unchanged"), "{}", text(&out));

    // A config the plugin refuses: exit 4 with the operator's reason; the
    // version in service stays.
    let bad = logs.path().join("bad-binding.yaml");
    let binding = std::fs::read_to_string(scaffold().join("binding.yaml")).unwrap();
    std::fs::write(&bad, binding.replace("greeting: Hello", "greeting: \" \"")).unwrap();
    let out = gantry(apply(&[
        "--binding",
        bad.to_str().unwrap(),
        "--timeout-secs",
        "60",
    ]))
    .await;
    let said = text(&out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(
        said.contains("refused by the operator: InvalidConfig"),
        "{said}"
    );
    assert!(said.contains("config.greeting must not be empty"), "{said}");
    let world = json!({"apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "world", "namespace": "default"}, "spec": {"who": "Moon"}});
    greetings
        .patch("world", &params, &Patch::Apply(&world))
        .await
        .unwrap();
    wait_for(
        "the greeting, by the version still in service",
        async || {
            let data = config_maps.get_opt("world-greeting").await.ok()??.data?;
            (data.get("message")? == "Hello, Moon!").then_some(())
        },
    )
    .await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_goes_into_service_with_plugin_apply(backend: Backend) {
    let webhooks = ["--webhook-listen", "127.0.0.1:0"];
    let (_cluster, client, kubeconfig, logs, _operator) = serving(backend, &webhooks).await;
    let component = logs.path().join("disallow-privileged.wasm");
    std::fs::write(
        &component,
        gantry::toolchain::example_plugin("disallow-privileged").unwrap(),
    )
    .unwrap();
    let policy: PathBuf = gantry::examples::source_dir("disallow-privileged").join("policy.yaml");
    let mut args = strings(&["plugin", "apply"]);
    args.push(component.display().to_string());
    args.extend(strings(&["--binding"]));
    args.push(policy.display().to_string());
    args.extend(strings(&["--namespace", NAMESPACE, "--kubeconfig"]));
    args.push(kubeconfig.display().to_string());
    let out = gantry(args).await;
    let log = std::fs::read_to_string(logs.path().join("gantry.log")).unwrap_or_default();
    assert!(out.status.success(), "{}\ngantry run:\n{log}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "policy disallow-privileged sha256:{} in service",
            gantry::runtime::digest(&std::fs::read(&component).unwrap())
        )),
        "{}",
        text(&out)
    );
    let cm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let cm = cm.get("disallow-privileged").await.unwrap();
    assert_eq!(
        cm.metadata
            .labels
            .unwrap()
            .get("gantry.dev/policy")
            .map(String::as_str),
        Some("true")
    );
}

#[test]
fn plugin_apply_of_a_component_needs_a_binding() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(GANTRY)
        .args(["plugin", "apply"])
        .arg(file.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--binding"), "{}", text(&out));
}

/// A new project of `lang` (`rust` or `go`) named `name`, in a directory
/// of its own (the returned guard holds it).
fn new_project(lang: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(name);
    let out = Command::new(GANTRY)
        .args(["plugin", "new", "--lang", lang, name, "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    if lang == "rust" {
        let workspace = gantry::toolchain::source_workspace_root();
        std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    (root, dir)
}

/// Replace `from` with `to` in the project file `file`: an edit.
fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let source = std::fs::read_to_string(&path).unwrap();
    assert!(source.contains(from), "{from} in {}", path.display());
    std::fs::write(&path, source.replace(from, to)).unwrap();
}

/// The message of the greeting ConfigMap of Greeting `name`, once it is
/// `want`.
async fn greeting_becomes(client: &kube::Client, name: &str, want: &str) {
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    wait_for_within(
        std::time::Duration::from_mins(2),
        &format!("{name}-greeting says {want}"),
        async || {
            let data = config_maps
                .get_opt(&format!("{name}-greeting"))
                .await
                .ok()??
                .data?;
            (data.get("message")? == want).then_some(())
        },
    )
    .await;
}

async fn greet(client: &kube::Client, name: &str, who: &str) {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Greeting"),
        "greetings",
    );
    let greetings: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let greeting = json!({"apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"who": who}});
    greetings
        .patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&greeting),
        )
        .await
        .unwrap();
}

/// The digest `plugin apply` says is in service.
fn in_service(out: &Output) -> String {
    let said = text(out);
    assert!(out.status.success(), "{said}");
    let (_, rest) = said
        .split_once("plugin sha256:")
        .unwrap_or_else(|| panic!("no digest in {said}"));
    rest[..64].to_string()
}

/// A Go plugin (about 16 MB, more than a ConfigMap holds) goes into
/// service with one `plugin apply`, published to gantry dev's plugin
/// store; after an edit another apply rebuilds it, publishes and pins the
/// new digest and rolls it out. Without anywhere to publish, apply says
/// so with exit 6.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_plugin_too_large_for_a_config_map_is_published_and_an_edit_rolls_out(
    backend: Backend,
) {
    let (_cluster, client, kubeconfig, _logs, _operator) = serving(backend, &[]).await;
    let (_root, dir) = new_project("go", "hello-go");
    let apply = || {
        let mut args = strings(&["plugin", "apply"]);
        args.push(dir.display().to_string());
        // Fetching and compiling 16 MB takes a debug build a while.
        args.extend(strings(&["--timeout-secs", "600"]));
        args.extend(strings(&["--namespace", NAMESPACE, "--kubeconfig"]));
        args.push(kubeconfig.display().to_string());
        args
    };

    let out = gantry(apply()).await;
    let said = text(&out);
    assert_eq!(out.status.code(), Some(6), "{said}");
    assert!(said.contains("nowhere to publish it"), "{said}");
    assert!(said.contains("--registry"), "{said}");

    // What gantry dev does when it starts: serve the store, say where.
    let store = gantry::dev::components::store().unwrap();
    gantry::publish::place::advertise_store(&client, NAMESPACE, &store)
        .await
        .unwrap();
    let out = gantry(apply()).await;
    assert!(text(&out).contains("published sha256:"), "{}", text(&out));
    let first = in_service(&out);
    greet(&client, "world", "World").await;
    greeting_becomes(&client, "world", "Hello, World!").await;

    edit(&dir, "main.go", "\"%s, %s%s\"", "\"%s, dear %s%s\"");
    let out = gantry(apply()).await;
    let second = in_service(&out);
    assert_ne!(first, second, "{}", text(&out));
    greeting_becomes(&client, "world", "Hello, dear World!").await;
}

/// A Rust plugin fits in its ConfigMap: one apply, and after an edit
/// another rolls out the new digest.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_plugin_edit_rolls_out_with_another_apply(backend: Backend) {
    let (_cluster, client, kubeconfig, _logs, _operator) = serving(backend, &[]).await;
    let (_root, dir) = new_project("rust", "hello-rust");
    let apply = || {
        let mut args = strings(&["plugin", "apply"]);
        args.push(dir.display().to_string());
        args.extend(strings(&["--namespace", NAMESPACE, "--kubeconfig"]));
        args.push(kubeconfig.display().to_string());
        args
    };
    let first = in_service(&gantry(apply()).await);
    greet(&client, "moon", "Moon").await;
    greeting_becomes(&client, "moon", "Hello, Moon!").await;
    edit(
        &dir,
        "src/lib.rs",
        "\"{greeting}, {}{}\"",
        "\"{greeting}, dear {}{}\"",
    );
    let second = in_service(&gantry(apply()).await);
    assert_ne!(first, second);
    greeting_becomes(&client, "moon", "Hello, dear Moon!").await;
}
