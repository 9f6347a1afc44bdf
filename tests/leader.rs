//! Leader election on each API server backend: one holder at a time,
//! take-over after the holder stops renewing, immediate hand-over on release.

use std::time::Duration;

use gantry::controller::leader::{LeaderElector, LeaseConfig};
use gantry_tests::{Backend, Cluster, backends, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

fn candidate(client: &kube::Client, identity: &str) -> LeaderElector {
    LeaderElector::new(
        client.clone(),
        LeaseConfig {
            namespace: "default".into(),
            name: "gantry".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(1),
            retry_period: Duration::from_millis(100),
        },
    )
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_with_take_over_and_hand_over(backend: Backend) {
    let server = Cluster::start(backend).await;
    let client = server.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let a = candidate(&client, "a");
    let b = candidate(&client, "b");

    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "a creates the lease"
    );
    // While a renews, b never gets it, however long it waits.
    for _ in 0..15 {
        assert!(a.try_acquire_or_renew().await.unwrap());
        assert!(!b.try_acquire_or_renew().await.unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // a stops renewing: b takes over once the record went unrenewed for a lease duration.
    eventually("b takes over", || async {
        b.try_acquire_or_renew().await.unwrap().then_some(())
    })
    .await;
    let spec = leases.get("gantry").await.unwrap().spec.unwrap();
    assert_eq!(
        (spec.holder_identity.as_deref(), spec.lease_transitions),
        (Some("b"), Some(1))
    );
    assert!(!a.try_acquire_or_renew().await.unwrap(), "a lost the lease");

    // Release hands over at once.
    b.release().await.unwrap();
    assert!(a.try_acquire_or_renew().await.unwrap());
    let spec = leases.get("gantry").await.unwrap().spec.unwrap();
    assert_eq!(
        (spec.holder_identity.as_deref(), spec.lease_transitions),
        (Some("a"), Some(2))
    );
    // Releasing a lease one does not hold changes nothing.
    b.release().await.unwrap();
    assert_eq!(
        leases
            .get("gantry")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("a")
    );
    server.shutdown().await;
}
