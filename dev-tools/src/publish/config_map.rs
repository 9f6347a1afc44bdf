//! The ConfigMap that binds a plugin: its document, its labels, and the
//! component in `binaryData` (zstd-compressed), within what a ConfigMap
//! holds.

use anyhow::Context as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;

use gantry_operator::controller::spec::{BINDING_KEY, BINDING_LABEL, PLUGIN_KEY, PLUGIN_ZSTD_KEY};
use gantry_operator::conversion::spec::{CONVERTER_KEY, CONVERTER_LABEL};
use gantry_operator::document::Document;
use gantry_operator::policy::spec::{POLICY_KEY, POLICY_LABEL};

/// Most bytes of values a ConfigMap holds (`data` and `binaryData`
/// together): the API server refuses a larger one.
pub const MAX_CONFIG_MAP_BYTES: usize = 1 << 20;

/// zstd level of inline components: the best ratio; decompression is as
/// fast at any level.
const ZSTD_LEVEL: i32 = 19;

/// A component too large to go inline in its ConfigMap.
#[derive(Debug, thiserror::Error)]
#[error(
    "the {noun} ConfigMap would hold {size} bytes (the component compressed to {compressed}), more than the {MAX_CONFIG_MAP_BYTES} a ConfigMap holds"
)]
pub struct TooLarge {
    /// "binding", "policy" or "converter".
    pub noun: &'static str,
    /// Bytes the ConfigMap would hold.
    pub size: usize,
    /// Bytes of the compressed component.
    pub compressed: usize,
}

/// The ConfigMap for `document` in `namespace`, named after it, with
/// `component` inline unless the document has a source. [`TooLarge`]
/// when it would not fit.
pub fn for_document(
    document: &Document,
    namespace: &str,
    component: Option<&[u8]>,
) -> anyhow::Result<ConfigMap> {
    let (label, key, text) = match document {
        Document::Binding { text, .. } => (BINDING_LABEL, BINDING_KEY, text),
        Document::Policy { text, .. } => (POLICY_LABEL, POLICY_KEY, text),
        Document::Converter { text, .. } => (CONVERTER_LABEL, CONVERTER_KEY, text),
    };
    let component = component.filter(|_| !document.has_source());
    let mut cm = with_component(document.name(), namespace, label, component, true)?;
    cm.data = Some([(key.to_string(), text.clone())].into());
    let size = text.len() + component_bytes(&cm);
    if size > MAX_CONFIG_MAP_BYTES {
        return Err(TooLarge {
            noun: document.noun(),
            size,
            compressed: component_bytes(&cm),
        }
        .into());
    }
    Ok(cm)
}

/// A binding ConfigMap named `name` labelled `label`, with `component` in
/// `binaryData` (zstd-compressed when `compress`); no document yet.
pub fn with_component(
    name: &str,
    namespace: &str,
    label: &str,
    component: Option<&[u8]>,
    compress: bool,
) -> anyhow::Result<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.metadata.namespace = Some(namespace.to_string());
    cm.metadata.labels = Some([(label.to_string(), "true".to_string())].into());
    if let Some(component) = component {
        let (key, bytes) = if compress {
            (
                PLUGIN_ZSTD_KEY,
                zstd::encode_all(component, ZSTD_LEVEL).context("compressing the plugin")?,
            )
        } else {
            (PLUGIN_KEY, component.to_vec())
        };
        cm.binary_data = Some([(key.to_string(), ByteString(bytes))].into());
    }
    Ok(cm)
}

fn component_bytes(cm: &ConfigMap) -> usize {
    cm.binary_data
        .iter()
        .flat_map(|data| data.values())
        .map(|bytes| bytes.0.len())
        .sum()
}

/// `cm` as an object to apply (with its apiVersion and kind).
pub fn as_object(cm: &ConfigMap) -> anyhow::Result<Value> {
    let mut object = serde_json::to_value(cm)?;
    object["apiVersion"] = "v1".into();
    object["kind"] = "ConfigMap".into();
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BINDING: &str = "name: hello\nparent: {apiVersion: example.com/v1, kind: Greeting}\n";

    #[test]
    fn holds_the_document_and_the_compressed_component_under_the_binding_label() {
        let document = Document::parse(BINDING).unwrap();
        let component = vec![7u8; 200_000];
        let cm = for_document(&document, "ops", Some(&component)).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("hello"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("ops"));
        assert_eq!(cm.metadata.labels.unwrap()[BINDING_LABEL], "true");
        assert_eq!(cm.data.unwrap()[BINDING_KEY], BINDING);
        let stored = &cm.binary_data.unwrap()[PLUGIN_ZSTD_KEY].0;
        assert!(stored.len() < 1000, "compressed: {} bytes", stored.len());
        assert_eq!(zstd::decode_all(&stored[..]).unwrap(), component);
    }

    #[test]
    fn refuses_what_a_config_map_cannot_hold() {
        let document = Document::parse(BINDING).unwrap();
        // Bytes zstd cannot shrink: a xorshift sequence.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let component: Vec<u8> = (0..MAX_CONFIG_MAP_BYTES + 1024)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()[0]
            })
            .collect();
        let error = for_document(&document, "ops", Some(&component)).unwrap_err();
        let too_large = error.downcast_ref::<TooLarge>().expect("TooLarge");
        assert!(too_large.size > MAX_CONFIG_MAP_BYTES, "{error}");
    }

    #[test]
    fn a_document_with_a_source_is_bound_without_the_component() {
        let text = format!(
            "{BINDING}sha256: {}\nsource: {{url: \"https://example.com/p.wasm\"}}\n",
            "a".repeat(64)
        );
        let document = Document::parse(&text).unwrap();
        let cm = for_document(&document, "ops", Some(b"\0asm")).unwrap();
        assert!(cm.binary_data.is_none());
    }
}
