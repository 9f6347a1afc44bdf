//! A policy binding: an admission policy plugin, what it judges and how,
//! as held by a ConfigMap labelled `gantry.dev/policy`.
//!
//! The plugin travels like a reconcile plugin's (`binaryData` key
//! `plugin.wasm`, or `plugin.wasm.zst` compressed with zstd, optionally
//! pinned by `sha256`); the document is `policy.yaml`.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use gantry_kube::names::is_dns1123_label;
use gantry_kube::rules::{RuleRequest, rule_covers};
use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;

pub use crate::delivery::LimitsSpec;
use crate::delivery::envelope::{self, Component, EnvelopeError, PluginBytes};
use crate::delivery::source::SourceSpec;
use gantry_sandbox::limits::Limits;

/// Label that marks a ConfigMap as a policy binding.
pub const POLICY_LABEL: &str = "gantry.dev/policy";
/// Key of the policy document in the ConfigMap's `data`.
pub const POLICY_KEY: &str = "policy.yaml";
/// Annotation on the ConfigMap: the digest of the policy in service.
pub const DIGEST_ANNOTATION: &str = "gantry.dev/policy-digest";

/// Whether the policy's verdict is enforced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Denials deny and mutations mutate.
    #[default]
    Enforce,
    /// The policy is evaluated, logged and counted, and every request is
    /// allowed unchanged.
    Monitor,
}

impl Mode {
    /// `enforce` or `monitor`, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Monitor => "monitor",
        }
    }
}

/// What happens when the policy cannot give a verdict (deadline, memory,
/// trap, broken contract), as in a webhook configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailurePolicy {
    /// The request is denied, saying why.
    #[default]
    Fail,
    /// The request is allowed, with a warning.
    Ignore,
}

impl FailurePolicy {
    /// `Fail` or `Ignore`, as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}

/// An operation a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operation {
    /// Create.
    #[serde(rename = "CREATE")]
    Create,
    /// Update.
    #[serde(rename = "UPDATE")]
    Update,
    /// Delete.
    #[serde(rename = "DELETE")]
    Delete,
    /// Connect (exec, attach, port-forward, proxy).
    #[serde(rename = "CONNECT")]
    Connect,
    /// Every operation.
    #[serde(rename = "*")]
    All,
}

impl Operation {
    /// As Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
            Self::All => "*",
        }
    }
}

/// Which requests the policy judges: Kubernetes' `RuleWithOperations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// API groups (`""` is the core group, `*` all).
    pub api_groups: Vec<String>,
    /// API versions (`*` all).
    pub api_versions: Vec<String>,
    /// Resources by plural name, with `/subresource` for subresources
    /// (`pods`, `deployments/scale`, `pods/*`, `*`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Kinds instead of resources (`Pod`, `Deployment/scale`): resolved to
    /// resources by discovery when the policy is loaded (see
    /// [`resolve_kinds`]). Webhook configurations carry the resources.
    #[serde(default, skip_serializing)]
    pub kinds: Vec<String>,
    /// Operations.
    pub operations: Vec<Operation>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

fn matches_list(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

impl Rule {
    /// The rule as a webhook configuration carries it.
    pub fn to_webhook_rule(&self) -> RuleWithOperations {
        RuleWithOperations {
            api_groups: Some(self.api_groups.clone()),
            api_versions: Some(self.api_versions.clone()),
            resources: Some(self.resources.clone()),
            operations: Some(
                self.operations
                    .iter()
                    .map(|o| o.as_str().to_string())
                    .collect(),
            ),
            scope: self.scope.clone(),
        }
    }

    /// Whether the rule covers `operation` on `group/version` `resource`
    /// (with `subresource`, empty for the main resource), in the given
    /// scope: judged by the embedded API server's own rule matching.
    pub fn matches(
        &self,
        operation: &str,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
        namespaced: bool,
    ) -> bool {
        let request = RuleRequest {
            operation,
            group,
            version,
            resource,
            subresource,
            namespaced,
        };
        rule_covers(&self.to_webhook_rule(), &request)
    }
}

/// The `policy.yaml` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// The policy's name, a DNS label: its webhook path is
    /// `/policies/<name>`, and reconcile bindings name it in
    /// `guardrailPolicies`.
    pub name: String,
    /// Requests the policy judges.
    pub rules: Vec<Rule>,
    /// Only objects in namespaces whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Only objects whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// `enforce` (default) or `monitor`.
    #[serde(default)]
    pub mode: Mode,
    /// Whether the policy may change objects. A mutation from a policy not
    /// marked mutating denies the request.
    #[serde(default)]
    pub mutating: bool,
    /// Passed to the policy with every request; checked by its
    /// `validate-settings` before the policy goes into service.
    #[serde(default)]
    pub settings: Value,
    /// Call limits (`maxChildren` does not apply: a policy has no children).
    #[serde(default)]
    pub limits: LimitsSpec,
    /// `Fail` (default) or `Ignore`: what a failed evaluation means.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// How long the API server waits for the webhook, 1 to 30 (default 10).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u32,
    /// Expected sha256 of the component (lowercase hex). Required with a
    /// `source.url`; with `source.oci` the artifact's layer must match it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Fetch the component from a URL or an OCI registry instead of
    /// `binaryData`, as reconcile bindings do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceSpec>,
}

fn default_timeout() -> u32 {
    10
}

impl PolicySpec {
    /// The call limits: the binding's, defaults elsewhere.
    pub fn call_limits(&self) -> Limits {
        self.limits.call_limits()
    }

    /// The webhook timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout_seconds))
    }

    /// The webhook's name in the webhook configurations.
    pub fn webhook_name(&self) -> String {
        format!("{}.policies.gantry.dev", self.name)
    }

    /// The webhook path of the policy on Gantry's webhook server.
    pub fn path(&self) -> String {
        format!("/policies/{}", self.name)
    }

    /// Whether a rule covers the request (see [`Rule::matches`]).
    pub fn matches(
        &self,
        operation: &str,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
        namespaced: bool,
    ) -> bool {
        self.rules
            .iter()
            .any(|r| r.matches(operation, group, version, resource, subresource, namespaced))
    }
}

/// Why a policy ConfigMap was refused.
#[derive(Debug, Error, PartialEq)]
pub enum PolicyBindingError {
    /// The envelope (document key, component, pin) is wrong.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// `policy.yaml` does not parse or has unknown fields.
    #[error("{POLICY_KEY} is invalid: {0}")]
    InvalidSpec(String),
    /// A field has a value the host cannot accept.
    #[error("{POLICY_KEY}: {field}: {message}")]
    InvalidField {
        /// Path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn field(field: &str, message: impl Into<String>) -> PolicyBindingError {
    PolicyBindingError::InvalidField {
        field: field.into(),
        message: message.into(),
    }
}

fn check_selector(path: &str, selector: Option<&LabelSelector>) -> Result<(), PolicyBindingError> {
    if let Some(selector) = selector {
        kube::core::Selector::try_from(selector.clone()).map_err(|e| field(path, e.to_string()))?;
    }
    Ok(())
}

/// Parse and check `policy.yaml`.
pub fn parse_spec(text: &str) -> Result<PolicySpec, PolicyBindingError> {
    let spec: PolicySpec =
        serde_yaml::from_str(text).map_err(|e| PolicyBindingError::InvalidSpec(e.to_string()))?;
    if !is_dns1123_label(&spec.name) {
        return Err(field(
            "name",
            format!(
                "{:?} must be a DNS label (lowercase letters, digits, '-')",
                spec.name
            ),
        ));
    }
    if spec.rules.is_empty() {
        return Err(field("rules", "at least one rule is needed"));
    }
    for (i, rule) in spec.rules.iter().enumerate() {
        for (name, list) in [
            ("apiGroups", &rule.api_groups),
            ("apiVersions", &rule.api_versions),
        ] {
            if list.is_empty() {
                return Err(field(&format!("rules[{i}].{name}"), "must not be empty"));
            }
        }
        match (rule.resources.is_empty(), rule.kinds.is_empty()) {
            (true, true) => {
                return Err(field(&format!("rules[{i}]"), "needs resources or kinds"));
            }
            (false, false) => {
                return Err(field(
                    &format!("rules[{i}]"),
                    "has both resources and kinds; name one",
                ));
            }
            _ => {}
        }
        if let Some(bad) = rule.kinds.iter().find(|k| {
            k.is_empty() || k.matches('/').count() > 1 || k.starts_with('/') || k.contains('*')
        }) {
            return Err(field(
                &format!("rules[{i}].kinds"),
                format!("{bad:?} is not `Kind` or `Kind/subresource`"),
            ));
        }
        if rule.operations.is_empty() {
            return Err(field(
                &format!("rules[{i}].operations"),
                "must not be empty",
            ));
        }
        if let Some(bad) = rule
            .resources
            .iter()
            .find(|r| r.is_empty() || r.matches('/').count() > 1 || r.starts_with('/'))
        {
            return Err(field(
                &format!("rules[{i}].resources"),
                format!("{bad:?} is not `resource` or `resource/subresource`"),
            ));
        }
        if let Some(scope) = &rule.scope
            && !["Cluster", "Namespaced", "*"].contains(&scope.as_str())
        {
            return Err(field(
                &format!("rules[{i}].scope"),
                format!("{scope:?} is not Cluster, Namespaced or *"),
            ));
        }
    }
    check_selector("namespaceSelector", spec.namespace_selector.as_ref())?;
    check_selector("objectSelector", spec.object_selector.as_ref())?;
    if !(1..=30).contains(&spec.timeout_seconds) {
        return Err(field("timeoutSeconds", "must be between 1 and 30"));
    }
    spec.limits
        .check()
        .map_err(|(path, message)| field(&path, message))?;
    if spec.limits.max_children.is_some() {
        return Err(field(
            "limits.maxChildren",
            "a policy has no children; only reconcile bindings take this limit",
        ));
    }
    if spec.call_limits().deadline >= spec.timeout() {
        return Err(field(
            "limits.deadlineMs",
            format!(
                "must be shorter than timeoutSeconds ({}s), or the API server gives up first",
                spec.timeout_seconds
            ),
        ));
    }
    envelope::check_pin_and_source(spec.sha256.as_deref(), spec.source.as_ref())
        .map_err(|(path, message)| field(&path, message))?;
    Ok(spec)
}

/// A policy binding with its component at hand.
#[derive(Debug, Clone)]
pub struct PolicyBinding {
    /// The parsed spec.
    pub spec: PolicySpec,
    /// The component.
    pub plugin: PluginBytes,
}

/// Fill the `resources` of rules that name `kinds`, from discovery: every
/// served resource of that kind in the rule's groups and versions. A kind
/// that nothing serves is an error naming the rule.
pub async fn resolve_kinds(client: &kube::Client, rules: &mut [Rule]) -> Result<(), String> {
    if rules.iter().all(|r| r.kinds.is_empty()) {
        return Ok(());
    }
    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| format!("discovering the served kinds: {e}"))?;
    for (i, rule) in rules.iter_mut().enumerate() {
        let mut resources = std::collections::BTreeSet::new();
        for kind in &rule.kinds {
            let (kind_name, subresource) = match kind.split_once('/') {
                Some((k, sub)) => (k, Some(sub)),
                None => (kind.as_str(), None),
            };
            let plurals: Vec<String> = discovery
                .groups()
                .filter(|g| matches_list(&rule.api_groups, g.name()))
                .flat_map(|g| {
                    g.versions()
                        .filter(|v| matches_list(&rule.api_versions, v))
                        .flat_map(|v| g.versioned_resources(v))
                        .collect::<Vec<_>>()
                })
                .filter(|(resource, _)| resource.kind == kind_name)
                .map(|(resource, _)| resource.plural)
                .collect();
            if plurals.is_empty() {
                return Err(format!(
                    "rules[{i}].kinds: {kind_name} is not served in groups {:?}, versions {:?}",
                    rule.api_groups, rule.api_versions
                ));
            }
            for plural in plurals {
                resources.insert(match subresource {
                    Some(sub) => format!("{plural}/{sub}"),
                    None => plural,
                });
            }
        }
        rule.resources = resources.into_iter().collect();
    }
    Ok(())
}

/// Read a policy binding from its ConfigMap: the spec and where its
/// component is (inline, checked against the pin; or its source).
pub fn read_config_map(cm: &ConfigMap) -> Result<(PolicySpec, Component), PolicyBindingError> {
    let spec = parse_spec(envelope::document(cm, POLICY_KEY)?)?;
    let source = envelope::check_source(spec.source.as_ref(), spec.sha256.is_some())
        .map_err(|(path, message)| field(&path, message))?;
    let component = envelope::component(cm, POLICY_KEY, source, spec.sha256.as_deref())?;
    Ok((spec, component))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;
    use crate::delivery::envelope::PLUGIN_KEY;

    const SPEC: &str = "name: cap-replicas\nrules:\n- {apiGroups: [apps], apiVersions: [v1], resources: [deployments, deployments/scale], operations: [CREATE, UPDATE]}\nsettings: {max: 5}\n";

    #[test]
    fn parses_a_minimal_policy_with_defaults() {
        let spec = parse_spec(SPEC).unwrap();
        assert_eq!(spec.mode, Mode::Enforce);
        assert_eq!(spec.failure_policy, FailurePolicy::Fail);
        assert!(!spec.mutating);
        assert_eq!(spec.timeout_seconds, 10);
        assert_eq!(spec.call_limits(), Limits::default());
        assert_eq!(spec.path(), "/policies/cap-replicas");
        assert_eq!(spec.webhook_name(), "cap-replicas.policies.gantry.dev");
        assert_eq!(spec.settings, serde_json::json!({"max": 5}));
    }

    #[test]
    fn rules_match_like_kubernetes() {
        let spec = parse_spec(SPEC).unwrap();
        assert!(spec.matches("CREATE", "apps", "v1", "deployments", "", true));
        assert!(spec.matches("UPDATE", "apps", "v1", "deployments", "scale", true));
        assert!(!spec.matches("DELETE", "apps", "v1", "deployments", "", true));
        assert!(!spec.matches("CREATE", "", "v1", "pods", "", true));
        assert!(!spec.matches("CREATE", "apps", "v1", "deployments", "status", true));
        let all = parse_spec(
            "name: x\nrules:\n- {apiGroups: ['*'], apiVersions: ['*'], resources: ['pods/*'], operations: ['*'], scope: Cluster}\n",
        )
        .unwrap();
        assert!(all.matches("CONNECT", "", "v1", "pods", "exec", false));
        assert!(!all.matches("CONNECT", "", "v1", "pods", "exec", true));
    }

    #[test]
    fn rejects_unknown_fields_and_bad_values_naming_the_field() {
        let cases = [
            (format!("{SPEC}colour: red\n"), "unknown field `colour`"),
            (format!("{SPEC}mode: audit\n"), "unknown variant `audit`"),
            (format!("{SPEC}failurePolicy: fail\n"), "unknown variant"),
            (SPEC.replace("CREATE", "PATCH"), "unknown variant `PATCH`"),
            (SPEC.replace("cap-replicas", "Cap"), "name:"),
            (SPEC.replace("[apps]", "[]"), "rules[0].apiGroups"),
            (
                SPEC.replace("deployments/scale", "a/b/c"),
                "rules[0].resources",
            ),
            ("name: x\nrules: []\n".to_string(), "at least one rule"),
            (
                SPEC.replace(
                    "resources: [deployments, deployments/scale]",
                    "resources: []",
                ),
                "needs resources or kinds",
            ),
            (
                SPEC.replace("resources:", "kinds: [Deployment], resources:"),
                "has both resources and kinds",
            ),
            (
                SPEC.replace(
                    "resources: [deployments, deployments/scale]",
                    "kinds: ['*']",
                ),
                "rules[0].kinds",
            ),
            (format!("{SPEC}timeoutSeconds: 31\n"), "timeoutSeconds"),
            (
                format!("{SPEC}timeoutSeconds: 1\nlimits: {{deadlineMs: 1000}}\n"),
                "shorter than timeoutSeconds",
            ),
            (
                format!("{SPEC}limits: {{memoryMiB: 0}}\n"),
                "limits.memoryMiB",
            ),
            (format!("{SPEC}sha256: ABC\n"), "sha256"),
            (
                format!(
                    "{SPEC}namespaceSelector: {{matchExpressions: [{{key: a, operator: Sideways}}]}}\n"
                ),
                "namespaceSelector",
            ),
            ("[1]".to_string(), "invalid"),
        ];
        for (text, expected) in cases {
            let err = parse_spec(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
        }
    }

    #[test]
    fn reads_the_plugin_like_reconcile_bindings() {
        let bytes = b"\0asm component".to_vec();
        let mut cm = ConfigMap {
            data: Some([(POLICY_KEY.to_string(), SPEC.to_string())].into()),
            binary_data: Some([(PLUGIN_KEY.to_string(), ByteString(bytes.clone()))].into()),
            ..ConfigMap::default()
        };
        let (_, component) = read_config_map(&cm).unwrap();
        let Component::Inline(plugin) = component else {
            panic!("an inline component")
        };
        assert_eq!(plugin.component.bytes(), bytes);
        assert_eq!(
            plugin.component.digest(),
            gantry_sandbox::runtime::digest(&bytes)
        );
        cm.data = Some(
            [(
                POLICY_KEY.to_string(),
                format!("{SPEC}sha256: {}\n", "0".repeat(64)),
            )]
            .into(),
        );
        assert!(matches!(
            read_config_map(&cm).unwrap_err(),
            PolicyBindingError::Envelope(EnvelopeError::DigestMismatch { .. })
        ));
        cm.data = None;
        assert_eq!(
            read_config_map(&cm).unwrap_err(),
            PolicyBindingError::Envelope(EnvelopeError::MissingDocument(POLICY_KEY))
        );
    }

    #[test]
    fn a_policy_may_come_from_a_source_and_takes_no_max_children() {
        let pin = "a".repeat(64);
        let remote =
            format!("{SPEC}sha256: {pin}\nsource: {{oci: \"oci://127.0.0.1:5000/p/cap:v1\"}}\n");
        let cm = ConfigMap {
            data: Some([(POLICY_KEY.to_string(), remote)].into()),
            ..ConfigMap::default()
        };
        let (spec, component) = read_config_map(&cm).unwrap();
        assert!(component.is_remote());
        assert_eq!(spec.sha256.as_deref(), Some(pin.as_str()));
        let url = format!("{SPEC}source: {{url: \"https://a.example/p.wasm\"}}\n");
        let err = parse_spec(&url).unwrap_err().to_string();
        assert!(err.contains("needs a sha256 pin"), "{err}");
        let err = parse_spec(&format!("{SPEC}limits: {{maxChildren: 3}}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("limits.maxChildren"), "{err}");
    }
}
