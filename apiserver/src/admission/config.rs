//! Webhook configurations: kube's defaults and validation on write, and the parsed
//! [`Webhook`] the dispatcher works with.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1 as admreg;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceInfo;

/// Mutating or validating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookKind {
    /// From a MutatingWebhookConfiguration.
    Mutating,
    /// From a ValidatingWebhookConfiguration.
    Validating,
}

/// Where a webhook is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum Endpoint {
    /// `clientConfig.url`.
    Url(String),
    /// `clientConfig.service`.
    Service {
        /// Service namespace.
        namespace: String,
        /// Service name.
        name: String,
        /// URL path (default `/`).
        path: String,
        /// Service port (default 443).
        port: u16,
    },
}

/// A compiled `matchConditions` entry.
#[derive(Clone)]
pub struct MatchCondition {
    /// Its name.
    pub name: String,
    /// The compiled expression.
    pub program: super::cel::Program,
}

impl std::fmt::Debug for MatchCondition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatchCondition")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One webhook of a configuration, with kube's defaults applied.
#[derive(Clone, Debug)]
pub struct Webhook {
    /// Mutating or validating.
    pub kind: WebhookKind,
    /// The configuration's name.
    pub configuration: String,
    /// The webhook's name.
    pub name: String,
    /// Where to send reviews.
    pub endpoint: Endpoint,
    /// PEM trust roots (empty: the system roots).
    pub ca_bundle: Vec<u8>,
    /// Rules.
    pub rules: Vec<admreg::RuleWithOperations>,
    /// `failurePolicy: Fail` (else Ignore).
    pub fail: bool,
    /// `matchPolicy: Equivalent` (else Exact).
    pub equivalent: bool,
    /// namespaceSelector.
    pub namespace_selector: LabelSelector,
    /// objectSelector.
    pub object_selector: LabelSelector,
    /// sideEffects.
    pub side_effects: String,
    /// timeoutSeconds.
    pub timeout: Duration,
    /// admissionReviewVersions.
    pub review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating only).
    pub reinvoke: bool,
    /// matchConditions; Err when one does not compile (the call then fails).
    pub match_conditions: Result<Vec<MatchCondition>, String>,
}

/// Parses the webhooks of a stored configuration (stored objects were validated and
/// defaulted on write; anything undecodable is skipped with a log line).
pub fn parse(kind: WebhookKind, obj: &Value) -> Vec<Arc<Webhook>> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let hooks: Vec<Value> = obj
        .get("webhooks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = vec![];
    for h in hooks {
        let parsed = match kind {
            WebhookKind::Mutating => {
                serde_json::from_value::<admreg::MutatingWebhook>(h).map(Common::from)
            }
            WebhookKind::Validating => {
                serde_json::from_value::<admreg::ValidatingWebhook>(h).map(Common::from)
            }
        };
        match parsed {
            Ok(c) => out.push(Arc::new(c.into_webhook(kind, &name))),
            Err(e) => tracing::warn!(configuration = %name, "skipping undecodable webhook: {e}"),
        }
    }
    out
}

/// The fields mutating and validating webhooks share (and `reinvocationPolicy`).
struct Common {
    name: String,
    client_config: admreg::WebhookClientConfig,
    rules: Vec<admreg::RuleWithOperations>,
    failure_policy: Option<String>,
    match_policy: Option<String>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
    side_effects: String,
    timeout_seconds: Option<i32>,
    review_versions: Vec<String>,
    reinvocation_policy: Option<String>,
    match_conditions: Vec<admreg::MatchCondition>,
}

impl From<admreg::MutatingWebhook> for Common {
    fn from(h: admreg::MutatingWebhook) -> Self {
        Common {
            name: h.name,
            client_config: h.client_config,
            rules: h.rules.unwrap_or_default(),
            failure_policy: h.failure_policy,
            match_policy: h.match_policy,
            namespace_selector: h.namespace_selector,
            object_selector: h.object_selector,
            side_effects: h.side_effects,
            timeout_seconds: h.timeout_seconds,
            review_versions: h.admission_review_versions,
            reinvocation_policy: h.reinvocation_policy,
            match_conditions: h.match_conditions.unwrap_or_default(),
        }
    }
}

impl From<admreg::ValidatingWebhook> for Common {
    fn from(h: admreg::ValidatingWebhook) -> Self {
        Common {
            name: h.name,
            client_config: h.client_config,
            rules: h.rules.unwrap_or_default(),
            failure_policy: h.failure_policy,
            match_policy: h.match_policy,
            namespace_selector: h.namespace_selector,
            object_selector: h.object_selector,
            side_effects: h.side_effects,
            timeout_seconds: h.timeout_seconds,
            review_versions: h.admission_review_versions,
            reinvocation_policy: None,
            match_conditions: h.match_conditions.unwrap_or_default(),
        }
    }
}

impl Common {
    fn into_webhook(self, kind: WebhookKind, configuration: &str) -> Webhook {
        let cc = self.client_config;
        let endpoint = endpoint(&cc);
        let match_conditions = self
            .match_conditions
            .iter()
            .map(|c| {
                super::cel::compile(&c.expression).map(|program| MatchCondition {
                    name: c.name.clone(),
                    program,
                })
            })
            .collect();
        Webhook {
            kind,
            configuration: configuration.to_string(),
            name: self.name,
            endpoint,
            ca_bundle: cc.ca_bundle.map(|b| b.0).unwrap_or_default(),
            rules: self.rules,
            fail: self.failure_policy.as_deref() != Some("Ignore"),
            equivalent: self.match_policy.as_deref() != Some("Exact"),
            namespace_selector: self.namespace_selector.unwrap_or_default(),
            object_selector: self.object_selector.unwrap_or_default(),
            side_effects: self.side_effects,
            timeout: Duration::from_secs(u64::from(
                self.timeout_seconds
                    .unwrap_or(10)
                    .clamp(1, 30)
                    .unsigned_abs(),
            )),
            review_versions: self.review_versions,
            reinvoke: self.reinvocation_policy.as_deref() == Some("IfNeeded"),
            match_conditions,
        }
    }
}

/// Where a `clientConfig` points (url first, then service with kube's defaults).
pub fn endpoint(cc: &admreg::WebhookClientConfig) -> Endpoint {
    match (&cc.url, &cc.service) {
        (Some(u), _) => Endpoint::Url(u.clone()),
        (None, Some(s)) => Endpoint::Service {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            path: s.path.clone().unwrap_or_else(|| "/".into()),
            port: s.port.and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
        },
        (None, None) => Endpoint::Url(String::new()),
    }
}

fn set_default(obj: &mut Value, field: &str, v: Value) {
    if let Some(m) = obj.as_object_mut()
        && m.get(field).is_none_or(Value::is_null)
    {
        m.insert(field.into(), v);
    }
}

/// kube's defaults for a webhook configuration (`SetDefaults_*Webhook`, `_Rule`,
/// `_ServiceReference`).
pub fn default(info: &ResourceInfo, obj: &mut Value) {
    let mutating = info.plural == super::MUTATING;
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for h in hooks {
        set_default(h, "failurePolicy", json!("Fail"));
        set_default(h, "matchPolicy", json!("Equivalent"));
        set_default(h, "namespaceSelector", json!({}));
        set_default(h, "objectSelector", json!({}));
        set_default(h, "timeoutSeconds", json!(10));
        if mutating {
            set_default(h, "reinvocationPolicy", json!("Never"));
        }
        if let Some(rules) = h.get_mut("rules").and_then(Value::as_array_mut) {
            for r in rules {
                set_default(r, "scope", json!("*"));
            }
        }
        if let Some(svc) = h.pointer_mut("/clientConfig/service") {
            set_default(svc, "port", json!(443));
        }
    }
}

/// Go's `%q`-like rendering of a string list, as kube prints `[]string` values.
pub(crate) fn go_strings(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

pub(crate) fn required(field: String, detail: &str) -> Cause {
    let msg = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    Cause::new("FieldValueRequired", msg, field)
}

pub(crate) fn invalid(field: String, value: &str, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
        field,
    )
}

pub(crate) fn unsupported(field: String, value: &str, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause::new(
        "FieldValueNotSupported",
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
        field,
    )
}

pub(crate) fn duplicate(field: String, value: &str) -> Cause {
    Cause::new(
        "FieldValueDuplicate",
        format!("Duplicate value: {value:?}"),
        field,
    )
}

/// Validates a configuration on create (`old` None) or update, as kube's
/// `ValidateMutatingWebhookConfiguration` / `ValidateValidatingWebhookConfiguration`.
pub fn admit(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
    let mutating = info.plural == super::MUTATING;
    let hooks = obj
        .get("webhooks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // kube allows Some/Unknown sideEffects only when the old object already used them.
    let old_uses_unsafe_side_effects = old
        .and_then(|o| o.get("webhooks"))
        .and_then(Value::as_array)
        .is_some_and(|hs| {
            hs.iter().any(|h| {
                matches!(
                    h.get("sideEffects").and_then(Value::as_str),
                    Some("Some" | "Unknown")
                )
            })
        });
    let mut causes = vec![];
    let mut names = BTreeSet::new();
    for (i, h) in hooks.into_iter().enumerate() {
        let path = format!("webhooks[{i}]");
        let common = if mutating {
            serde_json::from_value::<admreg::MutatingWebhook>(h).map(Common::from)
        } else {
            serde_json::from_value::<admreg::ValidatingWebhook>(h).map(Common::from)
        };
        let Ok(c) = common else {
            // The typed round trip on decode already rejected malformed webhooks.
            continue;
        };
        validate_webhook(&c, &path, old_uses_unsafe_side_effects, &mut causes);
        if !c.name.is_empty() && !names.insert(c.name.clone()) {
            causes.push(duplicate(format!("{path}.name"), &c.name));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::invalid(&info.group, &info.kind, name, causes))
}

fn validate_webhook(c: &Common, path: &str, allow_unsafe: bool, out: &mut Vec<Cause>) {
    // name: a fully qualified domain name with at least three segments.
    if c.name.is_empty() {
        out.push(required(format!("{path}.name"), ""));
    } else if !crate::objects::names::is_dns1123_subdomain(&c.name) {
        out.push(invalid(
            format!("{path}.name"),
            &format!("{:?}", c.name),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ));
    } else if c.name.split('.').count() < 3 {
        out.push(invalid(
            format!("{path}.name"),
            &format!("{:?}", c.name),
            "should be a domain with at least three segments separated by dots",
        ));
    }
    for (j, r) in c.rules.iter().enumerate() {
        validate_rule(r, &format!("{path}.rules[{j}]"), out);
    }
    match c.failure_policy.as_deref() {
        None | Some("Fail" | "Ignore") => {}
        Some(v) => out.push(unsupported(
            format!("{path}.failurePolicy"),
            v,
            &["Fail", "Ignore"],
        )),
    }
    match c.match_policy.as_deref() {
        None | Some("Equivalent" | "Exact") => {}
        Some(v) => out.push(unsupported(
            format!("{path}.matchPolicy"),
            v,
            &["Equivalent", "Exact"],
        )),
    }
    let side_ok: &[&str] = if allow_unsafe {
        &["None", "NoneOnDryRun", "Some", "Unknown"]
    } else {
        &["None", "NoneOnDryRun"]
    };
    if c.side_effects.is_empty() {
        out.push(required(
            format!("{path}.sideEffects"),
            &format!("must specify one of {}", side_ok.join(", ")),
        ));
    } else if !side_ok.contains(&c.side_effects.as_str()) {
        out.push(unsupported(
            format!("{path}.sideEffects"),
            &c.side_effects,
            side_ok,
        ));
    }
    if let Some(t) = c.timeout_seconds
        && !(1..=30).contains(&t)
    {
        out.push(invalid(
            format!("{path}.timeoutSeconds"),
            &t.to_string(),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    validate_review_versions(
        &c.review_versions,
        &format!("{path}.admissionReviewVersions"),
        out,
    );
    validate_client_config(&c.client_config, &format!("{path}.clientConfig"), out);
    if let Some(p) = c.reinvocation_policy.as_deref()
        && !matches!(p, "Never" | "IfNeeded")
    {
        out.push(unsupported(
            format!("{path}.reinvocationPolicy"),
            p,
            &["IfNeeded", "Never"],
        ));
    }
    for (sel, field) in [
        (&c.namespace_selector, "namespaceSelector"),
        (&c.object_selector, "objectSelector"),
    ] {
        if let Some(s) = sel {
            super::matching::validate_selector(s, &format!("{path}.{field}"), out);
        }
    }
    validate_match_conditions(&c.match_conditions, &format!("{path}.matchConditions"), out);
}

pub(crate) fn validate_rule(r: &admreg::RuleWithOperations, path: &str, out: &mut Vec<Cause>) {
    let ops = r.operations.clone().unwrap_or_default();
    if ops.is_empty() {
        out.push(required(format!("{path}.operations"), ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        out.push(invalid(
            format!("{path}.operations"),
            &go_strings(&ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (k, o) in ops.iter().enumerate() {
        if !matches!(o.as_str(), "*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT") {
            out.push(unsupported(
                format!("{path}.operations[{k}]"),
                o,
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            ));
        }
    }
    for (field, list, what) in [
        ("apiGroups", &r.api_groups, "groups"),
        ("apiVersions", &r.api_versions, "versions"),
    ] {
        let list = list.clone().unwrap_or_default();
        if list.is_empty() {
            out.push(required(format!("{path}.{field}"), ""));
        }
        if list.len() > 1 && list.iter().any(|g| g == "*") {
            out.push(invalid(
                format!("{path}.{field}"),
                &go_strings(&list),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
        if field == "apiVersions" {
            for (k, v) in list.iter().enumerate() {
                if v.is_empty() {
                    out.push(required(
                        format!("{path}.{field}[{k}]"),
                        "possible values are '*' or a specific version",
                    ));
                }
            }
        }
    }
    let resources = r.resources.clone().unwrap_or_default();
    if resources.is_empty() {
        out.push(required(format!("{path}.resources"), ""));
    }
    let mut has_all = false;
    for (k, res) in resources.iter().enumerate() {
        let p = format!("{path}.resources[{k}]");
        if res.is_empty() {
            out.push(required(p, ""));
            continue;
        }
        if res == "*/*" {
            has_all = true;
        }
        let (base, sub) = res.split_once('/').unwrap_or((res, ""));
        if res.contains('/') && (base.is_empty() || sub.is_empty() || sub.contains('/')) {
            out.push(invalid(
                p,
                &format!("{res:?}"),
                "must be in the form of '<resource>' or '<resource>/<subresource>'",
            ));
        }
    }
    if has_all && resources.len() > 1 {
        out.push(invalid(
            format!("{path}.resources"),
            &go_strings(&resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    match r.scope.as_deref() {
        None | Some("*" | "Cluster" | "Namespaced") => {}
        Some(s) => out.push(unsupported(
            format!("{path}.scope"),
            s,
            &["*", "Cluster", "Namespaced"],
        )),
    }
}

fn validate_review_versions(v: &[String], path: &str, out: &mut Vec<Cause>) {
    if v.is_empty() {
        out.push(required(
            path.to_string(),
            "must specify one of v1, v1beta1",
        ));
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, ver) in v.iter().enumerate() {
        if !seen.insert(ver) {
            out.push(duplicate(format!("{path}[{i}]"), ver));
        }
    }
    if !v.iter().any(|x| x == "v1" || x == "v1beta1") {
        out.push(invalid(
            path.to_string(),
            &go_strings(v),
            "must include at least one of v1, v1beta1",
        ));
    }
}

/// Validates a `clientConfig` at `path` as kube's `ValidateWebhookURL`/`Service` do.
pub(crate) fn validate_client_config(
    cc: &admreg::WebhookClientConfig,
    path: &str,
    out: &mut Vec<Cause>,
) {
    match (&cc.url, &cc.service) {
        (Some(_), Some(_)) | (None, None) => out.push(required(
            path.to_string(),
            "exactly one of url or service is required",
        )),
        (Some(u), None) => {
            let field = format!("{path}.url");
            let shown = format!("{u:?}");
            match u.parse::<hyper::Uri>() {
                Err(e) => out.push(invalid(
                    field,
                    &shown,
                    &format!("url must be a valid URL: {e}"),
                )),
                Ok(uri) => {
                    if uri.scheme_str() != Some("https") {
                        // kube 1.36 shows the scheme, with the format it wants.
                        out.push(invalid(
                            field.clone(),
                            &format!("{:?}", uri.scheme_str().unwrap_or("")),
                            "'https' is the only allowed URL scheme; desired format: https://host[/path]",
                        ));
                    }
                    if uri.host().is_none_or(str::is_empty) {
                        out.push(invalid(field.clone(), &shown, "host must be specified"));
                    }
                    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
                        out.push(invalid(
                            field.clone(),
                            &shown,
                            "user information is not permitted in the URL",
                        ));
                    }
                    if u.contains('#') {
                        out.push(invalid(
                            field.clone(),
                            &shown,
                            "fragments are not permitted in the URL",
                        ));
                    }
                    if uri.query().is_some() {
                        out.push(invalid(
                            field,
                            &shown,
                            "query parameters are not permitted in the URL",
                        ));
                    }
                }
            }
        }
        (None, Some(s)) => {
            let sp = format!("{path}.service");
            if s.name.is_empty() {
                out.push(required(format!("{sp}.name"), "service name is required"));
            }
            if s.namespace.is_empty() {
                out.push(required(
                    format!("{sp}.namespace"),
                    "service namespace is required",
                ));
            }
            if let Some(p) = &s.path
                && !p.is_empty()
                && !p.starts_with('/')
            {
                out.push(invalid(
                    format!("{sp}.path"),
                    &format!("{p:?}"),
                    "must start with a '/'",
                ));
            }
            if let Some(port) = s.port
                && !(1..=65535).contains(&port)
            {
                out.push(invalid(
                    format!("{sp}.port"),
                    &port.to_string(),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
}

pub(crate) fn validate_match_conditions(
    conds: &[admreg::MatchCondition],
    path: &str,
    out: &mut Vec<Cause>,
) {
    if conds.len() > 64 {
        out.push(Cause::new(
            "FieldValueTooMany",
            format!("Too many: {}: must have at most 64 items", conds.len()),
            path.to_string(),
        ));
    }
    let mut names = BTreeSet::new();
    for (i, c) in conds.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if c.name.is_empty() {
            out.push(required(format!("{p}.name"), ""));
        } else if !names.insert(c.name.clone()) {
            out.push(duplicate(format!("{p}.name"), &c.name));
        }
        if c.expression.trim().is_empty() {
            out.push(required(format!("{p}.expression"), ""));
        } else if let Err(e) = super::cel::compile(&c.expression) {
            out.push(invalid(
                format!("{p}.expression"),
                &format!("{:?}", c.expression),
                &format!("compilation failed: {e}"),
            ));
        }
    }
}
