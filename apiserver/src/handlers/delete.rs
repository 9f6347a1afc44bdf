//! DELETE of one object and of a collection: admission webhooks, preconditions,
//! propagation policy, finalizers, dry run.
//!
//! Webhooks see the live object (`oldObject`); the delete commits only if that object
//! is still the live one, else it starts over.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Value, json};

use super::output;
use crate::admission::{self as adm, Attributes, Operation};
use crate::app::{App, serve, serve_all};
use crate::error::{ApiError, ApiResult, success_status};
use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::objects::lifecycle::{self, Deletion, Propagation};
use crate::objects::meta;
use crate::registry::ResourceInfo;
use crate::storage::{View, Write};

/// Parsed `DeleteOptions` (body and query).
#[derive(Clone, Debug)]
pub(crate) struct DeleteOptions {
    uid: Option<String>,
    pub(crate) resource_version: Option<String>,
    policy: Option<Propagation>,
    pub(crate) dry_run: bool,
    /// The `DeleteOptions` object webhooks see.
    json: Value,
}

fn options(r: &ResourceRequest) -> ApiResult<DeleteOptions> {
    let body: Value = if r.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else if r.content_type() == "application/vnd.kubernetes.protobuf" {
        let body = crate::protobuf::decode(&r.body)?;
        if body["kind"] != "DeleteOptions" {
            return Err(ApiError::bad_request(format!(
                "error decoding DeleteOptions: the body is a {}",
                body["kind"].as_str().unwrap_or("")
            )));
        }
        body
    } else {
        serde_json::from_slice(&r.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    options_from(r, &body)
}

/// `DeleteOptions` from their JSON `body` (a DELETE's, or an `Eviction`'s) and the
/// request's query.
pub(crate) fn options_from(r: &ResourceRequest, body: &Value) -> ApiResult<DeleteOptions> {
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
    let mut json = json!({ "kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1" });
    if let Some(p) = policy {
        json["propagationPolicy"] = json!(match p {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        });
    }
    if let Some(p) = body.get("preconditions").filter(|p| p.is_object()) {
        json["preconditions"] = p.clone();
    }
    if let Some(g) = body.get("gracePeriodSeconds").filter(|g| g.is_i64()) {
        json["gracePeriodSeconds"] = g.clone();
    }
    if r.dry_run() || body_dry {
        json["dryRun"] = json!(["All"]);
    }
    Ok(DeleteOptions {
        json,
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
pub(crate) enum Deleted {
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
    delete_live(info, key, name, obj, opts)
}

/// Deletes `obj`, the live object at `key` (or a changed copy of it, whose last state
/// the DELETED event then carries): preconditions, finalizers, propagation.
pub(crate) fn delete_live(
    info: &ResourceInfo,
    key: &str,
    name: &str,
    obj: &Value,
    opts: &DeleteOptions,
) -> ApiResult<(Deleted, Vec<Write>)> {
    // kube's `BeforeDelete`: a Conflict on the kind, in its words.
    let unmet = |what: &str, wanted: &str, actual: &str, why: &str| {
        ApiError::conflict(
            &info.group,
            &info.kind,
            name,
            &format!(
                "the {what} in the precondition ({wanted}) does not match the {what} in record ({actual}). The object might have been {why}"
            ),
        )
    };
    if let Some(uid) = &opts.uid {
        let actual = meta::uid(obj);
        if uid != actual {
            return Err(unmet("UID", uid, actual, "deleted and then recreated"));
        }
    }
    if let Some(rv) = &opts.resource_version {
        let actual = meta::meta_str(obj, "resourceVersion").unwrap_or("");
        if rv != actual {
            return Err(unmet("ResourceVersion", rv, actual, "modified"));
        }
    }
    let is_ns = info.group.is_empty() && info.plural == "namespaces";
    if is_ns && matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(ApiError::Forbidden {
            message: format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            ),
            details: crate::error::Details::new("", "namespaces", name),
        });
    }
    let policy = opts.policy.unwrap_or(Propagation::Background);
    let mut target = obj.clone();
    if is_ns && !meta::is_deleting(&target) {
        target["status"] = json!({ "phase": "Terminating" });
    }
    let is_crd = info.group == crate::crd::GROUP && info.plural == crate::crd::PLURAL;
    if is_crd {
        crate::crd::with_cleanup_finalizer(&mut target);
    }
    let own = is_ns || is_crd;
    let marking = if own {
        lifecycle::Marking::Own
    } else {
        lifecycle::Marking::Generic
    };
    let (out, writes) = match lifecycle::delete(key, &target, policy, is_ns, marking) {
        Deletion::Removed(_) if is_graceful(info) && !meta::is_deleting(obj) => {
            // kube marks a Pod (grace period 0: no kubelet here) and removes it.
            let mut last = obj.clone();
            lifecycle::mark(&mut last, lifecycle::Marking::Generic);
            (
                Deleted::Gone(last.clone()),
                vec![Write::DeleteAs(key.to_string(), last)],
            )
        }
        Deletion::Removed(w) => (Deleted::Gone(obj.clone()), vec![w]),
        Deletion::Pending(o, w) => (Deleted::Pending(o), w.into_iter().collect()),
    };
    Ok((out, if opts.dry_run { vec![] } else { writes }))
}

/// Kinds whose strategy deletes gracefully (kube's `CheckGracefulDelete`): Pods.
fn is_graceful(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "pods"
}

/// Kinds whose registry answers a DELETE that removed the object with the object
/// (kube's `ReturnDeletedObject`); the others answer a Success Status.
fn returns_deleted_object(info: &ResourceInfo) -> bool {
    match info.group.as_str() {
        "" => matches!(
            info.plural.as_str(),
            "pods"
                | "services"
                | "serviceaccounts"
                | "persistentvolumes"
                | "persistentvolumeclaims"
                | "resourcequotas"
                | "podtemplates"
                | "namespaces"
        ),
        "storage.k8s.io" => info.plural == "storageclasses",
        _ => false,
    }
}

/// How often a delete starts over when the object changed while its webhooks ran.
const MAX_ATTEMPTS: usize = 16;

/// The admission attributes of deleting `name`.
fn attributes(r: &ResourceRequest, opts: &DeleteOptions, name: &str) -> Attributes {
    Attributes {
        info: r.info.clone(),
        subresource: None,
        operation: Operation::Delete,
        namespace: adm::request_namespace(&r.info, r.namespace.as_deref(), name, Operation::Delete),
        name: name.to_string(),
        user: r.user.clone(),
        dry_run: opts.dry_run,
        options: opts.json.clone(),
        object_kind: None,
    }
}

/// Mutating then validating webhooks for deleting `live` (object null, oldObject the
/// live object).
async fn admit_delete(app: &Arc<App>, a: &Attributes, live: &Value) -> ApiResult<()> {
    let old = serve(app, &a.info, live).await?;
    adm::mutate(app, a, None, Some(&old)).await?;
    adm::validate(app, a, None, Some(&old)).await?;
    Ok(())
}

/// DELETE one object.
pub async fn delete(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let opts = options(&r)?;
    let info = r.info.clone();
    let (key, name) = (r.key(), r.name().to_string());
    let attrs = attributes(&r, &opts, &name);
    let mut done = None;
    for _ in 0..MAX_ATTEMPTS {
        let live = app
            .store
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, &name))?;
        admit_delete(app, &attrs, &live).await?;
        let (i2, k2, n2, o2) = (info.clone(), key.clone(), name.clone(), opts.clone());
        let (out, events) = app
            .commit(move |view| {
                if !view.get(&k2).is_some_and(|l| Arc::ptr_eq(l, &live)) {
                    return Ok((None, vec![]));
                }
                let (out, writes) = delete_one(view, &i2, &k2, &n2, &o2)?;
                Ok((Some(out), writes))
            })
            .await?;
        if let Some(out) = out {
            done = Some((out, events));
            break;
        }
    }
    let Some((out, events)) = done else {
        return Err(ApiError::stale(&info.group, &info.plural, &name));
    };
    Ok(match out {
        Deleted::Pending(o) => {
            let stored = events.first().map_or(o, |e| (*e.object).clone());
            output::object(&r, 200, &serve(app, &info, &stored).await?, &[])
        }
        Deleted::Gone(o) => {
            if returns_deleted_object(&info) {
                let stored = events.first().map_or(o, |e| (*e.object).clone());
                output::object(&r, 200, &serve(app, &info, &stored).await?, &[])
            } else {
                let status = success_status(
                    &info.group,
                    &info.plural,
                    meta::meta_str(&o, "name").unwrap_or(""),
                    meta::uid(&o),
                );
                output::object(&r, 200, &status, &[])
            }
        }
    })
}

/// DELETE a collection (with label/field selectors). Every object goes through the
/// webhooks first; a denial deletes nothing.
pub async fn delete_collection(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let opts = options(&r)?;
    let sel = crate::handlers::read::selectors(&r)?;
    let info = r.info.clone();
    let prefix = info.ns_prefix(r.namespace.as_deref());
    let mut done = None;
    for _ in 0..MAX_ATTEMPTS {
        let (snapshot, _) = app.store.list(&prefix, None);
        let targets: Vec<(String, Arc<Value>)> = snapshot
            .into_iter()
            .filter(|(_, o)| sel.matches(o))
            .collect();
        for (_, obj) in &targets {
            let name = meta::meta_str(obj, "name").unwrap_or("");
            let mut attrs = attributes(&r, &opts, name);
            if info.namespaced {
                attrs.namespace = meta::meta_str(obj, "namespace").map(String::from);
            }
            admit_delete(app, &attrs, obj).await?;
        }
        let (i2, o2, p2, s2) = (info.clone(), opts.clone(), prefix.clone(), sel.clone());
        let (items, _) = app
            .commit(move |view| {
                // Start over when the set of matching objects changed meanwhile.
                let now: Vec<(String, Arc<Value>)> = view
                    .list(&p2)
                    .into_iter()
                    .filter(|(_, o)| s2.matches(o))
                    .collect();
                let same = now.len() == targets.len()
                    && now
                        .iter()
                        .zip(&targets)
                        .all(|((k1, a), (k2, b))| k1 == k2 && Arc::ptr_eq(a, b));
                if !same {
                    return Ok((None, vec![]));
                }
                let mut items = vec![];
                let mut writes = vec![];
                for (key, obj) in now {
                    let name = meta::meta_str(&obj, "name").unwrap_or("").to_string();
                    let (d, w) = delete_one(view, &i2, &key, &name, &o2)?;
                    items.push(match d {
                        Deleted::Gone(o) | Deleted::Pending(o) => o,
                    });
                    writes.extend(w);
                }
                Ok((Some(items), writes))
            })
            .await?;
        if let Some(items) = items {
            done = Some(items);
            break;
        }
    }
    let Some(items) = done else {
        return Err(ApiError::Conflict {
            message: "the collection kept changing while it was being deleted; please retry".into(),
            details: crate::error::Details::new(&info.group, &info.plural, ""),
        });
    };
    let items = serve_all(app, &info, &items).await?;
    let body = json!({
        "kind": format!("{}List", info.kind),
        "apiVersion": info.api_version(),
        "metadata": { "resourceVersion": app.store.rv().to_string() },
        "items": items,
    });
    Ok(json_response(200, &body, &[]))
}
