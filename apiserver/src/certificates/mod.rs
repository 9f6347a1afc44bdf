//! `certificates.k8s.io/v1` `CertificateSigningRequests` as kube serves them:
//! the requester recorded on create, the `/approval` and `/status`
//! subresources each changing only what kube lets it change
//! ([`strategy`]), kube's validation ([`validation`]), and the
//! `kubernetes.io/kube-apiserver-client` signer, which issues the
//! certificate of an approved request from the server's CA ([`signer`]).

pub mod signer;
pub mod strategy;
pub mod validation;

use crate::registry::ResourceInfo;

/// The API group.
pub const GROUP: &str = "certificates.k8s.io";

/// Whether `info` is the `CertificateSigningRequest` resource.
pub fn is_csr(info: &ResourceInfo) -> bool {
    info.group == GROUP && info.plural == "certificatesigningrequests"
}

/// The decoded PEM of a request's `spec.request` (base64 in JSON).
pub fn request_pem(obj: &serde_json::Value) -> Option<String> {
    use base64::Engine;
    let encoded = obj.pointer("/spec/request")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}
