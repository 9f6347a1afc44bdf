//! A binding: which parent kind a plugin reconciles, what it may create,
//! what it reads, and the plugin itself, as held by a ConfigMap labelled
//! `gantry.dev/plugin`.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::runtime::Limits;
use crate::source::{Fetched, PluginSource, SourceSpec};

/// Label that marks a ConfigMap as a plugin binding.
pub const BINDING_LABEL: &str = "gantry.dev/plugin";
/// Label the host puts on every child, naming its binding.
pub const CHILD_LABEL: &str = "gantry.dev/binding";
/// Annotation on the ConfigMap: the digest of the plugin in service.
pub const DIGEST_ANNOTATION: &str = "gantry.dev/plugin-digest";
/// Annotation on the ConfigMap: where the plugin in service came from; for
/// OCI, the artifact by digest (a tag resolved).
pub const SOURCE_ANNOTATION: &str = "gantry.dev/plugin-source";
/// Key of the binding document in the ConfigMap's `data`.
pub const BINDING_KEY: &str = "binding.yaml";
/// Key of the raw component in `binaryData`.
pub const PLUGIN_KEY: &str = "plugin.wasm";
/// Key of the zstd-compressed component in `binaryData`.
pub const PLUGIN_ZSTD_KEY: &str = "plugin.wasm.zst";
/// Largest component accepted after decompression.
pub const MAX_PLUGIN_BYTES: usize = 64 << 20;

/// A kind, as `apiVersion` and `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KindRef {
    /// `group/version`, or `v1`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

impl KindRef {
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// Whether `other` is the same kind, in any version: versions of one
    /// kind are views of the same objects.
    pub fn same_kind(&self, other: &KindRef) -> bool {
        self.kind == other.kind && self.group() == other.group()
    }
}

impl std::fmt::Display for KindRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

/// Objects the plugin reads besides its children.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RelatedSpec {
    /// `group/version`, or `v1`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Only objects matching this selector.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Only objects with these names.
    #[serde(default)]
    pub names: Vec<String>,
    /// Read from this namespace instead of the parent's (needs `crossNamespace`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Allow `namespace` to differ from the parent's.
    #[serde(default)]
    pub cross_namespace: bool,
}

impl RelatedSpec {
    /// The kind part.
    pub fn kind_ref(&self) -> KindRef {
        KindRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// Limits as written in a binding; absent fields keep the defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsSpec {
    /// Call deadline, milliseconds.
    pub deadline_ms: Option<u64>,
    /// Memory cap, MiB.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<usize>,
    /// Response size cap, bytes.
    pub output_bytes: Option<usize>,
    /// Most children per response.
    pub max_children: Option<usize>,
}

/// The `binding.yaml` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingSpec {
    /// The binding's name: a DNS label; used in the field manager
    /// (`gantry/<name>`), the child label and the finalizer.
    pub name: String,
    /// The kind reconciled.
    pub parent: KindRef,
    /// Kinds the plugin may create.
    #[serde(default)]
    pub children: Vec<KindRef>,
    /// Objects the plugin reads.
    #[serde(default)]
    pub related: Vec<RelatedSpec>,
    /// Add a finalizer and call the plugin with `finalizing` on deletion.
    #[serde(default)]
    pub finalize: bool,
    /// Resource limits of a call.
    #[serde(default)]
    pub limits: LimitsSpec,
    /// Seconds between resyncs of each parent.
    #[serde(default = "default_resync")]
    pub resync_seconds: u64,
    /// Free-form config passed to the plugin.
    #[serde(default)]
    pub config: Value,
    /// Expected sha256 of the component (lowercase hex). Required with a
    /// `source.url`; with `source.oci` the artifact's layer must match it.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Names of policy bindings (`gantry.dev/policy`) that every desired
    /// child must pass before anything is applied.
    #[serde(default)]
    pub guardrail_policies: Vec<String>,
    /// Fetch the component from a URL or an OCI registry instead of
    /// `binaryData` (for components larger than a ConfigMap holds).
    #[serde(default)]
    pub source: Option<SourceSpec>,
}

fn default_resync() -> u64 {
    300
}

impl BindingSpec {
    /// The call limits: the binding's, defaults elsewhere.
    pub fn call_limits(&self) -> Limits {
        let defaults = Limits::default();
        Limits {
            deadline: self
                .limits
                .deadline_ms
                .map(Duration::from_millis)
                .unwrap_or(defaults.deadline),
            memory_bytes: self
                .limits
                .memory_mib
                .map(|m| m << 20)
                .unwrap_or(defaults.memory_bytes),
            output_bytes: self.limits.output_bytes.unwrap_or(defaults.output_bytes),
            max_children: self.limits.max_children.unwrap_or(defaults.max_children),
        }
    }

    /// Resync period.
    pub fn resync(&self) -> Duration {
        Duration::from_secs(self.resync_seconds)
    }

    /// The finalizer the host adds when the binding finalizes.
    pub fn finalizer(&self) -> String {
        format!("gantry.dev/{}", self.name)
    }

    /// Field manager of children applies.
    pub fn field_manager(&self) -> String {
        format!("gantry/{}", self.name)
    }

    /// Field manager of status applies.
    pub fn status_field_manager(&self) -> String {
        format!("gantry/{}-status", self.name)
    }

    /// Whether `other` differs only in what can be swapped without
    /// restarting watches (plugin, config, limits).
    pub fn same_watches(&self, other: &BindingSpec) -> bool {
        self.name == other.name
            && self.parent == other.parent
            && self.children == other.children
            && self.related == other.related
            && self.finalize == other.finalize
            && self.resync_seconds == other.resync_seconds
    }
}

/// Why a binding ConfigMap was refused.
#[derive(Debug, Error, PartialEq)]
pub enum BindingError {
    /// No `binding.yaml` key.
    #[error("ConfigMap has no data key {BINDING_KEY}")]
    MissingSpec,
    /// `binding.yaml` does not parse or has unknown fields.
    #[error("{BINDING_KEY} is invalid: {0}")]
    InvalidSpec(String),
    /// A field has a value the host cannot accept.
    #[error("{BINDING_KEY}: {field}: {message}")]
    InvalidField {
        /// Path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// No plugin bytes.
    #[error("ConfigMap has no binaryData key {PLUGIN_KEY} or {PLUGIN_ZSTD_KEY}")]
    MissingPlugin,
    /// Both plugin keys are set.
    #[error("ConfigMap has both {PLUGIN_KEY} and {PLUGIN_ZSTD_KEY}; keep one")]
    AmbiguousPlugin,
    /// `source` is set and `binaryData` carries a plugin too.
    #[error("{BINDING_KEY} has a source and binaryData has a plugin; keep one")]
    SourceAndInline,
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

/// A binding read from its ConfigMap: the spec and the component bytes.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The parsed spec.
    pub spec: BindingSpec,
    /// The component (decompressed).
    pub plugin: Vec<u8>,
    /// sha256 of `plugin`.
    pub digest: String,
    /// Where a fetched component came from (an OCI tag resolved to its
    /// digest); `None` when inline.
    pub source: Option<String>,
}

impl Binding {
    /// A binding whose component was fetched from its source.
    pub fn fetched(spec: BindingSpec, fetched: Fetched, source: &PluginSource) -> Binding {
        Binding {
            spec,
            plugin: fetched.bytes,
            digest: fetched.digest,
            source: Some(fetched.resolved.unwrap_or_else(|| source.to_string())),
        }
    }
}

/// Where a binding's component is.
#[derive(Debug, Clone)]
pub enum Plugin {
    /// In the ConfigMap's `binaryData` (decompressed and checked).
    Inline(Binding),
    /// To be fetched from a URL or registry.
    Remote(BindingSpec, PluginSource),
}

fn field(field: &str, message: impl Into<String>) -> BindingError {
    BindingError::InvalidField {
        field: field.into(),
        message: message.into(),
    }
}

pub use gantry_apiserver::objects::meta::{is_dns_label, is_dns_subdomain};

fn check_kind(path: &str, kind: &KindRef) -> Result<(), BindingError> {
    let version_ok = {
        let mut parts = kind.api_version.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(v), None, None) => is_dns_label(v),
            (Some(g), Some(v), None) => is_dns_subdomain(g) && is_dns_label(v),
            _ => false,
        }
    };
    if !version_ok {
        return Err(field(
            &format!("{path}.apiVersion"),
            format!(
                "{:?} is not group/version or a core version",
                kind.api_version
            ),
        ));
    }
    if kind.kind.is_empty()
        || !kind
            .kind
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
        || !kind.kind.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(field(
            &format!("{path}.kind"),
            format!("{:?} is not a Kind", kind.kind),
        ));
    }
    Ok(())
}

/// Parse and check `binding.yaml`.
pub fn parse_spec(text: &str) -> Result<BindingSpec, BindingError> {
    let spec: BindingSpec =
        serde_yaml::from_str(text).map_err(|e| BindingError::InvalidSpec(e.to_string()))?;
    if !is_dns_label(&spec.name) {
        return Err(field(
            "name",
            format!(
                "{:?} must be a DNS label (lowercase letters, digits, '-')",
                spec.name
            ),
        ));
    }
    check_kind("parent", &spec.parent)?;
    for (i, child) in spec.children.iter().enumerate() {
        check_kind(&format!("children[{i}]"), child)?;
        if spec.children[..i].iter().any(|c| c.same_kind(child)) {
            return Err(field(
                &format!("children[{i}]"),
                format!("{child} is listed twice (in some version)"),
            ));
        }
        if child.same_kind(&spec.parent) {
            // A plugin creating its own parents forks without bound.
            return Err(field(
                &format!("children[{i}]"),
                format!("{child} is the parent kind; a binding cannot create its own parents"),
            ));
        }
    }
    for (i, related) in spec.related.iter().enumerate() {
        check_kind(&format!("related[{i}]"), &related.kind_ref())?;
        if related.namespace.is_some() && !related.cross_namespace {
            return Err(field(
                &format!("related[{i}].namespace"),
                "reading another namespace needs crossNamespace: true",
            ));
        }
        if related.selector.is_none() && related.names.is_empty() {
            return Err(field(&format!("related[{i}]"), "needs a selector or names"));
        }
    }
    for (i, policy) in spec.guardrail_policies.iter().enumerate() {
        if !is_dns_label(policy) {
            return Err(field(
                &format!("guardrailPolicies[{i}]"),
                format!("{policy:?} is not a policy name (a DNS label)"),
            ));
        }
        if spec.guardrail_policies[..i].contains(policy) {
            return Err(field(
                &format!("guardrailPolicies[{i}]"),
                format!("{policy} is listed twice"),
            ));
        }
    }
    if spec.resync_seconds == 0 {
        return Err(field("resyncSeconds", "must be at least 1"));
    }
    let limits = &spec.limits;
    if limits.deadline_ms == Some(0) || limits.deadline_ms.is_some_and(|d| d > 60_000) {
        return Err(field("limits.deadlineMs", "must be between 1 and 60000"));
    }
    if limits.memory_mib == Some(0) || limits.memory_mib.is_some_and(|m| m > 512) {
        return Err(field("limits.memoryMiB", "must be between 1 and 512"));
    }
    if let Some(sha) = &spec.sha256
        && !is_sha256_hex(sha)
    {
        return Err(field("sha256", "must be 64 lowercase hex digits"));
    }
    if let Some(source) = &spec.source {
        source
            .check(spec.sha256.is_some())
            .map_err(|(path, message)| field(&path, message))?;
    }
    Ok(spec)
}

fn decompress(bytes: &[u8]) -> Result<Vec<u8>, BindingError> {
    let decoder = zstd::stream::read::Decoder::new(bytes)
        .map_err(|e| BindingError::Decompress(e.to_string()))?;
    let mut out = Vec::new();
    // Read one byte past the cap to tell "exactly at the cap" from "over".
    decoder
        .take(MAX_PLUGIN_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| BindingError::Decompress(e.to_string()))?;
    if out.len() > MAX_PLUGIN_BYTES {
        return Err(BindingError::Decompress(format!(
            "decompresses to more than {MAX_PLUGIN_BYTES} bytes"
        )));
    }
    Ok(out)
}

/// Read a binding from its ConfigMap: the spec and, for an inline plugin,
/// its bytes with the digest checked; for a remote one, its source.
pub fn read_config_map(cm: &ConfigMap) -> Result<Plugin, BindingError> {
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(BINDING_KEY))
        .ok_or(BindingError::MissingSpec)?;
    let spec = parse_spec(text)?;
    if let Some(source) = &spec.source {
        let inline = cm
            .binary_data
            .as_ref()
            .is_some_and(|b| b.contains_key(PLUGIN_KEY) || b.contains_key(PLUGIN_ZSTD_KEY));
        if inline {
            return Err(BindingError::SourceAndInline);
        }
        let source = source
            .check(spec.sha256.is_some())
            .map_err(|(path, message)| field(&path, message))?;
        return Ok(Plugin::Remote(spec, source));
    }
    let (plugin, digest) = plugin_from_config_map(cm, spec.sha256.as_deref())?;
    Ok(Plugin::Inline(Binding {
        spec,
        plugin,
        digest,
        source: None,
    }))
}

/// Read a binding whose plugin is inline in the ConfigMap.
pub fn from_config_map(cm: &ConfigMap) -> Result<Binding, BindingError> {
    match read_config_map(cm)? {
        Plugin::Inline(binding) => Ok(binding),
        Plugin::Remote(..) => Err(BindingError::InvalidField {
            field: "source".into(),
            message: "the plugin must be fetched first".into(),
        }),
    }
}

/// The component a ConfigMap carries in `binaryData` (raw, or
/// zstd-compressed), and its sha256, checked against `pin` when given.
/// Shared by reconcile bindings and policy bindings.
pub fn plugin_from_config_map(
    cm: &ConfigMap,
    pin: Option<&str>,
) -> Result<(Vec<u8>, String), BindingError> {
    let empty = BTreeMap::new();
    let binary = cm.binary_data.as_ref().unwrap_or(&empty);
    let plugin = match (binary.get(PLUGIN_KEY), binary.get(PLUGIN_ZSTD_KEY)) {
        (Some(_), Some(_)) => return Err(BindingError::AmbiguousPlugin),
        (Some(raw), None) => raw.0.clone(),
        (None, Some(compressed)) => decompress(&compressed.0)?,
        (None, None) => return Err(BindingError::MissingPlugin),
    };
    let digest = crate::runtime::digest(&plugin);
    if let Some(expected) = pin
        && expected != digest
    {
        return Err(BindingError::DigestMismatch {
            expected: expected.to_string(),
            actual: digest,
        });
    }
    Ok((plugin, digest))
}

/// Whether `sha` is written as a pin must be: 64 lowercase hex digits.
pub fn is_sha256_hex(sha: &str) -> bool {
    sha.len() == 64
        && sha
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    const SPEC: &str = "name: memcached\nparent: {apiVersion: cache.example.com/v1alpha1, kind: Memcached}\nchildren:\n- {apiVersion: apps/v1, kind: Deployment}\n";

    fn config_map(spec: &str, key: &str, bytes: Vec<u8>) -> ConfigMap {
        ConfigMap {
            data: Some([(BINDING_KEY.to_string(), spec.to_string())].into()),
            binary_data: Some([(key.to_string(), ByteString(bytes))].into()),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn parses_a_minimal_binding_with_defaults() {
        let spec = parse_spec(SPEC).unwrap();
        assert_eq!(spec.parent.kind, "Memcached");
        assert_eq!(spec.resync(), Duration::from_secs(300));
        assert_eq!(spec.call_limits(), Limits::default());
        assert_eq!(spec.field_manager(), "gantry/memcached");
        assert_eq!(spec.finalizer(), "gantry.dev/memcached");
    }

    #[test]
    fn rejects_unknown_fields_and_bad_values_naming_the_field() {
        let cases = [
            (format!("{SPEC}colour: red\n"), "unknown field `colour`"),
            (SPEC.replace("name: memcached", "name: Memcached"), "name:"),
            (
                SPEC.replace("kind: Memcached", "kind: memcached"),
                "parent.kind",
            ),
            (
                SPEC.replace("apiVersion: apps/v1", "apiVersion: a/b/c"),
                "children[0].apiVersion",
            ),
            (
                format!("{SPEC}- {{apiVersion: apps/v1, kind: Deployment}}\n"),
                "listed twice",
            ),
            (
                format!("{SPEC}- {{apiVersion: apps/v1beta2, kind: Deployment}}\n"),
                "listed twice",
            ),
            (
                format!("{SPEC}- {{apiVersion: cache.example.com/v1alpha1, kind: Memcached}}\n"),
                "cannot create its own parents",
            ),
            (
                format!("{SPEC}- {{apiVersion: cache.example.com/v2, kind: Memcached}}\n"),
                "cannot create its own parents",
            ),
            (
                format!("{SPEC}limits: {{deadlineMs: 0}}\n"),
                "limits.deadlineMs",
            ),
            (
                format!("{SPEC}limits: {{memoryMiB: 4096}}\n"),
                "limits.memoryMiB",
            ),
            (format!("{SPEC}sha256: abc\n"), "sha256"),
            (
                format!("{SPEC}related:\n- {{apiVersion: v1, kind: Secret}}\n"),
                "needs a selector or names",
            ),
            (
                format!(
                    "{SPEC}related:\n- {{apiVersion: v1, kind: Secret, names: [a], namespace: x}}\n"
                ),
                "crossNamespace",
            ),
            ("[not, a, map]".to_string(), "invalid"),
        ];
        for (text, expected) in cases {
            let err = parse_spec(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
        }
    }

    #[test]
    fn reads_raw_and_zstd_plugins_and_checks_the_pin() {
        let bytes = b"\0asm\x0d\0\x01\0component".to_vec();
        let digest = crate::runtime::digest(&bytes);
        let raw = from_config_map(&config_map(SPEC, PLUGIN_KEY, bytes.clone())).unwrap();
        assert_eq!(
            (raw.plugin.clone(), raw.digest.clone()),
            (bytes.clone(), digest.clone())
        );

        let compressed = zstd::encode_all(&bytes[..], 3).unwrap();
        let pinned = format!("{SPEC}sha256: {digest}\n");
        let zst = from_config_map(&config_map(&pinned, PLUGIN_ZSTD_KEY, compressed)).unwrap();
        assert_eq!(zst.plugin, bytes);

        let wrong = format!("{SPEC}sha256: {}\n", "0".repeat(64));
        let err = from_config_map(&config_map(&wrong, PLUGIN_KEY, bytes)).unwrap_err();
        assert!(matches!(err, BindingError::DigestMismatch { .. }));
    }

    #[test]
    fn remote_sources_are_checked_and_exclude_inline_plugins() {
        let pin = "a".repeat(64);
        let url = format!(
            "{SPEC}sha256: {pin}\nsource: {{url: \"https://plugins.example.com/m.wasm\"}}\n"
        );
        let cm = ConfigMap {
            data: Some([(BINDING_KEY.to_string(), url.clone())].into()),
            ..ConfigMap::default()
        };
        match read_config_map(&cm).unwrap() {
            Plugin::Remote(spec, PluginSource::Url { url, insecure }) => {
                assert_eq!(url, "https://plugins.example.com/m.wasm");
                assert!(!insecure);
                assert_eq!(spec.sha256.as_deref(), Some(pin.as_str()));
            }
            other => panic!("{other:?}"),
        }
        let both = config_map(&url, PLUGIN_KEY, vec![1]);
        assert_eq!(
            read_config_map(&both).unwrap_err(),
            BindingError::SourceAndInline
        );
        let cases = [
            (
                format!("{SPEC}source: {{url: \"https://a.example/m.wasm\"}}\n"),
                "sha256: a url source needs a sha256 pin",
            ),
            (
                format!("{SPEC}sha256: {pin}\nsource: {{url: \"http://a.example/m.wasm\"}}\n"),
                "source.url",
            ),
            (
                format!("{SPEC}source: {{oci: \"oci://ghcr.io/org/m\"}}\n"),
                "source.oci",
            ),
            (
                format!("{SPEC}source: {{}}\n"),
                "exactly one of url and oci",
            ),
            (
                format!("{SPEC}source: {{oci: \"oci://a.b/c:d\", colour: red}}\n"),
                "unknown field `colour`",
            ),
        ];
        for (text, expected) in cases {
            let err = parse_spec(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
        }
        let oci = format!("{SPEC}source: {{oci: \"oci://127.0.0.1:5000/p/m:v1\"}}\n");
        assert!(parse_spec(&oci).is_ok(), "a tag without a pin is resolved");
    }

    #[test]
    fn refuses_missing_ambiguous_and_bomb_plugins() {
        let mut cm = config_map(SPEC, PLUGIN_KEY, vec![1]);
        cm.binary_data
            .as_mut()
            .unwrap()
            .insert(PLUGIN_ZSTD_KEY.into(), ByteString(vec![2]));
        assert_eq!(
            from_config_map(&cm).unwrap_err(),
            BindingError::AmbiguousPlugin
        );
        cm.binary_data = None;
        assert_eq!(
            from_config_map(&cm).unwrap_err(),
            BindingError::MissingPlugin
        );
        cm.data = None;
        assert_eq!(from_config_map(&cm).unwrap_err(), BindingError::MissingSpec);

        let bomb = zstd::encode_all(&vec![0u8; MAX_PLUGIN_BYTES + 1][..], 19).unwrap();
        assert!(bomb.len() < 1 << 20, "the bomb fits in a ConfigMap");
        let err = from_config_map(&config_map(SPEC, PLUGIN_ZSTD_KEY, bomb)).unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
        let err =
            from_config_map(&config_map(SPEC, PLUGIN_ZSTD_KEY, b"not zstd".to_vec())).unwrap_err();
        assert!(matches!(err, BindingError::Decompress(_)));
    }
}
