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
    ///
    /// # Errors
    ///
    /// Why the settings are rejected; the host then refuses that policy version.
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

    /// The API group and kind of the object under admission: from the
    /// object's `apiVersion` and `kind`, or from `request.kind` when the
    /// object does not say.
    pub fn group_kind(&self) -> Option<(String, String)> {
        if let Some(object) = self.object()
            && let (Some(api_version), Some(kind)) = (
                object.get("apiVersion").and_then(Value::as_str),
                object.get("kind").and_then(Value::as_str),
            )
        {
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            return Some((group.to_string(), kind.to_string()));
        }
        let kind = self.request.get("kind")?;
        Some((
            kind.get("group")?.as_str()?.to_string(),
            kind.get("kind")?.as_str()?.to_string(),
        ))
    }

    /// The settings deserialized; `null` reads as `{}`.
    ///
    /// # Errors
    ///
    /// A message if the settings do not deserialize into `T`.
    pub fn settings_as<T: DeserializeOwned>(&self) -> Result<T, String> {
        let settings = match &self.settings {
            Value::Null => Value::Object(serde_json::Map::default()),
            other => other.clone(),
        };
        serde_json::from_value(settings).map_err(|e| format!("invalid settings: {e}"))
    }
}

/// Where objects of `group`/`kind` keep their pod spec, as JSON pointer
/// tokens: `spec` for Pods, `spec.template.spec` for workloads and Jobs,
/// `spec.jobTemplate.spec.template.spec` for CronJobs; `None` for kinds
/// without one.
pub fn pod_spec_path(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    match (group, kind) {
        ("", "Pod") => Some(&["spec"]),
        ("", "ReplicationController")
        | ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job") => Some(&["spec", "template", "spec"]),
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn group_kind_comes_from_the_object_or_the_request() {
        let from_object = AdmissionRequest {
            request: json!({"kind": {"group": "x", "kind": "Y"}, "object": {"apiVersion": "apps/v1", "kind": "Deployment"}}),
            settings: Value::Null,
        };
        assert_eq!(
            from_object.group_kind(),
            Some(("apps".into(), "Deployment".into()))
        );
        let core = AdmissionRequest {
            request: json!({"object": {"apiVersion": "v1", "kind": "Pod"}}),
            settings: Value::Null,
        };
        assert_eq!(core.group_kind(), Some((String::new(), "Pod".into())));
        let from_request = AdmissionRequest {
            request: json!({"kind": {"group": "batch", "kind": "Job"}, "object": {}}),
            settings: Value::Null,
        };
        assert_eq!(
            from_request.group_kind(),
            Some(("batch".into(), "Job".into()))
        );
        assert_eq!(
            AdmissionRequest {
                request: json!({}),
                settings: Value::Null
            }
            .group_kind(),
            None
        );
    }

    #[test]
    fn pod_spec_paths_of_workloads() {
        assert_eq!(pod_spec_path("", "Pod"), Some(&["spec"][..]));
        assert_eq!(
            pod_spec_path("batch", "CronJob").map(<[&str]>::len),
            Some(5)
        );
        assert_eq!(pod_spec_path("apps", "Pod"), None);
    }
}
