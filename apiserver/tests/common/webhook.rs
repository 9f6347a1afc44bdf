//! An in-test HTTPS admission webhook: certificates from rcgen (its CA is the
//! caBundle), records every AdmissionReview it receives, answers per test.
#![allow(dead_code)]
// The helpers take `json!` literals by value so each call reads as data.
#![allow(clippy::needless_pass_by_value)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};

/// A CA and a server certificate it signed (for localhost, 127.0.0.1 and
/// hook.default.svc).
pub struct Pki {
    ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

pub fn pki() -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "gantry test CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "hook.default.svc".to_string(),
    ])
    .unwrap();
    let ca_pem = ca.pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    Pki {
        ca_pem,
        chain: vec![leaf.der().clone()],
        key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
    }
}

/// A webhook answer: after `delay`, HTTP `status` with `body`.
pub struct Reply {
    pub delay: Duration,
    pub status: u16,
    pub body: Vec<u8>,
}

pub fn reply(v: Value) -> Reply {
    Reply {
        delay: Duration::ZERO,
        status: 200,
        body: serde_json::to_vec(&v).unwrap(),
    }
}

pub type Answer = Arc<dyn Fn(&str, &Value) -> Reply + Send + Sync>;

/// A running HTTPS webhook that records every (path, AdmissionReview) it receives.
pub struct Hook {
    pub addr: SocketAddr,
    pub ca_b64: String,
    reviews: Arc<Mutex<Vec<(String, Value)>>>,
    /// TCP connections accepted so far.
    pub connections: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hook {
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    /// The reviews received on `path`.
    pub fn received(&self, path: &str) -> Vec<Value> {
        self.reviews
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r.clone())
            .collect()
    }

    pub fn count(&self, path: &str) -> usize {
        self.received(path).len()
    }
}

pub async fn start_hook(answer: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static) -> Hook {
    let answer: Answer = Arc::new(answer);
    let pki = pki();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), PrivateKeyDer::Pkcs8(pki.key.clone_key()))
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reviews: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let rec = reviews.clone();
    let connections: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let accepted = connections.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (acceptor, answer, rec) = (acceptor.clone(), answer.clone(), rec.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (answer, rec) = (answer.clone(), rec.clone());
                        async move {
                            let path = req.uri().path().to_string();
                            let body = req.into_body().collect().await?.to_bytes();
                            let review: Value =
                                serde_json::from_slice(&body).unwrap_or(Value::Null);
                            rec.lock().unwrap().push((path.clone(), review.clone()));
                            let r = answer(&path, &review);
                            tokio::time::sleep(r.delay).await;
                            Ok::<_, hyper::Error>(
                                hyper::Response::builder()
                                    .status(r.status)
                                    .header("Content-Type", "application/json")
                                    .body(Full::new(Bytes::from(r.body)))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Hook {
        addr,
        ca_b64: base64::engine::general_purpose::STANDARD.encode(pki.ca_pem.as_bytes()),
        reviews,
        connections,
        task,
    }
}

pub fn uid(review: &Value) -> Value {
    review["request"]["uid"].clone()
}

pub fn allow(review: &Value) -> Reply {
    reply(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "response": {"uid": uid(review), "allowed": true}}),
    )
}

pub fn deny(review: &Value, status: Value) -> Reply {
    reply(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "response": {"uid": uid(review), "allowed": false, "status": status}}),
    )
}

pub fn patch(review: &Value, ops: Value) -> Reply {
    let p = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap());
    reply(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "response": {"uid": uid(review), "allowed": true, "patchType": "JSONPatch", "patch": p}}),
    )
}

/// One webhook entry of a configuration: configmaps, CREATE and UPDATE.
pub fn webhook(name: &str, url: &str, ca_b64: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": { "url": url, "caBundle": ca_b64 },
        "rules": [{ "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"] }],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

pub fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": { "name": name },
        "webhooks": hooks,
    })
}
