//! The webhook server's certificate: PEM files, or a self-signed CA and a
//! serving certificate signed by it, generated at start. Either way the
//! result carries the CA bundle that webhook configurations need.
//! rustls with the `ring` provider only, as kube uses.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A serving certificate with its key, and the CA bundle that verifies it.
pub struct Certificate {
    /// The chain, leaf first (PEM).
    pub chain_pem: String,
    /// The private key (PEM).
    pub key_pem: String,
    /// What clients must trust (PEM): the `caBundle` of the webhook
    /// configurations.
    pub ca_pem: String,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate").finish_non_exhaustive()
    }
}

/// The parameters of a serving certificate for `hosts` (DNS names or IP
/// addresses), its validity left to the caller: named for the first host,
/// not a CA, for TLS servers only.
pub(crate) fn serving_params(hosts: &[String]) -> anyhow::Result<rcgen::CertificateParams> {
    use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose};
    let mut params = CertificateParams::new(hosts.to_vec()).context("certificate hosts")?;
    params.distinguished_name.push(
        DnType::CommonName,
        hosts.first().map_or("gantry-webhook", String::as_str),
    );
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    Ok(params)
}

/// A CA ("gantry webhook CA") and a serving certificate for `hosts` (DNS
/// names or IP addresses) signed by it, both new, valid for ten years.
pub fn self_signed(hosts: &[String]) -> anyhow::Result<Certificate> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let now = std::time::SystemTime::now();
    let valid_for = std::time::Duration::from_hours(87600);
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "gantry webhook CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = (now - std::time::Duration::from_hours(1)).into();
    ca.not_after = (now + valid_for).into();
    let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;

    let key = KeyPair::generate().context("generating the serving key")?;
    let mut leaf = serving_params(hosts)?;
    leaf.not_before = ca.not_before;
    leaf.not_after = ca.not_after;
    let issuer = Issuer::new(ca, ca_key);
    let leaf_cert = leaf
        .signed_by(&key, &issuer)
        .context("signing the serving certificate")?;
    Ok(Certificate {
        chain_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
        key_pem: key.serialize_pem(),
        ca_pem: ca_cert.pem(),
    })
}

/// The certificate chain and key from PEM files. The CA bundle is the
/// last certificate of the chain (its root, or the leaf when self-signed)
/// unless `ca` names a file.
pub fn from_files(cert: &Path, key: &Path, ca: Option<&Path>) -> anyhow::Result<Certificate> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    };
    let chain_pem = read(cert)?;
    let key_pem = read(key)?;
    let ca_pem = if let Some(path) = ca {
        read(path)?
    } else {
        let certs = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{} is not PEM", cert.display()))?;
        let last = certs
            .last()
            .with_context(|| format!("{} holds no certificate", cert.display()))?;
        pem_of(last)
    };
    Ok(Certificate {
        chain_pem,
        key_pem,
        ca_pem,
    })
}

/// PEM of a DER certificate.
pub(crate) fn pem_of(cert: &CertificateDer<'_>) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// A rustls server config for `cert` (HTTP/2 and HTTP/1.1 by ALPN).
pub fn server_config(cert: &Certificate) -> anyhow::Result<Arc<ServerConfig>> {
    let chain = CertificateDer::pem_slice_iter(cert.chain_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("the certificate is not PEM")?;
    anyhow::ensure!(
        !chain.is_empty(),
        "the certificate file holds no certificate"
    );
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .context("the key is not a PEM private key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the key does not match the certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_material_builds_a_server_config_and_round_trips_files() {
        let cert = self_signed(&["127.0.0.1".into(), "localhost".into()]).unwrap();
        assert_eq!(cert.chain_pem.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(cert.chain_pem.ends_with(&cert.ca_pem));
        server_config(&cert).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let (c, k) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&c, &cert.chain_pem).unwrap();
        std::fs::write(&k, &cert.key_pem).unwrap();
        let read = from_files(&c, &k, None).unwrap();
        assert_eq!(read.ca_pem, cert.ca_pem, "the CA is the chain's last");
        server_config(&read).unwrap();
        let err = from_files(&c, &dir.path().join("missing"), None).unwrap_err();
        assert!(format!("{err:#}").contains("missing"), "{err:#}");
    }
}
