//! The parameter objects a binding selects (kube's `CollectParams`), read from the
//! store at each request, so a parameter is used as soon as it is written.

use std::sync::Arc;

use serde_json::Value;

use super::{Binding, Policy};
use crate::admission::matching::{labels, selector_matches};
use crate::app::{App, present};
use crate::registry::ResourceInfo;

/// The served resource of a `paramKind` (apiVersion, kind).
fn param_resource(app: &App, api_version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    app.registry
        .all()
        .into_iter()
        .find(|i| i.group == group && i.version == version && i.kind == kind)
}

/// The params to evaluate the policy with: `[None]` when the policy has no
/// `paramKind` or the binding no `paramRef`; the selected objects (as served at
/// the paramKind's version) otherwise, possibly none (`parameterNotFoundAction:
/// Allow`). Err is a configuration error, with kube's words.
pub fn collect(
    app: &App,
    policy: &Policy,
    binding: &Binding,
    namespace: Option<&str>,
) -> Result<Vec<Option<Value>>, String> {
    let (Some((api_version, kind)), Some(pr)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    let Some(info) = param_resource(app, api_version, kind) else {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind},}}` not known"
        ));
    };
    let ref_ns = pr.namespace.as_deref().unwrap_or("");
    let ns = if info.namespaced {
        match (ref_ns, namespace.unwrap_or("")) {
            ("", "") => {
                return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
            }
            ("", ns) | (ns, _) => Some(ns.to_string()),
        }
    } else {
        if !ref_ns.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        }
        None
    };
    let name = pr.name.as_deref().unwrap_or("");
    let found: Vec<Option<Value>> = if name.is_empty() {
        let selector = pr.selector.clone().unwrap_or_default();
        let (objs, _) = app.store.list(&info.ns_prefix(ns.as_deref()), None);
        objs.into_iter()
            .filter(|(_, o)| selector_matches(&selector, &labels(Some(o))))
            .map(|(_, o)| Some(present(&info, &o)))
            .collect()
    } else {
        app.store
            .get(&info.key(ns.as_deref(), name))
            .map(|o| Some(present(&info, &o)))
            .into_iter()
            .collect()
    };
    if found.is_empty() && pr.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}
