//! The policies' verdict on a request, as kube's validating policy dispatcher:
//! policies and bindings in name order, a binding's validation actions on each
//! denial (Deny refuses, Warn adds a `Warning` header, Audit is only logged), the
//! failure policy on configuration errors, and kube's status for the first refusal.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::evaluate::{self, Denial, Inputs};
use super::{Binding, Policy, matching, params};
use crate::admission::{Attributes, cel, review};
use crate::app::{App, present};
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceInfo;

/// One refusal: the policy, the binding (None for a policy's own configuration
/// error), the message and reason.
struct Refusal {
    policy: String,
    binding: Option<String>,
    denial: Denial,
}

/// A (policy, binding) pair the request meets, with its params.
struct Job<'a> {
    policy: &'a Policy,
    binding: &'a Binding,
    matched: Arc<ResourceInfo>,
    params: Vec<Option<Value>>,
}

fn namespace_labels(app: &App, ns: &str) -> Option<BTreeMap<String, String>> {
    app.store
        .get(&crate::handlers::write::namespace_key(ns))
        .map(|n| crate::admission::matching::labels(Some(&n)))
}

/// The object as the policy sees it: at the matched resource's version.
fn versioned(info: &ResourceInfo, obj: Option<&Value>) -> Option<Value> {
    obj.map(|o| {
        if info.crd.is_some() {
            let mut o = o.clone();
            o["apiVersion"] = json!(info.api_version());
            o
        } else {
            present(info, o)
        }
    })
}

/// kube's `request` variable: the `AdmissionRequest` without uid, object and oldObject.
fn request_value(matched: &ResourceInfo, a: &Attributes) -> Value {
    let mut review = review::request("v1", "", matched, a, None, None);
    let mut r = review["request"].take();
    if let Some(m) = r.as_object_mut() {
        for f in ["uid", "object", "oldObject"] {
            m.remove(f);
        }
    }
    r
}

/// `namespaceObject`: the request's namespace (none for cluster-scoped objects and
/// Namespaces themselves); Err when it does not exist.
fn namespace_object(app: &App, a: &Attributes) -> ApiResult<Option<Value>> {
    let is_namespace = a.info.group.is_empty() && a.info.plural == "namespaces";
    let Some(ns) = a
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty() && !is_namespace)
    else {
        return Ok(None);
    };
    let Some(obj) = app.store.get(&crate::handlers::write::namespace_key(ns)) else {
        return Err(ApiError::not_found("", "namespaces", ns));
    };
    let mut obj = (*obj).clone();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    Ok(Some(obj))
}

/// Enforces the policies on a write (`object` None for DELETE). Returns the
/// warnings of `Warn` bindings; Err with kube's status for the first denial.
pub async fn validate(
    app: &App,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if crate::admission::is_configuration(&a.info) {
        return Ok(vec![]);
    }
    let bound = app.policies.current();
    if bound.is_empty() {
        return Ok(vec![]);
    }
    let mut refusals = vec![];
    let mut jobs = vec![];
    let configuration_error = |policy: &Policy, binding: Option<&Binding>, e: String| {
        policy.fail.then(|| Refusal {
            policy: policy.name.clone(),
            binding: binding.map(|b| b.name.clone()),
            denial: Denial {
                message: match binding {
                    Some(_) => format!("failed to configure binding: {e}"),
                    None => format!("failed to configure policy: {e}"),
                },
                reason: None,
            },
        })
    };
    for b in bound.iter() {
        let policy = &b.policy;
        let matched = matching::matches(&policy.constraints, a, object, old, &app.registry, |ns| {
            namespace_labels(app, ns)
        });
        // kube ignores a definition's matching errors (its namespace lookups).
        let Ok(Some(matched)) = matched else {
            continue;
        };
        if let Some(e) = &policy.configuration_error {
            refusals.extend(configuration_error(policy, None, e.clone()));
            continue;
        }
        for binding in &b.bindings {
            if let Some(m) = &binding.match_resources {
                match matching::matches(m, a, object, old, &app.registry, |ns| {
                    namespace_labels(app, ns)
                }) {
                    Ok(Some(_)) => {}
                    Ok(None) => continue,
                    Err(e) => {
                        refusals.extend(configuration_error(policy, Some(binding), e));
                        continue;
                    }
                }
            }
            match params::collect(app, policy, binding, a.namespace.as_deref()) {
                Ok(params) => jobs.push(Job {
                    policy,
                    binding,
                    matched: matched.clone(),
                    params,
                }),
                Err(e) => refusals.extend(configuration_error(policy, Some(binding), e)),
            }
        }
    }
    let mut warnings = vec![];
    if !jobs.is_empty() {
        let namespace = namespace_object(app, a)?;
        let prepared: Vec<_> = jobs
            .iter()
            .map(|j| {
                (
                    versioned(&j.matched, object),
                    versioned(&j.matched, old),
                    request_value(&j.matched, a),
                )
            })
            .collect();
        let results = cel::with_big_stack(|| {
            jobs.iter()
                .zip(&prepared)
                .map(|(j, (obj, old, request))| {
                    let inputs = match Inputs::new(
                        obj.as_ref(),
                        old.as_ref(),
                        request,
                        namespace.as_ref(),
                    ) {
                        Ok(i) => i,
                        Err(e) => {
                            return if j.policy.fail {
                                vec![Denial {
                                    message: e,
                                    reason: None,
                                }]
                            } else {
                                vec![]
                            };
                        }
                    };
                    j.params
                        .iter()
                        .flat_map(|p| evaluate::validate(j.policy, &inputs, p.as_ref()))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        })
        .ok_or_else(|| {
            ApiError::Internal("Internal error occurred: policy evaluation failed".into())
        })?;
        for (job, denials) in jobs.iter().zip(results) {
            for denial in denials {
                for action in &job.binding.actions {
                    match action.as_str() {
                        "Deny" => refusals.push(Refusal {
                            policy: job.policy.name.clone(),
                            binding: Some(job.binding.name.clone()),
                            denial: denial.clone(),
                        }),
                        "Warn" => warnings.push(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                            job.policy.name, job.binding.name, denial.message
                        )),
                        _ => tracing::info!(
                            policy = %job.policy.name,
                            binding = %job.binding.name,
                            message = %denial.message,
                            "validating admission policy audit: validation failed"
                        ),
                    }
                }
            }
        }
    }
    match refusals.into_iter().next() {
        Some(r) => Err(refused(a, object, &r)),
        None => Ok(warnings),
    }
}

/// kube's `admission.NewForbidden` with the denial's reason and code.
fn refused(a: &Attributes, object: Option<&Value>, r: &Refusal) -> ApiError {
    let message = match &r.binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
            r.policy, r.denial.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            r.policy, r.denial.message
        ),
    };
    let meta = |f: &str| {
        object
            .and_then(|o| o.pointer(&format!("/metadata/{f}")))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = if a.name.is_empty() {
        meta("name")
            .or_else(|| meta("generateName"))
            .unwrap_or("Unknown")
    } else {
        &a.name
    };
    let resource = crate::error::qualified(&a.info.group, &a.info.plural);
    let reason = r.denial.reason.as_deref().unwrap_or("Invalid");
    let code = match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    };
    let mut details = json!({ "name": name });
    if !a.info.group.is_empty() {
        details["group"] = json!(a.info.group);
    }
    details["kind"] = json!(a.info.plural);
    details["causes"] = json!([{ "message": message }]);
    ApiError::Rejected(Box::new(json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("{resource} \"{name}\" is forbidden: {message}"),
        "reason": reason,
        "details": details,
        "code": code,
    })))
}
