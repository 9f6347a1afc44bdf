//! Two `gantry run --leader-elect` processes on one cluster: only the
//! leader reconciles; when it is killed, the other takes over and every
//! parent converges.

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

mod common;

use common::{Backend, NAMESPACE, backends, cluster, memcached, sigterm, wait_for};

/// Start `gantry run --leader-elect` as `identity`, logging to `log`, with
/// `extra` flags.
fn operator(
    kubeconfig: &Path,
    identity: &str,
    log: &Path,
    extra: &[&str],
    rust_log: &str,
) -> common::Process {
    let mut args = vec![
        "--leader-elect",
        "--lease-duration-secs",
        "2",
        "--lease-retry-secs",
        "1",
        "--health-addr",
        "off",
        "--metrics-addr",
        "off",
        "--log-format",
        "text",
    ];
    args.extend_from_slice(extra);
    common::gantry_run(
        kubeconfig,
        log,
        &args,
        &[("HOSTNAME", identity), ("RUST_LOG", rust_log)],
        false,
    )
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("gantry-leader")
        .await
        .ok()??
        .spec?
        .holder_identity
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_the_other_takes_over(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, Some("memcached")).await;

    let logs = [dir.path().join("a.log"), dir.path().join("b.log")];
    let mut children = [
        operator(&kubeconfig, "a", &logs[0], &[], "info"),
        operator(&kubeconfig, "b", &logs[1], &[], "info"),
    ];
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let leader = wait_for("a leader", async || holder(&leases).await).await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    gantry::dev::apply_object(&client, &memcached("first"))
        .await
        .unwrap();
    wait_for("the leader reconciles", async || {
        deployments.get_opt("first").await.unwrap()
    })
    .await;
    let became = |log: &Path| {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("became the leader")
    };
    assert_eq!(
        logs.iter().filter(|l| became(l)).count(),
        1,
        "exactly one replica leads"
    );

    // The follower is warm: its binding is loaded, yet it leads nothing.
    let index = usize::from(leader != "a");
    let follower = &logs[1 - index];
    wait_for("the follower loads its binding", async || {
        std::fs::read_to_string(follower)
            .unwrap_or_default()
            .contains("plugin in service")
            .then_some(())
    })
    .await;
    assert!(
        std::fs::read_to_string(follower)
            .unwrap()
            .contains("standing by")
    );
    assert!(!became(follower));

    // Kill the leader outright: no release; the other waits out the lease.
    children[index].kill().unwrap();
    children[index].wait().unwrap();
    gantry::dev::apply_object(&client, &memcached("second"))
        .await
        .unwrap();
    wait_for("the follower takes over", async || {
        holder(&leases).await.filter(|h| *h != leader)
    })
    .await;
    wait_for("parents converge under the new leader", async || {
        deployments.get_opt("second").await.unwrap()
    })
    .await;
    assert!(became(&logs[1 - index]));

    // SIGTERM: the new leader releases the lease and exits 0.
    let survivor = &mut children[1 - index];
    sigterm(survivor);
    let status = survivor.wait().unwrap();
    assert!(status.success(), "graceful exit: {status:?}");
    assert_eq!(holder(&leases).await, None, "the lease was released");
    server.shutdown().await;
}

/// Two shards, each its own leader: together they reconcile every parent,
/// and no parent is reconciled by both.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_split_the_parents(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, Some("memcached")).await;
    let logs = [dir.path().join("0.log"), dir.path().join("1.log")];
    let mut children: Vec<common::Process> = (0..2)
        .map(|i| {
            let index = i.to_string();
            let shard = ["--shard-count", "2", "--shard-index", &index];
            operator(
                &kubeconfig,
                &format!("shard-{i}"),
                &logs[i],
                &shard,
                "gantry_operator::controller=debug",
            )
        })
        .collect();
    let names: Vec<String> = (0..12).map(|n| format!("mc-{n}")).collect();
    for name in &names {
        gantry::dev::apply_object(&client, &memcached(name))
            .await
            .unwrap();
    }
    // Synced: the reconcile has logged its children (a Deployment alone
    // exists before the reconcile that applied it has logged, and the
    // replicas are killed below).
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"),
        "memcacheds",
    );
    let parents: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource);
    for name in &names {
        wait_for("every parent Synced", async || {
            let parent = parents.get_opt(name).await.unwrap()?;
            let conditions = parent.data["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "Synced" && c["status"] == "True")
                .then_some(())
        })
        .await;
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..2 {
        let lease = leases
            .get(&format!("gantry-leader-shard-{i}"))
            .await
            .unwrap();
        assert_eq!(
            lease.spec.unwrap().holder_identity,
            Some(format!("shard-{i}"))
        );
    }
    for child in &mut children {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    // Which parents each replica reconciled, from its logs.
    let reconciled = |log: &Path| -> std::collections::BTreeSet<String> {
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .filter(|l| l.contains("children reconciled"))
            .filter_map(|l| l.split("parent=default/").nth(1))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(|name| {
                name.trim_end_matches(|c: char| !c.is_alphanumeric())
                    .to_string()
            })
            .collect()
    };
    let (zero, one) = (reconciled(&logs[0]), reconciled(&logs[1]));
    assert!(
        !(zero.is_empty() && one.is_empty()),
        "no reconciles in the logs:\n{}",
        std::fs::read_to_string(&logs[0])
            .unwrap()
            .lines()
            .take(30)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        zero.is_disjoint(&one),
        "reconciled by both: {:?}",
        zero.intersection(&one).collect::<Vec<_>>()
    );
    let all: std::collections::BTreeSet<String> = zero.union(&one).cloned().collect();
    assert_eq!(
        all,
        names.iter().cloned().collect(),
        "shard 0: {zero:?}, shard 1: {one:?}"
    );
    assert!(
        !zero.is_empty() && !one.is_empty(),
        "both shards work: {zero:?} / {one:?}"
    );
    server.shutdown().await;
}
