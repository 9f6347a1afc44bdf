//! An HTTPS client for one API server: the embedded one with its bearer
//! token, trusting its CA, or a real kube-apiserver with the admin client
//! certificate. The proxy forwards through it, the replayer sends
//! through it.

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use gantry_apiserver::ApiServerHandle;

use crate::{Cluster, RealCluster, https_connector};

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
        Upstream::new(base, None, https_connector(None, None))
    }

    /// The embedded server: its URL (HTTPS, or HTTP without TLS), its
    /// bearer token and its CA.
    pub fn embedded(server: &ApiServerHandle) -> Upstream {
        Upstream::new(
            &server.url(),
            server.token().map(str::to_string),
            https_connector(server.ca_pem(), None),
        )
    }

    /// HTTPS to a real kube-apiserver as its admin.
    pub fn real(real: &RealCluster) -> Upstream {
        let (ca, cert, key) = real.admin_identity();
        let connector = std::fs::read_to_string(&ca)
            .map_err(anyhow::Error::from)
            .and_then(|ca| https_connector(Some(&ca), Some((&cert, &key))));
        Upstream::new(&real.url(), None, connector)
    }

    fn new(
        base: &str,
        token: Option<String>,
        connector: anyhow::Result<HttpsConnector<HttpConnector>>,
    ) -> Upstream {
        let connector = connector.unwrap_or_else(|e| panic!("TLS to {base}: {e:#}"));
        Upstream {
            base: base.trim_end_matches('/').to_string(),
            token,
            client: Client::builder(TokioExecutor::new()).build(connector),
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
