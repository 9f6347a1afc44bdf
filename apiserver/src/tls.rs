//! The server's TLS identity: a CA and a serving certificate signed by it, made
//! at first start. A durable server keeps them in `<data-dir>/tls/` (the key 0600),
//! so kubeconfigs stay valid across restarts; an in-memory one makes new ones each
//! start. kubectl sends its token only over TLS, so the token needs it.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A serving certificate, its key, and the CA that clients trust.
pub struct Identity {
    /// The CA certificate (PEM): `certificate-authority-data` of the kubeconfig.
    pub ca_pem: String,
    /// The CA certificate (DER).
    pub ca_der: Vec<u8>,
    /// The CA's private key (PEM), which signs the certificates of approved
    /// `CertificateSigningRequests`; None for an identity kept from before
    /// the key was.
    pub ca_key_pem: Option<String>,
    chain_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

/// Failures making the identity.
#[derive(Debug, thiserror::Error)]
#[error("TLS identity: {0}")]
pub struct TlsError(String);

fn err(e: impl std::fmt::Display) -> TlsError {
    TlsError(e.to_string())
}

impl Identity {
    /// A new CA ("gantry apiserver CA") and a certificate for `localhost`, the
    /// loopback addresses and `listen`'s IP (unless unspecified), valid ten years.
    pub fn generate(listen: SocketAddr) -> Result<Identity, TlsError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let now = std::time::SystemTime::now();
        let valid_for = std::time::Duration::from_hours(87600);
        let ca_key = KeyPair::generate().map_err(err)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca.distinguished_name
            .push(DnType::CommonName, "gantry apiserver CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.not_before = (now - std::time::Duration::from_hours(1)).into();
        ca.not_after = (now + valid_for).into();
        let ca_cert = ca.self_signed(&ca_key).map_err(err)?;

        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
            hosts.push(listen.ip().to_string());
        }
        let key = KeyPair::generate().map_err(err)?;
        let mut leaf = CertificateParams::new(hosts).map_err(err)?;
        leaf.distinguished_name
            .push(DnType::CommonName, "gantry-apiserver");
        leaf.is_ca = IsCa::ExplicitNoCa;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.not_before = ca.not_before;
        leaf.not_after = ca.not_after;
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = Issuer::new(ca, ca_key);
        let leaf_cert = leaf.signed_by(&key, &issuer).map_err(err)?;
        Ok(Identity {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            ca_key_pem: Some(ca_key_pem),
            chain_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
            key_pem: key.serialize_pem(),
        })
    }

    /// The identity kept in `dir` (`ca.crt`, `ca.key`, `tls.crt`, `tls.key`), or a new one
    /// written there (each file 0600, atomically) when `dir` has none.
    pub fn load_or_generate(dir: &Path, listen: SocketAddr) -> Result<Identity, TlsError> {
        let read = |name: &str| std::fs::read_to_string(dir.join(name));
        if let (Ok(ca_pem), Ok(chain_pem), Ok(key_pem)) =
            (read("ca.crt"), read("tls.crt"), read("tls.key"))
        {
            let ca_der = CertificateDer::from_pem_slice(ca_pem.as_bytes())
                .map_err(err)?
                .to_vec();
            return Ok(Identity {
                ca_pem,
                ca_der,
                ca_key_pem: read("ca.key").ok(),
                chain_pem,
                key_pem,
            });
        }
        let id = Identity::generate(listen)?;
        crate::private_file::create_dir(dir).map_err(err)?;
        let ca_key = id.ca_key_pem.clone().unwrap_or_default();
        for (name, text) in [
            ("ca.key", &ca_key),
            ("tls.key", &id.key_pem),
            ("tls.crt", &id.chain_pem),
            ("ca.crt", &id.ca_pem),
        ] {
            crate::private_file::write(&dir.join(name), text.as_bytes()).map_err(err)?;
        }
        Ok(id)
    }

    /// The rustls server configuration (HTTP/1.1 by ALPN).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(
            PrivatePkcs8KeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(err)?,
        );
        let chain = CertificateDer::pem_slice_iter(self.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(err)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}
