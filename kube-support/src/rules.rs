//! Admission rule and label selector matching as kube decides it: the one
//! implementation, used by the embedded API server when it calls webhooks
//! and by Gantry's guardrail policies on reconcile output.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1 as admreg;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn listed(list: Option<&Vec<String>>, value: &str) -> bool {
    list.is_some_and(|l| l.iter().any(|x| x == "*" || x == value))
}

/// What an admission rule is matched against: one request, as the webhook
/// would see it.
#[derive(Debug, Clone, Copy)]
pub struct RuleRequest<'a> {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: &'a str,
    /// API group (`""` for the core group).
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Plural resource name.
    pub resource: &'a str,
    /// Subresource, `""` for the main resource.
    pub subresource: &'a str,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
}

/// Whether one rule (a webhook configuration's `RuleWithOperations`)
/// covers `request`. The one place rules are matched: the embedded API
/// server calling webhooks and Gantry's guardrail policies both use it.
pub fn rule_covers(rule: &admreg::RuleWithOperations, request: &RuleRequest<'_>) -> bool {
    let op_ok = listed(rule.operations.as_ref(), request.operation);
    let group_ok = listed(rule.api_groups.as_ref(), request.group);
    let version_ok = listed(rule.api_versions.as_ref(), request.version);
    let resource_ok = rule.resources.as_ref().is_some_and(|rs| {
        rs.iter().any(|r| {
            let (res, rsub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == request.resource) && (rsub == "*" || rsub == request.subresource)
        })
    });
    // Namespace objects are cluster-scoped.
    let namespaces = request.group.is_empty() && request.resource == "namespaces";
    let scope_ok = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => !namespaces && request.namespaced,
        Some("Cluster") => namespaces || !request.namespaced,
        Some(_) => false,
    };
    op_ok && group_ok && version_ok && resource_ok && scope_ok
}

/// Whether a metav1 `LabelSelector` matches `labels` (the empty selector matches all).
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = sel
        .match_labels
        .as_ref()
        .is_none_or(|ml| ml.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let exprs_ok = sel.match_expressions.as_ref().is_none_or(|es| {
        es.iter().all(|e| {
            let values = e.values.as_deref().unwrap_or(&[]);
            let got = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => got.is_some_and(|v| values.contains(v)),
                "NotIn" => got.is_none_or(|v| !values.contains(v)),
                "Exists" => got.is_some(),
                "DoesNotExist" => got.is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}
