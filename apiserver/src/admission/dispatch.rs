//! Calling webhooks as kube-apiserver's mutating and validating dispatchers do:
//! mutating webhooks one after the other (each patch changes the object the next one
//! sees; `reinvocationPolicy: IfNeeded` webhooks run once more when a later webhook
//! changed the object), validating webhooks in parallel; `failurePolicy` decides what
//! a failed call does; denials and failures carry kube's messages.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tracing::Instrument;

use super::config::{Webhook, WebhookKind};
use super::{Attributes, matching, review};
use crate::app::{App, present};
use crate::error::{ApiError, ApiResult};
use crate::objects::admission::{FieldValidation, check_type_meta, normalize};
use crate::registry::ResourceInfo;

/// Why a call failed (kube's `ErrCallingWebhook`): subject to the failure policy.
struct CallError(String);

/// What one call decided.
enum Outcome {
    /// Not called (rules, selectors or conditions did not match).
    Skipped,
    /// Allowed; the patch (mutating webhooks) and warnings.
    Allowed {
        patch: Option<Vec<u8>>,
        warnings: Vec<String>,
    },
}

/// `admission webhook "NAME" denied the request: MESSAGE`, with the webhook's status
/// code (at least 400) and reason, as kube's `ToStatusErr`.
pub fn denied(hook: &str, status: Option<Value>) -> ApiError {
    let mut s = status.unwrap_or_else(|| json!({}));
    let by = format!("admission webhook {hook:?} denied the request");
    let msg = s.get("message").and_then(Value::as_str).unwrap_or("");
    let reason = s.get("reason").and_then(Value::as_str).unwrap_or("");
    let message = if !msg.is_empty() {
        format!("{by}: {msg}")
    } else if !reason.is_empty() {
        format!("{by}: {reason}")
    } else {
        format!("{by} without explanation")
    };
    let code = s
        .get("code")
        .and_then(Value::as_i64)
        .filter(|c| (400..=599).contains(c))
        .unwrap_or(400);
    s["message"] = json!(message);
    s["code"] = json!(code);
    if matches!(
        s.get("status").and_then(Value::as_str),
        None | Some("" | "Success")
    ) {
        s["status"] = json!("Failure");
    }
    s["kind"] = json!("Status");
    s["apiVersion"] = json!("v1");
    if !s.get("metadata").is_some_and(Value::is_object) {
        s["metadata"] = json!({});
    }
    ApiError::Rejected(Box::new(s))
}

fn internal(msg: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(format!("Internal error occurred: {msg}"))
}

/// Whether a webhook may be called for a dry-run request.
pub fn dry_run_ok(side_effects: &str) -> bool {
    matches!(side_effects, "None" | "NoneOnDryRun")
}

fn namespace_labels(app: &App, ns: &str) -> Option<BTreeMap<String, String>> {
    app.store
        .get(&crate::handlers::write::namespace_key(ns))
        .map(|n| matching::labels(Some(&n)))
}

/// Calls one webhook if it matches. `object`/`old` are at the request's version.
async fn call(
    app: &App,
    hook: &Webhook,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Result<Outcome, CallError>> {
    let Some(matched) = matching::matched_resource(hook, a, &app.registry) else {
        return Ok(Ok(Outcome::Skipped));
    };
    match matching::namespace_matches(hook, a, object, |ns| namespace_labels(app, ns)) {
        Ok(true) => {}
        Ok(false) => return Ok(Ok(Outcome::Skipped)),
        Err(_) => {
            let ns = a.selector_namespace().unwrap_or("");
            return Err(ApiError::not_found("", "namespaces", ns));
        }
    }
    if !matching::object_matches(hook, object, old) {
        return Ok(Ok(Outcome::Skipped));
    }
    let convert = |o: Option<&Value>| {
        o.map(|o| match a.object_kind {
            Some(_) => o.clone(),
            None => as_version(&matched, o),
        })
    };
    let (obj_v, old_v) = (convert(object), convert(old));
    let uid = uuid::Uuid::new_v4().to_string();
    let version = review::version(&hook.review_versions);
    let review = review::request(
        version.unwrap_or("v1"),
        &uid,
        &matched,
        a,
        obj_v.as_ref(),
        old_v.as_ref(),
    );
    match matching::conditions_match(hook, obj_v.as_ref(), old_v.as_ref(), &review["request"]) {
        Ok(true) => {}
        Ok(false) => return Ok(Ok(Outcome::Skipped)),
        Err(e) => return Ok(Err(CallError(e))),
    }
    if a.dry_run && !dry_run_ok(&hook.side_effects) {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    let Some(version) = version else {
        return Ok(Err(CallError(
            "could not create admission objects: webhook does not accept known AdmissionReview versions".into(),
        )));
    };
    let span = tracing::info_span!(
        "admission_webhook",
        webhook = %hook.name,
        configuration = %hook.configuration,
        operation = a.operation.as_str(),
        resource = %crate::error::qualified(&a.info.group, &a.info.plural),
    );
    let started = Instant::now();
    let body = serde_json::to_vec(&review).expect("JSON serializes");
    let result = app
        .webhooks
        .clients
        .call(&app.store, hook, body)
        .instrument(span.clone())
        .await;
    let _enter = span.enter();
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let bytes = match result {
        Ok(b) => b,
        Err(e) => {
            tracing::info!(elapsed_ms, error = %e, "webhook call failed");
            return Ok(Err(CallError(e)));
        }
    };
    let verdict = match review::verify(version, &uid, hook.kind == WebhookKind::Mutating, &bytes) {
        Ok(v) => v,
        Err(e) => {
            tracing::info!(elapsed_ms, error = %e, "invalid webhook response");
            return Ok(Err(CallError(format!(
                "received invalid webhook response: {e}"
            ))));
        }
    };
    tracing::debug!(
        elapsed_ms,
        allowed = verdict.allowed,
        patched = verdict.patch.is_some(),
        "webhook called"
    );
    if !verdict.allowed {
        return Err(denied(&hook.name, verdict.status));
    }
    Ok(Ok(Outcome::Allowed {
        patch: verdict.patch,
        warnings: verdict.warnings,
    }))
}

/// The object as served at `info`'s version (custom resources: only `apiVersion`
/// changes, there is no conversion webhook).
fn as_version(info: &ResourceInfo, obj: &Value) -> Value {
    if info.crd.is_some() {
        let mut o = obj.clone();
        o["apiVersion"] = json!(info.api_version());
        o
    } else {
        present(info, obj)
    }
}

/// Applies the failure policy to a failed call: Fail → 500, Ignore → logged.
fn failed(hook: &Webhook, e: &CallError) -> ApiResult<()> {
    let msg = format!("failed calling webhook {:?}: {}", hook.name, e.0);
    if hook.fail {
        Err(internal(msg))
    } else {
        tracing::warn!(webhook = %hook.name, "failing open (failurePolicy Ignore): {msg}");
        Ok(())
    }
}

/// Runs the mutating webhooks on `object` (None for DELETE), in kube's order, and
/// re-decodes/defaults the object after each patch. Returns the webhooks' warnings.
pub async fn mutate(
    app: &App,
    a: &Attributes,
    mut object: Option<&mut Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if super::is_configuration(&a.info) {
        return Ok(vec![]);
    }
    let hooks = app.webhooks.current().mutating.clone();
    if hooks.is_empty() {
        return Ok(vec![]);
    }
    let mut warnings = vec![];
    let mut invoked_reinvocable: Vec<usize> = vec![];
    let mut reinvoke: BTreeSet<usize> = BTreeSet::new();
    for pass in 0..2 {
        if pass == 1 && reinvoke.is_empty() {
            break;
        }
        for (i, hook) in hooks.iter().enumerate() {
            if pass == 1 && !reinvoke.contains(&i) {
                continue;
            }
            let current = object.as_deref().cloned();
            let outcome = match call(app, hook, a, current.as_ref(), old).await? {
                Ok(o) => o,
                Err(e) => {
                    failed(hook, &e)?;
                    continue;
                }
            };
            let Outcome::Allowed { patch, warnings: w } = outcome else {
                continue;
            };
            warnings.extend(w);
            let changed = match patch {
                Some(p) => apply_patch(app, hook, a, object.as_deref_mut(), &p)?,
                None => false,
            };
            if pass == 0 {
                if changed {
                    reinvoke.extend(invoked_reinvocable.drain(..));
                }
                if hook.reinvoke {
                    invoked_reinvocable.push(i);
                }
            }
        }
    }
    Ok(warnings)
}

/// Applies a webhook's JSON patch; Ok(true) when the object changed. Errors here are
/// not subject to the failure policy (as in kube).
fn apply_patch(
    app: &App,
    hook: &Webhook,
    a: &Attributes,
    object: Option<&mut Value>,
    patch: &[u8],
) -> ApiResult<bool> {
    let ops: json_patch::Patch = serde_json::from_slice(patch).map_err(internal)?;
    if ops.0.is_empty() {
        return Ok(false);
    }
    let Some(object) = object else {
        return Err(internal(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    };
    if a.object_kind.is_some() {
        let mut doc = object.clone();
        json_patch::patch(&mut doc, &ops).map_err(internal)?;
        let changed = doc != *object;
        *object = doc;
        return Ok(changed);
    }
    let matched = matching::matched_resource(hook, a, &app.registry).unwrap_or(a.info.clone());
    let mut doc = as_version(&matched, object);
    json_patch::patch(&mut doc, &ops).map_err(internal)?;
    // Back to the request's version, then decoded and defaulted as kube does.
    let mut doc = as_version(&a.info, &doc);
    check_type_meta(&a.info, &mut doc).map_err(|e| internal(e.to_string()))?;
    normalize(&a.info, &mut doc, FieldValidation::Ignore).map_err(|e| internal(e.to_string()))?;
    if doc == *object {
        return Ok(false);
    }
    *object = doc;
    Ok(true)
}

/// Enforces the validating admission policies, then runs the matching validating
/// webhooks in parallel on the final object (None for DELETE). The first failure in
/// webhook order wins. Returns the warnings.
pub async fn validate(
    app: &App,
    a: &Attributes,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if super::is_configuration(&a.info) {
        return Ok(vec![]);
    }
    // kube's ValidatingAdmissionPolicy plugin runs before its webhook plugin.
    let mut warnings = super::policy::validate(app, a, object, old).await?;
    let hooks: Vec<Arc<Webhook>> = app.webhooks.current().validating.clone();
    if hooks.is_empty() {
        return Ok(warnings);
    }
    let results =
        futures::future::join_all(hooks.iter().map(|h| call(app, h, a, object, old))).await;
    for (hook, r) in hooks.iter().zip(results) {
        match r? {
            Ok(Outcome::Allowed { warnings: w, .. }) => warnings.extend(w),
            Ok(Outcome::Skipped) => {}
            Err(e) => failed(hook, &e)?,
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_refused_for_side_effects() {
        assert!(dry_run_ok("None"));
        assert!(dry_run_ok("NoneOnDryRun"));
        assert!(!dry_run_ok("Unknown"));
        assert!(!dry_run_ok("Some"));
    }

    #[test]
    fn denial_messages_as_kube() {
        let s = denied("a.b.c", Some(json!({"code": 403, "message": "no"}))).to_status();
        assert_eq!(
            s["message"],
            "admission webhook \"a.b.c\" denied the request: no"
        );
        assert_eq!(s["code"], 403);
        assert_eq!(s["status"], "Failure");
        let s = denied("a.b.c", None).to_status();
        assert_eq!(
            s["message"],
            "admission webhook \"a.b.c\" denied the request without explanation"
        );
        assert_eq!(s["code"], 400);
        let s = denied("a.b.c", Some(json!({"code": 1000, "reason": "Nope"}))).to_status();
        assert_eq!(
            s["message"],
            "admission webhook \"a.b.c\" denied the request: Nope"
        );
        assert_eq!(s["code"], 400);
    }
}
