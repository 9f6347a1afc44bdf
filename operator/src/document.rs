//! The document a plugin is bound with: a reconcile binding
//! (`binding.yaml`), an admission policy (`policy.yaml`) or a CRD
//! converter (`converter.yaml`), told apart by which of them it parses as
//! (all refuse unknown fields).

use std::path::Path;

use anyhow::Context as _;

use crate::controller::spec::{self as binding_spec, BindingSpec};
use crate::conversion::spec::{self as converter_spec, ConverterSpec};
use crate::policy::spec::{self as policy_spec, PolicySpec};

/// A parsed binding or policy document, with its text as written.
#[derive(Debug, Clone)]
pub enum Document {
    /// A reconcile binding.
    Binding {
        /// The parsed document.
        spec: Box<BindingSpec>,
        /// Its text, stored as it is.
        text: String,
    },
    /// An admission policy.
    Policy {
        /// The parsed document.
        spec: Box<PolicySpec>,
        /// Its text, stored as it is.
        text: String,
    },
    /// A CRD converter.
    Converter {
        /// The parsed document.
        spec: Box<ConverterSpec>,
        /// Its text, stored as it is.
        text: String,
    },
}

impl Document {
    /// Parse `text` as a binding, a policy or a converter; when it is
    /// none, the error says why it is not a binding (not a policy or a
    /// converter, when it looks like one).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        if has_key(text, "crd") {
            return converter_spec::parse_spec(text)
                .map(|spec| Self::Converter {
                    spec: Box::new(spec),
                    text: text.to_string(),
                })
                .map_err(|e| anyhow::anyhow!("invalid converter document: {e}"));
        }
        let as_binding = binding_spec::parse_spec(text);
        if let Ok(spec) = as_binding {
            return Ok(Self::Binding {
                spec: Box::new(spec),
                text: text.to_string(),
            });
        }
        match policy_spec::parse_spec(text) {
            Ok(spec) => Ok(Self::Policy {
                spec: Box::new(spec),
                text: text.to_string(),
            }),
            Err(policy_error) if has_key(text, "rules") => {
                Err(anyhow::anyhow!("invalid policy document: {policy_error}"))
            }
            Err(_) => Err(anyhow::anyhow!(
                "invalid binding document: {}",
                as_binding.err().map(|e| e.to_string()).unwrap_or_default()
            )),
        }
    }

    /// Read and parse the document at `path`.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| path.display().to_string())
    }

    /// The binding's (or policy's) name, also its ConfigMap's.
    pub fn name(&self) -> &str {
        match self {
            Self::Binding { spec, .. } => &spec.name,
            Self::Policy { spec, .. } => &spec.name,
            Self::Converter { spec, .. } => &spec.crd,
        }
    }

    /// Whether the operator fetches the component from a URL or registry
    /// (the ConfigMap then holds the document only).
    pub fn has_source(&self) -> bool {
        match self {
            Self::Binding { spec, .. } => spec.source.is_some(),
            Self::Policy { spec, .. } => spec.source.is_some(),
            Self::Converter { spec, .. } => spec.source.is_some(),
        }
    }

    /// The sha256 the document pins, if any.
    pub fn pinned_sha256(&self) -> Option<&str> {
        match self {
            Self::Binding { spec, .. } => spec.sha256.as_deref(),
            Self::Policy { spec, .. } => spec.sha256.as_deref(),
            Self::Converter { spec, .. } => spec.sha256.as_deref(),
        }
    }

    /// The document as written.
    pub fn text(&self) -> &str {
        match self {
            Self::Binding { text, .. }
            | Self::Policy { text, .. }
            | Self::Converter { text, .. } => text,
        }
    }

    /// "binding", "policy" or "converter".
    pub fn noun(&self) -> &'static str {
        match self {
            Self::Binding { .. } => "binding",
            Self::Policy { .. } => "policy",
            Self::Converter { .. } => "converter",
        }
    }
}

/// Whether the document has the top-level `key`: a policy has `rules`, a
/// converter `crd`; a binding has neither.
fn has_key(text: &str, key: &str) -> bool {
    serde_yaml::from_str::<serde_yaml::Value>(text)
        .ok()
        .and_then(|v| v.get(key).cloned())
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_bindings_from_policies_and_says_what_is_wrong() {
        let binding = "name: hello\nparent: {apiVersion: example.com/v1, kind: Greeting}\n";
        let document = Document::parse(binding).unwrap();
        assert!(matches!(document, Document::Binding { .. }));
        assert_eq!((document.name(), document.noun()), ("hello", "binding"));

        let policy = "name: no-root\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}\n";
        let document = Document::parse(policy).unwrap();
        assert!(matches!(document, Document::Policy { .. }));
        assert_eq!(document.name(), "no-root");

        let bad_binding =
            "name: hello\nparent: {apiVersion: example.com/v1, kind: Greeting}\nchidlren: []\n";
        let error = Document::parse(bad_binding).unwrap_err().to_string();
        assert!(error.contains("invalid binding document"), "{error}");
        assert!(error.contains("chidlren"), "{error}");

        let converter = "crd: myresources.example.com\n";
        let document = Document::parse(converter).unwrap();
        assert!(matches!(document, Document::Converter { .. }));
        assert_eq!(
            (document.name(), document.noun()),
            ("myresources.example.com", "converter")
        );
        let error = Document::parse("crd: x\n").unwrap_err().to_string();
        assert!(error.contains("invalid converter document"), "{error}");

        let bad_policy = "name: no-root\nrules: []\nmode: loud\n";
        let error = Document::parse(bad_policy).unwrap_err().to_string();
        assert!(error.contains("invalid policy document"), "{error}");
    }
}
