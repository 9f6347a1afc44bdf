//! [`Fetcher`]: get a component from its source, through the disk cache,
//! with retries, a size cap and digest verification.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_sandbox::runtime::ComponentBytes;
use thiserror::Error;

use super::cache::DigestCache;
use super::spec::PluginSource;
use super::{http, oci};
use crate::delivery::envelope::MAX_PLUGIN_BYTES;

/// How downloads behave.
#[derive(Debug, Clone)]
pub struct FetchSettings {
    /// Root of the disk cache (`<root>/sha256/<hex>`); `None`: no disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Largest component accepted.
    pub max_bytes: usize,
    /// Tries per download, the first included.
    pub attempts: u32,
    /// Delay before the first retry; doubled each time, with jitter.
    pub backoff_base: Duration,
    /// Longest delay between tries.
    pub backoff_max: Duration,
    /// Connecting to the server.
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of a response.
    pub read_timeout: Duration,
    /// Longest one try may take in all.
    pub attempt_timeout: Duration,
    /// Downloads at once (more wait their turn).
    pub max_concurrent: usize,
}

impl Default for FetchSettings {
    fn default() -> Self {
        Self {
            cache_dir: gantry_sandbox::runtime::user_cache_dir().map(|d| d.join("plugins")),
            max_bytes: MAX_PLUGIN_BYTES,
            attempts: 4,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            attempt_timeout: Duration::from_mins(5),
            max_concurrent: 4,
        }
    }
}

/// Why a fetch failed.
#[derive(Debug, Error)]
pub enum FetchError {
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// Connecting, TLS, a timeout or a broken transfer.
    #[error("transfer failed: {0}")]
    Transport(String),
    /// The registry refused the request or does not have the artifact.
    #[error("registry: {message}")]
    Registry {
        /// What it said.
        message: String,
        /// Worth trying again (5xx, rate limits, network).
        transient: bool,
    },
    /// The component is larger than the cap.
    #[error("the component is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// The bytes do not hash to the pin.
    #[error("the component's sha256 is {actual}, but the binding pins {expected}")]
    DigestMismatch {
        /// Pinned.
        expected: String,
        /// Computed.
        actual: String,
    },
    /// A redirect the source does not allow (a downgrade to plain http, or
    /// too many).
    #[error("redirect refused: {0}")]
    Redirect(String),
    /// A URL source without a `sha256` pin.
    #[error("a url source needs a sha256 pin")]
    Unpinned,
    /// The OCI artifact is not a Wasm component artifact.
    #[error("not a Wasm OCI artifact: {0}")]
    NotWasmArtifact(String),
    /// Every try failed.
    #[error("{last} (gave up after {attempts} tries)")]
    GaveUp {
        /// Tries made.
        attempts: u32,
        /// The last failure.
        last: Box<FetchError>,
    },
}

impl FetchError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            FetchError::Status { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            FetchError::Transport(_) => true,
            FetchError::Registry { transient, .. } => *transient,
            FetchError::GaveUp { last, .. } => last.is_transient(),
            FetchError::TooLarge { .. }
            | FetchError::DigestMismatch { .. }
            | FetchError::NotWasmArtifact(_)
            | FetchError::Redirect(_)
            | FetchError::Unpinned => false,
        }
    }
}

/// A fetched component.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The component, with its sha256.
    pub component: ComponentBytes,
    /// For OCI: the artifact by digest, `oci://host/repo@sha256:<manifest>`.
    pub resolved: Option<String>,
    /// Read from the disk cache, no download.
    pub from_cache: bool,
    /// Time taken.
    pub elapsed: Duration,
}

/// Fetches components; cheap to clone (clones share the download slots).
#[derive(Debug, Clone)]
pub struct Fetcher {
    settings: FetchSettings,
    downloads: Arc<tokio::sync::Semaphore>,
}

impl Default for Fetcher {
    fn default() -> Self {
        Self::new(FetchSettings::default())
    }
}

impl Fetcher {
    /// A fetcher with these settings.
    pub fn new(settings: FetchSettings) -> Self {
        let slots = settings.max_concurrent.max(1);
        Self {
            settings,
            downloads: Arc::new(tokio::sync::Semaphore::new(slots)),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &FetchSettings {
        &self.settings
    }

    fn cache(&self) -> Option<DigestCache> {
        self.settings.cache_dir.as_ref().map(DigestCache::new)
    }

    async fn cached(&self, hex: &str) -> Option<ComponentBytes> {
        let cache = self.cache()?;
        let hex = hex.to_string();
        tokio::task::spawn_blocking(move || cache.get(&hex))
            .await
            .ok()
            .flatten()
    }

    async fn store(&self, component: ComponentBytes) -> ComponentBytes {
        let Some(cache) = self.cache() else {
            return component;
        };
        tokio::task::spawn_blocking(move || {
            if let Err(e) = cache.put(component.digest(), component.bytes()) {
                tracing::warn!(root = %cache.root().display(), error = %e, "could not cache the plugin; it will be downloaded again next time");
            }
            component
        })
        .await
        .expect("cache write does not panic")
    }

    /// Get the component of `source`. `pin`: the binding's `sha256`,
    /// required for URLs; for OCI the layer must match it.
    pub async fn fetch(
        &self,
        source: &PluginSource,
        pin: Option<&str>,
    ) -> Result<Fetched, FetchError> {
        gantry_kube::tls::install_crypto_provider();
        let started = Instant::now();
        let done = |component: ComponentBytes, resolved, from_cache| {
            let elapsed = started.elapsed();
            tracing::info!(%source, digest = component.digest(), from_cache, bytes = component.bytes().len(), ?elapsed, "plugin fetched");
            Fetched {
                component,
                resolved,
                from_cache,
                elapsed,
            }
        };
        match source {
            PluginSource::Url { url, insecure } => {
                let pin = pin.ok_or(FetchError::Unpinned)?;
                if let Some(component) = self.cached(pin).await {
                    return Ok(done(component, None, true));
                }
                let _slot = self.downloads.acquire().await.expect("never closed");
                let bytes = self
                    .retrying(source, || http::download(url, *insecure, &self.settings))
                    .await?;
                let component = self.verify(bytes, Some(pin)).await?;
                Ok(done(self.store(component).await, None, false))
            }
            PluginSource::Oci {
                reference,
                insecure,
            } => {
                let client = oci::client(reference, *insecure, &self.settings);
                let parsed: oci_client::Reference = reference
                    .parse()
                    .map_err(|e| FetchError::NotWasmArtifact(format!("{reference}: {e}")))?;
                // Pinned and cached: the pin is the identity, so the cache
                // answers without asking the registry (a tag is then not
                // resolved: the pin is the record).
                if let Some(pin) = pin
                    && let Some(component) = self.cached(pin).await
                {
                    let resolved = parsed.digest().map(|_| format!("oci://{reference}"));
                    return Ok(done(component, resolved, true));
                }
                let _slot = self.downloads.acquire().await.expect("never closed");
                let (manifest_digest, layer) = self
                    .retrying(source, || oci::resolve(&client, &parsed, &self.settings))
                    .await?;
                let resolved = Some(format!(
                    "oci://{}/{}@{manifest_digest}",
                    parsed.registry(),
                    parsed.repository()
                ));
                let layer_hex = layer.digest.trim_start_matches("sha256:").to_string();
                if let Some(pin) = pin
                    && pin != layer_hex
                {
                    return Err(FetchError::DigestMismatch {
                        expected: pin.to_string(),
                        actual: layer_hex,
                    });
                }
                if let Some(component) = self.cached(&layer_hex).await {
                    return Ok(done(component, resolved, true));
                }
                let bytes = self
                    .retrying(source, || {
                        oci::pull_layer(&client, &parsed, &layer, &self.settings)
                    })
                    .await?;
                let component = self.verify(bytes, Some(&layer_hex)).await?;
                Ok(done(self.store(component).await, resolved, false))
            }
        }
    }

    /// `bytes` with their sha256 (hashed off the executor), checked
    /// against `expected`.
    async fn verify(
        &self,
        bytes: Vec<u8>,
        expected: Option<&str>,
    ) -> Result<ComponentBytes, FetchError> {
        let component = tokio::task::spawn_blocking(move || ComponentBytes::new(bytes))
            .await
            .expect("hashing does not panic");
        match expected {
            Some(expected) if expected != component.digest() => Err(FetchError::DigestMismatch {
                expected: expected.to_string(),
                actual: component.digest().to_string(),
            }),
            _ => Ok(component),
        }
    }

    /// Run `attempt` until it succeeds, fails for good, or runs out of
    /// tries; exponential backoff with jitter between tries.
    async fn retrying<T, F, Fut>(
        &self,
        source: &PluginSource,
        mut attempt: F,
    ) -> Result<T, FetchError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, FetchError>>,
    {
        let attempts = self.settings.attempts.max(1);
        let mut n = 0;
        loop {
            n += 1;
            let result = match tokio::time::timeout(self.settings.attempt_timeout, attempt()).await
            {
                Ok(result) => result,
                Err(_) => Err(FetchError::Transport(format!(
                    "no answer within {:?}",
                    self.settings.attempt_timeout
                ))),
            };
            match result {
                Ok(value) => return Ok(value),
                Err(e) if !e.is_transient() => return Err(e),
                Err(e) if n >= attempts => {
                    return Err(FetchError::GaveUp {
                        attempts: n,
                        last: Box::new(e),
                    });
                }
                Err(e) => {
                    let delay = backoff(&self.settings, n);
                    tracing::warn!(%source, error = %e, attempt = n, ?delay, "fetching the plugin failed; retrying");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

/// Delay after failed try `n` (1-based): base·2ⁿ⁻¹ capped, then a random
/// point in its upper half.
pub(crate) fn backoff(settings: &FetchSettings, n: u32) -> Duration {
    let exp = settings
        .backoff_base
        .saturating_mul(1 << (n - 1).min(20))
        .min(settings.backoff_max);
    let half = exp / 2;
    half + half.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let settings = FetchSettings {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
            ..FetchSettings::default()
        };
        for _ in 0..50 {
            let d1 = backoff(&settings, 1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = backoff(&settings, 3);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            let d9 = backoff(&settings, 40);
            assert!(d9 >= Duration::from_millis(500) && d9 <= Duration::from_secs(1));
        }
    }

    #[test]
    fn only_network_and_server_failures_are_transient() {
        let status = |status| FetchError::Status {
            url: "u".into(),
            status,
        };
        assert!(status(503).is_transient());
        assert!(status(429).is_transient());
        assert!(!status(404).is_transient());
        assert!(FetchError::Transport("reset".into()).is_transient());
        assert!(!FetchError::TooLarge { limit: 1 }.is_transient());
        let mismatch = FetchError::DigestMismatch {
            expected: "a".into(),
            actual: "b".into(),
        };
        assert!(!mismatch.is_transient());
    }
}
