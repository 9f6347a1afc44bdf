//! Secret values for request headers: read by the host, never shown to
//! the plugin, never written to logs, traces or errors.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

/// How long a Secret read from the API server is used before it is read
/// again (so a rotated token is picked up within this time).
pub const SECRET_TTL: Duration = Duration::from_secs(10);

/// A future of a Secret value; `Err` names what is missing, never a value.
pub type SecretFuture<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// Where header values come from.
pub trait SecretSource: Send + Sync {
    /// The value of `key` in Secret `secret`.
    fn value<'a>(&'a self, secret: &'a str, key: &'a str) -> SecretFuture<'a>;
}

/// Secrets in one namespace of the cluster, cached for [`SECRET_TTL`].
/// The operator needs `get` on them.
pub struct KubeSecrets {
    api: Api<Secret>,
    cache: Mutex<HashMap<String, (Instant, Secret)>>,
}

impl KubeSecrets {
    /// Secrets of `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            cache: Mutex::new(HashMap::new()),
        }
    }

    async fn secret(&self, name: &str) -> Result<Secret, String> {
        if let Some((read, secret)) = self.cache.lock().unwrap().get(name)
            && read.elapsed() < SECRET_TTL
        {
            return Ok(secret.clone());
        }
        let secret = self
            .api
            .get(name)
            .await
            .map_err(|e| format!("Secret {name} could not be read: {}", kube_reason(&e)))?;
        self.cache
            .lock()
            .unwrap()
            .insert(name.to_string(), (Instant::now(), secret.clone()));
        Ok(secret)
    }
}

/// What failed, without anything the API server echoed of the object.
fn kube_reason(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.reason, status.code),
        _ => "the API server could not be reached".to_string(),
    }
}

impl SecretSource for KubeSecrets {
    fn value<'a>(&'a self, secret: &'a str, key: &'a str) -> SecretFuture<'a> {
        Box::pin(async move {
            let found = self.secret(secret).await?;
            let bytes = found
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .ok_or_else(|| format!("Secret {secret} has no key {key}"))?;
            String::from_utf8(bytes.0.clone())
                .map(|v| v.trim_end_matches(['\r', '\n']).to_string())
                .map_err(|_| format!("Secret {secret} key {key} is not UTF-8"))
        })
    }
}

/// Fixed values, for tests and tools: (secret, key) → value.
pub struct StaticSecrets(pub HashMap<(String, String), String>);

impl SecretSource for StaticSecrets {
    fn value<'a>(&'a self, secret: &'a str, key: &'a str) -> SecretFuture<'a> {
        let found = self
            .0
            .get(&(secret.to_string(), key.to_string()))
            .cloned()
            .ok_or_else(|| format!("Secret {secret} has no key {key}"));
        Box::pin(async move { found })
    }
}
