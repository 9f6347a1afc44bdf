//! The HTTPS client of webhooks: one pooled hyper client per caBundle and service
//! port (connections are reused), the caBundle as the only trust roots (the system
//! roots when empty, as kube does), `timeoutSeconds` per call, a capped response
//! body, and services resolved through their Endpoints/EndpointSlices (there is no
//! cluster DNS).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{ConfigBuilderExt, HttpsConnector};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;

use super::config::{Endpoint, Webhook};
use crate::storage::Store;

/// Largest webhook response body read.
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;

type HttpsClient = Client<HttpsConnector<HttpConnector<Resolver>>, Full<Bytes>>;

/// `NAME.NAMESPACE.svc` → the addresses of the service port's endpoints, filled just
/// before each call to a service-backed webhook (one table per client, so each
/// service port has its own).
type ServiceTable = Arc<RwLock<HashMap<String, Vec<SocketAddr>>>>;

/// Resolves `*.svc` names from the service table, everything else with the system
/// resolver.
#[derive(Clone)]
struct Resolver {
    services: ServiceTable,
}

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let known = self
            .services
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name.as_str())
            .cloned();
        let host = name.as_str().to_string();
        Box::pin(async move {
            if let Some(addrs) = known {
                return Ok(addrs.into_iter());
            }
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(addrs.into_iter())
        })
    }
}

/// A pool key: (caBundle, service `host:port` or "" for URLs).
type PoolKey = (Vec<u8>, String);

/// Pooled HTTPS clients by [`PoolKey`], each with its service address table.
#[derive(Default)]
pub struct Clients {
    pool: Mutex<HashMap<PoolKey, (HttpsClient, ServiceTable)>>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_config(ca_bundle: &[u8]) -> Result<rustls::ClientConfig, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    if ca_bundle.iter().all(u8::is_ascii_whitespace) {
        return Ok(builder
            .with_native_roots()
            .map_err(|e| format!("unable to load system root certificates: {e}"))?
            .with_no_client_auth());
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_bundle) {
        let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("unable to load root certificates: {e}"))?;
    }
    if roots.is_empty() {
        return Err("unable to load root certificates: unable to parse bytes as PEM block".into());
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

impl Clients {
    fn client(
        &self,
        ca_bundle: &[u8],
        service: &str,
    ) -> Result<(HttpsClient, ServiceTable), String> {
        let key = (ca_bundle.to_vec(), service.to_string());
        let mut pool = self
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = pool.get(&key) {
            return Ok(c.clone());
        }
        let tls = tls_config(ca_bundle).map_err(|e| format!("could not get REST client: {e}"))?;
        let services = ServiceTable::default();
        let mut http = HttpConnector::new_with_resolver(Resolver {
            services: services.clone(),
        });
        http.enforce_http(false);
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(https);
        pool.insert(key, (client.clone(), services.clone()));
        Ok((client, services))
    }

    /// POSTs `body` to the webhook and returns the response body. Errors read as
    /// kube's reasons after `failed calling webhook "NAME": `.
    pub async fn call(
        &self,
        store: &Store,
        hook: &Webhook,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        self.post(store, &hook.endpoint, &hook.ca_bundle, hook.timeout, body)
            .await
            .map_err(|e| match e {
                PostError::Setup(m) => m,
                PostError::Timeout { url } => {
                    format!("failed to call webhook: Post \"{url}\": context deadline exceeded")
                }
                PostError::Transport { url, message } => {
                    format!("failed to call webhook: Post \"{url}\": {message}")
                }
                PostError::Status { code, .. } => format!(
                    "failed to call webhook: the server responded with the status code {code} but did not return more information"
                ),
            })
    }

    /// POSTs JSON `body` to `endpoint?timeout=Ns`, trusting `ca_bundle`, within
    /// `timeout`; the body of a 2xx answer.
    pub async fn post(
        &self,
        store: &Store,
        endpoint: &Endpoint,
        ca_bundle: &[u8],
        timeout: std::time::Duration,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, PostError> {
        let (client, url) = match endpoint {
            Endpoint::Url(u) => {
                let (client, _) = self.client(ca_bundle, "").map_err(PostError::Setup)?;
                (client, u.clone())
            }
            Endpoint::Service {
                namespace,
                name,
                path,
                port,
            } => {
                let host = format!("{name}.{namespace}.svc");
                let (client, services) = self
                    .client(ca_bundle, &format!("{host}:{port}"))
                    .map_err(PostError::Setup)?;
                let addrs = resolve_service(store, namespace, name, *port)
                    .await
                    .map_err(PostError::Setup)?;
                services
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(host.clone(), addrs);
                // No port in the URL: the resolved addresses carry the endpoint's
                // port; the host is the TLS server name, as in kube.
                (client, format!("https://{host}{path}"))
            }
        };
        let url = format!("{url}?timeout={}s", timeout.as_secs());
        let req = hyper::Request::post(&url)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json, */*")
            .header(hyper::header::USER_AGENT, "gantry-apiserver")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| PostError::Transport {
                url: url.clone(),
                message: e.to_string(),
            })?;
        let exchange = async {
            let resp = client.request(req).await.map_err(|e| error_chain(&e))?;
            let status = resp.status();
            let collected = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        format!("webhook response was larger than {MAX_RESPONSE_BYTES} bytes")
                    } else {
                        error_chain(&*e)
                    }
                })?;
            Ok::<_, String>((status, collected.to_bytes()))
        };
        let (status, bytes) = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => return Err(PostError::Timeout { url }),
            Ok(Err(message)) => return Err(PostError::Transport { url, message }),
            Ok(Ok(r)) => r,
        };
        if !status.is_success() {
            return Err(PostError::Status {
                code: status.as_u16(),
                body: bytes.to_vec(),
            });
        }
        Ok(bytes.to_vec())
    }
}

/// Why a webhook POST failed.
#[derive(Debug)]
pub enum PostError {
    /// No client for the caBundle, or the service did not resolve (the message).
    Setup(String),
    /// No answer within the timeout.
    Timeout {
        /// The URL called.
        url: String,
    },
    /// The connection or the exchange failed.
    Transport {
        /// The URL called.
        url: String,
        /// What failed.
        message: String,
    },
    /// A non-2xx answer.
    Status {
        /// HTTP status.
        code: u16,
        /// Its body.
        body: Vec<u8>,
    },
}

/// An error and its sources, `: `-joined (hyper's own Display is terse).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

/// Addresses of a service port: from its Endpoints, else its EndpointSlices, else
/// (`ExternalName` services) the external name, as kube's resolvers do. The cluster IP
/// is not used: nothing routes it here.
pub async fn resolve_service(
    store: &Store,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, String> {
    let svc = store
        .get(&format!("/services/{namespace}/{name}"))
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    let svc_port = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        })
        .cloned();
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        let host = svc
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or("");
        return tokio::net::lookup_host((host, port))
            .await
            .map(Iterator::collect)
            .map_err(|e| format!("resolving externalName {host:?}: {e}"));
    }
    let Some(svc_port) = svc_port else {
        return Err(format!(
            "unable to find service port {port} of service \"{namespace}/{name}\""
        ));
    };
    let port_name = svc_port.get("name").and_then(Value::as_str).unwrap_or("");
    let target = svc_port.get("targetPort").and_then(Value::as_u64);
    let mut addrs = vec![];
    if let Some(ep) = store.get(&format!("/endpoints/{namespace}/{name}")) {
        for subset in ep
            .get("subsets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let p = endpoint_port(subset.get("ports"), port_name, target);
            for a in subset
                .get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(ip), Some(p)) = (a.get("ip").and_then(Value::as_str), p)
                    && let Ok(ip) = ip.parse()
                {
                    addrs.push(SocketAddr::new(ip, p));
                }
            }
        }
    }
    if addrs.is_empty() {
        let (slices, _) = store.list(
            &format!("discovery.k8s.io/endpointslices/{namespace}/"),
            None,
        );
        for (_, s) in slices {
            if s.pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                != Some(name)
            {
                continue;
            }
            let p = endpoint_port(s.get("ports"), port_name, target);
            for e in s
                .get("endpoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if e.pointer("/conditions/ready") == Some(&Value::Bool(false)) {
                    continue;
                }
                for ip in e
                    .get("addresses")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let (Some(ip), Some(p)) = (ip.as_str().and_then(|i| i.parse().ok()), p) {
                        addrs.push(SocketAddr::new(ip, p));
                    }
                }
            }
        }
    }
    if addrs.is_empty() {
        return Err(format!("service \"{namespace}/{name}\" has no endpoints"));
    }
    Ok(addrs)
}

/// The endpoint port for a service port: the one with the service port's name, or
/// the only one, or the numeric targetPort.
fn endpoint_port(ports: Option<&Value>, name: &str, target: Option<u64>) -> Option<u16> {
    let ports = ports.and_then(Value::as_array).cloned().unwrap_or_default();
    let by_name = ports
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == name)
        .or(if ports.len() == 1 {
            ports.first()
        } else {
            None
        });
    by_name
        .and_then(|p| p.get("port").and_then(Value::as_u64))
        .or(target)
        .and_then(|p| u16::try_from(p).ok())
}
