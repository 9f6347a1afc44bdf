//! `admission` interface: admission request out, verdict in.

use gantry_sdk::{AdmissionRequest, Mutation, Verdict};
use serde_json::Value;

use super::generated::policy::exports::gantry::plugin::admission as wit;
use crate::{error::CallError, limits::Limits};

/// The WIT admission request.
pub fn to_wit_admission(request: &AdmissionRequest) -> wit::AdmissionRequest {
    wit::AdmissionRequest {
        request: request.request.to_string(),
        settings: request.settings.to_string(),
    }
}

fn violation(detail: impl Into<String>) -> CallError {
    CallError::ContractViolation {
        detail: detail.into(),
    }
}

/// Check a verdict against `limits` and the contract.
pub fn from_wit_verdict(v: wit::Verdict, limits: &Limits) -> Result<Verdict, CallError> {
    let size = v.message.as_ref().map_or(0, String::len)
        + v.warnings.iter().map(String::len).sum::<usize>()
        + match &v.mutation {
            Some(wit::Mutation::JsonPatch(t) | wit::Mutation::MutatedObject(t)) => t.len(),
            None => 0,
        };
    if size > limits.output_bytes {
        return Err(CallError::OutputTooLarge {
            size,
            limit: limits.output_bytes,
        });
    }
    if let Some(code) = v.code
        && !(400..600).contains(&code)
    {
        return Err(violation(format!(
            "rejection code {code} is not an HTTP error code"
        )));
    }
    let mutation = match v.mutation {
        None => None,
        Some(wit::Mutation::JsonPatch(text)) => {
            let patch: Value = serde_json::from_str(&text)
                .map_err(|e| violation(format!("JSON patch is not valid JSON: {e}")))?;
            serde_json::from_value::<json_patch::Patch>(patch.clone())
                .map_err(|e| violation(format!("JSON patch is not an RFC 6902 patch: {e}")))?;
            Some(Mutation::JsonPatch(patch))
        }
        Some(wit::Mutation::MutatedObject(text)) => {
            let object: Value = serde_json::from_str(&text)
                .map_err(|e| violation(format!("mutated object is not valid JSON: {e}")))?;
            if !object.is_object() {
                return Err(violation("mutated object is not a JSON object"));
            }
            Some(Mutation::MutatedObject(object))
        }
    };
    Ok(Verdict {
        allowed: v.allowed,
        message: v.message,
        code: v.code,
        mutation,
        warnings: v.warnings,
    })
}
