//! kube's `kubernetes.io/kube-apiserver-client` signer (its csrsigning
//! controller): an approved request for that signer gets a client
//! certificate from the server's CA, or a `Failed` condition when its usages
//! are not a client certificate's. Written through `/status` as
//! kube-controller-manager writes it.

use serde_json::{Value, json};

use crate::objects::fieldmanager;
use crate::registry::Registry;
use crate::storage::{View, Write};
use crate::tls::Identity;

/// The signer served.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// kube-controller-manager's default `--cluster-signing-duration`: a year.
const DEFAULT_SECONDS: i64 = 365 * 24 * 3600;
/// kube's backdating of certificates, and the lifetime below which the end
/// is not backdated.
const BACKDATE_SECONDS: i64 = 5 * 60;
const SHORT_SECONDS: i64 = 8 * 3600;

fn has_true(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

/// kube's `validAPIServerClientUsages`.
fn client_usages(usages: &[&str]) -> Result<(), String> {
    for u in usages {
        if !["digital signature", "key encipherment", "client auth"].contains(u) {
            return Err(format!("invalid usage for client certificate: {u}"));
        }
    }
    if usages.contains(&"client auth") {
        Ok(())
    } else {
        Err("missing required usage for client certificate: client auth".into())
    }
}

/// The PEM certificate for `csr`, signed by the CA of `identity`.
fn sign(csr: &Value, usages: &[&str], identity: &Identity) -> Result<String, String> {
    use rcgen::{
        CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
        KeyUsagePurpose, SerialNumber,
    };
    let key_pem = identity
        .ca_key_pem
        .as_deref()
        .ok_or("the server's CA key is not kept")?;
    let key = KeyPair::from_pem(key_pem).map_err(|e| e.to_string())?;
    let issuer = Issuer::from_ca_cert_pem(&identity.ca_pem, key).map_err(|e| e.to_string())?;
    let pem = super::request_pem(csr).unwrap_or_default();
    let mut request = CertificateSigningRequestParams::from_pem(&pem).map_err(|e| e.to_string())?;
    let seconds = csr
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_SECONDS)
        .min(DEFAULT_SECONDS);
    let now = std::time::SystemTime::now();
    let secs = |s: i64| std::time::Duration::from_secs(s.unsigned_abs());
    let params = &mut request.params;
    params.not_before = (now - secs(BACKDATE_SECONDS)).into();
    params.not_after = if seconds < SHORT_SECONDS {
        now + secs(seconds)
    } else {
        now + secs(seconds - BACKDATE_SECONDS)
    }
    .into();
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = usages
        .iter()
        .filter_map(|u| match *u {
            "digital signature" => Some(KeyUsagePurpose::DigitalSignature),
            "key encipherment" => Some(KeyUsagePurpose::KeyEncipherment),
            _ => None,
        })
        .collect();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let serial: [u8; 16] = rand::random();
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    let cert = request.signed_by(&issuer).map_err(|e| e.to_string())?;
    Ok(cert.pem())
}

/// The status writes that answer approved requests for [`SIGNER`].
pub fn plan(registry: &Registry, view: &View<'_>, identity: &Identity) -> Vec<Write> {
    use base64::Engine;
    let Some(info) = registry.get(super::GROUP, "v1", "certificatesigningrequests") else {
        return vec![];
    };
    let mut writes = Vec::new();
    for (key, csr) in view.list(&info.prefix()) {
        let pending = csr.pointer("/spec/signerName") == Some(&json!(SIGNER))
            && has_true(&csr, "Approved")
            && !has_true(&csr, "Failed")
            && csr
                .pointer("/status/certificate")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
        if !pending {
            continue;
        }
        let usages: Vec<&str> = csr
            .pointer("/spec/usages")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut new: Value = (*csr).clone();
        if !new["status"].is_object() {
            new["status"] = json!({});
        }
        let outcome = client_usages(&usages).and_then(|()| sign(&csr, &usages, identity));
        match outcome {
            Ok(pem) => {
                new["status"]["certificate"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(pem));
            }
            Err(message) => {
                let now = crate::objects::meta::now_rfc3339();
                let mut conditions = new["status"]["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                conditions.push(json!({
                    "type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                    "message": message, "lastUpdateTime": now, "lastTransitionTime": now,
                }));
                new["status"]["conditions"] = json!(conditions);
            }
        }
        if fieldmanager::record_update(
            &info,
            Some(&csr),
            &mut new,
            "kube-controller-manager",
            Some("status"),
        )
        .is_ok()
        {
            writes.push(Write::Put(key, new));
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::client_usages;

    #[test]
    fn client_certificates_need_client_auth_and_nothing_else() {
        assert!(client_usages(&["digital signature", "client auth"]).is_ok());
        assert_eq!(
            client_usages(&["server auth"]).unwrap_err(),
            "invalid usage for client certificate: server auth"
        );
        assert_eq!(
            client_usages(&["digital signature"]).unwrap_err(),
            "missing required usage for client certificate: client auth"
        );
    }
}
