//! A serving certificate that can change while the webhook server runs: a
//! rustls certificate resolver whose certificate is swapped when the
//! Secret's changes, so renewals need no restart. Connections already open
//! keep the certificate of their handshake.

use std::sync::{Arc, RwLock};

use anyhow::Context;
use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;

/// The certificate the webhook server presents now; none until the first
/// is set (handshakes fail until then).
#[derive(Debug)]
pub struct ReloadingCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    loaded: watch::Sender<bool>,
}

impl Default for ReloadingCert {
    fn default() -> Self {
        Self {
            current: RwLock::new(None),
            loaded: watch::channel(false).0,
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().expect("not poisoned").clone()
    }
}

impl ReloadingCert {
    /// Present `chain_pem` (leaf first) with `key_pem` from the next
    /// handshake on. Whether it differs from the one presented so far.
    pub fn set(&self, chain_pem: &str, key_pem: &str) -> anyhow::Result<bool> {
        let chain = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("the certificate is not PEM")?;
        anyhow::ensure!(!chain.is_empty(), "no certificate");
        let mut current = self.current.write().expect("not poisoned");
        if current.as_ref().is_some_and(|c| c.cert == chain) {
            return Ok(false);
        }
        let key =
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("the key is not PEM")?;
        let certified =
            CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
                .context("the key does not match the certificate")?;
        *current = Some(Arc::new(certified));
        self.loaded.send_replace(true);
        Ok(true)
    }

    /// Whether a certificate is set (`true` from the first on).
    pub fn loaded(&self) -> watch::Receiver<bool> {
        self.loaded.subscribe()
    }

    /// A rustls server config presenting this certificate (HTTP/2 and
    /// HTTP/1.1 by ALPN).
    pub fn server_config(self: &Arc<Self>) -> anyhow::Result<Arc<ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_swaps_and_refuses_a_mismatched_key() {
        let reloading = Arc::new(ReloadingCert::default());
        reloading.server_config().unwrap();
        let loaded = reloading.loaded();
        assert!(!*loaded.borrow());
        let a = crate::webhook::tls::self_signed(&["localhost".into()]).unwrap();
        let b = crate::webhook::tls::self_signed(&["localhost".into()]).unwrap();
        assert!(reloading.set(&a.chain_pem, &a.key_pem).unwrap());
        assert!(*loaded.borrow());
        assert!(!reloading.set(&a.chain_pem, &a.key_pem).unwrap(), "same");
        let err = reloading.set(&b.chain_pem, &a.key_pem).unwrap_err();
        assert!(format!("{err:#}").contains("does not match"), "{err:#}");
        assert!(reloading.set(&b.chain_pem, &b.key_pem).unwrap());
    }
}
