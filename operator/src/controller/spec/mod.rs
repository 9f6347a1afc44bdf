//! The spec of a reconcile binding (`binding.yaml`): which parent kind a
//! plugin reconciles, what it may create, what it reads, and the plugin
//! itself, as held by a ConfigMap labelled `gantry.dev/plugin`.

mod hand_over;
mod rollout;

use std::time::Duration;

use gantry_kube::names::{is_dns1123_label, is_dns1123_subdomain};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

pub use crate::delivery::LimitsSpec;
use crate::delivery::envelope::{self, Component, EnvelopeError, PluginBytes};
pub use crate::delivery::envelope::{MAX_PLUGIN_BYTES, PLUGIN_KEY, PLUGIN_ZSTD_KEY, is_sha256_hex};
use crate::delivery::source::SourceSpec;
use gantry_sandbox::limits::Limits;
pub use hand_over::HandOverSpec;
pub use rollout::{RolloutSpec, Threshold};

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
    /// Seconds between resyncs of each parent; 0: none (a parent is
    /// reconciled only when it, its children or its related objects change,
    /// or when the plugin asks for a requeue).
    #[serde(default = "default_resync")]
    pub resync_seconds: u64,
    /// Reconciles of this binding at once (default and ceiling: the
    /// operator's `--concurrency`).
    #[serde(default)]
    pub max_concurrent_reconciles: Option<u16>,
    /// Retry delays after a failure (default: the operator's).
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
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
    /// How a new version goes into service: shadow-run first, and what it
    /// may fail or change.
    #[serde(default)]
    pub rollout: RolloutSpec,
    /// What the plugin may do beyond computing (outbound HTTP); nothing
    /// unless granted.
    #[serde(default)]
    pub capabilities: gantry_sandbox::capability::CapabilitiesSpec,
    /// Fields of children that pass to another controller (an HPA's
    /// `spec.replicas`) when the plugin stops setting them, instead of
    /// being removed (see `children::handover`).
    #[serde(default)]
    pub hand_over: Vec<HandOverSpec>,
}

fn default_resync() -> u64 {
    300
}

/// Retry delays of a binding after a failed reconcile: `baseMs` doubled
/// per consecutive failure up to `maxMs`, with ±20% jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackoffSpec {
    /// The first retry delay, in milliseconds.
    pub base_ms: u64,
    /// The longest retry delay, in milliseconds.
    pub max_ms: u64,
}

impl BindingSpec {
    /// The call limits: the binding's, defaults elsewhere.
    pub fn call_limits(&self) -> Limits {
        self.limits.call_limits()
    }

    /// Resync period; `None`: no resync.
    pub fn resync(&self) -> Option<Duration> {
        (self.resync_seconds > 0).then(|| Duration::from_secs(self.resync_seconds))
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
    /// restarting watches and the controller (plugin, config, limits,
    /// backoff, rollout).
    pub fn same_watches(&self, other: &BindingSpec) -> bool {
        self.name == other.name
            && self.parent == other.parent
            && self.children == other.children
            && self.related == other.related
            && self.finalize == other.finalize
            && self.resync_seconds == other.resync_seconds
            && self.max_concurrent_reconciles == other.max_concurrent_reconciles
    }
}

/// Why a binding ConfigMap was refused.
#[derive(Debug, Error, PartialEq)]
pub enum BindingError {
    /// The envelope (document key, component, pin) is wrong.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
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
}

/// A binding read from its ConfigMap: the spec and the component.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The parsed spec.
    pub spec: BindingSpec,
    /// The component.
    pub plugin: PluginBytes,
}

fn field(field: &str, message: impl Into<String>) -> BindingError {
    BindingError::InvalidField {
        field: field.into(),
        message: message.into(),
    }
}

fn check_kind(path: &str, kind: &KindRef) -> Result<(), BindingError> {
    let version_ok = {
        let mut parts = kind.api_version.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(v), None, None) => is_dns1123_label(v),
            (Some(g), Some(v), None) => is_dns1123_subdomain(g) && is_dns1123_label(v),
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
    if !is_dns1123_label(&spec.name) {
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
        if !is_dns1123_label(policy) {
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
    hand_over::check(&spec.hand_over, &spec.children)
        .map_err(|(at, message)| field(&at, message))?;
    if spec.max_concurrent_reconciles == Some(0) {
        return Err(field("maxConcurrentReconciles", "must be at least 1"));
    }
    if let Some(backoff) = spec.backoff
        && (backoff.base_ms == 0 || backoff.max_ms < backoff.base_ms)
    {
        return Err(field(
            "backoff",
            "baseMs must be at least 1 and maxMs at least baseMs",
        ));
    }
    spec.limits
        .check()
        .map_err(|(path, message)| field(&path, message))?;
    if let Some(http) = &spec.capabilities.http {
        http.check()
            .map_err(|(path, message)| field(&path, message))?;
    }
    envelope::check_pin_and_source(spec.sha256.as_deref(), spec.source.as_ref())
        .map_err(|(path, message)| field(&path, message))?;
    Ok(spec)
}

/// Read a binding from its ConfigMap: the spec and where its component is
/// (inline, decompressed and checked against the pin; or its source).
pub fn read_config_map(cm: &ConfigMap) -> Result<(BindingSpec, Component), BindingError> {
    let spec = parse_spec(envelope::document(cm, BINDING_KEY)?)?;
    let source = envelope::check_source(spec.source.as_ref(), spec.sha256.is_some())
        .map_err(|(path, message)| field(&path, message))?;
    let component = envelope::component(cm, BINDING_KEY, source, spec.sha256.as_deref())?;
    Ok((spec, component))
}

/// Read a binding whose plugin is inline in the ConfigMap.
pub fn from_config_map(cm: &ConfigMap) -> Result<Binding, BindingError> {
    match read_config_map(cm)? {
        (spec, Component::Inline(plugin)) => Ok(Binding { spec, plugin }),
        (_, Component::Remote(_)) => Err(field("source", "the plugin must be fetched first")),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;
    use crate::delivery::source::PluginSource;

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
        assert_eq!(spec.resync(), Some(Duration::from_mins(5)));
        assert_eq!(spec.call_limits(), Limits::default());
        assert_eq!(spec.field_manager(), "gantry/memcached");
        assert_eq!(spec.finalizer(), "gantry.dev/memcached");
    }

    #[test]
    fn per_binding_knobs_parse_and_are_checked() {
        let spec = parse_spec(&format!(
            "{SPEC}maxConcurrentReconciles: 2\nbackoff: {{baseMs: 100, maxMs: 1000}}\nresyncSeconds: 0\n"
        ))
        .unwrap();
        assert_eq!(spec.max_concurrent_reconciles, Some(2));
        assert_eq!(
            spec.backoff,
            Some(BackoffSpec {
                base_ms: 100,
                max_ms: 1000
            })
        );
        assert_eq!(spec.resync(), None, "resyncSeconds: 0 turns resync off");
        let zero = parse_spec(&format!("{SPEC}maxConcurrentReconciles: 0\n")).unwrap_err();
        assert!(
            zero.to_string()
                .contains("maxConcurrentReconciles: must be at least 1"),
            "{zero}"
        );
        let inverted =
            parse_spec(&format!("{SPEC}backoff: {{baseMs: 100, maxMs: 10}}\n")).unwrap_err();
        assert!(inverted.to_string().contains("backoff: "), "{inverted}");
        let mut other = spec.clone();
        other.max_concurrent_reconciles = Some(3);
        assert!(
            !spec.same_watches(&other),
            "a new bound restarts the controller"
        );
        other = spec.clone();
        other.backoff = None;
        assert!(spec.same_watches(&other), "backoff is swapped in place");
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
        let digest = gantry_sandbox::runtime::digest(&bytes);
        let raw = from_config_map(&config_map(SPEC, PLUGIN_KEY, bytes.clone())).unwrap();
        assert_eq!(
            (raw.plugin.component.bytes(), raw.plugin.component.digest()),
            (&bytes[..], &digest[..])
        );

        let compressed = zstd::encode_all(&bytes[..], 3).unwrap();
        let pinned = format!("{SPEC}sha256: {digest}\n");
        let zst = from_config_map(&config_map(&pinned, PLUGIN_ZSTD_KEY, compressed)).unwrap();
        assert_eq!(zst.plugin.component.bytes(), bytes);

        let wrong = format!("{SPEC}sha256: {}\n", "0".repeat(64));
        let err = from_config_map(&config_map(&wrong, PLUGIN_KEY, bytes)).unwrap_err();
        assert!(matches!(
            err,
            BindingError::Envelope(EnvelopeError::DigestMismatch { .. })
        ));
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
            (spec, Component::Remote(PluginSource::Url { url, insecure })) => {
                assert_eq!(url, "https://plugins.example.com/m.wasm");
                assert!(!insecure);
                assert_eq!(spec.sha256.as_deref(), Some(pin.as_str()));
            }
            other => panic!("{other:?}"),
        }
        let both = config_map(&url, PLUGIN_KEY, vec![1]);
        assert_eq!(
            read_config_map(&both).unwrap_err(),
            BindingError::Envelope(EnvelopeError::SourceAndInline(BINDING_KEY))
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
    fn refuses_missing_documents_and_plugins() {
        let mut cm = config_map(SPEC, PLUGIN_KEY, vec![1]);
        cm.binary_data = None;
        assert_eq!(
            from_config_map(&cm).unwrap_err(),
            BindingError::Envelope(EnvelopeError::MissingPlugin)
        );
        cm.data = None;
        assert_eq!(
            from_config_map(&cm).unwrap_err().to_string(),
            "ConfigMap has no data key binding.yaml"
        );
    }
}
