//! `AdmissionReview` (admission.k8s.io/v1, or v1beta1 for webhooks that only accept
//! that): the request sent, and kube's checks of the response received
//! (`VerifyAdmissionResponse`).

use base64::Engine;
use serde_json::{Value, json};

use super::Attributes;
use crate::registry::ResourceInfo;

/// The review version to send: v1 when accepted, else v1beta1.
pub fn version(accepted: &[String]) -> Option<&'static str> {
    if accepted.iter().any(|v| v == "v1") {
        Some("v1")
    } else if accepted.iter().any(|v| v == "v1beta1") {
        Some("v1beta1")
    } else {
        None
    }
}

fn gvk(info: &ResourceInfo) -> Value {
    json!({ "group": info.group, "version": info.version, "kind": info.kind })
}

fn gvr(info: &ResourceInfo) -> Value {
    json!({ "group": info.group, "version": info.version, "resource": info.plural })
}

/// The `AdmissionReview` for one call. `matched` is the resource as the webhook's
/// rules matched it (differs from the request's with `matchPolicy: Equivalent`);
/// objects are already converted to it.
pub fn request(
    version: &str,
    uid: &str,
    matched: &ResourceInfo,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let (kind, request_kind) = match &a.object_kind {
        Some((g, v, k)) => {
            let k = json!({ "group": g, "version": v, "kind": k });
            (k.clone(), k)
        }
        None => (gvk(matched), gvk(&a.info)),
    };
    let mut req = json!({
        "uid": uid,
        "kind": kind,
        "resource": gvr(matched),
        "requestKind": request_kind,
        "requestResource": gvr(&a.info),
        "name": a.name,
        "operation": a.operation.as_str(),
        "userInfo": a.user.to_json(),
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": a.dry_run,
        "options": a.options,
    });
    if let Some(ns) = a.namespace.as_deref().filter(|n| !n.is_empty()) {
        req["namespace"] = json!(ns);
    }
    if let Some(sub) = &a.subresource {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    json!({
        "apiVersion": format!("admission.k8s.io/{version}"),
        "kind": "AdmissionReview",
        "request": req,
    })
}

/// What a webhook answered, after kube's checks.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    /// `response.allowed`.
    pub allowed: bool,
    /// `response.status` (a metav1.Status), if any.
    pub status: Option<Value>,
    /// The decoded JSON patch (mutating webhooks only).
    pub patch: Option<Vec<u8>>,
    /// `response.warnings`, sanitized.
    pub warnings: Vec<String>,
}

/// Checks a response body as kube's `VerifyAdmissionResponse` does. Errors are the
/// reasons kube reports after "received invalid webhook response: ".
pub fn verify(version: &str, uid: &str, mutating: bool, body: &[u8]) -> Result<Verdict, String> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| format!("couldn't decode response: {e}"))?;
    let v1 = version == "v1";
    let Some(resp) = review.get("response").filter(|r| r.is_object()) else {
        return Err("webhook response was absent".into());
    };
    if v1 {
        let av = review
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
        if av != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (g, v) = crate::registry::split_api_version(av);
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {g}/{v}, Kind={kind}"
            ));
        }
        let got = resp.get("uid").and_then(Value::as_str).unwrap_or("");
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
    }
    let allowed = match resp.get("allowed") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => false,
        Some(other) => {
            return Err(format!(
                "couldn't decode response: response.allowed: expected bool, got {other}"
            ));
        }
    };
    let patch = match resp.get("patch") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| format!("couldn't decode response: response.patch: {e}"))?,
        ),
        Some(_) => {
            return Err(
                "couldn't decode response: response.patch: expected a base64 string".into(),
            );
        }
    };
    let patch_type = resp.get("patchType").filter(|v| !v.is_null());
    if mutating {
        if v1 {
            if patch.is_some() && patch_type.is_none() {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            if patch.is_none() && patch_type.is_some() {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            if let Some(pt) = patch_type {
                let pt = pt.as_str().unwrap_or("");
                if pt != "JSONPatch" {
                    return Err(format!("unsupported patch type {pt:?}"));
                }
            }
        }
    } else if v1 {
        if patch.is_some() {
            return Err("validating webhook may not return response.patch".into());
        }
        if patch_type.is_some() {
            return Err("validating webhook may not return response.patchType".into());
        }
    }
    let status = resp.get("status").filter(|s| s.is_object()).cloned();
    let warnings = resp
        .get("warnings")
        .and_then(Value::as_array)
        .map(|ws| {
            ws.iter()
                .filter_map(Value::as_str)
                .map(sanitize_warning)
                .filter(|w| !w.is_empty())
                .collect()
        })
        .unwrap_or_default();
    Ok(Verdict {
        allowed,
        status,
        patch: if mutating { patch } else { None },
        warnings,
    })
}

/// kube's warning sanitizing: control characters become spaces, trimmed, at most 4 KiB.
fn sanitize_warning(w: &str) -> String {
    let s: String = w
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let s = s.trim();
    let mut end = s.len().min(4096);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    #[test]
    fn uid_and_type_checked() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                        "response": {"uid": "a", "allowed": true, "warnings": ["w\nx"]}});
        let v = verify("v1", "a", false, &body(&ok)).unwrap();
        assert!(v.allowed);
        assert_eq!(v.warnings, vec!["w x"]);
        assert_eq!(
            verify("v1", "b", false, &body(&ok)).unwrap_err(),
            "expected response.uid=\"b\", got \"a\""
        );
        let bad = json!({"apiVersion": "v1", "kind": "Status", "response": {"uid": "a"}});
        assert!(
            verify("v1", "a", false, &body(&bad))
                .unwrap_err()
                .starts_with("expected webhook response of admission.k8s.io/v1")
        );
        assert_eq!(
            verify("v1", "a", false, b"{}").unwrap_err(),
            "webhook response was absent"
        );
    }

    #[test]
    fn patches_only_from_mutating_webhooks() {
        let p = base64::engine::general_purpose::STANDARD.encode(b"[]");
        let r = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "response": {"uid": "a", "allowed": true, "patch": p, "patchType": "JSONPatch"}});
        assert_eq!(
            verify("v1", "a", true, &body(&r)).unwrap().patch,
            Some(b"[]".to_vec())
        );
        assert_eq!(
            verify("v1", "a", false, &body(&r)).unwrap_err(),
            "validating webhook may not return response.patch"
        );
        let r = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "response": {"uid": "a", "allowed": true, "patch": p}});
        assert_eq!(
            verify("v1", "a", true, &body(&r)).unwrap_err(),
            "webhook returned response.patch but not response.patchType"
        );
    }
}
