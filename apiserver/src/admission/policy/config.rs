//! `ValidatingAdmissionPolicy` / `ValidatingAdmissionPolicyBinding` on write: kube's
//! defaults (`SetDefaults_ValidatingAdmissionPolicySpec`, `_MatchResources`, `_Rule`)
//! and validation (`pkg/apis/admissionregistration/validation`), with kube's messages.
//! Expressions are only parsed: kube also type-checks them against its declared
//! variables, which the `cel` crate cannot do.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1 as admreg;
use serde_json::{Value, json};

use super::super::cel;
use super::super::config::{
    duplicate, invalid, required, unsupported, validate_match_conditions, validate_rule,
};
use super::super::matching::validate_selector;
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceInfo;

fn set_default(obj: &mut Value, field: &str, v: Value) {
    if let Some(m) = obj.as_object_mut()
        && m.get(field).is_none_or(Value::is_null)
    {
        m.insert(field.into(), v);
    }
}

fn default_match_resources(m: &mut Value) {
    if !m.is_object() {
        return;
    }
    set_default(m, "matchPolicy", json!("Equivalent"));
    set_default(m, "namespaceSelector", json!({}));
    set_default(m, "objectSelector", json!({}));
    for rules in ["resourceRules", "excludeResourceRules"] {
        if let Some(rs) = m.get_mut(rules).and_then(Value::as_array_mut) {
            for r in rs {
                set_default(r, "scope", json!("*"));
            }
        }
    }
}

/// kube's defaults for a policy or a binding.
pub fn default(info: &ResourceInfo, obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if info.plural == super::POLICIES {
        set_default(spec, "failurePolicy", json!("Fail"));
    }
    for field in ["matchConstraints", "matchResources"] {
        if let Some(m) = spec.get_mut(field) {
            default_match_resources(m);
        }
    }
}

/// Validates a policy or binding, as kube's `ValidateValidatingAdmissionPolicy[Binding]`.
pub fn admit(info: &ResourceInfo, obj: &Value) -> ApiResult<()> {
    let mut causes = vec![];
    if info.plural == super::POLICIES {
        match serde_json::from_value::<admreg::ValidatingAdmissionPolicy>(obj.clone()) {
            Ok(p) => validate_policy(&p, &mut causes),
            Err(e) => return Err(ApiError::bad_request(e.to_string())),
        }
    } else {
        match serde_json::from_value::<admreg::ValidatingAdmissionPolicyBinding>(obj.clone()) {
            Ok(b) => validate_binding(&b, &mut causes),
            Err(e) => return Err(ApiError::bad_request(e.to_string())),
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

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// A compile error as kube reports it on the expression's field.
fn compile_cause(path: String, src: &str, out: &mut Vec<Cause>) {
    if let Err(e) = cel::compile(src) {
        out.push(invalid(
            path,
            &quoted(src),
            &format!("compilation failed: {e}"),
        ));
    }
}

fn validate_policy(p: &admreg::ValidatingAdmissionPolicy, out: &mut Vec<Cause>) {
    let spec = p.spec.clone().unwrap_or_default();
    match spec.failure_policy.as_deref() {
        None => out.push(required("spec.failurePolicy".into(), "")),
        Some("Fail" | "Ignore") => {}
        Some(v) => out.push(unsupported(
            "spec.failurePolicy".into(),
            v,
            &["Fail", "Ignore"],
        )),
    }
    if let Some(pk) = &spec.param_kind {
        validate_param_kind(pk, out);
    }
    match &spec.match_constraints {
        None => out.push(required("spec.matchConstraints".into(), "")),
        Some(mc) => {
            validate_match_resources(mc, "spec.matchConstraints", out);
            if mc.resource_rules.as_ref().is_none_or(Vec::is_empty) {
                out.push(required("spec.matchConstraints.resourceRules".into(), ""));
            }
        }
    }
    validate_match_conditions(
        spec.match_conditions.as_deref().unwrap_or(&[]),
        "spec.matchConditions",
        out,
    );
    for (i, v) in spec.variables.iter().flatten().enumerate() {
        let path = format!("spec.variables[{i}]");
        if v.name.trim().is_empty() {
            out.push(required(format!("{path}.name"), "name is not specified"));
        } else if !is_cel_identifier(&v.name) {
            out.push(invalid(
                format!("{path}.name"),
                &quoted(&v.name),
                "must be a valid CEL identifier",
            ));
        }
        if v.expression.trim().is_empty() {
            out.push(required(
                format!("{path}.expression"),
                "expression is not specified",
            ));
        } else {
            compile_cause(format!("{path}.expression"), &v.expression, out);
        }
    }
    let validations = spec.validations.clone().unwrap_or_default();
    let annotations = spec.audit_annotations.clone().unwrap_or_default();
    if validations.is_empty() && annotations.is_empty() {
        let msg = "validations or auditAnnotations must contain at least one item";
        out.push(required("spec.validations".into(), msg));
        out.push(required("spec.auditAnnotations".into(), msg));
        return;
    }
    for (i, v) in validations.iter().enumerate() {
        validate_validation(v, &format!("spec.validations[{i}]"), out);
    }
    let mut keys = BTreeSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let path = format!("spec.auditAnnotations[{i}]");
        if a.value_expression.trim().is_empty() {
            out.push(required(
                format!("{path}.valueExpression"),
                "valueExpression is not specified",
            ));
        } else {
            compile_cause(format!("{path}.valueExpression"), &a.value_expression, out);
        }
        if !keys.insert(a.key.clone()) {
            out.push(duplicate(format!("{path}.key"), &a.key));
        }
    }
}

fn validate_validation(v: &admreg::Validation, path: &str, out: &mut Vec<Cause>) {
    if v.expression.trim().is_empty() {
        out.push(required(
            format!("{path}.expression"),
            "expression is not specified",
        ));
    } else {
        compile_cause(format!("{path}.expression"), &v.expression, out);
    }
    if let Some(me) = &v.message_expression {
        if !me.is_empty() && me.trim().is_empty() {
            out.push(invalid(
                format!("{path}.messageExpression"),
                &quoted(me),
                "must be non-empty if specified",
            ));
        } else if !me.trim().is_empty() {
            compile_cause(format!("{path}.messageExpression"), me, out);
        }
    }
    if let Some(m) = &v.message {
        if !m.is_empty() && m.trim().is_empty() {
            out.push(invalid(
                format!("{path}.message"),
                &quoted(m),
                "must be non-empty if specified",
            ));
        } else if m.trim().contains(['\n', '\r']) {
            out.push(invalid(
                format!("{path}.message"),
                &quoted(m),
                "message must not contain line breaks",
            ));
        }
    }
    if let Some(r) = &v.reason
        && !matches!(
            r.as_str(),
            "Forbidden" | "Invalid" | "RequestEntityTooLarge"
        )
    {
        out.push(unsupported(
            format!("{path}.reason"),
            r,
            &["Forbidden", "Invalid", "RequestEntityTooLarge"],
        ));
    }
}

fn validate_param_kind(pk: &admreg::ParamKind, out: &mut Vec<Cause>) {
    let api_version = pk.api_version.as_deref().unwrap_or("");
    if api_version.is_empty() {
        out.push(required("spec.paramKind.apiVersion".into(), ""));
    } else if api_version.matches('/').count() > 1 {
        out.push(invalid(
            "spec.paramKind.apiVersion".into(),
            &quoted(api_version),
            &format!("unexpected GroupVersion string: {api_version}"),
        ));
    } else if api_version
        .split_once('/')
        .is_some_and(|(_, v)| v.is_empty())
    {
        out.push(invalid(
            "spec.paramKind.apiVersion".into(),
            &quoted(api_version),
            "version must be specified",
        ));
    }
    if pk.kind.as_deref().unwrap_or("").is_empty() {
        out.push(required("spec.paramKind.kind".into(), ""));
    }
}

/// kube's `validateMatchResources` (selectors, rules, resourceNames).
fn validate_match_resources(m: &admreg::MatchResources, path: &str, out: &mut Vec<Cause>) {
    match m.match_policy.as_deref() {
        None => out.push(required(format!("{path}.matchPolicy"), "")),
        Some("Exact" | "Equivalent") => {}
        Some(v) => out.push(unsupported(
            format!("{path}.matchPolicy"),
            v,
            &["Equivalent", "Exact"],
        )),
    }
    for (sel, field) in [
        (&m.namespace_selector, "namespaceSelector"),
        (&m.object_selector, "objectSelector"),
    ] {
        match sel {
            None => out.push(required(format!("{path}.{field}"), "")),
            Some(s) => validate_selector(s, &format!("{path}.{field}"), out),
        }
    }
    for (field, rules) in [
        ("resourceRules", &m.resource_rules),
        ("excludeResourceRules", &m.exclude_resource_rules),
    ] {
        for (i, r) in rules.iter().flatten().enumerate() {
            let p = format!("{path}.{field}[{i}]");
            let mut names = BTreeSet::new();
            for (k, n) in r.resource_names.iter().flatten().enumerate() {
                if !names.insert(n.clone()) {
                    out.push(duplicate(format!("{p}.resourceNames[{k}]"), n));
                }
            }
            let rule = admreg::RuleWithOperations {
                api_groups: r.api_groups.clone(),
                api_versions: r.api_versions.clone(),
                operations: r.operations.clone(),
                resources: r.resources.clone(),
                scope: r.scope.clone(),
            };
            validate_rule(&rule, &p, out);
        }
    }
}

fn validate_binding(b: &admreg::ValidatingAdmissionPolicyBinding, out: &mut Vec<Cause>) {
    let spec = b.spec.clone().unwrap_or_default();
    if spec.policy_name.as_deref().unwrap_or("").is_empty() {
        out.push(required("spec.policyName".into(), ""));
    }
    if let Some(pr) = &spec.param_ref {
        validate_param_ref(pr, out);
    }
    if let Some(m) = &spec.match_resources {
        validate_match_resources(m, "spec.matchResources", out);
    }
    let actions = spec.validation_actions.clone().unwrap_or_default();
    let mut seen = BTreeSet::new();
    for (i, a) in actions.iter().enumerate() {
        if !matches!(a.as_str(), "Deny" | "Warn" | "Audit") {
            out.push(unsupported(
                format!("spec.validationActions[{i}]"),
                a,
                &["Audit", "Deny", "Warn"],
            ));
        }
        if !seen.insert(a.as_str()) {
            out.push(duplicate(format!("spec.validationActions[{i}]"), a));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        out.push(invalid(
            "spec.validationActions".into(),
            &serde_json::to_string(&actions).unwrap_or_default(),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        out.push(required(
            "spec.validationActions".into(),
            "at least one validation action is required",
        ));
    }
}

fn validate_param_ref(pr: &admreg::ParamRef, out: &mut Vec<Cause>) {
    let name = pr.name.as_deref().unwrap_or("");
    let forbidden = |field: &str| {
        Cause::new(
            "FieldValueForbidden",
            "Forbidden: name and selector are mutually exclusive",
            format!("spec.paramRef.{field}"),
        )
    };
    if !name.is_empty() && pr.selector.is_some() {
        out.push(forbidden("name"));
    }
    if let Some(sel) = &pr.selector {
        validate_selector(sel, "spec.paramRef.selector", out);
        if !name.is_empty() {
            out.push(forbidden("selector"));
        }
    }
    if name.is_empty() && pr.selector.is_none() {
        out.push(required(
            "spec.paramRef".into(),
            "one of name or selector must be specified",
        ));
    }
    match pr.parameter_not_found_action.as_deref() {
        None | Some("") => out.push(required("spec.paramRef.parameterNotFoundAction".into(), "")),
        Some("Deny" | "Allow") => {}
        Some(v) => out.push(unsupported(
            "spec.paramRef.parameterNotFoundAction".into(),
            v,
            &["Deny", "Allow"],
        )),
    }
}

/// kube's `isCELIdentifier`: `[_a-zA-Z][_a-zA-Z0-9]*`, not a reserved word.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: [&str; 21] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}
