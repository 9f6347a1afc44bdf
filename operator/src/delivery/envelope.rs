//! What every binding ConfigMap carries besides its own document: the
//! component, inline in `binaryData` (raw or zstd-compressed) or named by a
//! `source` to fetch, and the optional `sha256` pin it must match.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;

use gantry_sandbox::runtime::ComponentBytes;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
use thiserror::Error;

use super::source::{Fetched, PluginSource, SourceSpec};

/// Key of the raw component in `binaryData`.
pub const PLUGIN_KEY: &str = "plugin.wasm";
/// Key of the zstd-compressed component in `binaryData`.
pub const PLUGIN_ZSTD_KEY: &str = "plugin.wasm.zst";
/// Largest component accepted after decompression.
pub const MAX_PLUGIN_BYTES: usize = 64 << 20;

/// Why a ConfigMap's envelope was refused.
#[derive(Debug, Error, PartialEq)]
pub enum EnvelopeError {
    /// The document key (`binding.yaml`, `policy.yaml`) is missing.
    #[error("ConfigMap has no data key {0}")]
    MissingDocument(&'static str),
    /// No plugin bytes and no source.
    #[error("ConfigMap has no binaryData key {PLUGIN_KEY} or {PLUGIN_ZSTD_KEY}")]
    MissingPlugin,
    /// Both plugin keys are set.
    #[error("ConfigMap has both {PLUGIN_KEY} and {PLUGIN_ZSTD_KEY}; keep one")]
    AmbiguousPlugin,
    /// The document names a `source` and `binaryData` carries a plugin too.
    #[error("{0} has a source and binaryData has a plugin; keep one")]
    SourceAndInline(&'static str),
    /// The compressed plugin does not decompress, or is too large.
    #[error("{PLUGIN_ZSTD_KEY}: {0}")]
    Decompress(String),
    /// The plugin's sha256 differs from the pin.
    #[error("plugin sha256 is {actual}, but the binding pins {expected}")]
    DigestMismatch {
        /// Pinned.
        expected: String,
        /// Computed.
        actual: String,
    },
}

/// Where a version's component is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Component {
    /// In the ConfigMap: decompressed, and checked against the pin.
    Inline(PluginBytes),
    /// To be fetched (and checked against the pin by the fetcher).
    Remote(PluginSource),
}

impl Component {
    /// Whether the component is still to be fetched.
    pub fn is_remote(&self) -> bool {
        matches!(self, Component::Remote(_))
    }
}

/// A component's bytes, as compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginBytes {
    /// The component, decompressed, with its sha256: hashed once where the
    /// bytes arrive, and loaded without hashing them again.
    pub component: ComponentBytes,
    /// Where a fetched component came from (an OCI tag resolved to its
    /// digest); `None` when inline.
    pub source: Option<String>,
}

impl PluginBytes {
    /// The bytes of a component fetched from `source`.
    pub fn fetched(fetched: Fetched, source: &PluginSource) -> Self {
        PluginBytes {
            component: fetched.component,
            source: Some(fetched.resolved.unwrap_or_else(|| source.to_string())),
        }
    }
}

/// The document under `key` in the ConfigMap's `data`.
pub fn document<'a>(cm: &'a ConfigMap, key: &'static str) -> Result<&'a str, EnvelopeError> {
    cm.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(String::as_str)
        .ok_or(EnvelopeError::MissingDocument(key))
}

/// The component of a ConfigMap whose document (under `key`) names
/// `source` (already checked) and `pin`.
pub fn component(
    cm: &ConfigMap,
    key: &'static str,
    source: Option<PluginSource>,
    pin: Option<&str>,
) -> Result<Component, EnvelopeError> {
    match source {
        Some(source) => {
            let inline = cm
                .binary_data
                .as_ref()
                .is_some_and(|b| b.contains_key(PLUGIN_KEY) || b.contains_key(PLUGIN_ZSTD_KEY));
            if inline {
                return Err(EnvelopeError::SourceAndInline(key));
            }
            Ok(Component::Remote(source))
        }
        None => inline(cm, pin).map(Component::Inline),
    }
}

/// Check a document's `source` against its pin: `Err` is (field, message).
pub fn check_source(
    source: Option<&SourceSpec>,
    pinned: bool,
) -> Result<Option<PluginSource>, (String, String)> {
    source.map(|s| s.check(pinned)).transpose()
}

/// Check a document's `sha256` pin (64 lowercase hex digits) and its
/// `source` (which a URL source needs the pin for): `Err` is (field,
/// message).
pub fn check_pin_and_source(
    sha256: Option<&str>,
    source: Option<&SourceSpec>,
) -> Result<(), (String, String)> {
    if sha256.is_some_and(|sha| !is_sha256_hex(sha)) {
        return Err(("sha256".into(), "must be 64 lowercase hex digits".into()));
    }
    check_source(source, sha256.is_some()).map(|_| ())
}

/// The component a ConfigMap carries in `binaryData` (raw, or
/// zstd-compressed), checked against `pin` when given.
pub fn inline(cm: &ConfigMap, pin: Option<&str>) -> Result<PluginBytes, EnvelopeError> {
    let empty = BTreeMap::new();
    let binary = cm.binary_data.as_ref().unwrap_or(&empty);
    let bytes = match (binary.get(PLUGIN_KEY), binary.get(PLUGIN_ZSTD_KEY)) {
        (Some(_), Some(_)) => return Err(EnvelopeError::AmbiguousPlugin),
        (Some(raw), None) => raw.0.clone(),
        (None, Some(compressed)) => decompress(&compressed.0)?,
        (None, None) => return Err(EnvelopeError::MissingPlugin),
    };
    let component = ComponentBytes::new(bytes);
    if let Some(expected) = pin
        && expected != component.digest()
    {
        return Err(EnvelopeError::DigestMismatch {
            expected: expected.to_string(),
            actual: component.digest().to_string(),
        });
    }
    Ok(PluginBytes {
        component,
        source: None,
    })
}

fn decompress(bytes: &[u8]) -> Result<Vec<u8>, EnvelopeError> {
    let decoder = zstd::stream::read::Decoder::new(bytes)
        .map_err(|e| EnvelopeError::Decompress(e.to_string()))?;
    let mut out = Vec::new();
    // Read one byte past the cap to tell "exactly at the cap" from "over".
    decoder
        .take(MAX_PLUGIN_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| EnvelopeError::Decompress(e.to_string()))?;
    if out.len() > MAX_PLUGIN_BYTES {
        return Err(EnvelopeError::Decompress(format!(
            "decompresses to more than {MAX_PLUGIN_BYTES} bytes"
        )));
    }
    Ok(out)
}

/// Whether `sha` is written as a pin must be: 64 lowercase hex digits.
pub fn is_sha256_hex(sha: &str) -> bool {
    sha.len() == 64
        && sha
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// A fingerprint of what a binding ConfigMap holds (data, and binaryData by
/// digest): metadata changes such as the loader's own annotations are not
/// news.
pub fn content_of(cm: &ConfigMap) -> u64 {
    let binary: Vec<(String, String)> = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), gantry_sandbox::runtime::digest(&v.0)))
        .collect();
    let mut hasher = DefaultHasher::new();
    json!({"data": cm.data, "binary": binary})
        .to_string()
        .hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn with_binary(entries: &[(&str, Vec<u8>)]) -> ConfigMap {
        ConfigMap {
            binary_data: Some(
                entries
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), ByteString(v.clone())))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn raw_and_zstd_components_are_read_and_pinned() {
        let bytes = b"\0asm\x0d\0\x01\0component".to_vec();
        let digest = gantry_sandbox::runtime::digest(&bytes);
        let raw = inline(&with_binary(&[(PLUGIN_KEY, bytes.clone())]), None).unwrap();
        assert_eq!(
            (raw.component.bytes(), raw.component.digest()),
            (&bytes[..], &digest[..])
        );
        let compressed = zstd::encode_all(&bytes[..], 3).unwrap();
        let zst = inline(
            &with_binary(&[(PLUGIN_ZSTD_KEY, compressed)]),
            Some(&digest),
        )
        .unwrap();
        assert_eq!(zst.component.bytes(), bytes);
        let wrong = "0".repeat(64);
        let err = inline(&with_binary(&[(PLUGIN_KEY, bytes)]), Some(&wrong)).unwrap_err();
        assert!(matches!(err, EnvelopeError::DigestMismatch { .. }));
    }

    #[test]
    fn missing_ambiguous_and_bomb_components_are_refused() {
        let both = with_binary(&[(PLUGIN_KEY, vec![1]), (PLUGIN_ZSTD_KEY, vec![2])]);
        assert_eq!(
            inline(&both, None).unwrap_err(),
            EnvelopeError::AmbiguousPlugin
        );
        assert_eq!(
            inline(&ConfigMap::default(), None).unwrap_err(),
            EnvelopeError::MissingPlugin
        );
        let bomb = zstd::encode_all(&vec![0u8; MAX_PLUGIN_BYTES + 1][..], 19).unwrap();
        assert!(bomb.len() < 1 << 20, "the bomb fits in a ConfigMap");
        let err = inline(&with_binary(&[(PLUGIN_ZSTD_KEY, bomb)]), None).unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
        let err = inline(
            &with_binary(&[(PLUGIN_ZSTD_KEY, b"not zstd".to_vec())]),
            None,
        );
        assert!(matches!(err, Err(EnvelopeError::Decompress(_))));
    }

    #[test]
    fn a_source_excludes_an_inline_component() {
        let source = PluginSource::Url {
            url: "https://a.example/m.wasm".into(),
            insecure: false,
        };
        let cm = with_binary(&[(PLUGIN_KEY, vec![1])]);
        assert_eq!(
            component(&cm, "policy.yaml", Some(source.clone()), None).unwrap_err(),
            EnvelopeError::SourceAndInline("policy.yaml")
        );
        let remote = component(&ConfigMap::default(), "policy.yaml", Some(source), None).unwrap();
        assert!(remote.is_remote());
        assert_eq!(
            document(&cm, "policy.yaml").unwrap_err().to_string(),
            "ConfigMap has no data key policy.yaml"
        );
    }

    #[test]
    fn content_ignores_metadata() {
        let mut a = with_binary(&[(PLUGIN_KEY, vec![1])]);
        let before = content_of(&a);
        a.metadata.annotations = Some([("x".to_string(), "y".to_string())].into());
        assert_eq!(content_of(&a), before);
        a.data = Some([("k".to_string(), "v".to_string())].into());
        assert_ne!(content_of(&a), before);
    }
}
