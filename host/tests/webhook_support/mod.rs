//! Shared by the webhook tests: example policies loaded as the policy
//! manager loads them, the webhook server on loopback with a generated
//! certificate, and an HTTPS client that trusts only its CA.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use gantry::policy::spec::{PolicyBinding, parse_spec};
use gantry::policy::{LoadedPolicy, Policies, PolicyMetrics, manager};
use gantry::runtime::Runtime;
use gantry::webhook::server::WebhookServer;
use gantry::webhook::{server, tls};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// A recorded AdmissionReview from `tests/fixtures/admission/`.
pub fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Load the example plugin `plugin` with the binding `policy_yaml`,
/// settings checked, as the policy manager does.
pub fn load(runtime: &Runtime, plugin: &str, policy_yaml: &str) -> LoadedPolicy {
    let spec = parse_spec(policy_yaml).expect("a valid policy.yaml");
    let bytes = gantry::toolchain::example_plugin(plugin).expect("example plugin builds");
    let binding = PolicyBinding {
        spec,
        plugin: gantry::delivery::PluginBytes {
            component: gantry::runtime::ComponentBytes::new(bytes),
            source: None,
        },
    };
    let plugin = manager::load_policy(runtime, &binding)
        .unwrap_or_else(|(reason, message)| panic!("{reason}: {message}"));
    LoadedPolicy {
        spec: Arc::new(binding.spec),
        plugin,
        config_map: "test".into(),
        recent: gantry::policy::recent::RecentReviews::default(),
    }
}

/// `policy.yaml` for a policy named `name` on Pods (CREATE, UPDATE), with
/// `extra` lines.
pub fn pods_policy(name: &str, extra: &str) -> String {
    format!(
        "name: {name}\nrules:\n- {{apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE, UPDATE]}}\n{extra}"
    )
}

type Https = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The webhook server and a client of it.
pub struct Webhooks {
    /// The server.
    pub server: WebhookServer,
    /// `https://127.0.0.1:<port>`.
    pub base: String,
    /// The policies it serves.
    pub policies: Policies,
    /// Its certificate.
    pub certificate: tls::Certificate,
    client: Https,
}

impl Webhooks {
    /// Serve `policies` on a free loopback port.
    pub async fn start(policies: Vec<LoadedPolicy>) -> Webhooks {
        let registry = Policies::new(Arc::new(PolicyMetrics::default()));
        for policy in policies {
            registry.insert(policy);
        }
        let certificate = tls::self_signed(&["127.0.0.1".into()]).unwrap();
        let server = server::serve(
            "127.0.0.1:0".parse().unwrap(),
            tls::server_config(&certificate).unwrap(),
            gantry::policy::server::router(registry.clone()),
        )
        .await
        .unwrap();
        let base = format!("https://{}", server.addr);
        let client = https_client(&certificate.ca_pem);
        Webhooks {
            server,
            base,
            policies: registry,
            certificate,
            client,
        }
    }

    /// POST `body` to `path`: the status and the body.
    pub async fn post(&self, path: &str, body: Vec<u8>) -> (u16, Bytes) {
        let request = hyper::Request::post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let response = self
            .client
            .request(request)
            .await
            .expect("the server answers");
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body)
    }

    /// Send `review` to the policy `name`; the `response` of the answer.
    pub async fn review(&self, name: &str, review: &Value) -> Value {
        let (status, body) = self
            .post(
                &format!("/policies/{name}"),
                review.to_string().into_bytes(),
            )
            .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], review["request"]["uid"]);
        answer["response"].clone()
    }
}

/// An HTTPS client (HTTP/1.1 and HTTP/2) trusting only `ca_pem`.
pub fn https_client(ca_pem: &str) -> Https {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .enable_http2()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// The JSON patch of an admission response, decoded.
pub fn patch_of(response: &Value) -> Option<json_patch::Patch> {
    use base64::Engine;
    let text = response.get("patch")?.as_str()?;
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    Some(serde_json::from_slice(&bytes).unwrap())
}
