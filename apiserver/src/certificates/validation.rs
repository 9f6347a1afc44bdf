//! kube's validation of `CertificateSigningRequests` (create and the updates
//! of each subresource), with its messages.

use serde_json::Value;

use crate::error::Cause;

/// The key usages kube accepts.
const USAGES: [&str; 22] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "timestamping",
];

/// Condition types whose status may only be `True`.
const TRUE_ONLY: [&str; 3] = ["Approved", "Denied", "Failed"];

/// What an update may do, by subresource.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// The main resource: metadata only.
    Object,
    /// `/status`: the certificate may be set once.
    Status,
    /// `/approval`: Approved and Denied conditions may be added.
    Approval,
}

/// Go's `%q` of a string.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// kube's `validateCSR`: the request is a PEM `CERTIFICATE REQUEST` whose
/// signature holds.
fn request_error(obj: &Value) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let pem = super::request_pem(obj).unwrap_or_default();
    let parsed = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok();
    let Some((_, block)) = parsed.filter(|(_, b)| b.label == "CERTIFICATE REQUEST") else {
        return Some("PEM block type must be CERTIFICATE REQUEST".into());
    };
    match x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents) {
        Err(e) => Some(format!("x509: {e}")),
        Ok((_, csr)) => csr
            .verify_signature()
            .err()
            .map(|_| "x509: ECDSA verification failure".into()),
    }
}

fn strings<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a str> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn conditions(obj: &Value) -> Vec<&Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn of_type<'a>(obj: &'a Value, kind: &str) -> Vec<&'a Value> {
    conditions(obj)
        .into_iter()
        .filter(|c| c["type"] == kind)
        .collect()
}

/// kube's `ValidateSignerName`: `DOMAIN/PATH`.
fn signer_name(name: &str, out: &mut Vec<Cause>) {
    const FIELD: &str = "spec.signerName";
    if name.is_empty() {
        out.push(Cause::new("FieldValueRequired", "Required value", FIELD));
        return;
    }
    let valid = name.split_once('/').is_some_and(|(domain, path)| {
        crate::objects::names::is_dns1123_subdomain(domain) && !path.is_empty()
    });
    if !valid {
        out.push(Cause::new(
            "FieldValueInvalid",
            format!(
                "Invalid value: {}: must be a fully qualified domain and path of the form 'example.com/signer-name'",
                quoted(name)
            ),
            FIELD,
        ));
    }
}

/// The causes of a request kube would refuse (create, or the new object of
/// an update).
pub fn validate(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Some(e) = request_error(obj) {
        out.push(Cause::new(
            "FieldValueInvalid",
            format!(
                "Invalid value: {}: {e}",
                obj.pointer("/spec/request").cloned().unwrap_or(Value::Null)
            ),
            "spec.request",
        ));
    }
    let usages = strings(obj, "/spec/usages");
    if usages.is_empty() {
        out.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.usages",
        ));
    }
    for (i, usage) in usages.iter().enumerate() {
        if !USAGES.contains(usage) {
            let supported: Vec<String> = USAGES.iter().map(|u| quoted(u)).collect();
            out.push(Cause::new(
                "FieldValueNotSupported",
                format!(
                    "Unsupported value: {}: supported values: {}",
                    quoted(usage),
                    supported.join(", ")
                ),
                format!("spec.usages[{i}]"),
            ));
        } else if usages[..i].contains(usage) {
            out.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: {}", quoted(usage)),
                format!("spec.usages[{i}]"),
            ));
        }
    }
    let signer = obj
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if signer == "kubernetes.io/legacy-unknown" {
        out.push(Cause::new(
            "FieldValueInvalid",
            "Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version",
            "spec.signerName",
        ));
    } else {
        signer_name(signer, &mut out);
    }
    if let Some(seconds) = obj
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .filter(|s| *s < 600)
    {
        out.push(Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {seconds}: may not specify a duration less than 600 seconds (10 minutes)"),
            "spec.expirationSeconds",
        ));
    }
    validate_conditions(obj, &mut out);
    out
}

fn validate_conditions(obj: &Value, out: &mut Vec<Cause>) {
    let (mut approved, mut denied) = (false, false);
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions(obj).into_iter().enumerate() {
        let kind = c["type"].as_str().unwrap_or_default();
        let status = c["status"].as_str().unwrap_or_default();
        let at = format!("status.conditions[{i}]");
        if kind.is_empty() {
            out.push(Cause::new(
                "FieldValueRequired",
                "Required value",
                format!("{at}.type"),
            ));
        }
        let allowed: &[&str] = if TRUE_ONLY.contains(&kind) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            out.push(Cause::new(
                "FieldValueRequired",
                "Required value",
                format!("{at}.status"),
            ));
        } else if !allowed.contains(&status) {
            let supported: Vec<String> = allowed.iter().map(|s| quoted(s)).collect();
            out.push(Cause::new(
                "FieldValueNotSupported",
                format!(
                    "Unsupported value: {}: supported values: {}",
                    quoted(status),
                    supported.join(", ")
                ),
                format!("{at}.status"),
            ));
        }
        let exclusive = match kind {
            "Approved" => {
                approved = true;
                denied
            }
            "Denied" => {
                denied = true;
                approved
            }
            _ => false,
        };
        if exclusive {
            out.push(Cause::new(
                "FieldValueInvalid",
                format!(
                    "Invalid value: {}: Approved and Denied conditions are mutually exclusive",
                    quoted(kind)
                ),
                "status.conditions",
            ));
        }
        if seen.contains(&kind) {
            out.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: {}", quoted(kind)),
                format!("{at}.type"),
            ));
        }
        seen.push(kind);
    }
}

/// The causes of an update kube would refuse, beyond [`validate`] of the
/// new object: conditions that go away or change where they may not, a
/// certificate set where it may not be.
pub fn validate_update(old: &Value, new: &Value, update: Update) -> Vec<Cause> {
    let mut out = validate(new);
    let forbidden = |message: String, field: &str| {
        Cause::new(
            "FieldValueForbidden",
            format!("Forbidden: {message}"),
            field,
        )
    };
    for kind in ["Approved", "Denied", "Failed"] {
        if of_type(new, kind).len() < of_type(old, kind).len() {
            out.push(forbidden(
                format!(
                    "updates may not remove a condition of type {}",
                    quoted(kind)
                ),
                "status.conditions",
            ));
        }
    }
    if update != Update::Approval {
        for kind in ["Approved", "Denied"] {
            let (before, after) = (of_type(old, kind), of_type(new, kind));
            if after.len() > before.len() {
                out.push(forbidden(
                    format!("updates may not add a condition of type {}", quoted(kind)),
                    "status.conditions",
                ));
            } else if after.len() == before.len() && after != before {
                out.push(forbidden(
                    format!(
                        "updates may not modify a condition of type {}",
                        quoted(kind)
                    ),
                    "status.conditions",
                ));
            }
        }
    }
    let certificate = |o: &Value| o.pointer("/status/certificate").cloned();
    let (before, after) = (certificate(old), certificate(new));
    if before != after {
        if update != Update::Status {
            out.push(forbidden(
                "updates may not set certificate content".into(),
                "status.certificate",
            ));
        } else if before
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty())
        {
            out.push(forbidden(
                "updates may not modify existing certificate content".into(),
                "status.certificate",
            ));
        }
    }
    out
}
