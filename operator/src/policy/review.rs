//! `admission.k8s.io/v1` AdmissionReview in and out, and the decision
//! that turns a policy's verdict (or its failure) into an admission
//! response: mode, `mutating`, failurePolicy, `JSONPatch`.

use std::fmt;

use base64::Engine;
use gantry_sdk::{Mutation, Verdict};
use serde_json::{Value, json};
use thiserror::Error;

use super::spec::{FailurePolicy, Mode, PolicySpec};
use gantry_sandbox::error::CallError;

/// The only AdmissionReview version served.
pub const ADMISSION_V1: &str = "admission.k8s.io/v1";

/// Why a body is not an AdmissionReview the server can answer.
#[derive(Debug, Error, PartialEq)]
pub enum ReviewError {
    /// Not JSON (or YAML, for files).
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    /// Another apiVersion or kind.
    #[error("expected apiVersion {ADMISSION_V1}, kind AdmissionReview; got {0}")]
    WrongType(String),
    /// No `request`, or one without a `uid`.
    #[error("the AdmissionReview has no request with a uid")]
    NoRequest,
}

/// The `request` of an AdmissionReview given as JSON.
pub fn parse_review(body: &[u8]) -> Result<Value, ReviewError> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    request_of(review)
}

/// The `request` of an AdmissionReview value. A bare request (an object
/// with `uid` and `operation`, as `kwctl` also accepts) is taken as is.
pub fn request_of(review: Value) -> Result<Value, ReviewError> {
    let api_version = review.get("apiVersion").and_then(Value::as_str);
    let kind = review.get("kind").and_then(Value::as_str);
    let request = match (api_version, kind) {
        (Some(ADMISSION_V1), Some("AdmissionReview")) => {
            review.get("request").cloned().unwrap_or(Value::Null)
        }
        (None, None) if review.get("operation").is_some() => review,
        (api_version, kind) => {
            return Err(ReviewError::WrongType(format!(
                "apiVersion {}, kind {}",
                api_version.unwrap_or("(none)"),
                kind.unwrap_or("(none)")
            )));
        }
    };
    if request.get("uid").and_then(Value::as_str).is_none() {
        return Err(ReviewError::NoRequest);
    }
    Ok(request)
}

/// An admission response, ready to be wrapped in an AdmissionReview.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// HTTP code of a rejection.
    pub code: u16,
    /// The rejection's message (shown to the user), if any.
    pub message: Option<String>,
    /// The change to the object, as an RFC 6902 patch.
    pub patch: Option<json_patch::Patch>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    /// Allowed unchanged.
    pub fn allow(uid: &str) -> Self {
        Self {
            uid: uid.to_string(),
            allowed: true,
            code: 200,
            message: None,
            patch: None,
            warnings: Vec::new(),
        }
    }

    /// Denied with `code` and `message`.
    pub fn deny(uid: &str, code: u16, message: impl Into<String>) -> Self {
        Self {
            uid: uid.to_string(),
            allowed: false,
            code,
            message: Some(message.into()),
            patch: None,
            warnings: Vec::new(),
        }
    }

    /// The `response` of an AdmissionReview: patch base64-encoded with
    /// `patchType: JSONPatch`, rejection in a `Status`.
    pub fn to_json(&self) -> Value {
        let mut response = json!({"uid": self.uid, "allowed": self.allowed});
        if !self.allowed {
            response["status"] = json!({
                "metadata": {},
                "status": "Failure",
                "code": self.code,
                "reason": reason_for(self.code),
                "message": self.message.clone().unwrap_or_default(),
            });
        }
        if let Some(patch) = &self.patch {
            let text = serde_json::to_vec(patch).expect("a patch serializes");
            response["patchType"] = "JSONPatch".into();
            response["patch"] = base64::engine::general_purpose::STANDARD
                .encode(text)
                .into();
        }
        if !self.warnings.is_empty() {
            response["warnings"] = json!(self.warnings);
        }
        response
    }

    /// The whole AdmissionReview carrying this response.
    pub fn to_review(&self) -> Value {
        json!({"apiVersion": ADMISSION_V1, "kind": "AdmissionReview", "response": self.to_json()})
    }
}

fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        504 => "Timeout",
        _ => "",
    }
}

/// What the policy said, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed unchanged.
    Allowed,
    /// Allowed with a change to the object.
    Mutated,
    /// Denied.
    Denied,
    /// No usable verdict (the policy failed, or its answer was refused).
    Error,
}

impl Outcome {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Mutated => "mutated",
            Self::Denied => "denied",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy's verdict (or failure) turned into an admission response.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The response to send.
    pub response: AdmissionResponse,
    /// What the policy said.
    pub outcome: Outcome,
    /// The kind of error, when the outcome is [`Outcome::Error`].
    pub error: Option<String>,
    /// What the policy said, in words, for the logs.
    pub detail: String,
}

/// The patch that a mutation makes to `object` (none when it changes
/// nothing), checked to apply cleanly.
pub fn patch_for(
    object: Option<&Value>,
    mutation: &Mutation,
) -> Result<Option<json_patch::Patch>, String> {
    let Some(object) = object else {
        return Err("the policy mutated a request that has no object".into());
    };
    let patch = match mutation {
        Mutation::JsonPatch(patch) => {
            let patch: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| format!("the JSON patch is not an RFC 6902 patch: {e}"))?;
            let mut patched = object.clone();
            json_patch::patch(&mut patched, &patch)
                .map_err(|e| format!("the JSON patch does not apply to the object: {e}"))?;
            if !patched.is_object() {
                return Err("the JSON patch replaces the object with a non-object".into());
            }
            patch
        }
        Mutation::MutatedObject(mutated) => json_patch::diff(object, mutated),
    };
    Ok((!patch.0.is_empty()).then_some(patch))
}

fn failed(spec: &PolicySpec, uid: &str, kind: &str, message: String) -> Decision {
    let name = &spec.name;
    let response = match (spec.mode, spec.failure_policy) {
        (Mode::Monitor, _) => AdmissionResponse::allow(uid),
        (Mode::Enforce, FailurePolicy::Fail) => AdmissionResponse::deny(
            uid,
            500,
            format!("policy {name} could not judge the request: {message} (failurePolicy Fail)"),
        ),
        (Mode::Enforce, FailurePolicy::Ignore) => {
            let mut response = AdmissionResponse::allow(uid);
            response.warnings.push(format!(
                "policy {name} could not judge the request: {message}; allowed by failurePolicy Ignore"
            ));
            response
        }
    };
    Decision {
        response,
        outcome: Outcome::Error,
        error: Some(kind.to_string()),
        detail: message,
    }
}

/// Turn what the policy `spec` answered for `request` into a decision.
pub fn decide(spec: &PolicySpec, request: &Value, result: Result<Verdict, CallError>) -> Decision {
    let uid = request.get("uid").and_then(Value::as_str).unwrap_or("");
    let monitor = spec.mode == Mode::Monitor;
    let verdict = match result {
        Ok(verdict) => verdict,
        Err(e) => return failed(spec, uid, e.kind(), e.to_string()),
    };
    if !verdict.allowed {
        let message = verdict
            .message
            .clone()
            .unwrap_or_else(|| format!("denied by policy {}", spec.name));
        let response = if monitor {
            AdmissionResponse::allow(uid)
        } else {
            let mut response = AdmissionResponse::deny(uid, verdict.code.unwrap_or(403), &message);
            response.warnings = verdict.warnings;
            response
        };
        return Decision {
            response,
            outcome: Outcome::Denied,
            error: None,
            detail: message,
        };
    }
    let mut response = AdmissionResponse::allow(uid);
    if !monitor {
        response.warnings = verdict.warnings;
    }
    let Some(mutation) = &verdict.mutation else {
        return Decision {
            response,
            outcome: Outcome::Allowed,
            error: None,
            detail: "allowed".into(),
        };
    };
    if !spec.mutating {
        let message = format!(
            "policy {} returned a mutation, but it is not marked mutating (mutating: true in its binding)",
            spec.name
        );
        let response = if monitor {
            AdmissionResponse::allow(uid)
        } else {
            AdmissionResponse::deny(uid, 500, &message)
        };
        return Decision {
            response,
            outcome: Outcome::Error,
            error: Some("mutation_not_allowed".into()),
            detail: message,
        };
    }
    match patch_for(request.get("object").filter(|o| !o.is_null()), mutation) {
        Err(message) => failed(spec, uid, "invalid_patch", message),
        Ok(None) => Decision {
            response,
            outcome: Outcome::Allowed,
            error: None,
            detail: "allowed (the mutation changes nothing)".into(),
        },
        Ok(Some(patch)) => {
            let detail = format!(
                "mutated: {}",
                serde_json::to_string(&patch).unwrap_or_default()
            );
            if !monitor {
                response.patch = Some(patch);
            }
            Decision {
                response,
                outcome: Outcome::Mutated,
                error: None,
                detail,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::spec::parse_spec;

    fn spec(extra: &str) -> PolicySpec {
        parse_spec(&format!(
            "name: p\nrules:\n- {{apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}}\n{extra}"
        ))
        .unwrap()
    }

    fn request() -> Value {
        json!({"uid": "u-1", "operation": "CREATE",
               "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}})
    }

    #[test]
    fn parses_reviews_and_bare_requests() {
        let review =
            json!({"apiVersion": ADMISSION_V1, "kind": "AdmissionReview", "request": request()});
        assert_eq!(
            parse_review(review.to_string().as_bytes()).unwrap(),
            request()
        );
        assert_eq!(request_of(request()).unwrap(), request());
        assert!(matches!(parse_review(b"{"), Err(ReviewError::NotJson(_))));
        let v1beta1 = json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": request()});
        assert!(matches!(
            request_of(v1beta1),
            Err(ReviewError::WrongType(_))
        ));
        let no_uid = json!({"apiVersion": ADMISSION_V1, "kind": "AdmissionReview", "request": {"operation": "CREATE"}});
        assert_eq!(request_of(no_uid), Err(ReviewError::NoRequest));
    }

    #[test]
    fn denials_carry_the_message_and_code_unless_monitoring() {
        let verdict = Verdict {
            code: Some(422),
            warnings: vec!["careful".into()],
            ..Verdict::deny("no privileged pods")
        };
        let d = decide(&spec(""), &request(), Ok(verdict.clone()));
        assert_eq!(d.outcome, Outcome::Denied);
        assert_eq!(
            d.response.to_review()["response"],
            json!({"uid": "u-1", "allowed": false, "warnings": ["careful"],
                   "status": {"metadata": {}, "status": "Failure", "code": 422, "reason": "Invalid", "message": "no privileged pods"}})
        );
        let d = decide(&spec("mode: monitor\n"), &request(), Ok(verdict));
        assert_eq!(
            (d.outcome, d.response.clone()),
            (Outcome::Denied, AdmissionResponse::allow("u-1"))
        );
    }

    #[test]
    fn mutations_become_base64_json_patches_only_for_mutating_policies() {
        let mut mutated = request()["object"].clone();
        mutated["metadata"]["labels"] = json!({"team": "a"});
        let verdict = Verdict::mutate(mutated);
        let d = decide(&spec("mutating: true\n"), &request(), Ok(verdict.clone()));
        assert_eq!(d.outcome, Outcome::Mutated);
        let response = d.response.to_json();
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(response["patch"].as_str().unwrap())
            .unwrap();
        let patch: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"team": "a"}}])
        );

        let d = decide(&spec(""), &request(), Ok(verdict.clone()));
        assert_eq!(d.outcome, Outcome::Error);
        assert_eq!(d.error.as_deref(), Some("mutation_not_allowed"));
        assert!(!d.response.allowed);
        assert!(d.response.message.unwrap().contains("mutating: true"));

        let d = decide(
            &spec("mutating: true\nmode: monitor\n"),
            &request(),
            Ok(verdict),
        );
        assert_eq!(
            (d.outcome, d.response),
            (Outcome::Mutated, AdmissionResponse::allow("u-1"))
        );

        // A patch that does not apply is a failure of the policy.
        let bad = Verdict {
            mutation: Some(Mutation::JsonPatch(
                json!([{"op": "remove", "path": "/spec/x"}]),
            )),
            ..Verdict::allow()
        };
        let d = decide(&spec("mutating: true\n"), &request(), Ok(bad));
        assert_eq!(d.error.as_deref(), Some("invalid_patch"));
        assert_eq!(d.response.code, 500);
        // A mutation that changes nothing is no patch.
        let same = Verdict::mutate(request()["object"].clone());
        let d = decide(&spec("mutating: true\n"), &request(), Ok(same));
        assert_eq!((d.outcome, d.response.patch), (Outcome::Allowed, None));
    }

    #[test]
    fn failures_follow_the_failure_policy() {
        let timeout = || {
            Err(CallError::Timeout {
                deadline: Duration::from_millis(500),
            })
        };
        let d = decide(&spec(""), &request(), timeout());
        assert_eq!(
            (d.outcome, d.error.as_deref()),
            (Outcome::Error, Some("timeout"))
        );
        assert!(!d.response.allowed);
        assert!(
            d.response.message.as_deref().unwrap().contains("deadline"),
            "{:?}",
            d.response.message
        );
        let d = decide(&spec("failurePolicy: Ignore\n"), &request(), timeout());
        assert!(d.response.allowed);
        assert!(d.response.warnings[0].contains("failurePolicy Ignore"));
        let d = decide(&spec("mode: monitor\n"), &request(), timeout());
        assert_eq!(d.response, AdmissionResponse::allow("u-1"));
    }
}
