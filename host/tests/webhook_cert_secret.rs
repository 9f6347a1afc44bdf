//! `gantry run --webhook-cert-secret`: two replicas against one API server
//! share the CA and serving certificate of one Secret, the API server's
//! calls to an admission policy with `failurePolicy: Fail` succeed through
//! either, a renewal (with a serving lifetime shortened to seconds) is
//! served without a restart and without a refused request, a Secret
//! deleted by hand is made again, and garbage written into it is replaced
//! by what the replicas served.
//!
//! The API server reaches the replicas through a TCP switch in the test
//! that stands for the Service: it forwards new connections to one replica
//! or the other, and cuts the open ones when switched.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, NAMESPACE, Process, backends, cluster, gantry_run, http_get, wait_for};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const POLICY: &str = "name: disallow-privileged\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE, UPDATE]}\ntimeoutSeconds: 5\nfailurePolicy: Fail\n";
const SECRET: &str = "gantry-webhook-cert";
/// Serving certificates valid this long: renewed after about 30 s, time
/// for both replicas to start first.
const SERVING_SECS: u64 = 45;

/// Stands for the Service: forwards each new connection to the target.
struct Switch {
    addr: SocketAddr,
    target: Arc<Mutex<Option<SocketAddr>>>,
    open: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Switch {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let target: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let open: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (t, o) = (target.clone(), open.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let Some(to) = *t.lock().unwrap() else {
                    continue;
                };
                o.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                }));
            }
        });
        Self {
            addr,
            target,
            open,
            accept,
        }
    }

    /// New connections go to `to`; open ones are cut, and the API server
    /// is given a moment to see its pooled connection closed (a request
    /// sent on it as it closes would fail, as with any Service).
    async fn switch(&self, to: SocketAddr) {
        *self.target.lock().unwrap() = Some(to);
        for task in self.open.lock().unwrap().drain(..) {
            task.abort();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.open.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

struct Replica {
    /// Killed when dropped.
    _process: Process,
    webhooks: SocketAddr,
    health: String,
}

fn start_replica(kubeconfig: &std::path::Path, log: &std::path::Path, url: &str) -> Replica {
    let webhooks = free_port();
    let health = free_port().to_string();
    let process = gantry_run(
        kubeconfig,
        log,
        &[
            "--health-addr",
            &health,
            "--metrics-addr",
            "off",
            "--leader-elect",
            "--webhook-listen",
            &webhooks.to_string(),
            "--webhook-url",
            url,
            "--sync-webhook-configurations",
            "--webhook-cert-secret",
            &format!("{NAMESPACE}/{SECRET}"),
            "--webhook-cert-lifetime-secs",
            &SERVING_SECS.to_string(),
            "--webhook-ca-lifetime-secs",
            "3600",
        ],
        &[("RUST_LOG", "gantry=info")],
        false,
    );
    Replica {
        _process: process,
        webhooks,
        health,
    }
}

/// The certificate `addr` presents to a client trusting only `ca_pem`
/// for 127.0.0.1; `None` if the handshake fails.
async fn served_cert(addr: SocketAddr, ca_pem: &str) -> Option<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.ok()?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.ok()?;
    Some(tls.get_ref().1.peer_certificates()?[0].to_vec())
}

fn der_of(pem: &[u8]) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem).unwrap().to_vec()
}

fn field(secret: &Secret, key: &str) -> Vec<u8> {
    secret.data.as_ref().unwrap()[key].0.clone()
}

fn pod(name: &str, privileged: bool) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "busybox",
            "securityContext": {"privileged": privileged}}]}
    }))
    .unwrap()
}

/// A dry-run create of an allowed Pod and of a privileged one: the policy
/// was called (and answered) for both. The refusal, if any.
async fn admission(pods: &Api<Pod>) -> Result<(), String> {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    pods.create(&dry, &pod("fine", false))
        .await
        .map_err(|e| format!("the allowed pod was refused: {e}"))?;
    match pods.create(&dry, &pod("root", true)).await {
        Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains("is privileged") => Ok(()),
        other => Err(format!(
            "the privileged pod was not denied by the policy: {other:?}"
        )),
    }
}

async fn ready(replica: &Replica) -> bool {
    let health = replica.health.clone();
    tokio::task::spawn_blocking(move || {
        std::net::TcpStream::connect(&health).is_ok() && http_get(&health, "/readyz").0 == 200
    })
    .await
    .unwrap()
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_secret_and_rotate_without_a_refusal(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, None).await;
    gantry::dev::ensure_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let component = gantry::toolchain::example_plugin("disallow-privileged").unwrap();
    let cm = gantry::dev::policy_config_map("no-privileged", NAMESPACE, POLICY, &component, true)
        .unwrap();
    gantry::dev::apply_binding(&client, &cm).await.unwrap();

    let switch = Switch::start().await;
    let url = format!("https://{}", switch.addr);
    let logs = [dir.path().join("a.log"), dir.path().join("b.log")];
    let replicas = [
        start_replica(&kubeconfig, &logs[0], &url),
        start_replica(&kubeconfig, &logs[1], &url),
    ];
    for replica in &replicas {
        wait_for("a replica to be ready", async || {
            ready(replica).await.then_some(())
        })
        .await;
    }

    // One Secret, of type kubernetes.io/tls, both replicas serving its
    // certificate, which its CA verifies.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret = wait_for(
        "both replicas to serve the Secret's certificate",
        async || {
            let secret = secrets.get(SECRET).await.unwrap();
            let ca = String::from_utf8(field(&secret, "ca.crt")).unwrap();
            let expected = der_of(&field(&secret, "tls.crt"));
            for replica in &replicas {
                if served_cert(replica.webhooks, &ca).await? != expected {
                    return None;
                }
            }
            Some(secret)
        },
    )
    .await;
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    let ca = String::from_utf8(field(&secret, "ca.crt")).unwrap();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    wait_for("the caBundle of the Secret", async || {
        let configuration = validating.get_opt("gantry-policies").await.unwrap()?;
        let bundle = configuration
            .webhooks?
            .first()?
            .client_config
            .ca_bundle
            .clone()?;
        (bundle.0 == ca.as_bytes()).then_some(())
    })
    .await;

    // The policy answers through either replica.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for replica in &replicas {
        switch.switch(replica.webhooks).await;
        admission(&pods).await.unwrap();
    }

    // A renewal: requests all along, through the API server and straight
    // to each replica (a handshake that verifies with the CA); none fails,
    // and each replica ends up serving the new certificate, same CA.
    let first = field(&secret, "tls.crt");
    let deadline = Instant::now() + Duration::from_secs(SERVING_SECS * 2);
    let mut calls = 0;
    let renewed = loop {
        admission(&pods).await.unwrap();
        let mut presented = Vec::new();
        for replica in &replicas {
            let cert = served_cert(replica.webhooks, &ca).await;
            presented.push(cert.expect("a replica's certificate verifies with the CA"));
        }
        calls += 1;
        let now = secrets.get(SECRET).await.unwrap();
        let current = der_of(&field(&now, "tls.crt"));
        if current != der_of(&first) && presented.iter().all(|s| *s == current) {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "no renewal within {SERVING_SECS}s x 2"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(field(&renewed, "ca.crt"), ca.as_bytes(), "the CA stays");
    for replica in &replicas {
        switch.switch(replica.webhooks).await;
        admission(&pods).await.unwrap();
    }
    assert!(calls > 10, "{calls} calls across the renewal");

    // Garbage in the Secret: replaced by what the replicas served, so the
    // CA and every caBundle stay as they were.
    let mut hostile = renewed.clone();
    hostile.data.as_mut().unwrap().insert(
        "ca.crt".into(),
        ByteString(
            b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n".to_vec(),
        ),
    );
    hostile
        .data
        .as_mut()
        .unwrap()
        .insert("tls.key".into(), ByteString(vec![0xff; 64]));
    secrets
        .replace(SECRET, &PostParams::default(), &hostile)
        .await
        .unwrap();
    wait_for("the garbage to be replaced", async || {
        let now = secrets.get(SECRET).await.unwrap();
        (field(&now, "ca.crt") == ca.as_bytes() && field(&now, "tls.key") != vec![0xff; 64])
            .then_some(())
    })
    .await;
    for replica in &replicas {
        switch.switch(replica.webhooks).await;
        admission(&pods).await.unwrap();
        assert!(ready(replica).await);
    }
    let logged = logs
        .iter()
        .map(|log| std::fs::read_to_string(log).unwrap())
        .collect::<String>();
    assert!(
        logged.contains("held unusable content: replaced") && logged.contains("ca.crt"),
        "the replacement is logged as an error naming the bad part"
    );

    // Deleted by hand: made again, with a new CA that every replica serves
    // and writes into the configuration.
    secrets
        .delete(SECRET, &DeleteParams::default())
        .await
        .unwrap();
    let remade = wait_for("the Secret to be made again", async || {
        let now = secrets.get_opt(SECRET).await.unwrap()?;
        (field(&now, "ca.crt") != ca.as_bytes()).then_some(now)
    })
    .await;
    let new_ca = String::from_utf8(field(&remade, "ca.crt")).unwrap();
    for replica in &replicas {
        wait_for("the new certificate to be served", async || {
            served_cert(replica.webhooks, &new_ca).await
        })
        .await;
    }
    wait_for("the new caBundle", async || {
        let configuration = validating.get_opt("gantry-policies").await.unwrap()?;
        let bundle = configuration
            .webhooks?
            .first()?
            .client_config
            .ca_bundle
            .clone()?;
        (bundle.0 == new_ca.as_bytes()).then_some(())
    })
    .await;
    for replica in &replicas {
        switch.switch(replica.webhooks).await;
        wait_for("the policy to answer again", async || {
            admission(&pods).await.ok()
        })
        .await;
    }

    drop(replicas);
    drop(switch);
    server.shutdown().await;
}

/// A Secret of another type is left alone, and a replica that never read a
/// usable certificate stays unready while it says why.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_of_another_type_is_refused_and_the_replica_stays_unready(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, None).await;
    gantry::dev::ensure_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let opaque: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET},
        "type": "Opaque", "data": {"ca.crt": "Z2FyYmFnZQ=="}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &opaque)
        .await
        .unwrap();
    let log = dir.path().join("gantry.log");
    let replica = start_replica(&kubeconfig, &log, "https://127.0.0.1:9");
    wait_for("the refusal in the log", async || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("is not of type kubernetes.io/tls: left alone")
            .then_some(())
    })
    .await;
    wait_for("readiness to name the certificate", async || {
        let health = replica.health.clone();
        let (status, body) = tokio::task::spawn_blocking(move || http_get(&health, "/readyz"))
            .await
            .unwrap();
        assert_eq!(status, 503, "{body}");
        (body == "webhook certificate from the Secret not served yet").then_some(())
    })
    .await;
    let secret = secrets.get(SECRET).await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("Opaque"), "left as it was");
    drop(replica);
    server.shutdown().await;
}
