//! A converter binding: the conversion webhook of one `CustomResourceDefinition`
//! as a plugin, held by a ConfigMap labelled `gantry.dev/converter`.
//!
//! The plugin travels like a reconcile plugin's (`binaryData` key
//! `plugin.wasm`, or `plugin.wasm.zst`, optionally pinned by `sha256`, or a
//! `source`); the document is `converter.yaml`:
//!
//! ```yaml
//! crd: myresources.example.gantry.dev   # the CRD it converts
//! limits: {deadlineMs: 2000}            # optional
//! rollout: {shadow: true, maxFailures: 0}
//! ```

use serde::{Deserialize, Serialize};
use thiserror::Error;

use gantry_kube::names::is_dns1123_subdomain;

pub use crate::delivery::LimitsSpec;
use crate::delivery::envelope;
use crate::delivery::source::SourceSpec;
use gantry_sandbox::limits::Limits;

/// Label that marks a ConfigMap as a converter binding.
pub const CONVERTER_LABEL: &str = "gantry.dev/converter";
/// Key of the converter document in the ConfigMap's `data`.
pub const CONVERTER_KEY: &str = "converter.yaml";
/// Annotation on the ConfigMap: the digest of the converter in service.
pub const DIGEST_ANNOTATION: &str = "gantry.dev/converter-digest";
/// Annotation on the ConfigMap: where the converter in service came from.
pub const SOURCE_ANNOTATION: &str = "gantry.dev/converter-source";
/// The path under which the webhook server serves converters.
pub const PATH_PREFIX: &str = "/convert/";

/// How a new version of a converter goes into service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConverterRollout {
    /// Before a new version serves, convert every stored object of the CRD
    /// to each other served version and back with it (default true).
    #[serde(default = "yes")]
    pub shadow: bool,
    /// Objects on which the new version may fail (an error, or a round
    /// trip that does not give the object back) where the running one
    /// succeeds (default 0).
    #[serde(default)]
    pub max_failures: u64,
}

fn yes() -> bool {
    true
}

impl Default for ConverterRollout {
    fn default() -> Self {
        Self {
            shadow: true,
            max_failures: 0,
        }
    }
}

/// The `converter.yaml` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConverterSpec {
    /// The `CustomResourceDefinition` it converts (`plural.group`); also its
    /// name on the webhook server: `/convert/<crd>`.
    pub crd: String,
    /// Call limits (`maxChildren` does not apply).
    #[serde(default)]
    pub limits: LimitsSpec,
    /// Shadow runs before a new version serves.
    #[serde(default)]
    pub rollout: ConverterRollout,
    /// Expected sha256 of the component (lowercase hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Fetch the component from a URL or an OCI registry instead of
    /// `binaryData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceSpec>,
}

impl ConverterSpec {
    /// The call limits: the binding's, defaults elsewhere.
    pub fn call_limits(&self) -> Limits {
        self.limits.call_limits()
    }

    /// The CRD's API group (what follows its plural).
    pub fn group(&self) -> &str {
        self.crd.split_once('.').map_or("", |(_, group)| group)
    }

    /// Its path on Gantry's webhook server.
    pub fn path(&self) -> String {
        format!("{PATH_PREFIX}{}", self.crd)
    }
}

/// Why a converter document was refused.
#[derive(Debug, Error, PartialEq)]
pub enum ConverterBindingError {
    /// `converter.yaml` does not parse or has unknown fields.
    #[error("{CONVERTER_KEY} is invalid: {0}")]
    InvalidSpec(String),
    /// A field has a value the host cannot accept.
    #[error("{CONVERTER_KEY}: {field}: {message}")]
    InvalidField {
        /// Path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn field(field: &str, message: impl Into<String>) -> ConverterBindingError {
    ConverterBindingError::InvalidField {
        field: field.into(),
        message: message.into(),
    }
}

/// Parse and check `converter.yaml`.
pub fn parse_spec(text: &str) -> Result<ConverterSpec, ConverterBindingError> {
    let spec: ConverterSpec = serde_yaml::from_str(text)
        .map_err(|e| ConverterBindingError::InvalidSpec(e.to_string()))?;
    if !is_dns1123_subdomain(&spec.crd) || !spec.crd.contains('.') {
        return Err(field(
            "crd",
            format!(
                "{:?} is not the name of a CustomResourceDefinition (plural.group)",
                spec.crd
            ),
        ));
    }
    spec.limits
        .check()
        .map_err(|(path, message)| field(&path, message))?;
    if spec.limits.max_children.is_some() {
        return Err(field(
            "limits.maxChildren",
            "a converter has no children; only reconcile bindings take this limit",
        ));
    }
    if spec.call_limits().deadline >= super::REVIEW_BUDGET {
        return Err(field(
            "limits.deadlineMs",
            format!(
                "must be shorter than {:?}, or the API server gives up first",
                super::REVIEW_BUDGET
            ),
        ));
    }
    envelope::check_pin_and_source(spec.sha256.as_deref(), spec.source.as_ref())
        .map_err(|(path, message)| field(&path, message))?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_converter_names_its_crd() {
        let spec = parse_spec("crd: myresources.example.gantry.dev\n").unwrap();
        assert_eq!(spec.group(), "example.gantry.dev");
        assert_eq!(spec.path(), "/convert/myresources.example.gantry.dev");
        assert!(spec.rollout.shadow);
        assert_eq!(spec.rollout.max_failures, 0);
        let err = parse_spec("crd: myresources\n").unwrap_err();
        assert!(err.to_string().contains("plural.group"), "{err}");
        let err = parse_spec("crd: a.b\nsettings: {}\n").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let err = parse_spec("crd: a.b\nlimits: {maxChildren: 3}\n").unwrap_err();
        assert!(err.to_string().contains("no children"), "{err}");
        let err = parse_spec("crd: a.b\nlimits: {deadlineMs: 30000}\n").unwrap_err();
        assert!(err.to_string().contains("API server gives up"), "{err}");
        let err = parse_spec("crd: a.b\nsha256: abc\n").unwrap_err();
        assert!(err.to_string().contains("sha256"), "{err}");
    }
}
