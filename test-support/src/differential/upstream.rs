//! An HTTPS client for one API server: the embedded one with its bearer
//! token, trusting its CA, or a real kube-apiserver with the admin client
//! certificate. The proxy forwards through it, the replayer sends
//! through it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use gantry_apiserver::ApiServerHandle;

use crate::{Cluster, RealCluster};

/// Where requests go, and with which credentials.
#[derive(Clone)]
pub struct Upstream {
    base: String,
    token: Option<String>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// A request to send.
#[derive(Debug, Clone, Default)]
pub struct Outgoing {
    /// HTTP method.
    pub method: String,
    /// Path and query (`/api/v1/pods?limit=1`).
    pub path_and_query: String,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Accept`.
    pub accept: Option<String>,
    /// `User-Agent`.
    pub user_agent: Option<String>,
    /// Body.
    pub body: Vec<u8>,
}

/// A whole response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// Body.
    pub body: Bytes,
}

impl Upstream {
    /// Plain HTTP to `base`, with no credentials (a server that needs none).
    pub fn plain(base: &str) -> Upstream {
        Upstream {
            base: base.trim_end_matches('/').to_string(),
            token: None,
            client: Client::builder(TokioExecutor::new()).build(connector(Trust::Ca(None))),
        }
    }

    /// The embedded server: its URL (HTTPS, or HTTP without TLS), its
    /// bearer token and its CA.
    pub fn embedded(server: &ApiServerHandle) -> Upstream {
        let roots = server.ca_pem().map(|pem| {
            let mut roots = rustls::RootCertStore::empty();
            for ca in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots
                    .add(ca.expect("the embedded server's CA is PEM"))
                    .expect("the embedded server's CA is a certificate");
            }
            roots
        });
        Upstream {
            base: server.url().trim_end_matches('/').to_string(),
            token: server.token().map(str::to_string),
            client: Client::builder(TokioExecutor::new()).build(connector(Trust::Ca(roots))),
        }
    }

    /// HTTPS to a real kube-apiserver as its admin.
    pub fn real(real: &RealCluster) -> Upstream {
        let identity = identity(&real.admin_identity())
            .unwrap_or_else(|e| panic!("the real cluster's admin identity: {e:#}"));
        Upstream {
            base: real.url(),
            token: None,
            client: Client::builder(TokioExecutor::new()).build(connector(Trust::Admin(identity))),
        }
    }

    /// The server of `cluster`, without any proxy between.
    pub fn of(cluster: &Cluster) -> Upstream {
        match (cluster.embedded(), cluster.real()) {
            (Some(embedded), _) => Upstream::embedded(embedded),
            (_, Some(real)) => Upstream::real(real),
            _ => unreachable!("a cluster has a server"),
        }
    }

    /// Send `request`; the response body is left to the caller.
    pub async fn send(&self, request: &Outgoing) -> anyhow::Result<hyper::Response<Incoming>> {
        let mut builder = hyper::Request::builder()
            .method(request.method.as_str())
            .uri(format!("{}{}", self.base, request.path_and_query));
        let headers = [
            ("content-type", &request.content_type),
            ("accept", &request.accept),
            ("user-agent", &request.user_agent),
        ];
        for (name, value) in headers {
            if let Some(value) = value {
                builder = builder.header(name, value);
            }
        }
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        let request = builder
            .body(Full::new(Bytes::from(request.body.clone())))
            .context("building the request")?;
        Ok(self.client.request(request).await?)
    }

    /// Send `request` and read the whole response.
    pub async fn call(&self, request: &Outgoing) -> anyhow::Result<Reply> {
        let response = self.send(request).await?;
        let status = response.status().as_u16();
        let content_type = content_type(response.headers());
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Reply {
            status,
            content_type,
            body,
        })
    }
}

/// The `Content-Type` of `headers`.
pub fn content_type(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// What the client trusts, and how it proves who it is.
enum Trust {
    /// The server's CA (none: plain HTTP); the bearer token is a header.
    Ca(Option<rustls::RootCertStore>),
    /// The real cluster's CA and admin client certificate.
    Admin(Identity),
}

fn connector(trust: Trust) -> HttpsConnector<HttpConnector> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let config = match trust {
        Trust::Admin((roots, chain, key)) => builder
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .expect("the admin client certificate is usable"),
        Trust::Ca(roots) => builder
            .with_root_certificates(roots.unwrap_or_else(rustls::RootCertStore::empty))
            .with_no_client_auth(),
    };
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build()
}

type Identity = (
    rustls::RootCertStore,
    Vec<CertificateDer<'static>>,
    PrivateKeyDer<'static>,
);

fn identity((ca, cert, key): &(PathBuf, PathBuf, PathBuf)) -> anyhow::Result<Identity> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(ca)? {
        roots.add(ca?)?;
    }
    let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<_, _>>()?;
    Ok((roots, chain, PrivateKeyDer::from_pem_file(key)?))
}
