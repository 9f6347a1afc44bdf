//! What the webhook certificate Secret (`--webhook-cert-secret`) holds,
//! read from its data and made anew with rcgen: a CA that signs (`ca.key`
//! and the first certificate of `ca.crt`), the older CAs still trusted (the
//! rest of `ca.crt`), and the serving certificate with its key (`tls.crt`,
//! `tls.key`). Every part read is checked: PEM that parses, keys that match
//! their certificates, a serving certificate signed by a trusted CA.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use k8s_openapi::ByteString;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PublicKeyData,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use x509_parser::extensions::GeneralName;

/// Key of the serving certificate (PEM) in the Secret's data.
pub(crate) const TLS_CRT: &str = "tls.crt";
/// Key of the serving certificate's private key (PEM).
pub(crate) const TLS_KEY: &str = "tls.key";
/// Key of the CA bundle (PEM): the signing CA first, then older CAs still
/// trusted. It is the webhook configurations' `caBundle`.
pub(crate) const CA_CRT: &str = "ca.crt";
/// Key of the signing CA's private key (PEM), so that any replica can
/// renew the serving certificate.
pub(crate) const CA_KEY: &str = "ca.key";

/// What renewal needs to know of one certificate.
#[derive(Debug, Clone)]
pub(crate) struct CertInfo {
    /// The certificate (PEM).
    pub pem: String,
    der: Vec<u8>,
    /// Start of validity, in seconds since the Unix epoch.
    pub not_before: i64,
    /// End of validity, in seconds since the Unix epoch.
    pub not_after: i64,
    /// Its DNS names and IP addresses.
    pub names: Vec<String>,
    spki: Vec<u8>,
}

impl CertInfo {
    fn from_der(der: &[u8]) -> Result<Self, String> {
        let (_, cert) =
            x509_parser::parse_x509_certificate(der).map_err(|e| format!("not X.509: {e}"))?;
        let names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san
                .value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some((*dns).to_string()),
                    GeneralName::IPAddress(ip) => ip_of(ip).map(|ip| ip.to_string()),
                    _ => None,
                })
                .collect(),
            Ok(None) => Vec::new(),
            Err(e) => return Err(format!("subject alternative names: {e}")),
        };
        Ok(Self {
            pem: super::tls::pem_of(&CertificateDer::from(der)),
            der: der.to_vec(),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            names,
            spki: cert.public_key().raw.to_vec(),
        })
    }

    /// Whether `issuer`'s key signed this certificate.
    fn signed_by(&self, issuer: &CertInfo) -> bool {
        let (Ok((_, cert)), Ok((_, ca))) = (
            x509_parser::parse_x509_certificate(&self.der),
            x509_parser::parse_x509_certificate(&issuer.der),
        ) else {
            return false;
        };
        cert.issuer() == ca.subject() && cert.verify_signature(Some(ca.public_key())).is_ok()
    }

    /// When it was made: its start of validity without the backdating.
    pub(crate) fn issued_at(&self) -> i64 {
        // The inverse of `backdate`: the span is the lifetime plus the
        // backdating, 5 minutes or a twentieth of the lifetime.
        let span = self.not_after - self.not_before;
        let backdated = if span >= 21 * BACKDATE_MAX_SECS {
            BACKDATE_MAX_SECS
        } else {
            span / 21
        };
        self.not_before + backdated
    }

    /// The time at which a third of its validity remains: when it is
    /// renewed.
    pub(crate) fn renew_at(&self) -> i64 {
        self.not_before + (self.not_after - self.not_before) * 2 / 3
    }
}

fn ip_of(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => None,
    }
}

/// The CAs: the one that signs, with its key, and older ones still trusted.
#[derive(Debug, Clone)]
pub(crate) struct Authority {
    /// The CA that signs new serving certificates.
    pub signing: CertInfo,
    key_pem: String,
    /// Older CAs, trusted until they expire (a serving certificate they
    /// signed is still in use somewhere).
    pub older: Vec<CertInfo>,
}

/// The serving certificate and its key.
#[derive(Debug, Clone)]
pub(crate) struct Serving {
    /// The certificate.
    pub cert: CertInfo,
    key_pem: String,
    /// Whether the signing CA signed it (else an older one did).
    pub by_signing_ca: bool,
}

fn text<'a>(data: &'a BTreeMap<String, ByteString>, key: &str) -> Result<&'a str, String> {
    let bytes = data.get(key).ok_or_else(|| format!("no {key}"))?;
    std::str::from_utf8(&bytes.0).map_err(|_| format!("{key} is not text"))
}

fn certs_of(pem: &str, key: &str) -> Result<Vec<CertInfo>, String> {
    let ders = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{key} is not PEM: {e}"))?;
    if ders.is_empty() {
        return Err(format!("{key} holds no certificate"));
    }
    ders.iter()
        .map(|der| CertInfo::from_der(der).map_err(|e| format!("{key}: {e}")))
        .collect()
}

fn key_for(pem: &str, key: &str, cert: &CertInfo) -> Result<(), String> {
    let pair = KeyPair::from_pem(pem).map_err(|e| format!("{key} is not a private key: {e}"))?;
    if pair.subject_public_key_info() != cert.spki {
        return Err(format!("{key} does not match its certificate"));
    }
    Ok(())
}

impl Authority {
    /// The CAs of the Secret's `ca.crt` and `ca.key`.
    pub(crate) fn read(data: &BTreeMap<String, ByteString>) -> Result<Self, String> {
        let mut cas = certs_of(text(data, CA_CRT)?, CA_CRT)?;
        let key_pem = text(data, CA_KEY)?.to_string();
        key_for(&key_pem, CA_KEY, &cas[0])?;
        let signing = cas.remove(0);
        Ok(Self {
            signing,
            key_pem,
            older: cas,
        })
    }

    /// A new CA, valid for `lifetime` from `now`, trusting `older` too.
    pub(crate) fn generate(
        now: SystemTime,
        lifetime: Duration,
        older: Vec<CertInfo>,
    ) -> anyhow::Result<Self> {
        let key = KeyPair::generate().context("generating the CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        // A name of its own, so that clients tell the CAs of a rotation apart.
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("gantry webhook CA {since}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = (now - backdate(lifetime)).into();
        params.not_after = (now + lifetime).into();
        let cert = params.self_signed(&key).context("signing the CA")?;
        Ok(Self {
            signing: CertInfo::from_der(cert.der()).map_err(anyhow::Error::msg)?,
            key_pem: key.serialize_pem(),
            older,
        })
    }

    /// Every CA trusted, the signing one first: the `caBundle`.
    pub(crate) fn bundle_pem(&self) -> String {
        std::iter::once(&self.signing)
            .chain(&self.older)
            .map(|c| c.pem.as_str())
            .collect()
    }

    /// A serving certificate for `hosts` signed by the signing CA, valid
    /// for `lifetime` from `now` but never past the CA.
    pub(crate) fn issue(
        &self,
        hosts: &[String],
        now: SystemTime,
        lifetime: Duration,
    ) -> anyhow::Result<Serving> {
        let ca_key = KeyPair::from_pem(&self.key_pem).context("the CA key")?;
        let issuer = Issuer::from_ca_cert_pem(&self.signing.pem, ca_key).context("the CA")?;
        let key = KeyPair::generate().context("generating the serving key")?;
        let mut params = super::tls::serving_params(hosts)?;
        params.not_before = (now - backdate(lifetime)).into();
        let ca_end =
            UNIX_EPOCH + Duration::from_secs(self.signing.not_after.max(0).cast_unsigned());
        params.not_after = (now + lifetime).min(ca_end).into();
        let cert = params
            .signed_by(&key, &issuer)
            .context("signing the serving certificate")?;
        Ok(Serving {
            cert: CertInfo::from_der(cert.der()).map_err(anyhow::Error::msg)?,
            key_pem: key.serialize_pem(),
            by_signing_ca: true,
        })
    }
}

impl Serving {
    /// The serving certificate of the Secret's `tls.crt` and `tls.key`,
    /// which one of `authority`'s CAs must have signed.
    pub(crate) fn read(
        data: &BTreeMap<String, ByteString>,
        authority: &Authority,
    ) -> Result<Self, String> {
        let cert = certs_of(text(data, TLS_CRT)?, TLS_CRT)?.remove(0);
        let key_pem = text(data, TLS_KEY)?.to_string();
        key_for(&key_pem, TLS_KEY, &cert)?;
        let by_signing_ca = cert.signed_by(&authority.signing);
        if !by_signing_ca && !authority.older.iter().any(|ca| cert.signed_by(ca)) {
            return Err(format!("{TLS_CRT} is not signed by a CA of {CA_CRT}"));
        }
        Ok(Self {
            cert,
            key_pem,
            by_signing_ca,
        })
    }

    /// Its certificate (PEM).
    pub(crate) fn cert_pem(&self) -> &str {
        &self.cert.pem
    }

    /// Its private key (PEM).
    pub(crate) fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Whether it names every one of `hosts`.
    pub(crate) fn covers(&self, hosts: &[String]) -> bool {
        hosts.iter().all(|h| self.cert.names.contains(h))
    }
}

/// The Secret's data for `authority` and `serving`.
pub(crate) fn to_data(authority: &Authority, serving: &Serving) -> BTreeMap<String, ByteString> {
    [
        (TLS_CRT, serving.cert.pem.clone()),
        (TLS_KEY, serving.key_pem.clone()),
        (CA_CRT, authority.bundle_pem()),
        (CA_KEY, authority.key_pem.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
    .collect()
}

/// Longest backdating, in seconds.
const BACKDATE_MAX_SECS: i64 = 300;

/// How far back a new certificate's validity starts, so that a clock a
/// little behind ours accepts it: 5 minutes, less for short test lifetimes.
fn backdate(lifetime: Duration) -> Duration {
    Duration::from_secs(BACKDATE_MAX_SECS.cast_unsigned()).min(lifetime / 20)
}

/// Seconds since the Unix epoch.
pub(crate) fn unix(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs().cast_signed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        vec![
            "gantry-webhook.gantry-system.svc".into(),
            "127.0.0.1".into(),
        ]
    }

    #[test]
    fn generated_material_reads_back_and_bad_parts_are_named() {
        let now = SystemTime::now();
        let ca = Authority::generate(now, Duration::from_hours(24), vec![]).unwrap();
        let serving = ca.issue(&hosts(), now, Duration::from_hours(1)).unwrap();
        let data = to_data(&ca, &serving);
        let read = Authority::read(&data).unwrap();
        assert!(read.older.is_empty());
        let back = Serving::read(&data, &read).unwrap();
        assert!(back.by_signing_ca && back.covers(&hosts()));
        assert_eq!(back.cert.names, hosts());
        assert!(back.cert.not_after - unix(now) <= 3600);
        assert!((back.cert.issued_at() - unix(now)).abs() <= 1);
        assert!((read.signing.issued_at() - unix(now)).abs() <= 1);

        let mut broken = data.clone();
        broken.insert(
            CA_CRT.into(),
            ByteString(
                b"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n".to_vec(),
            ),
        );
        let err = Authority::read(&broken).unwrap_err();
        assert!(err.contains("ca.crt"), "{err}");
        // A key of another certificate.
        let other = ca.issue(&hosts(), now, Duration::from_hours(1)).unwrap();
        let mut swapped = data.clone();
        swapped.insert(
            TLS_KEY.into(),
            ByteString(other.key_pem.clone().into_bytes()),
        );
        let err = Serving::read(&swapped, &read).unwrap_err();
        assert_eq!(err, "tls.key does not match its certificate");
        // A serving certificate of a CA not in the bundle.
        let stranger = Authority::generate(now, Duration::from_hours(24), vec![]).unwrap();
        let err = Serving::read(&data, &stranger).unwrap_err();
        assert_eq!(err, "tls.crt is not signed by a CA of ca.crt");
        // Signed by an older CA still trusted.
        let rotated =
            Authority::generate(now, Duration::from_hours(24), vec![read.signing.clone()]).unwrap();
        let older = Serving::read(&data, &rotated).unwrap();
        assert!(!older.by_signing_ca);
    }

    #[test]
    fn a_serving_certificate_never_outlives_its_ca() {
        let now = SystemTime::now();
        let ca = Authority::generate(now, Duration::from_mins(10), vec![]).unwrap();
        let serving = ca.issue(&hosts(), now, Duration::from_hours(1)).unwrap();
        assert_eq!(serving.cert.not_after, ca.signing.not_after);
        assert!((ca.signing.issued_at() - unix(now)).abs() <= 1);
    }
}
