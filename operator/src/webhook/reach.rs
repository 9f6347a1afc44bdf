//! How the API server reaches Gantry's webhook server: a URL or a Service,
//! and the CA bundle to trust; rendered as a webhook `clientConfig` for any
//! path (a policy's, a converter's).

use base64::Engine;
use gantry_kube::names::is_dns1123_label;
use serde_json::{Value, json};

/// Where the API server finds the webhook server, and what it trusts.
#[derive(Debug, Clone)]
pub struct Reach {
    /// Base URL of the webhook server as the API server reaches it, e.g.
    /// `https://gantry.example.com:8443`; ignored when `service` is set.
    pub base_url: String,
    /// The Service in front of the webhook server, if the API server
    /// should reach it through one (`clientConfig.service`).
    pub service: Option<ServiceRef>,
    /// PEM of the CA that signed the server's certificate.
    pub ca_pem: CaBundle,
}

/// The CA bundle (PEM) the API server must trust: fixed, or changing as
/// the CA of the certificate Secret rotates.
#[derive(Debug, Clone)]
pub struct CaBundle(tokio::sync::watch::Receiver<String>);

impl CaBundle {
    /// A bundle that follows `rx`.
    pub fn follow(rx: tokio::sync::watch::Receiver<String>) -> Self {
        Self(rx)
    }

    /// The bundle now.
    pub fn current(&self) -> String {
        self.0.borrow().clone()
    }

    /// Completes when the bundle changes; never, for a fixed one.
    pub async fn changed(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl From<String> for CaBundle {
    fn from(pem: String) -> Self {
        // The sender goes: the bundle never changes.
        Self(tokio::sync::watch::channel(pem).1)
    }
}

impl From<&str> for CaBundle {
    fn from(pem: &str) -> Self {
        pem.to_string().into()
    }
}

/// A Service in front of the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its port (443 when absent).
    pub port: Option<u16>,
}

impl std::str::FromStr for ServiceRef {
    type Err = String;

    /// `namespace/name` or `namespace/name:port`.
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not namespace/name[:port]");
        let (namespace, rest) = text.split_once('/').ok_or_else(bad)?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => (name, Some(port.parse().map_err(|_| bad())?)),
            None => (rest, None),
        };
        if !is_dns1123_label(namespace) || !is_dns1123_label(name) {
            return Err(bad());
        }
        Ok(Self {
            namespace: namespace.into(),
            name: name.into(),
            port,
        })
    }
}

impl Reach {
    /// How the API server reaches `path` on the webhook server: through
    /// the Service, or at the base URL; with the CA bundle.
    pub fn client_config(&self, path: &str) -> Value {
        let ca_bundle =
            base64::engine::general_purpose::STANDARD.encode(self.ca_pem.current().as_bytes());
        match &self.service {
            Some(service) => json!({
                "service": {
                    "namespace": service.namespace,
                    "name": service.name,
                    "path": path,
                    "port": service.port.unwrap_or(443),
                },
                "caBundle": ca_bundle,
            }),
            None => json!({
                "url": format!("{}{path}", self.base_url.trim_end_matches('/')),
                "caBundle": ca_bundle,
            }),
        }
    }
}

impl ServiceRef {
    /// The DNS names the serving certificate needs: the Service's names
    /// within the namespace, the cluster and beyond, `name.namespace.svc`
    /// first.
    pub fn dns_names(&self) -> Vec<String> {
        let base = format!("{}.{}.svc", self.name, self.namespace);
        vec![
            base.clone(),
            format!("{base}.cluster.local"),
            format!("{}.{}", self.name, self.namespace),
            self.name.clone(),
        ]
    }
}
