//! Create, update (PUT), and patch (JSON, merge, strategic, apply).
//!
//! A write reads the live object, computes the new one (admission webhooks included,
//! outside the store lock), then commits only if the live object is still the one it
//! read; otherwise it starts over (kube's `GuaranteedUpdate`). So optimistic
//! concurrency and no-op detection are exact, and a failed webhook never half-applies
//! a write.

use std::sync::Arc;

use axum::response::Response;
use serde_json::Value;

use super::output;
use crate::admission::{self as adm, Attributes, Operation};
use crate::app::{App, present, serve};
use crate::error::{ApiError, ApiResult, Details};
use crate::http::body;
use crate::http::request::ResourceRequest;
use crate::objects::admission::{FieldValidation, check_type_meta, normalize, validate_schema};
use crate::objects::{fieldmanager, meta};
use crate::registry::ResourceInfo;
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
    /// `?fieldManager=` as given (for the admission options).
    pub field_manager_param: Option<String>,
    /// The requesting user.
    pub user: adm::UserInfo,
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
            field_manager_param: r
                .query
                .get("fieldManager")
                .filter(|m| !m.is_empty())
                .map(String::from),
            user: r.user.clone(),
        })
    }

    /// The admission attributes of this write.
    pub(super) fn attributes(&self, operation: Operation, name: &str) -> Attributes {
        let kind = match operation {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        };
        let mut options = serde_json::json!({ "kind": kind, "apiVersion": "meta.k8s.io/v1" });
        if self.dry_run {
            options["dryRun"] = serde_json::json!(["All"]);
        }
        if let Some(m) = &self.field_manager_param {
            options["fieldManager"] = serde_json::json!(m);
        }
        Attributes {
            info: self.info.clone(),
            subresource: self.subresource.clone(),
            operation,
            namespace: adm::request_namespace(
                &self.info,
                self.namespace.as_deref(),
                name,
                operation,
            ),
            name: name.to_string(),
            user: self.user.clone(),
            dry_run: self.dry_run,
            options,
            object_kind: None,
        }
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
                crate::error::qualified(&info.group, &info.plural)
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

/// Sets the request's namespace on a new namespaced object (400 when the body names
/// another), as kube does before admission.
fn set_request_namespace(ctx: &WriteCtx, obj: &mut Value) -> ApiResult<()> {
    if !ctx.info.namespaced {
        return Ok(());
    }
    let ns = ctx.namespace.as_deref().unwrap_or("default");
    let m = meta::meta_mut(obj);
    match m.get("namespace").and_then(Value::as_str) {
        Some(body_ns) if !body_ns.is_empty() && body_ns != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            m.insert("namespace".into(), Value::String(ns.to_string()));
            Ok(())
        }
    }
}

/// A new object, from decoding to the object to store, in kube's order: decode and
/// defaults → mutating webhooks → decode/defaults again → schema validation, system
/// metadata, kind strategies, validation → managedFields → validating webhooks.
/// `managed` is the managedFields of apply (None: recorded for this manager).
/// Returns the object and warnings.
pub(super) async fn admit_new(
    app: &Arc<App>,
    ctx: &WriteCtx,
    mut obj: Value,
    managed: Option<Vec<gantry_merge::ManagedFieldsEntry>>,
) -> ApiResult<(Value, Vec<String>)> {
    let info = &ctx.info;
    check_type_meta(info, &mut obj)?;
    let mut warnings = normalize(info, &mut obj, ctx.validation)?;
    set_request_namespace(ctx, &mut obj)?;
    let name = meta::meta_str(&obj, "name").unwrap_or("").to_string();
    if info.namespaced {
        // kube's NamespaceLifecycle plugin runs before the webhooks. A read-only
        // transaction: nothing is written, so nothing touches the disk.
        app.store
            .commit(|view| {
                check_namespace(view, info, ctx.namespace.as_deref(), &name).map(|()| ((), vec![]))
            })
            .map_err(|e| ApiError::Internal(e.to_string()))??;
    }
    let mut attrs = ctx.attributes(Operation::Create, &name);
    warnings.extend(adm::mutate(app, &attrs, Some(&mut obj), None).await?);
    validate_schema(info, &obj, None)?;
    meta::prepare_create(info, ctx.namespace.as_deref(), &mut obj)?;
    crate::objects::initial_status::set_initial_status(info, &mut obj);
    crate::strategy::on_create(info, &mut obj)?;
    if crate::certificates::is_csr(info) {
        crate::certificates::strategy::on_create(&ctx.user, &mut obj);
    }
    meta::validate_name_and_labels(info, &obj)?;
    match managed {
        Some(mf) => fieldmanager::set_managed_fields(&mut obj, &mf),
        None => fieldmanager::record_update(info, None, &mut obj, &ctx.manager, None)?,
    }
    attrs.name = meta::meta_str(&obj, "name").unwrap_or("").to_string();
    warnings.extend(adm::validate(app, &attrs, Some(&obj), None).await?);
    Ok((crate::objects::to_storage(info, obj), warnings))
}

/// Stores a new object (converted to the storage version) unless one with its name
/// exists (or its namespace is gone). Returns the stored object (with its
/// resourceVersion).
pub(super) async fn commit_create(app: &Arc<App>, ctx: &WriteCtx, obj: Value) -> ApiResult<Value> {
    let obj = crate::conversion::to_storage(app, &ctx.info, obj).await?;
    let ctx = ctx.clone();
    let (obj, events) = app
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
        .await?;
    Ok(events.first().map_or(obj, |e| (*e.object).clone()))
}

/// POST: create an object.
pub async fn create(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let ctx = WriteCtx::new(&r)?;
    let obj = body::object(&r.content_type(), &r.body)?;
    let (obj, warnings) = admit_new(app, &ctx, obj, None).await?;
    let stored = commit_create(app, &ctx, obj).await?;
    Ok(output::object(
        &r,
        201,
        &serve(app, &ctx.info, &stored).await?,
        &warnings,
    ))
}

/// How a write changes the live object.
#[derive(Clone)]
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

/// How often a write starts over when the object changed while its webhooks ran.
const MAX_ATTEMPTS: usize = 16;

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
            vec![crate::error::Cause::new(
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

/// The candidate object of `change` applied to `current` (and apply's managedFields).
fn apply_change(
    ctx: &WriteCtx,
    current: &Value,
    change: Change,
) -> ApiResult<(Value, Option<Vec<gantry_merge::ManagedFieldsEntry>>)> {
    Ok(match change {
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
            let doc = gantry_merge::strategic_merge_patch(current, &p, &schema)
                .map_err(|e| patch_error(e.to_string()))?;
            (doc, None)
        }
        Change::Apply { body, force } => {
            let (obj, mf) = super::apply::run_apply(ctx, Some(current), &body, force)?;
            (obj, Some(mf))
        }
    })
}

/// Applies `change` to the live object and stores the result, starting over when the
/// object changed between reading it and committing.
async fn modify(app: &Arc<App>, r: &ResourceRequest, change: Change) -> ApiResult<Response> {
    let ctx = WriteCtx::new(r)?;
    let info = ctx.info.clone();
    let key = ctx.key(&ctx.name);
    for _ in 0..MAX_ATTEMPTS {
        let Some(old) = app.store.get(&key) else {
            return match &change {
                Change::Apply { body, force } if ctx.subresource.is_none() => {
                    let (obj, warnings) =
                        super::apply::apply_create(app, &ctx, body.clone(), *force).await?;
                    match commit_create(app, &ctx, obj).await {
                        Ok(stored) => Ok(output::object(
                            r,
                            201,
                            &serve(app, &info, &stored).await?,
                            &warnings,
                        )),
                        // Created meanwhile: apply again, as an update.
                        Err(ApiError::AlreadyExists { .. }) => continue,
                        Err(e) => Err(e),
                    }
                }
                _ => Err(ApiError::not_found(&info.group, &info.plural, &ctx.name)),
            };
        };
        let current = serve(app, &info, &old).await?;
        let (candidate, managed) = apply_change(&ctx, &current, change.clone())?;
        check_uid(&ctx, &change, &current, &candidate)?;
        let (new, warnings) = finish_update(app, &ctx, &current, candidate, managed).await?;
        let Some(new) = new else {
            return Ok(output::object(r, 200, &current, &warnings));
        };
        let new = crate::objects::to_storage(&info, new);
        let new = crate::conversion::to_storage(app, &info, new).await?;
        let remove = meta::is_deleting(&new)
            && meta::finalizers(&new).is_empty()
            && !crate::strategy::holds_deletion(&info, &new);
        let (c2, key2) = (ctx.clone(), key.clone());
        let (done, events) = app
            .commit(move |view| {
                if !view.get(&key2).is_some_and(|live| Arc::ptr_eq(live, &old)) {
                    return Ok((None, vec![]));
                }
                let writes = match (c2.dry_run, remove) {
                    (true, _) => vec![],
                    (false, true) => vec![Write::DeleteAs(key2, new.clone())],
                    (false, false) => vec![Write::Put(key2, new.clone())],
                };
                Ok((Some(new), writes))
            })
            .await?;
        let Some(new) = done else {
            continue;
        };
        // Return what was stored (with its resourceVersion).
        let stored = events.first().map_or(new, |e| (*e.object).clone());
        return Ok(output::object(
            r,
            200,
            &serve(app, &info, &stored).await?,
            &warnings,
        ));
    }
    Err(ApiError::stale(&info.group, &info.plural, &ctx.name))
}

/// A PUT naming another uid fails kube's storage precondition (409, in the words of
/// its etcd store); a patch changing the uid is refused by kube's validation (422).
fn check_uid(ctx: &WriteCtx, change: &Change, current: &Value, candidate: &Value) -> ApiResult<()> {
    let Some(uid) = meta::meta_str(candidate, "uid").filter(|u| !u.is_empty()) else {
        return Ok(());
    };
    let actual = meta::uid(current);
    if uid == actual {
        return Ok(());
    }
    let info = &ctx.info;
    match change {
        Change::Replace(_) => Err(ApiError::conflict(
            "",
            &info.plural,
            &ctx.name,
            &format!(
                "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}",
                etcd_key(info, ctx.namespace.as_deref(), &ctx.name)
            ),
        )),
        Change::Apply { .. } => Ok(()),
        _ => Err(ApiError::invalid(
            &info.group,
            &info.kind,
            &ctx.name,
            vec![crate::error::Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {uid:?}: field is immutable"),
                "metadata.uid",
            )],
        )),
    }
}

/// The etcd key kube-apiserver keeps an object under (its default resource prefixes).
fn etcd_key(info: &ResourceInfo, namespace: Option<&str>, name: &str) -> String {
    let prefix = match (info.group.as_str(), info.plural.as_str()) {
        ("", "services") => "services/specs".to_string(),
        ("", "endpoints") => "services/endpoints".to_string(),
        ("", "nodes") => "minions".to_string(),
        (group, plural)
            if info.crd.is_some()
                || group == crate::crd::GROUP
                || group == "apiregistration.k8s.io" =>
        {
            format!("{group}/{plural}")
        }
        (_, plural) => plural.to_string(),
    };
    match namespace {
        Some(ns) => format!("/registry/{prefix}/{ns}/{name}"),
        None => format!("/registry/{prefix}/{name}"),
    }
}

/// Turns a candidate object into the object to store, in kube's order: decode and
/// defaults → mutating webhooks → subresource rules, preserved system fields,
/// validation, kind strategies, generation, managedFields → validating webhooks.
/// Returns None when nothing changed (no write, same resourceVersion). `old` is the live
/// object as served at the request's version.
async fn finish_update(
    app: &Arc<App>,
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
    let mut warnings = normalize(info, &mut cand, ctx.validation)?;
    let attrs = ctx.attributes(Operation::Update, &ctx.name);
    let name_before = meta::meta_str(&cand, "name").map(String::from);
    warnings.extend(adm::mutate(app, &attrs, Some(&mut cand), Some(old)).await?);
    if let Some(n) = meta::meta_str(&cand, "name").filter(|n| Some(*n) != name_before.as_deref()) {
        // A webhook renamed the object: names are immutable.
        return Err(ApiError::invalid(
            &info.group,
            &info.kind,
            &ctx.name,
            vec![crate::error::Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {n:?}: field is immutable"),
                "metadata.name",
            )],
        ));
    }
    let mut new = match ctx.subresource.as_deref() {
        Some("status" | "approval") => {
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
        Some("ephemeralcontainers") => {
            crate::objects::validation::with_ephemeral_containers(&present(info, old), &cand)
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
    validate_schema(info, &new, Some(old))?;
    meta::validate_name_and_labels(info, &new)?;
    crate::strategy::on_update(info, old, &mut new, ctx.subresource.as_deref())?;
    let immutable = match ctx.subresource.as_deref() {
        Some("ephemeralcontainers") => {
            crate::objects::validation::validate_ephemeral_update(old, &new)
        }
        _ => crate::objects::validation::validate_update(info, old, &new),
    };
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
                vec![crate::error::Cause::new(
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
    // Webhooks see no-op updates too (kube admits before comparing).
    warnings.extend(adm::validate(app, &attrs, Some(&new), Some(old)).await?);
    let comparable = |o: &Value| crate::objects::without_zero_fields(info, without_rv(o));
    if comparable(&new) == comparable(&present(info, old)) {
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
