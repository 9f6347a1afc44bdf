//! Shared helpers for the integration tests: an in-process server, a raw HTTP client
//! for exact status/header checks, and small object builders.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use gantry_apiserver::{ApiServer, ApiServerHandle, Config};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Starts an in-memory server on a free loopback port.
pub async fn server() -> ApiServerHandle {
    server_with(Config::default()).await
}

/// Starts a server with `config`; [`raw`] speaks its TLS and sends its token.
pub async fn server_with(config: Config) -> ApiServerHandle {
    let s = ApiServer::start(config).await.expect("server starts");
    remember(s.addr(), s.token(), s.ca_pem());
    s
}

/// How [`raw`] reaches one server: its token and a TLS client trusting its CA.
#[derive(Clone, Default)]
struct Access {
    token: Option<String>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

/// The access of each server started by this test binary, by address.
static SERVERS: LazyLock<Mutex<HashMap<SocketAddr, Access>>> = LazyLock::new(Default::default);

/// Makes [`raw`] send `token` to `addr` and trust `ca_pem` (PEM) there.
pub fn remember(addr: SocketAddr, token: Option<&str>, ca_pem: Option<&str>) {
    let tls = ca_pem.map(|pem| {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.expect("CA is PEM")).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    });
    let access = Access {
        token: token.map(str::to_string),
        tls,
    };
    SERVERS.lock().unwrap().insert(addr, access);
}

/// Remembers the server a kubeconfig (YAML) points at, as [`remember`].
pub fn remember_kubeconfig(addr: SocketAddr, kubeconfig: &str) {
    use base64::Engine;
    let kc: Value = serde_yaml::from_str(kubeconfig).unwrap();
    let token = kc["users"][0]["user"]["token"].as_str();
    let ca = kc["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .map(|b| {
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).unwrap()).unwrap()
        });
    remember(addr, token, ca.as_deref());
}

fn access(addr: SocketAddr) -> Access {
    SERVERS
        .lock()
        .unwrap()
        .get(&addr)
        .cloned()
        .unwrap_or_default()
}

/// The token [`raw`] sends to `addr`.
pub fn token_for(addr: SocketAddr) -> Option<String> {
    access(addr).token
}

/// A raw HTTP response.
#[derive(Debug)]
pub struct Raw {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Raw {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = vec![];
    while let Some(pos) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&body[..pos]).unwrap().trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&body[pos + 2..pos + 2 + size]);
        body = &body[pos + 2 + size + 2..];
    }
    out
}

/// Sends one HTTP/1.1 request (Connection: close) and reads the whole response.
/// Sends the server's bearer token unless `headers` has an Authorization header.
pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Raw {
    let has_auth = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
    let bearer = token_for(addr)
        .filter(|_| !has_auth)
        .map(|t| format!("Bearer {t}"));
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if let Some(b) = &bearer {
        all.push(("Authorization", b));
    }
    raw_unauthenticated(addr, method, path, &all, body).await
}

/// Connects to `addr`: TLS when the server has a CA (see [`remember`]), else TCP.
pub async fn connect(addr: SocketAddr) -> Box<dyn Stream> {
    try_connect(addr).await.expect("connect")
}

/// [`connect`], None when the server is not there.
pub async fn try_connect(addr: SocketAddr) -> Option<Box<dyn Stream>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    Some(match access(addr).tls {
        Some(tls) => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            Box::new(
                tokio_rustls::TlsConnector::from(tls)
                    .connect(name, tcp)
                    .await
                    .ok()?,
            )
        }
        None => Box::new(tcp),
    })
}

/// A connection to the server (TLS or TCP).
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for S {}

/// [`raw`] without the server's token: exactly `headers` (and Host: `addr` unless
/// `headers` has one).
pub async fn raw_unauthenticated(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Raw {
    let mut s = connect(addr).await;
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        let _ = write!(req, "Host: {addr}\r\n");
    }
    let _ = write!(
        req,
        "Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut buf = vec![];
    // A peer closing without TLS close_notify ends the response too.
    let _ = s.read_to_end(&mut buf).await;
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&buf[..split]).to_string();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    let raw_body = &buf[split + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(raw_body)
    } else {
        raw_body.to_vec()
    };
    Raw {
        status,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    }
}

/// JSON request helper.
pub async fn req(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Raw {
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    raw(
        addr,
        method,
        path,
        &[("Content-Type", "application/json")],
        &bytes,
    )
    .await
}

/// A ConfigMap body.
// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
pub fn configmap(name: &str, data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": data })
}

/// Asserts a Status response with code and reason.
#[track_caller]
pub fn assert_status(r: &Raw, code: u16, reason: &str) -> Value {
    assert_eq!(r.status, code, "body: {}", r.body);
    let s = r.json();
    assert_eq!(s["kind"], "Status", "{s}");
    assert_eq!(s["code"], code, "{s}");
    assert_eq!(s["reason"], reason, "{s}");
    s
}

/// The widgets.example.com CRD used by several tests.
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"] },
            "versions": [
                {
                    "name": "v1", "served": true, "storage": true,
                    "subresources": { "status": {}, "scale": { "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas" } },
                    "additionalPrinterColumns": [
                        { "name": "Size", "type": "string", "jsonPath": ".spec.size" },
                        { "name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas" }
                    ],
                    "schema": { "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": { "type": "object", "properties": {
                                "size": { "type": "string", "default": "small" },
                                "replicas": { "type": "integer", "maximum": 10 },
                                "tags": { "type": "array", "items": { "type": "string" }, "x-kubernetes-list-type": "set" }
                            }},
                            "status": { "type": "object", "properties": { "replicas": { "type": "integer" }, "phase": { "type": "string" } } }
                        }
                    }}
                },
                {
                    "name": "v1beta1", "served": true, "storage": false,
                    "subresources": { "status": {} },
                    "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
                }
            ]
        }
    })
}

/// Creates the widget CRD and waits until its resources are served and the
/// background controllers have registered its `APIServices`, so that a test
/// reading the resourceVersion afterwards sees no write of theirs land later.
pub async fn install_widgets(addr: SocketAddr) {
    let r = req(
        addr,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&widget_crd()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let d = req(addr, "GET", "/apis/example.com/v1", None).await;
    assert_eq!(d.status, 200, "served right after create: {}", d.body);
    let deadline = Instant::now() + Duration::from_secs(30);
    for version in ["v1", "v1beta1"] {
        let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{version}.example.com");
        while req(addr, "GET", &path, None).await.status != 200 {
            assert!(Instant::now() < deadline, "{path} was never registered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// A widget body.
// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
pub fn widget(name: &str, spec: Value) -> Value {
    json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": name }, "spec": spec })
}

/// Current global resourceVersion (from a list).
pub async fn current_rv(addr: SocketAddr) -> u64 {
    let r = req(addr, "GET", "/api/v1/namespaces", None).await;
    r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// A watch over a raw connection: [`RawWatch::open`] reads the response head only,
/// and the body is read when asked, so a test can play a client that never reads.
pub struct RawWatch {
    /// The response status.
    pub status: u16,
    /// The response head (status line and headers).
    pub head: String,
    stream: Box<dyn Stream>,
    /// Raw body bytes not yet de-chunked.
    raw: Vec<u8>,
    /// De-chunked body bytes not yet returned as lines.
    body: Vec<u8>,
    ended: bool,
}

impl RawWatch {
    /// Sends `GET path` with the server's token and reads the response head.
    pub async fn open(addr: SocketAddr, path: &str) -> RawWatch {
        let mut stream = connect(addr).await;
        let token = token_for(addr)
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{token}\r\n");
        stream.write_all(req.as_bytes()).await.unwrap();
        let mut raw = vec![];
        let split = loop {
            if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break p;
            }
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).await.expect("response head");
            assert!(n > 0, "connection closed before the response head");
            raw.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let raw = raw.split_off(split + 4);
        RawWatch {
            status,
            head,
            stream,
            raw,
            body: vec![],
            ended: false,
        }
    }

    /// Moves complete chunks from `raw` to `body`; notes the last chunk.
    fn dechunk(&mut self) {
        while let Some(pos) = self.raw.windows(2).position(|w| w == b"\r\n") {
            let size_text = std::str::from_utf8(&self.raw[..pos]).unwrap().trim();
            let size = usize::from_str_radix(size_text, 16).expect("chunk size");
            if size == 0 {
                self.ended = true;
                return;
            }
            if self.raw.len() < pos + 2 + size + 2 {
                return;
            }
            self.body
                .extend_from_slice(&self.raw[pos + 2..pos + 2 + size]);
            self.raw.drain(..pos + 2 + size + 2);
        }
    }

    /// The next watch event; None once the response has ended (or the connection closed).
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(nl) = self.body.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.body.drain(..=nl).collect();
                return Some(serde_json::from_slice(&line).expect("a JSON event"));
            }
            self.dechunk();
            if self.body.contains(&b'\n') {
                continue;
            }
            if self.ended {
                return None;
            }
            let mut buf = vec![0u8; 64 * 1024];
            match self.stream.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.raw.extend_from_slice(&buf[..n]),
            }
        }
    }
}
