//! DELETE of one object and of a collection: preconditions, propagation policy,
//! finalizers, dry run.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Value, json};

use crate::app::{App, present};
use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::objects::lifecycle::{self, Deletion, Propagation};
use crate::objects::meta;
use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult, success_status};
use crate::storage::{View, Write};

/// Parsed DeleteOptions (body and query).
#[derive(Clone, Debug)]
struct DeleteOptions {
    uid: Option<String>,
    resource_version: Option<String>,
    policy: Option<Propagation>,
    dry_run: bool,
}

fn options(r: &ResourceRequest) -> ApiResult<DeleteOptions> {
    let body: Value = if r.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&r.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let policy_str = r
        .query
        .get("propagationPolicy")
        .map(String::from)
        .or_else(|| {
            body.get("propagationPolicy")
                .and_then(Value::as_str)
                .map(String::from)
        });
    let orphan = r
        .query
        .get("orphanDependents")
        .map(|v| v == "true")
        .or_else(|| body.get("orphanDependents").and_then(Value::as_bool));
    let policy = match (policy_str, orphan) {
        (Some(p), _) => Some(Propagation::parse(&p).ok_or_else(|| {
            ApiError::bad_request(format!("propagationPolicy: Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""))
        })?),
        (None, Some(true)) => Some(Propagation::Orphan),
        _ => None,
    };
    let body_dry = body
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v == "All"));
    Ok(DeleteOptions {
        uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        policy,
        dry_run: r.dry_run() || body_dry,
    })
}

/// The outcome of deleting one object.
enum Deleted {
    Gone(Value),
    Pending(Value),
}

fn delete_one(
    view: &View<'_>,
    info: &ResourceInfo,
    key: &str,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<(Deleted, Vec<Write>)> {
    let obj = view
        .get(key)
        .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))?;
    if let Some(uid) = &opts.uid {
        let actual = meta::uid(obj);
        if uid != actual {
            return Err(ApiError::conflict(
                &info.group,
                &info.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &opts.resource_version {
        let actual = meta::meta_str(obj, "resourceVersion").unwrap_or("");
        if rv != actual {
            return Err(ApiError::conflict(
                &info.group,
                &info.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                ),
            ));
        }
    }
    let is_ns = info.group.is_empty() && info.plural == "namespaces";
    if is_ns && matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(ApiError::Forbidden {
            message: format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            ),
            details: crate::status::Details::new("", "namespaces", name),
        });
    }
    let policy = opts.policy.unwrap_or(Propagation::Background);
    let mut target = (**obj).clone();
    if is_ns && !meta::is_deleting(&target) {
        target["status"] = json!({ "phase": "Terminating" });
    }
    let (out, writes) = match lifecycle::delete(key, &target, policy, is_ns) {
        Deletion::Removed(w) => (Deleted::Gone((**obj).clone()), vec![w]),
        Deletion::Pending(o, w) => (Deleted::Pending(o), w.into_iter().collect()),
    };
    Ok((out, if opts.dry_run { vec![] } else { writes }))
}

/// DELETE one object.
pub async fn delete(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let opts = options(&r)?;
    let info = r.info.clone();
    let (key, name) = (r.key(), r.name().to_string());
    let i2 = info.clone();
    let (out, events) = app
        .commit(move |view| delete_one(view, &i2, &key, &name, &opts))
        .await?;
    Ok(match out {
        Deleted::Pending(o) => {
            let stored = events.first().map(|e| (*e.object).clone()).unwrap_or(o);
            json_response(200, &present(&info, &stored), &[])
        }
        Deleted::Gone(o) => {
            if info.is_custom() {
                let stored = events.first().map(|e| (*e.object).clone()).unwrap_or(o);
                json_response(200, &present(&info, &stored), &[])
            } else {
                let status = success_status(
                    &info.group,
                    &info.plural,
                    meta::meta_str(&o, "name").unwrap_or(""),
                    meta::uid(&o),
                );
                json_response(200, &status, &[])
            }
        }
    })
}

/// DELETE a collection (with label/field selectors).
pub async fn delete_collection(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let opts = options(&r)?;
    let sel = crate::handlers::read::selectors(&r)?;
    let info = r.info.clone();
    let prefix = info.ns_prefix(r.namespace.as_deref());
    let i2 = info.clone();
    let (items, _) = app
        .commit(move |view| {
            let mut items = vec![];
            let mut writes = vec![];
            for (key, obj) in view.list(&prefix) {
                if !sel.matches(&obj) {
                    continue;
                }
                let name = meta::meta_str(&obj, "name").unwrap_or("").to_string();
                let (d, w) = delete_one(view, &i2, &key, &name, &opts)?;
                items.push(match d {
                    Deleted::Gone(o) | Deleted::Pending(o) => o,
                });
                writes.extend(w);
            }
            Ok((items, writes))
        })
        .await?;
    let items: Vec<Value> = items.iter().map(|o| present(&info, o)).collect();
    let body = json!({
        "kind": format!("{}List", info.kind),
        "apiVersion": info.api_version(),
        "metadata": { "resourceVersion": app.store.rv().to_string() },
        "items": items,
    });
    Ok(json_response(200, &body, &[]))
}
