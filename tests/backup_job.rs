//! The `backup-job` example end to end: a finalizer that
//! has a loopback backup service delete a `BackupJob`'s remote backups, and
//! lets the `BackupJob` go only when the service says they are gone; with a
//! service that fails and one that hangs on the way.

use std::time::Duration;

use gantry::toolchain::example_plugin;
use gantry_test_support::backup_service::{BackupService, Mode};
use gantry_tests::{
    BINDINGS_NS, Backend, Env, backends, condition, eventually, eventually_within, get_json,
};
use kube::api::DeleteParams;
use serde_json::{Value, json};

/// `Bearer t0ken-e2e`, as the Secret holds it.
const TOKEN: &str = "Bearer t0ken-e2e";
const TOKEN_B64: &str = "QmVhcmVyIHQwa2VuLWUyZQ==";

/// The example's binding, pointed at `origin`, with a short deadline so
/// that a hanging service is cut off quickly; without `capabilities` when
/// `granted` is false.
fn binding(origin: &str, granted: bool) -> String {
    let example = include_str!("../plugins/backup-job/binding.yaml")
        .replace("http://127.0.0.1:8089", origin)
        .replace("deadlineMs: 2000", "deadlineMs: 700")
        .replace("timeoutMs: 1500", "timeoutMs: 5000");
    if granted {
        return example;
    }
    let (head, rest) = example.split_once("capabilities:").unwrap();
    let (_, tail) = rest.split_once("config:").unwrap();
    format!("{head}config:{tail}")
}

async fn synced_reason(api: &kube::Api<kube::api::DynamicObject>, reason: &str) {
    eventually(&format!("Synced=False with reason {reason}"), || async {
        let job = get_json(api, "nightly").await?;
        let synced = condition(&job, "Synced")?;
        (synced["status"] == "False" && synced["reason"] == reason).then_some(())
    })
    .await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_job_goes_only_when_its_remote_backups_are_deleted(backend: Backend) {
    let service = BackupService::start().await;
    let env = Env::start(backend).await;
    for crd in gantry::manifest::read_objects(
        &gantry::toolchain::source_workspace_root().join("plugins/backup-job/crd.yaml"),
    )
    .unwrap()
    {
        env.apply(crd).await;
    }
    gantry::dev::wait_for_crd(&env.client, "backupjobs.backup.example.com")
        .await
        .unwrap();
    env.apply(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "backup-service-token", "namespace": BINDINGS_NS},
        "data": {"token": TOKEN_B64}}))
        .await;
    let component = example_plugin("backup-job").unwrap();

    // A plugin that imports HTTP under a binding that grants none: refused.
    env.bind("backup-job", &binding(&service.origin(), false), &component)
        .await;
    let refusal = eventually("CapabilityNotGranted", || async {
        env.event(BINDINGS_NS, "backup-job", "CapabilityNotGranted")
            .await
    })
    .await;
    assert!(
        refusal["note"]
            .as_str()
            .unwrap()
            .contains("grants no capabilities.http"),
        "{refusal}"
    );

    env.bind("backup-job", &binding(&service.origin(), true), &component)
        .await;
    env.apply(
        json!({"apiVersion": "backup.example.com/v1alpha1", "kind": "BackupJob",
        "metadata": {"name": "nightly", "namespace": "default"}, "spec": {"schedule": "@daily"}}),
    )
    .await;
    let jobs = env.api(
        "backup.example.com/v1alpha1",
        "BackupJob",
        "backupjobs",
        Some("default"),
    );
    let job = eventually("the remote backups listed", || async {
        let job = get_json(&jobs, "nightly").await?;
        (job.pointer("/status/remoteBackups") == Some(&json!(3))).then_some(job)
    })
    .await;
    assert!(
        job.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.contains(&json!("gantry.dev/backup-job")))
    );

    // The service fails: the BackupJob stays, and says why.
    service.set_mode(Mode::Fail);
    jobs.delete("nightly", &DeleteParams::default())
        .await
        .unwrap();
    synced_reason(&jobs, "BackupServiceError").await;
    // It hangs: every call ends at its deadline, the BackupJob stays.
    service.set_mode(Mode::Hang);
    synced_reason(&jobs, "PluginTimeout").await;
    assert!(get_json(&jobs, "nightly").await.is_some());
    let before = service.seen().len();

    // It works: 202 (in progress, requeue), then 204: the BackupJob goes.
    service.set_mode(Mode::Ok);
    eventually_within(Duration::from_secs(30), "the BackupJob gone", || async {
        get_json(&jobs, "nightly").await.is_none().then_some(())
    })
    .await;
    let deletes: Vec<_> = service.seen()[before..]
        .iter()
        .filter(|s| s.method == "DELETE")
        .cloned()
        .collect();
    assert!(deletes.len() >= 2, "in progress, then done: {deletes:?}");
    assert!(
        service
            .seen()
            .iter()
            .all(|s| s.authorization.as_deref() == Some(TOKEN)),
        "every request carries the token from the Secret"
    );
    let metrics = env.metrics.render();
    for expected in [
        "gantry_plugin_metric_backup_deletion_polls_total{binding=\"backup-job\"",
        "gantry_plugin_http_requests_total{binding=\"backup-job\",method=\"DELETE\"",
    ] {
        assert!(metrics.contains(expected), "{expected} in {metrics}");
    }
    assert!(!metrics.contains("t0ken"), "no Secret value in the metrics");
    env.stop().await;
}
