//! `gantry dev --kubeconfig`: the main job against an existing cluster of
//! either backend. The example CRDs, bindings (Guestbook's, in Go, by URL
//! from a loopback server of `gantry dev`), samples and admission policies
//! go in, the operator reconciles the samples, and the cluster's
//! own API server calls Gantry's webhooks on loopback. A later start leaves
//! what the user changed or deleted as it is, and `--reset` starts over.

mod common;

use std::process::{Command, Stdio};

use common::{Backend, Cluster, Process, backends, sigterm, wait_for, wait_for_within};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_the_examples_and_policies_on_an_existing_cluster(backend: Backend) {
    // Guestbook is built with Go and compiled into the compile cache that
    // `gantry dev` uses first, so that neither a cold Go build nor
    // compiling its 16 MB component holds up what the waits below expect.
    tokio::task::spawn_blocking(|| {
        let built = gantry::toolchain::go::build_plugin(&gantry::examples::source_dir("guestbook"))
            .expect("the Guestbook plugin builds");
        let runtime = gantry::runtime::Runtime::new(gantry::runtime::RuntimeSettings {
            cache_dir: gantry::runtime::default_compile_cache_dir(),
            ..gantry::runtime::RuntimeSettings::default()
        })
        .unwrap();
        runtime
            .load_reconciler("guestbook", &std::fs::read(built).unwrap())
            .expect("the Guestbook component loads");
    })
    .await
    .unwrap();
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dev.log");
    let mut dev = Process(
        Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["--log-format", "text", "dev", "--kubeconfig"])
            .arg(cluster.kubeconfig())
            .stdout(std::fs::File::create(dir.path().join("dev.out")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .expect("start gantry dev"),
    );

    // The samples are reconciled by their plugins.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment = wait_for("the sample Memcached's Deployment", async || {
        deployments.get_opt("memcached-sample").await.ok()?
    })
    .await;
    // `gantry plugin apply` finds the plugin store gantry dev serves.
    let publishing: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "gantry-system");
    let store = publishing
        .get(gantry::publish::place::PUBLISHING)
        .await
        .unwrap()
        .data
        .unwrap()[gantry::publish::place::STORE_KEY]
        .clone();
    assert!(store.starts_with("http://127.0.0.1:"), "{store}");
    assert_eq!(deployment.spec.unwrap().replicas, Some(3));
    // The first load compiles the 16 MB Go component (cached by digest after).
    let frontend = wait_for_within(
        std::time::Duration::from_mins(4),
        "the sample Guestbook's frontend (Go, bound by URL)",
        async || {
            deployments
                .get_opt("guestbook-sample-frontend")
                .await
                .ok()?
        },
    )
    .await;
    assert_eq!(frontend.spec.unwrap().replicas, Some(3));
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    wait_for("the sample Database's StatefulSet", async || {
        let list = sets.list(&kube::api::ListParams::default()).await.ok()?;
        (!list.items.is_empty()).then_some(())
    })
    .await;

    // BackupJob: its finalizer asks gantry dev's stand-in backup service
    // (over the HTTP capability) before the parent may go.
    let backups = kind_api(&client, "backup.example.com", "BackupJob", "backupjobs");
    wait_for("the sample BackupJob to be Ready", async || {
        let job = backups.get_opt("orders-nightly").await.ok()??;
        (condition_status(&job, "Ready").as_deref() == Some("True")).then_some(())
    })
    .await;
    backups
        .delete("orders-nightly", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "the BackupJob's remote backups deleted, then the BackupJob",
        async || match backups.get_opt("orders-nightly").await {
            Ok(None) => Some(()),
            _ => None,
        },
    )
    .await;

    // MyResource: installed at its storage version v1, read at v1alpha1
    // through the example converter once the CRD points at it.
    let alpha = kind_api_at(
        &client,
        "example.com",
        "v1alpha1",
        "MyResource",
        "myresources",
    );
    let older = wait_for("the sample MyResource converted to v1alpha1", async || {
        let web = alpha.get_opt("web").await.ok()??;
        (web.data["spec"]["replicas"] == 3).then_some(web)
    })
    .await;
    assert_eq!(
        older.data["spec"]["image"], "registry.example.com:5000/web:1.4",
        "{older:?}"
    );
    let v1 = kind_api_at(&client, "example.com", "v1", "MyResource", "myresources");
    assert_eq!(v1.get("web").await.unwrap().data["spec"]["instances"], 3);

    let out = std::fs::read_to_string(dir.path().join("dev.out")).unwrap();
    assert!(
        out.contains(&format!(
            "export KUBECONFIG={}",
            cluster.kubeconfig().display()
        )),
        "{out}"
    );

    // The policies' webhook configuration is in place, and the cluster's
    // API server asks Gantry about a privileged Pod: denied.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    wait_for("the validating webhook configuration", async || {
        validating.get_opt("gantry-policies").await.ok()?
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let privileged: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug"},
        "spec": {"containers": [{"name": "debug", "image": "busybox",
                                 "securityContext": {"privileged": true}}]}
    }))
    .unwrap();
    let denial = wait_for("the webhook to be called", async || {
        match pods.create(&PostParams::default(), &privileged).await {
            Err(kube::Error::Api(status)) if status.message.contains("admission webhook") => {
                Some(status)
            }
            // Not called yet (the configuration takes a moment to be
            // picked up); undo and try again.
            Ok(_) => {
                let _ = pods
                    .delete("debug", &kube::api::DeleteParams::default())
                    .await;
                None
            }
            Err(_) => None,
        }
    })
    .await;
    assert!(
        denial
            .message
            .contains("\"disallow-privileged.policies.gantry.dev\" denied the request"),
        "{denial:?}"
    );

    sigterm(&dev);
    let status = dev.wait().unwrap();
    assert!(
        status.success(),
        "gantry dev exits 0 on SIGTERM: {status:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    cluster.shutdown().await;
}

/// `gantry dev` with `args`, its stdout and stderr into files in `dir`
/// named after `run`.
fn start_dev(args: &[&std::ffi::OsStr], dir: &std::path::Path, run: &str) -> Process {
    Process(
        Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["--log-format", "text", "dev"])
            .args(args)
            .stdout(std::fs::File::create(dir.join(format!("{run}.out"))).unwrap())
            .stderr(std::fs::File::create(dir.join(format!("{run}.log"))).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .expect("start gantry dev"),
    )
}

/// Wait until `gantry dev`'s run `run` says it is ready; its stdout then.
async fn ready_output(dir: &std::path::Path, run: &str) -> String {
    let out = dir.join(format!("{run}.out"));
    wait_for_within(
        std::time::Duration::from_mins(5),
        &format!("gantry dev ({run}) to say it is ready"),
        async || {
            let text = std::fs::read_to_string(&out).ok()?;
            text.contains("gantry dev: ready:").then_some(text)
        },
    )
    .await
}

/// Stop `gantry dev` with SIGTERM: it exits 0.
fn stop_dev(mut dev: Process, dir: &std::path::Path, run: &str) {
    sigterm(&dev);
    let status = dev.wait().unwrap();
    assert!(
        status.success(),
        "gantry dev ({run}) exits 0 on SIGTERM: {status:?}\n{}",
        std::fs::read_to_string(dir.join(format!("{run}.log"))).unwrap_or_default()
    );
}

fn kind_api(client: &kube::Client, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    kind_api_at(client, group, "v1alpha1", kind, plural)
}

/// The namespaced (`default`) API of a custom kind at `version`.
fn kind_api_at(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), "default", &resource)
}

/// A restart leaves the sample the user edited (with another field
/// manager) and the one they deleted as they are, and says so; `--reset`
/// puts both back. The server's field ownership is the judge, so this runs
/// on both backends.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_users_edits_and_deletions_and_reset_starts_over(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        std::ffi::OsStr::new("--kubeconfig"),
        cluster.kubeconfig().as_os_str(),
    ];
    let memcacheds = kind_api(&client, "cache.example.com", "Memcached", "memcacheds");
    let databases = kind_api(&client, "db.example.com", "Database", "databases");

    let dev = start_dev(&args, dir.path(), "first");
    let first = ready_output(dir.path(), "first").await;
    assert!(
        first.contains("ready: bindings backup-job, database, guestbook, memcached in service; admission policies disallow-privileged"),
        "{first}"
    );

    // As `kubectl edit` and `kubectl delete` would (while the operator
    // runs, so that it lets the Database go: it holds a finalizer).
    memcacheds
        .patch(
            "memcached-sample",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(serde_json::json!({"spec": {"size": 5}})),
        )
        .await
        .unwrap();
    databases
        .delete("orders", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Database to be gone", async || {
        databases
            .get_opt("orders")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    stop_dev(dev, dir.path(), "first");

    let dev = start_dev(&args, dir.path(), "again");
    let again = ready_output(dir.path(), "again").await;
    let size = |m: DynamicObject| m.data["spec"]["size"].as_i64();
    assert_eq!(
        size(memcacheds.get("memcached-sample").await.unwrap()),
        Some(5)
    );
    assert!(
        databases.get_opt("orders").await.unwrap().is_none(),
        "the deleted sample came back"
    );
    assert!(
        again.contains("Memcached default/memcached-sample: keeping your changes"),
        "{again}"
    );
    assert!(
        again
            .contains("Database default/orders: deleted since it was installed, not created again"),
        "{again}"
    );
    stop_dev(dev, dir.path(), "again");

    let reset_args = [args[0], args[1], std::ffi::OsStr::new("--reset")];
    let dev = start_dev(&reset_args, dir.path(), "reset");
    ready_output(dir.path(), "reset").await;
    assert_eq!(
        size(memcacheds.get("memcached-sample").await.unwrap()),
        Some(3)
    );
    assert!(
        databases.get_opt("orders").await.unwrap().is_some(),
        "--reset puts the sample back"
    );
    stop_dev(dev, dir.path(), "reset");
    cluster.shutdown().await;
}

/// On the embedded API server the kubeconfig is written into the data
/// directory, a restart finds the data there, and `--reset` deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_dev_keeps_its_kubeconfig_and_data_in_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = [std::ffi::OsStr::new("--data-dir"), data.as_os_str()];
    let client = async || {
        let kubeconfig = kube::config::Kubeconfig::read_from(data.join("kubeconfig")).unwrap();
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        kube::Client::try_from(config).unwrap()
    };
    let mine = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "mine", "namespace": "default"}});

    let dev = start_dev(&args, dir.path(), "first");
    let first = ready_output(dir.path(), "first").await;
    assert!(
        first.contains(&format!(
            "export KUBECONFIG={}",
            data.join("kubeconfig").display()
        )),
        "{first}"
    );
    assert!(
        !dir.path().join("kubeconfig").exists(),
        "nothing is written beside the data directory"
    );
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client().await, "default");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(mine).unwrap(),
    )
    .await
    .unwrap();
    stop_dev(dev, dir.path(), "first");

    let dev = start_dev(&args, dir.path(), "again");
    ready_output(dir.path(), "again").await;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client().await, "default");
    assert!(
        maps.get_opt("mine").await.unwrap().is_some(),
        "the data is kept"
    );
    stop_dev(dev, dir.path(), "again");

    let reset_args = [args[0], args[1], std::ffi::OsStr::new("--reset")];
    let dev = start_dev(&reset_args, dir.path(), "reset");
    ready_output(dir.path(), "reset").await;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client().await, "default");
    assert!(
        maps.get_opt("mine").await.unwrap().is_none(),
        "--reset starts over"
    );
    let memcacheds = kind_api(
        &client().await,
        "cache.example.com",
        "Memcached",
        "memcacheds",
    );
    assert!(
        memcacheds
            .get_opt("memcached-sample")
            .await
            .unwrap()
            .is_some()
    );
    stop_dev(dev, dir.path(), "reset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_binary_runs_dev_in_an_empty_directory_without_toolchains() {
    // `gantry` copied out of the build, run from an empty directory with a
    // fresh HOME and a PATH without cargo, rustup or Go: its examples are
    // embedded, so nothing is built and no source tree is read.
    let dir = tempfile::tempdir().unwrap();
    let (bin, work, home) = (
        dir.path().join("bin"),
        dir.path().join("work"),
        dir.path().join("home"),
    );
    for d in [&bin, &work, &home] {
        std::fs::create_dir(d).unwrap();
    }
    let gantry = bin.join("gantry");
    std::fs::copy(env!("CARGO_BIN_EXE_gantry"), &gantry).unwrap();
    let dev = Process(
        Command::new(&gantry)
            .args(["--log-format", "text", "dev", "--no-simulate"])
            .current_dir(&work)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", "/usr/bin:/bin")
            .stdout(std::fs::File::create(dir.path().join("copied.out")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("copied.log")).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .expect("start the copied gantry dev"),
    );
    let ready = ready_output(dir.path(), "copied").await;
    assert!(
        ready.contains("ready: bindings backup-job, database, guestbook, memcached in service; admission policies disallow-privileged"),
        "{ready}\n{}",
        std::fs::read_to_string(dir.path().join("copied.log")).unwrap_or_default()
    );
    assert!(
        home.join(".cache/gantry/dev/kubeconfig").is_file(),
        "its data is under the fresh HOME"
    );
    assert_eq!(
        std::fs::read_dir(&work).unwrap().count(),
        0,
        "nothing is written to the working directory"
    );
    stop_dev(dev, dir.path(), "copied");
}

/// A client of `gantry dev`'s embedded API server, from the kubeconfig in
/// its data directory.
async fn embedded_client(data: &std::path::Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(data.join("kubeconfig")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The status of `object`'s condition `kind`.
fn condition_status(object: &DynamicObject, kind: &str) -> Option<String> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
        .map(str::to_string)
}

/// On the embedded API server `gantry dev` simulates workloads: the sample
/// Memcached's Deployment gets Running, Ready Pods on the simulated Node and
/// the Memcached (which reports its Deployment's ready replicas) becomes
/// Ready. With `--no-simulate` the Deployment gets no Pods and the Memcached
/// is reconciled but not Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_dev_simulates_workloads_so_the_samples_become_ready() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Node;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("simulated");
    let args = [
        std::ffi::OsStr::new("--data-dir"),
        data.as_os_str(),
        std::ffi::OsStr::new("--simulate-pod-ready-ms"),
        std::ffi::OsStr::new("100"),
    ];
    let dev = start_dev(&args, dir.path(), "simulated");
    let out = ready_output(dir.path(), "simulated").await;
    assert!(
        out.contains("simulating workloads on node gantry-dev"),
        "{out}"
    );
    let client = embedded_client(&data).await;
    let memcacheds = kind_api(&client, "cache.example.com", "Memcached", "memcacheds");
    wait_for("the sample Memcached to be Ready", async || {
        let m = memcacheds.get_opt("memcached-sample").await.ok()??;
        (condition_status(&m, "Ready").as_deref() == Some("True")).then_some(())
    })
    .await;
    let memcached = memcacheds.get("memcached-sample").await.unwrap();
    assert_eq!(
        memcached.data["status"]["readyReplicas"], 3,
        "{memcached:?}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let status = deployments
        .get("memcached-sample")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.available_replicas, Some(3));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running = pods
        .list(
            &kube::api::ListParams::default().labels("app.kubernetes.io/instance=memcached-sample"),
        )
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.spec.as_ref().unwrap().node_name.as_deref() == Some("gantry-dev")
                && p.status.as_ref().unwrap().phase.as_deref() == Some("Running")
        })
        .count();
    assert_eq!(running, 3);
    stop_dev(dev, dir.path(), "simulated");

    let data = dir.path().join("plain");
    let args = [
        std::ffi::OsStr::new("--data-dir"),
        data.as_os_str(),
        std::ffi::OsStr::new("--no-simulate"),
    ];
    let dev = start_dev(&args, dir.path(), "plain");
    let out = ready_output(dir.path(), "plain").await;
    assert!(!out.contains("simulating workloads"), "{out}");
    let client = embedded_client(&data).await;
    let memcacheds = kind_api(&client, "cache.example.com", "Memcached", "memcacheds");
    let ready = wait_for("the sample Memcached to be reconciled", async || {
        let m = memcacheds.get_opt("memcached-sample").await.ok()??;
        condition_status(&m, "Ready")
    })
    .await;
    assert_eq!(ready, "False");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    assert!(deployments.get("memcached-sample").await.is_ok());
    let sets: Api<ReplicaSet> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let params = kube::api::ListParams::default();
    assert!(sets.list(&params).await.unwrap().items.is_empty());
    assert!(pods.list(&params).await.unwrap().items.is_empty());
    assert!(nodes.list(&params).await.unwrap().items.is_empty());
    stop_dev(dev, dir.path(), "plain");
}
