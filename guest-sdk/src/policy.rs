//! The admission policy contract (the `admission` interface of
//! `wit/gantry.wit`) as plain Rust types.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An admission policy: judge one API request.
pub trait Policy {
    /// Allow, deny or (for mutating policies) change the request's object.
    fn validate(request: AdmissionRequest) -> Verdict;

    /// Check the binding's settings before the policy is put into service.
    /// The default accepts anything.
    fn validate_settings(_settings: &Value) -> Result<(), String> {
        Ok(())
    }
}

/// One admission request and the policy's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdmissionRequest {
    /// The `request` of an `admission.k8s.io/v1` AdmissionReview.
    pub request: Value,
    /// The binding's settings (`null` when absent).
    #[serde(default)]
    pub settings: Value,
}

impl AdmissionRequest {
    /// The object under admission (`request.object`), if any.
    pub fn object(&self) -> Option<&Value> {
        self.request.get("object").filter(|o| !o.is_null())
    }

    /// The operation: CREATE, UPDATE, DELETE or CONNECT.
    pub fn operation(&self) -> &str {
        self.request
            .get("operation")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The settings deserialized; `null` reads as `{}`.
    pub fn settings_as<T: DeserializeOwned>(&self) -> Result<T, String> {
        let settings = match &self.settings {
            Value::Null => Value::Object(Default::default()),
            other => other.clone(),
        };
        serde_json::from_value(settings).map_err(|e| format!("invalid settings: {e}"))
    }
}

/// How a mutating policy changes the object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mutation {
    /// An RFC 6902 JSON Patch against the request's object.
    JsonPatch(Value),
    /// The whole mutated object.
    MutatedObject(Value),
}

/// A policy's answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Verdict {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why it was rejected, or a note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// HTTP code for a rejection (default 403).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// A change to the object (mutating policies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation: Option<Mutation>,
    /// Warnings for the client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Let the request through unchanged.
    pub fn allow() -> Self {
        Self {
            allowed: true,
            ..Self::default()
        }
    }

    /// Reject the request with a message for the user.
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            message: Some(message.into()),
            ..Self::default()
        }
    }

    /// Let the request through with the object replaced by `object`.
    pub fn mutate(object: Value) -> Self {
        Self {
            allowed: true,
            mutation: Some(Mutation::MutatedObject(object)),
            ..Self::default()
        }
    }
}
