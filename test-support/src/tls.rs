//! TLS to the API servers of the tests: trust a server's CA and, for the
//! real control plane, present the admin's client certificate.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A connector for `https://` (and plain `http://`) that trusts the CAs in
/// `ca_pem` only, and presents the client certificate and key files of
/// `identity` when given.
pub fn https_connector(
    ca_pem: Option<&str>,
    identity: Option<(&Path, &Path)>,
) -> anyhow::Result<HttpsConnector<HttpConnector>> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.unwrap_or_default().as_bytes()) {
        roots.add(ca.context("the CA is not PEM")?)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .with_context(|| format!("reading {}", cert.display()))?
                .collect::<Result<_, _>>()?;
            let key = PrivateKeyDer::from_pem_file(key)
                .with_context(|| format!("reading {}", key.display()))?;
            builder.with_client_auth_cert(chain, key)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build())
}
