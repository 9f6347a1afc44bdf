//! Namespace-scoped mode and RBAC from bindings,
//! on both backends: `gantry run --watch-namespaces a,b` as a service
//! account holding only the Roles `gantry rbac` prints reconciles parents
//! in a and b and never sees c; a right taken away is named in a
//! `MissingPermissions` Warning when the binding loads.

mod common;

use std::process::Command;

use common::{Backend, NAMESPACE, backends, gantry_run, memcached, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

fn gantry_rbac(kubeconfig: &std::path::Path, extra: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["rbac", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--namespace", NAMESPACE])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_yaml::Deserializer::from_slice(&out.stdout)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_operator_with_only_roles_reconciles_its_namespaces_and_names_missing_rights(
    backend: Backend,
) {
    let (cluster, admin, admin_kubeconfig) = common::cluster(backend, Some("memcached")).await;
    for ns in ["a", "b", "c"] {
        gantry::dev::ensure_namespace(&admin, ns).await.unwrap();
    }

    // The roles for the installed binding, scoped to a and b: no
    // ClusterRole at all (no policies, no cluster-scoped kinds).
    let objects = gantry_rbac(&admin_kubeconfig, &["--watch-namespaces", "a,b"]);
    let kinds: Vec<(&str, &str)> = objects
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap(),
                o["metadata"]["namespace"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert!(
        kinds.iter().all(|(kind, _)| !kind.starts_with("Cluster")),
        "{kinds:?}"
    );
    for ns in ["a", "b", NAMESPACE] {
        assert!(kinds.contains(&("Role", ns)), "{kinds:?}");
    }
    // Grant them, except that in b Deployments may only be read.
    for mut object in objects {
        if object["kind"] == "Role" && object["metadata"]["namespace"] == "b" {
            for rule in object["rules"].as_array_mut().unwrap() {
                if rule["resources"] == json!(["deployments"]) {
                    rule["verbs"] = json!(["get", "list", "watch"]);
                }
            }
        }
        gantry::dev::apply_object(&admin, &object).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("gantry.kubeconfig");
    cluster
        .service_account_kubeconfig(NAMESPACE, "gantry", &kubeconfig)
        .await;

    let memcacheds = |ns: &str| -> Api<DynamicObject> {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"),
            "memcacheds",
        );
        Api::namespaced_with(admin.clone(), ns, &resource)
    };
    for ns in ["a", "b", "c"] {
        let mut parent = memcached("cache");
        parent["metadata"]["namespace"] = ns.into();
        gantry::dev::apply_object(&admin, &parent).await.unwrap();
    }
    let log = dir.path().join("gantry.log");
    let _operator = gantry_run(
        &kubeconfig,
        &log,
        &[
            "--watch-namespaces",
            "a,b",
            "--health-addr",
            "off",
            "--metrics-addr",
            "off",
        ],
        &[],
        false,
    );

    let deployments = |ns: &str| -> Api<Deployment> { Api::namespaced(admin.clone(), ns) };
    wait_for("the Deployment in a", async || {
        deployments("a").get_opt("cache").await.ok()?
    })
    .await;
    // b: the binding loaded with a Warning that names what is missing.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(admin.clone(), NAMESPACE);
    let warning = wait_for("the MissingPermissions Warning", async || {
        let list = events.list(&kube::api::ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("MissingPermissions"))
            .and_then(|e| e.note)
    })
    .await;
    for missing in [
        "create apps/deployments in namespace b",
        "patch apps/deployments in namespace b",
        "delete apps/deployments in namespace b",
    ] {
        assert!(warning.contains(missing), "{warning}");
    }
    assert!(!warning.contains("namespace a"), "{warning}");
    assert!(!warning.contains("cluster-wide"), "{warning}");

    // c is not watched: its parent is never touched. a's parent was
    // reconciled meanwhile, so the operator has had every chance.
    let a = memcacheds("a").get("cache").await.unwrap();
    assert!(a.data["status"]["conditions"].is_array(), "{:?}", a.data);
    let c = memcacheds("c").get("cache").await.unwrap();
    assert!(
        c.data
            .get("status")
            .is_none_or(|s| s.get("conditions").is_none()),
        "{:?}",
        c.data
    );
    assert!(c.metadata.finalizers.is_none_or(|f| f.is_empty()));
    assert!(deployments("c").get_opt("cache").await.unwrap().is_none());
}

#[test]
fn gantry_rbac_prints_helm_values_and_refuses_without_bindings() {
    let binding = gantry::examples::source_dir("memcached").join("binding.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["rbac", "--helm-values", "--binding"])
        .arg(&binding)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let values: Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let resources: Vec<&str> = values["rbac"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resources"][0].as_str().unwrap())
        .collect();
    assert_eq!(
        resources,
        [
            "memcacheds",
            "memcacheds/status",
            "memcacheds/finalizers",
            "deployments"
        ]
    );
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("rbac")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no bindings"));
}
