//! Which webhooks a request goes to, as kube's `rules.Matcher`, `namespace.Matcher`,
//! `object.Matcher` and `matchconditions.Matcher` decide.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1 as admreg;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::{Attributes, Operation, Webhook, cel};
use crate::error::Cause;
use crate::registry::{Registry, ResourceInfo};
pub use gantry_kube::rules::{RuleRequest, rule_covers, selector_matches};

fn is_namespaces(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "namespaces"
}

/// Whether one rule matches a request for `info` (the resource as the webhook would
/// see it).
pub fn rule_matches(
    rule: &admreg::RuleWithOperations,
    info: &ResourceInfo,
    a: &Attributes,
) -> bool {
    let request = RuleRequest {
        operation: a.operation.as_str(),
        group: &info.group,
        version: &info.version,
        resource: &info.plural,
        subresource: a.subresource.as_deref().unwrap_or(""),
        namespaced: info.namespaced,
    };
    rule_covers(rule, &request)
}

/// The resource the webhook's rules match the request as: the requested one, or with
/// `matchPolicy: Equivalent` another served version of the same resource. None when
/// the rules do not match.
pub fn matched_resource(
    hook: &Webhook,
    a: &Attributes,
    registry: &Registry,
) -> Option<Arc<ResourceInfo>> {
    resource_matched_by(a, registry, hook.equivalent, |info| {
        hook.rules.iter().any(|r| rule_matches(r, info, a))
    })
}

/// The resource `covers` matches the request as: the requested one, or when
/// `equivalent`, another served version of the same resource (kube's
/// `matchPolicy: Equivalent`).
pub fn resource_matched_by(
    a: &Attributes,
    registry: &Registry,
    equivalent: bool,
    covers: impl Fn(&ResourceInfo) -> bool,
) -> Option<Arc<ResourceInfo>> {
    if covers(&a.info) {
        return Some(a.info.clone());
    }
    if !equivalent {
        return None;
    }
    registry
        .all()
        .into_iter()
        .filter(|o| {
            o.storage_group == a.info.storage_group
                && o.group == a.info.group
                && o.plural == a.info.plural
                && o.version != a.info.version
        })
        .find(|o| covers(o))
}

/// Labels of an object (empty when none).
pub fn labels(obj: Option<&Value>) -> BTreeMap<String, String> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a selector is empty (matches everything).
pub fn selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels
        .as_ref()
        .is_none_or(std::collections::BTreeMap::is_empty)
        && sel.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// kube's label selector validation (`ValidateLabelSelector`).
pub fn validate_selector(sel: &LabelSelector, path: &str, out: &mut Vec<Cause>) {
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
        match e.operator.as_str() {
            "In" | "NotIn" if !has_values => out.push(Cause::new(
                "FieldValueRequired",
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                format!("{p}.values"),
            )),
            "Exists" | "DoesNotExist" if has_values => out.push(Cause::new(
                "FieldValueForbidden",
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                format!("{p}.values"),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => out.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {op:?}: not a valid selector operator"),
                format!("{p}.operator"),
            )),
        }
        if e.key.is_empty() {
            out.push(Cause::new(
                "FieldValueInvalid",
                "Invalid value: \"\": name part must be non-empty",
                format!("{p}.key"),
            ));
        }
    }
}

/// Whether the object selector matches the new or the old object's labels.
pub fn object_matches(hook: &Webhook, obj: Option<&Value>, old: Option<&Value>) -> bool {
    object_selector_matches(&hook.object_selector, obj, old)
}

/// Whether `sel` matches the new or the old object's labels (kube's object matcher).
pub fn object_selector_matches(
    sel: &LabelSelector,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    if selector_is_empty(sel) {
        return true;
    }
    let m = |o: Option<&Value>| o.is_some_and(|o| selector_matches(sel, &labels(Some(o))));
    m(obj) || m(old)
}

/// Whether the namespace selector matches: cluster-scoped objects (other than
/// Namespaces) always match; Namespace creates/updates use the object's own labels;
/// everything else the labels of the stored namespace (`ns_labels`). Err(message)
/// when the namespace does not exist.
pub fn namespace_matches(
    hook: &Webhook,
    a: &Attributes,
    obj: Option<&Value>,
    ns_labels: impl FnOnce(&str) -> Option<BTreeMap<String, String>>,
) -> Result<bool, String> {
    namespace_selector_matches(&hook.namespace_selector, a, obj, ns_labels)
}

/// [`namespace_matches`] for any selector (kube's namespace matcher).
pub fn namespace_selector_matches(
    sel: &LabelSelector,
    a: &Attributes,
    obj: Option<&Value>,
    ns_labels: impl FnOnce(&str) -> Option<BTreeMap<String, String>>,
) -> Result<bool, String> {
    let Some(ns) = a.selector_namespace() else {
        return Ok(true);
    };
    if selector_is_empty(sel) {
        return Ok(true);
    }
    let own = is_namespaces(&a.info)
        && a.subresource.is_none()
        && matches!(a.operation, Operation::Create | Operation::Update);
    let labels = if own {
        labels(obj)
    } else {
        ns_labels(ns).ok_or_else(|| format!("namespaces \"{ns}\" not found"))?
    };
    Ok(selector_matches(sel, &labels))
}

/// Evaluates matchConditions: Ok(false) when one is false, Err when none is false and
/// one failed to evaluate (kube then applies the failure policy). They share kube's
/// runtime cost budget; each is held to the per-expression limit.
pub fn conditions_match(
    hook: &Webhook,
    obj: Option<&Value>,
    old: Option<&Value>,
    request: &Value,
) -> Result<bool, String> {
    let conds = hook.match_conditions.as_ref().map_err(Clone::clone)?;
    if conds.is_empty() {
        return Ok(true);
    }
    let mut activation = cel::Activation::default();
    for (name, v) in [
        ("object", obj),
        ("oldObject", old),
        ("request", Some(request)),
    ] {
        activation.bind_json(name, v.unwrap_or(&Value::Null))?;
    }
    cel::with_big_stack(|| evaluate(conds, &activation))
        .unwrap_or_else(|| Err("matchConditions: evaluation failed".into()))
}

fn evaluate(
    conds: &[super::config::MatchCondition],
    activation: &cel::Activation,
) -> Result<bool, String> {
    let mut budget = cel::Budget::runtime();
    let mut first_err = None;
    for c in conds {
        match cel::evaluate_here(&c.program, activation, &mut budget) {
            Ok(::cel::Value::Bool(true)) => {}
            Ok(::cel::Value::Bool(false)) => return Ok(false),
            Ok(other) => {
                first_err.get_or_insert(format!(
                    "matchCondition {:?} must evaluate to bool, got {other:?}",
                    c.name
                ));
            }
            Err(cel::EvalError::Failed(e)) => {
                first_err.get_or_insert(format!(
                    "failed to evaluate matchCondition {:?}: {e}",
                    c.name
                ));
            }
            Err(cel::EvalError::CostLimit) => {
                first_err.get_or_insert(format!(
                    "failed to evaluate matchCondition {:?}: operation cancelled: actual cost limit exceeded",
                    c.name
                ));
            }
            Err(cel::EvalError::OutOfBudget) => {
                return Err(
                    "validation failed due to running out of cost budget, no further validation rules will be run".into(),
                );
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(true),
    }
}
