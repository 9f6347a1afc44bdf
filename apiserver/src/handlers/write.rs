//! Create, update (PUT), and patch (JSON, merge, strategic, apply).
//!
//! Every write computes the new object under the store lock from the live one
//! (`modify`), so optimistic concurrency and no-op detection are exact.

use std::sync::Arc;

use axum::response::Response;
use serde_json::Value;

use crate::app::{App, present};
use crate::http::body;
use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::objects::admission::{FieldValidation, admit, check_type_meta};
use crate::objects::{fieldmanager, meta};
use crate::registry::ResourceInfo;
use crate::status::{ApiError, ApiResult, Details};
use crate::storage::{View, Write};

/// Everything a write needs from the request, owned (it runs in the store closure).
#[derive(Clone)]
pub struct WriteCtx {
    /// The resource.
    pub info: Arc<ResourceInfo>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Object name (from the URL; empty on create).
    pub name: String,
    /// Subresource.
    pub subresource: Option<String>,
    /// Field manager.
    pub manager: String,
    /// dryRun=All.
    pub dry_run: bool,
    /// fieldValidation.
    pub validation: FieldValidation,
}

impl WriteCtx {
    fn new(r: &ResourceRequest) -> ApiResult<Self> {
        Ok(WriteCtx {
            info: r.info.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone().unwrap_or_default(),
            subresource: r.subresource.clone(),
            manager: r.field_manager(),
            dry_run: r.dry_run(),
            validation: FieldValidation::parse(r.query.get("fieldValidation"))?,
        })
    }

    pub(super) fn key(&self, name: &str) -> String {
        self.info.key(self.namespace.as_deref(), name)
    }
}

/// Fails unless the namespace of a namespaced object exists and is not terminating.
pub fn check_namespace(
    view: &View<'_>,
    info: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
) -> ApiResult<()> {
    if !info.namespaced {
        return Ok(());
    }
    let ns = namespace.unwrap_or("default");
    match view.get(&namespace_key(ns)) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if meta::is_deleting(n) => Err(ApiError::Forbidden {
            message: format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                crate::status::qualified(&info.group, &info.plural)
            ),
            details: Details::new(&info.group, &info.plural, name),
        }),
        Some(_) => Ok(()),
    }
}

/// Storage key of a namespace object.
pub fn namespace_key(ns: &str) -> String {
    format!("/namespaces//{ns}")
}

/// Admission, system metadata and kind hooks for a new object. Returns warnings.
pub(super) fn prepare_new(ctx: &WriteCtx, obj: &mut Value) -> ApiResult<Vec<String>> {
    let info = &ctx.info;
    check_type_meta(info, obj)?;
    let warnings = admit(info, obj, ctx.validation, None)?;
    meta::prepare_create(info, ctx.namespace.as_deref(), obj)?;
    if info.has_status
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    crate::hooks::on_create(info, obj)?;
    meta::validate_name_and_labels(info, obj)?;
    Ok(warnings)
}

/// POST: create an object.
pub async fn create(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let ctx = WriteCtx::new(&r)?;
    let mut obj = body::object(&r.content_type(), &r.body)?;
    let warnings = prepare_new(&ctx, &mut obj)?;
    fieldmanager::record_update(&ctx.info, None, &mut obj, &ctx.manager, None)?;
    let obj = crate::objects::events::to_storage(&ctx.info, obj);
    let info = ctx.info.clone();
    let (stored, _) = app
        .commit(move |view| {
            let name = meta::meta_str(&obj, "name").unwrap_or("").to_string();
            let key = ctx.key(&name);
            check_namespace(view, &ctx.info, ctx.namespace.as_deref(), &name)?;
            if view.get(&key).is_some() {
                return Err(ApiError::already_exists(
                    &ctx.info.group,
                    &ctx.info.plural,
                    &name,
                ));
            }
            let writes = if ctx.dry_run {
                vec![]
            } else {
                vec![Write::Put(key, obj.clone())]
            };
            Ok((obj, writes))
        })
        .await
        .map(|(obj, events)| {
            (
                events.first().map(|e| (*e.object).clone()).unwrap_or(obj),
                (),
            )
        })?;
    Ok(json_response(201, &present(&info, &stored), &warnings))
}

/// How a write changes the live object.
pub enum Change {
    /// PUT body.
    Replace(Value),
    /// RFC 6902 JSON patch.
    Json(json_patch::Patch),
    /// RFC 7386 merge patch.
    Merge(Value),
    /// Strategic merge patch.
    Strategic(Value),
    /// Server-side apply.
    Apply {
        /// The applied configuration.
        body: Value,
        /// `force=true`.
        force: bool,
    },
}

/// What [`modify`] did.
pub(super) enum Outcome {
    /// Created (create-on-apply).
    Created(Value),
    /// Stored a change.
    Updated(Value),
    /// Nothing changed; nothing written.
    Unchanged(Value),
}

/// What a [`modify`] transaction returns: the outcome, warnings, and the writes.
pub(super) type ModifyResult = ((Outcome, Vec<String>), Vec<Write>);

/// PUT: replace an object (or its status / namespace finalizers).
pub async fn update(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let obj = body::object(&r.content_type(), &r.body)?;
    if let Some(n) = meta::meta_str(&obj, "name").filter(|n| !n.is_empty() && *n != r.name()) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({})",
            r.name()
        )));
    }
    // Custom resources and CRDs do not allow unconditional updates (kube's
    // AllowUnconditionalUpdate is false for them).
    let unconditional_ok = !(r.info.is_custom() || r.info.group == crate::crd::GROUP);
    if !unconditional_ok && meta::meta_str(&obj, "resourceVersion").is_none_or(str::is_empty) {
        return Err(ApiError::invalid(
            &r.info.group,
            &r.info.kind,
            r.name(),
            vec![crate::status::Cause::new(
                "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion",
            )],
        ));
    }
    modify(app, &r, Change::Replace(obj)).await
}

/// PATCH: by Content-Type.
pub async fn patch(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let ct = r.content_type();
    let change = match ct.as_str() {
        "application/json-patch+json" => {
            let p: json_patch::Patch = serde_json::from_slice(&r.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?;
            Change::Json(p)
        }
        "application/merge-patch+json" => Change::Merge(body::json(&r.body)?),
        "application/strategic-merge-patch+json" if !r.info.is_custom() => {
            Change::Strategic(body::json(&r.body)?)
        }
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            if r.query.get("fieldManager").is_none_or(str::is_empty) {
                return Err(ApiError::bad_request(
                    "PATCH, application/apply-patch+yaml: fieldManager is required for apply requests",
                ));
            }
            let body = body::yaml(&r.body)?;
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "the applied configuration must be an object",
                ));
            }
            Change::Apply {
                body,
                force: r.query.flag("force"),
            }
        }
        _ => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
                if r.info.is_custom() {
                    ""
                } else {
                    ", application/strategic-merge-patch+json"
                }
            )));
        }
    };
    if r.query.flag("force") && !matches!(change, Change::Apply { .. }) {
        return Err(ApiError::bad_request(
            "force may not be specified for non-apply patch",
        ));
    }
    modify(app, &r, change).await
}

fn patch_error(message: String) -> ApiError {
    ApiError::Invalid {
        message,
        details: Details::default(),
    }
}

/// Applies `change` to the live object under the store lock and stores the result.
async fn modify(app: &Arc<App>, r: &ResourceRequest, change: Change) -> ApiResult<Response> {
    let ctx = WriteCtx::new(r)?;
    let info = ctx.info.clone();
    let ((outcome, warnings), _events) = app
        .commit(move |view| {
            let key = ctx.key(&ctx.name);
            let Some(old) = view.get(&key).map(|o| (**o).clone()) else {
                return match change {
                    Change::Apply { body, force } if ctx.subresource.is_none() => {
                        super::apply::apply_create(view, &ctx, body, force)
                    }
                    _ => Err(ApiError::not_found(
                        &ctx.info.group,
                        &ctx.info.plural,
                        &ctx.name,
                    )),
                };
            };
            let current = present(&ctx.info, &old);
            let (candidate, managed) = match change {
                Change::Replace(v) => (v, None),
                Change::Json(p) => {
                    let mut doc = current.clone();
                    json_patch::patch(&mut doc, &p).map_err(|e| patch_error(e.to_string()))?;
                    (doc, None)
                }
                Change::Merge(p) => {
                    let mut doc = current.clone();
                    json_patch::merge(&mut doc, &p);
                    (doc, None)
                }
                Change::Strategic(p) => {
                    let schema = fieldmanager::merge_schema(&ctx.info);
                    let doc = gantry_merge::strategic_merge_patch(&current, &p, &schema)
                        .map_err(|e| patch_error(e.to_string()))?;
                    (doc, None)
                }
                Change::Apply { body, force } => {
                    let (obj, mf) = super::apply::run_apply(&ctx, Some(&current), &body, force)?;
                    (obj, Some(mf))
                }
            };
            let (new, warnings) = finish_update(&ctx, &current, candidate, managed)?;
            let Some(new) = new else {
                return Ok(((Outcome::Unchanged(old), warnings), vec![]));
            };
            let new = crate::objects::events::to_storage(&ctx.info, new);
            let remove = meta::is_deleting(&new)
                && meta::finalizers(&new).is_empty()
                && !crate::hooks::holds_deletion(&ctx.info, &new);
            let writes = match (ctx.dry_run, remove) {
                (true, _) => vec![],
                (false, true) => vec![Write::DeleteAs(key, new.clone())],
                (false, false) => vec![Write::Put(key, new.clone())],
            };
            Ok(((Outcome::Updated(new), warnings), writes))
        })
        .await
        .map(|((outcome, w), events)| {
            // Return what was stored (with its resourceVersion).
            let stored = events.first().map(|e| (*e.object).clone());
            let outcome = match (outcome, stored) {
                (Outcome::Created(_), Some(s)) => Outcome::Created(s),
                (Outcome::Updated(_), Some(s)) => Outcome::Updated(s),
                (o, _) => o,
            };
            ((outcome, w), events)
        })?;
    Ok(match outcome {
        Outcome::Created(o) => json_response(201, &present(&info, &o), &warnings),
        Outcome::Updated(o) | Outcome::Unchanged(o) => {
            json_response(200, &present(&info, &o), &warnings)
        }
    })
}

/// Turns a candidate object into the object to store: subresource rules, preserved
/// system fields, optimistic concurrency, admission, generation, managedFields.
/// Returns None when nothing changed (no write, same resourceVersion). `old` is the live
/// object as served at the request's version.
fn finish_update(
    ctx: &WriteCtx,
    old: &Value,
    mut cand: Value,
    managed: Option<Vec<gantry_merge::ManagedFieldsEntry>>,
) -> ApiResult<(Option<Value>, Vec<String>)> {
    let info = &ctx.info;
    check_type_meta(info, &mut cand)?;
    if let Some(n) = meta::meta_str(&cand, "name").filter(|n| *n != ctx.name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({})",
            ctx.name
        )));
    }
    let old_rv = meta::meta_str(old, "resourceVersion").unwrap_or("");
    if let Some(rv) = meta::meta_str(&cand, "resourceVersion").filter(|rv| !rv.is_empty())
        && rv != old_rv
    {
        return Err(ApiError::stale(&info.group, &info.plural, &ctx.name));
    }
    let mut new = match ctx.subresource.as_deref() {
        Some("status") => {
            let mut n = present(info, old);
            match cand.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    n.as_object_mut().map(|m| m.remove("status"));
                }
            }
            if let Some(mf) = cand.pointer("/metadata/managedFields") {
                meta::meta_mut(&mut n).insert("managedFields".into(), mf.clone());
            }
            n
        }
        Some("finalize") => {
            let mut n = old.clone();
            n["spec"]["finalizers"] = cand
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or(Value::Array(vec![]));
            n
        }
        _ => {
            if info.has_status {
                match old.get("status") {
                    Some(s) => cand["status"] = s.clone(),
                    None => {
                        cand.as_object_mut().map(|m| m.remove("status"));
                    }
                }
            }
            cand
        }
    };
    meta::preserve_system_fields(old, &mut new);
    meta::meta_mut(&mut new).insert("resourceVersion".into(), Value::String(old_rv.to_string()));
    let warnings = admit(info, &mut new, ctx.validation, Some(old))?;
    meta::validate_name_and_labels(info, &new)?;
    crate::hooks::on_update(info, old, &mut new, ctx.subresource.as_deref())?;
    let immutable = crate::objects::validation::validate_update(info, old, &new);
    if !immutable.is_empty() {
        return Err(ApiError::invalid(
            &info.group,
            &info.kind,
            &ctx.name,
            immutable,
        ));
    }
    if meta::is_deleting(old) {
        let old_f = meta::finalizers(old);
        if let Some(f) = meta::finalizers(&new)
            .into_iter()
            .find(|f| !old_f.contains(f))
        {
            return Err(ApiError::invalid(
                &info.group,
                &info.kind,
                &ctx.name,
                vec![crate::status::Cause::new(
                    "FieldValueForbidden",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{f:?}}}"
                    ),
                    "metadata.finalizers",
                )],
            ));
        }
    }
    meta::bump_generation(old, &mut new);
    match managed {
        Some(mf) => fieldmanager::set_managed_fields(&mut new, &mf),
        None => fieldmanager::record_update(
            info,
            Some(old),
            &mut new,
            &ctx.manager,
            ctx.subresource.as_deref(),
        )?,
    }
    let old_cmp = without_rv(&present(info, old));
    if without_rv(&new) == old_cmp {
        return Ok((None, warnings));
    }
    Ok((Some(new), warnings))
}

fn without_rv(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    o
}
