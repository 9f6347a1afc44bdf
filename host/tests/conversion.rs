//! CRD conversion as a WebAssembly function, end to end
//! on both backends: `gantry plugin apply` binds the `myresource-converter`
//! example, `gantry run` serves it at `/convert/<crd>` and points the CRD's
//! `spec.conversion` at it, and the API server converts `MyResource` between
//! v1alpha1 and v1 through it. A conversion that fails answers with the
//! converter's message and leaves the stored object as it was; a new
//! version that loses data is refused by its shadow run.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Backend, NAMESPACE, backends, gantry_run, wait_for};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use serde_json::{Value, json};

const GANTRY: &str = env!("CARGO_BIN_EXE_gantry");
const CRD: &str = "myresources.example.com";

fn example(file: &str) -> PathBuf {
    gantry::toolchain::source_workspace_root()
        .join("plugins/myresource-converter")
        .join(file)
}

/// The built component of example plugin `name`.
fn component(name: &str) -> PathBuf {
    gantry::toolchain::example_plugins()
        .unwrap()
        .join(format!("{}.wasm", name.replace('-', "_")))
}

fn api(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "MyResource"),
        "myresources",
    );
    Api::namespaced_with(client.clone(), "default", &resource)
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Result<Value, kube::Error> {
    api.get(name)
        .await
        .map(|o| serde_json::to_value(o).unwrap())
}

/// `gantry plugin apply WASM --binding converter.yaml [--crd crd.yaml]`:
/// (exit code, stdout and stderr).
async fn plugin_apply(kubeconfig: &std::path::Path, wasm: PathBuf, crd: bool) -> (i32, String) {
    let mut command = Command::new(GANTRY);
    command
        .args(["plugin", "apply"])
        .arg(wasm)
        .arg("--binding")
        .arg(example("converter.yaml"))
        .args([
            "--namespace",
            NAMESPACE,
            "--timeout-secs",
            "60",
            "--kubeconfig",
        ])
        .arg(kubeconfig);
    if crd {
        command.arg("--crd").arg(example("crd.yaml"));
    }
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// `gantry run` on the cluster of `kubeconfig` with its webhook server on
/// loopback, keeping CRDs' `spec.conversion` in step; its log is
/// `gantry.log` in the directory returned.
async fn serve_webhooks(
    client: &kube::Client,
    kubeconfig: &std::path::Path,
) -> (common::Process, tempfile::TempDir) {
    gantry::dev::ensure_namespace(client, NAMESPACE)
        .await
        .unwrap();
    let logs = tempfile::tempdir().unwrap();
    let operator = gantry_run(
        kubeconfig,
        &logs.path().join("gantry.log"),
        &[
            "--health-addr",
            "off",
            "--metrics-addr",
            "off",
            "--webhook-listen",
            "127.0.0.1:0",
            "--sync-webhook-configurations",
        ],
        &[],
        false,
    );
    (operator, logs)
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn myresource_converts_between_v1alpha1_and_v1_through_the_plugin(backend: Backend) {
    let (_cluster, client, kubeconfig) = common::cluster(backend, None).await;
    let (_operator, logs) = serve_webhooks(&client, &kubeconfig).await;
    let log = || std::fs::read_to_string(logs.path().join("gantry.log")).unwrap_or_default();

    // The CRD, then the converter; the operator answers, and points the
    // CRD at its webhook.
    let (code, said) = plugin_apply(&kubeconfig, component("myresource-converter"), true).await;
    assert_eq!(code, 0, "{said}\n{}", log());
    assert!(
        said.contains(&format!("converter for {CRD} sha256:")),
        "{said}"
    );
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    wait_for("the CRD's conversion webhook", || async {
        let crd = get(&crds, CRD).await.ok()?;
        let conversion = &crd["spec"]["conversion"];
        (conversion["strategy"] == "Webhook"
            && conversion["webhook"]["clientConfig"]["url"]
                .as_str()?
                .ends_with(&format!("/convert/{CRD}")))
        .then_some(())
    })
    .await;

    // Created as v1alpha1, stored as v1: read as v1, renamed and split.
    let (alpha, v1) = (api(&client, "v1alpha1"), api(&client, "v1"));
    let created: Value =
        serde_yaml::from_str(&std::fs::read_to_string(example("example.yaml")).unwrap()).unwrap();
    alpha
        .create(
            &PostParams::default(),
            &serde_json::from_value(created.clone()).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("create at v1alpha1: {e}\n{}", log()));
    let at_v1 = get(&v1, "web").await.unwrap();
    assert_eq!(at_v1["apiVersion"], "example.com/v1");
    assert_eq!(
        at_v1["spec"],
        json!({"instances": 3, "owner": "platform-team", "image": {
            "repository": "registry.example.com:5000/web", "tag": "1.4"}})
    );

    // Written back as v1 unchanged, read as v1alpha1: as it was created.
    let written = v1
        .replace(
            "web",
            &PostParams::default(),
            &serde_json::from_value(at_v1.clone()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(written.metadata.name.as_deref(), Some("web"));
    let back = get(&alpha, "web").await.unwrap();
    assert_eq!(back["spec"], created["spec"]);
    assert_eq!(back["apiVersion"], "example.com/v1alpha1");

    // A field only v1 has survives a write at v1alpha1.
    let mut paused = get(&v1, "web").await.unwrap();
    paused["spec"]["paused"] = true.into();
    v1.replace(
        "web",
        &PostParams::default(),
        &serde_json::from_value(paused).unwrap(),
    )
    .await
    .unwrap();
    let mut older = get(&alpha, "web").await.unwrap();
    assert!(older["spec"].get("paused").is_none(), "{older}");
    older["spec"]["replicas"] = 5.into();
    alpha
        .replace(
            "web",
            &PostParams::default(),
            &serde_json::from_value(older).unwrap(),
        )
        .await
        .unwrap();
    let newer = get(&v1, "web").await.unwrap();
    assert_eq!(newer["spec"]["instances"], 5);
    assert_eq!(newer["spec"]["paused"], true, "{newer}");
    assert!(
        newer["metadata"]["annotations"]
            .get("myresource.example.com/v1-fields")
            .is_none(),
        "{newer}"
    );

    // Lists convert too.
    let listed = alpha.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.items[0].data["spec"]["image"],
        "registry.example.com:5000/web:1.4"
    );

    // An object the converter cannot take to v1alpha1: reading it there
    // fails with the converter's message; at v1 it is as stored.
    let mut bad = get(&v1, "web").await.unwrap();
    bad["metadata"] = json!({"name": "bad", "namespace": "default"});
    bad["spec"]["image"]["repository"] = "web:2".into();
    v1.create(
        &PostParams::default(),
        &serde_json::from_value(bad).unwrap(),
    )
    .await
    .unwrap();
    let error = get(&alpha, "bad").await.unwrap_err().to_string();
    assert!(error.contains("must not carry a tag or digest"), "{error}");
    assert_eq!(
        get(&v1, "bad").await.unwrap()["spec"]["image"]["repository"],
        "web:2"
    );
    v1.delete("bad", &DeleteParams::default()).await.unwrap();

    // A new version that loses spec.owner on a round trip: its shadow run
    // names the object and refuses it; the old version keeps serving.
    let mut marked = get(&v1, "web").await.unwrap();
    marked["metadata"] = json!({"name": "marked", "namespace": "default",
        "annotations": {"hostile.gantry.dev/convert": "lossy"}});
    v1.create(
        &PostParams::default(),
        &serde_json::from_value(marked).unwrap(),
    )
    .await
    .unwrap();
    let (code, said) = plugin_apply(&kubeconfig, component("hostile-converter"), false).await;
    assert_eq!(code, 4, "{said}");
    assert!(said.contains("ShadowRunFailed"), "{said}");
    assert!(
        said.contains("default/marked via example.com/v1alpha1")
            && said.contains(".spec.owner is lost"),
        "{said}"
    );
    let still = get(&alpha, "marked").await.unwrap();
    assert_eq!(still["spec"]["owner"], "platform-team");
}

/// `gantry convert run` with `args`: (exit code, stdout, stderr).
fn convert_run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(GANTRY)
        .args(["convert", "run"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn convert_run_is_the_local_loop() {
    let converter = component("myresource-converter");
    let converter = converter.to_str().unwrap();
    let objects = example("example.yaml");
    let objects = objects.to_str().unwrap();
    let (code, out, err) = convert_run(&[
        "--plugin",
        converter,
        "--objects",
        objects,
        "--to",
        "example.com/v1",
        "--round-trip",
    ]);
    assert_eq!(code, 0, "{err}");
    let at_v1: Value = serde_yaml::from_str(out.trim_start_matches("---\n")).unwrap();
    assert_eq!(at_v1["spec"]["instances"], 3);
    assert_eq!(at_v1["spec"]["image"]["tag"], "1.4");
    assert!(err.contains("every object came back unchanged"), "{err}");

    // Objects of another group are refused before the plugin runs.
    let (code, _, err) = convert_run(&[
        "--plugin",
        converter,
        "--objects",
        objects,
        "--to",
        "other.dev/v1",
    ]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("not in group other.dev"), "{err}");

    // A hostile converter: each misdeed is named, with its exit code.
    let hostile = component("hostile-converter");
    let dir = tempfile::tempdir().unwrap();
    let marked = |mode: &str| {
        let path = dir.path().join(format!("{mode}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: example.com/v1alpha1\nkind: MyResource\nmetadata:\n  name: {mode}\n  namespace: default\n  annotations: {{hostile.gantry.dev/convert: {mode}}}\nspec: {{owner: ops}}\n"
            ),
        )
        .unwrap();
        path
    };
    let run = |mode: &str, extra: &[&str]| {
        let path = marked(mode);
        let mut args = vec![
            "--plugin",
            hostile.to_str().unwrap(),
            "--objects",
            path.to_str().unwrap(),
            "--to",
            "example.com/v1",
        ];
        args.extend_from_slice(extra);
        convert_run(&args)
    };
    let (code, _, err) = run("trap", &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("hostile converter traps on purpose"), "{err}");
    let (code, _, err) = run("spin", &["--deadline-ms", "200"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("deadline"), "{err}");
    let (code, _, err) = run("kind", &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("came back as kind \"Other\""), "{err}");
    let (code, _, err) = run("lossy", &["--round-trip"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("round trip failed: default/lossy: the round trip through example.com/v1 is not lossless: .spec.owner is lost"),
        "{err}"
    );
}

/// `gantry plugin new --converter`: the project's own test passes out of
/// the box, and `gantry plugin apply DIR` builds it, installs its
/// two-version CRD and puts it into service, after which the API server
/// converts Greetings through it.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaffolded_converter_passes_its_test_and_goes_into_service(backend: Backend) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("greeting-converter");
    let workspace = gantry::toolchain::source_workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), PathBuf::from);
    let run = |program: &std::path::Path, args: &[&std::ffi::OsStr]| {
        let out = Command::new(program)
            .args(args)
            .env("GANTRY", GANTRY)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), said)
    };
    let (code, said) = run(
        GANTRY.as_ref(),
        &[
            "plugin".as_ref(),
            "new".as_ref(),
            "--converter".as_ref(),
            "greeting-converter".as_ref(),
            "--dir".as_ref(),
            dir.as_os_str(),
        ],
    );
    assert_eq!(code, 0, "{said}");
    for file in ["converter.yaml", "crd.yaml", "src/lib.rs", "test.sh"] {
        assert!(dir.join(file).is_file(), "{file} not written: {said}");
    }
    // The versions this tree is tested with, and no registry lookup.
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let (code, said) = tokio::task::block_in_place(|| run(&dir.join("test.sh"), &[]));
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("round trips are lossless"), "{said}");

    let (_cluster, client, kubeconfig) = common::cluster(backend, None).await;
    let (_operator, logs) = serve_webhooks(&client, &kubeconfig).await;
    let log = || std::fs::read_to_string(logs.path().join("gantry.log")).unwrap_or_default();
    let (code, said) = tokio::task::block_in_place(|| {
        run(
            GANTRY.as_ref(),
            &[
                "plugin".as_ref(),
                "apply".as_ref(),
                dir.as_os_str(),
                "--namespace".as_ref(),
                NAMESPACE.as_ref(),
                "--timeout-secs".as_ref(),
                "60".as_ref(),
                "--kubeconfig".as_ref(),
                kubeconfig.as_os_str(),
            ],
        )
    });
    assert_eq!(code, 0, "{said}\n{}", log());
    assert!(
        said.contains("converter for greetings.example.com sha256:"),
        "{said}"
    );

    // Written at v1 with the field v1alpha1 lacks, read at v1alpha1 once
    // the operator has pointed the CRD at the converter.
    let resource = |version: &str| {
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            "default",
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("example.com", version, "Greeting"),
                "greetings",
            ),
        )
    };
    let (alpha, v1) = (resource("v1alpha1"), resource("v1"));
    let greeting = json!({"apiVersion": "example.com/v1", "kind": "Greeting",
        "metadata": {"name": "formal", "namespace": "default"},
        "spec": {"who": "everyone", "style": "formal"}});
    v1.create(
        &PostParams::default(),
        &serde_json::from_value(greeting).unwrap(),
    )
    .await
    .unwrap_or_else(|e| panic!("create at v1: {e}\n{}", log()));
    let older = wait_for("the Greeting converted to v1alpha1", || async {
        get(&alpha, "formal")
            .await
            .ok()
            .filter(|older| older["spec"].get("name").is_some())
    })
    .await;
    assert_eq!(older["spec"], json!({"name": "everyone"}), "{older}");
    assert_eq!(
        older["metadata"]["annotations"]["greetings.example.com/v1-fields"],
        r#"{"style":"formal"}"#
    );
    let newer = get(&v1, "formal").await.unwrap();
    assert_eq!(newer["spec"], json!({"who": "everyone", "style": "formal"}));
}

/// The Go port of the converter (`plugins/myresource-converter-go`, on the
/// Go SDK's converter package), built from its source directory by
/// `gantry convert run`: the Rust converter's answers, a lossless round
/// trip, and a refusal that names the object.
#[test]
fn convert_run_builds_and_runs_a_go_converter() {
    let go = gantry::toolchain::source_workspace_root().join("plugins/myresource-converter-go");
    let go = go.to_str().unwrap();
    let rust = component("myresource-converter");
    let objects = example("example.yaml");
    let objects = objects.to_str().unwrap();
    let run = |plugin: &str, objects: &str, to: &str| {
        convert_run(&[
            "--plugin",
            plugin,
            "--objects",
            objects,
            "--to",
            to,
            "--round-trip",
            "--deadline-ms",
            "10000",
        ])
    };
    let parse =
        |out: &str| -> Value { serde_yaml::from_str(out.trim_start_matches("---\n")).unwrap() };
    let (code, go_v1, err) = run(go, objects, "example.com/v1");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("every object came back unchanged"), "{err}");
    let (code, rust_v1, err) = run(rust.to_str().unwrap(), objects, "example.com/v1");
    assert_eq!(code, 0, "{err}");
    let at_v1 = parse(&go_v1);
    assert_eq!(at_v1, parse(&rust_v1));
    assert_eq!(
        at_v1["spec"]["image"],
        json!({"repository": "registry.example.com:5000/web", "tag": "1.4"})
    );

    // Down from v1 with a field v1alpha1 lacks, and back: lossless.
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, spec: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: example.com/v1\nkind: MyResource\nmetadata:\n  name: {name}\n  namespace: default\nspec: {spec}\n"
            ),
        )
        .unwrap();
        path
    };
    let paused = write(
        "paused",
        "{instances: 2, paused: true, image: {repository: web, digest: 'sha256:1'}}",
    );
    let (code, at_alpha, err) = run(go, paused.to_str().unwrap(), "example.com/v1alpha1");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("every object came back unchanged"), "{err}");
    let at_alpha = parse(&at_alpha);
    assert_eq!(
        at_alpha["spec"],
        json!({"replicas": 2, "image": "web@sha256:1"})
    );
    assert_eq!(
        at_alpha["metadata"]["annotations"]["myresource.example.com/v1-fields"],
        r#"{"paused":true}"#
    );

    // What cannot be converted is refused, naming the object.
    let tagged = write("tagged", "{image: {repository: 'web:2'}}");
    let (code, _, err) = run(go, tagged.to_str().unwrap(), "example.com/v1alpha1");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            r#"default/tagged: spec.image.repository "web:2" must not carry a tag or digest"#
        ),
        "{err}"
    );
}
