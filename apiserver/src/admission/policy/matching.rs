//! Which policies and bindings a request meets, as kube's `matching.Matcher`:
//! namespace and object selectors, `excludeResourceRules`, then `resourceRules`
//! (with `resourceNames`, and `matchPolicy: Equivalent`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1 as admreg;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::super::Attributes;
use super::super::matching::{
    namespace_selector_matches, object_selector_matches, resource_matched_by, rule_matches,
};
use crate::registry::{Registry, ResourceInfo};

/// Whether one named rule covers the request for `info`.
fn named_rule_matches(
    r: &admreg::NamedRuleWithOperations,
    info: &ResourceInfo,
    a: &Attributes,
) -> bool {
    let names_ok = r
        .resource_names
        .as_ref()
        .is_none_or(|ns| ns.is_empty() || ns.contains(&a.name));
    let rule = admreg::RuleWithOperations {
        api_groups: r.api_groups.clone(),
        api_versions: r.api_versions.clone(),
        operations: r.operations.clone(),
        resources: r.resources.clone(),
        scope: r.scope.clone(),
    };
    names_ok && rule_matches(&rule, info, a)
}

/// The resource `m` matches the request as, None when it does not match;
/// Err when the request's namespace does not exist (and a selector needs it).
pub fn matches(
    m: &admreg::MatchResources,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
    registry: &Registry,
    ns_labels: impl FnOnce(&str) -> Option<BTreeMap<String, String>>,
) -> Result<Option<Arc<ResourceInfo>>, String> {
    let empty = LabelSelector::default();
    let ns = namespace_selector_matches(
        m.namespace_selector.as_ref().unwrap_or(&empty),
        a,
        object,
        ns_labels,
    );
    if ns == Ok(false) {
        return Ok(None);
    }
    if !object_selector_matches(m.object_selector.as_ref().unwrap_or(&empty), object, old) {
        return Ok(None);
    }
    let equivalent = m.match_policy.as_deref() != Some("Exact");
    let excluded = m.exclude_resource_rules.as_deref().unwrap_or(&[]);
    if !excluded.is_empty()
        && resource_matched_by(a, registry, equivalent, |info| {
            excluded.iter().any(|r| named_rule_matches(r, info, a))
        })
        .is_some()
    {
        return Ok(None);
    }
    let rules = m.resource_rules.as_deref().unwrap_or(&[]);
    let matched = if rules.is_empty() {
        Some(a.info.clone())
    } else {
        resource_matched_by(a, registry, equivalent, |info| {
            rules.iter().any(|r| named_rule_matches(r, info, a))
        })
    };
    if matched.is_none() {
        return Ok(None);
    }
    ns?;
    Ok(matched)
}
