//! Admission policy: objects must carry the labels listed in the settings.
//!
//! Settings: `{"labels": ["team", "app.kubernetes.io/name"]}`.

use gantry_sdk::{AdmissionRequest, Policy, Value, Verdict};
use serde::Deserialize;

/// The policy's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Label keys every object must have.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// The policy.
pub struct RequireLabels;

impl Policy for RequireLabels {
    fn validate(request: AdmissionRequest) -> Verdict {
        let settings: Settings = match request.settings_as() {
            Ok(s) => s,
            Err(e) => return Verdict::deny(e),
        };
        let Some(object) = request.object() else {
            return Verdict::allow();
        };
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        let missing: Vec<&str> = settings
            .labels
            .iter()
            .filter(|key| !labels.is_some_and(|l| l.contains_key(key.as_str())))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            Verdict::allow()
        } else {
            Verdict::deny(format!("missing required labels: {}", missing.join(", ")))
        }
    }

    fn validate_settings(settings: &Value) -> Result<(), String> {
        let settings: Settings = serde_json::from_value(if settings.is_null() {
            Value::Object(serde_json::Map::default())
        } else {
            settings.clone()
        })
        .map_err(|e| format!("invalid settings: {e}"))?;
        if settings.labels.iter().any(String::is_empty) {
            return Err("label keys must not be empty".into());
        }
        Ok(())
    }
}

gantry_sdk::export_policy!(RequireLabels);

#[cfg(test)]
mod tests {
    use gantry_sdk::json;

    use super::*;

    // Takes a `json!` literal by value so each call reads as data.
    #[allow(clippy::needless_pass_by_value)]
    fn request(labels: Value) -> AdmissionRequest {
        AdmissionRequest {
            request: json!({"operation": "CREATE", "object": {"metadata": {"name": "x", "labels": labels}}}),
            settings: json!({"labels": ["team", "app"]}),
        }
    }

    #[test]
    fn denies_missing_labels_and_names_them() {
        let verdict = RequireLabels::validate(request(json!({"team": "a"})));
        assert!(!verdict.allowed);
        assert_eq!(
            verdict.message.as_deref(),
            Some("missing required labels: app")
        );
        assert!(RequireLabels::validate(request(json!({"team": "a", "app": "b"}))).allowed);
    }

    #[test]
    fn settings_are_checked() {
        assert!(RequireLabels::validate_settings(&json!({"labels": ["ok"]})).is_ok());
        assert!(RequireLabels::validate_settings(&json!({"labels": [""]})).is_err());
        assert!(RequireLabels::validate_settings(&json!({"nope": 1})).is_err());
    }
}
