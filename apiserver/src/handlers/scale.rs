//! The `scale` subresource: autoscaling/v1 Scale views of `.spec.replicas`-like paths.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Value, json};

use crate::admission::{self as adm, Attributes, Operation};
use crate::app::{App, present, serve};
use crate::error::{ApiError, ApiResult, Cause};
use crate::http::body;
use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::objects::{fieldmanager, meta};
use crate::registry::{ResourceInfo, ScalePaths};
use crate::storage::Write;

fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, p| format!("{acc}/{p}"))
}

fn scale_of(info: &ResourceInfo, paths: &ScalePaths, obj: &Value) -> Value {
    let m = &obj["metadata"];
    let mut status = json!({ "replicas": obj.pointer(&pointer(&paths.status_replicas)).and_then(Value::as_i64).unwrap_or(0) });
    if let Some(sel) = &paths.label_selector {
        if let Some(s) = obj.pointer(&pointer(sel)).and_then(Value::as_str) {
            status["selector"] = json!(s);
        }
    } else if let Some(ml) = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
    {
        let s: Vec<String> = ml
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        status["selector"] = json!(s.join(","));
    }
    let _ = info;
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": { "replicas": obj.pointer(&pointer(&paths.spec_replicas)).and_then(Value::as_i64).unwrap_or(0) },
        "status": status,
    })
}

/// GET .../scale
pub async fn get(app: &Arc<App>, r: &ResourceRequest) -> ApiResult<Response> {
    let info = &r.info;
    let paths = info.scale.as_ref().expect("router checked scale");
    let obj = app
        .store
        .get(&r.key())
        .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, r.name()))?;
    Ok(json_response(
        200,
        &scale_of(info, paths, &serve(app, info, &obj).await?),
        &[],
    ))
}

/// The Scale a PUT/PATCH of `.../scale` asks for, from the current one.
fn requested_scale(r: &ResourceRequest, current: &Value) -> ApiResult<Value> {
    if r.verb != crate::http::request::Verb::Patch {
        return body::object(&r.content_type(), &r.body);
    }
    let mut doc = current.clone();
    match r.content_type().as_str() {
        "application/json-patch+json" => {
            let p: json_patch::Patch = serde_json::from_slice(&r.body)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            json_patch::patch(&mut doc, &p).map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            json_patch::merge(&mut doc, &body::json(&r.body)?);
        }
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "unsupported patch type for scale: {other}"
            )));
        }
    }
    Ok(doc)
}

/// How often a scale write starts over when the object changed while its webhooks ran.
const MAX_ATTEMPTS: usize = 16;

/// PUT or PATCH .../scale: sets the desired replicas. Webhooks see `autoscaling/v1
/// Scale` objects (kind Scale, resource the parent, subResource `scale`).
pub async fn write(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let info = r.info.clone();
    let paths = info.scale.clone().expect("router checked scale");
    let key = r.key();
    let name = r.name().to_string();
    let manager = r.field_manager();
    let dry = r.dry_run();
    let mut options = json!({ "kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1" });
    if dry {
        options["dryRun"] = json!(["All"]);
    }
    if let Some(m) = r.query.get("fieldManager").filter(|m| !m.is_empty()) {
        options["fieldManager"] = json!(m);
    }
    let attrs = Attributes {
        info: info.clone(),
        subresource: Some("scale".into()),
        operation: Operation::Update,
        namespace: r.namespace.clone().filter(|_| info.namespaced),
        name: name.clone(),
        user: r.user.clone(),
        dry_run: dry,
        options,
        object_kind: Some(("autoscaling".into(), "v1".into(), "Scale".into())),
    };
    for _ in 0..MAX_ATTEMPTS {
        let live = app
            .store
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, &name))?;
        // The object at the request's version: replicas paths are that version's.
        let old = crate::conversion::to_version(app, &info, (*live).clone()).await?;
        let current = scale_of(&info, &paths, &present(&info, &old));
        let mut scale = requested_scale(&r, &current)?;
        if let Some(rv) = meta::meta_str(&scale, "resourceVersion").filter(|rv| !rv.is_empty())
            && Some(rv) != meta::meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::stale(&info.group, &info.plural, &name));
        }
        let mut warnings = adm::mutate(app, &attrs, Some(&mut scale), Some(&current)).await?;
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                &name,
                vec![Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                    "spec.replicas",
                )],
            ));
        }
        let mut new = old.clone();
        set_at(&mut new, &pointer(&paths.spec_replicas), json!(replicas));
        let unchanged = new == old;
        if !unchanged {
            meta::bump_generation(&old, &mut new);
            fieldmanager::record_update(&info, Some(&old), &mut new, &manager, Some("scale"))?;
        }
        let new_scale = scale_of(&info, &paths, &present(&info, &new));
        warnings.extend(adm::validate(app, &attrs, Some(&new_scale), Some(&current)).await?);
        if unchanged {
            return Ok(json_response(200, &current, &warnings));
        }
        let new = crate::conversion::to_storage(app, &info, new).await?;
        let k2 = key.clone();
        let (done, events) = app
            .commit(move |view| {
                if !view.get(&k2).is_some_and(|l| Arc::ptr_eq(l, &live)) {
                    return Ok((None, vec![]));
                }
                let writes = if dry {
                    vec![]
                } else {
                    vec![Write::Put(k2, new.clone())]
                };
                Ok((Some(new), writes))
            })
            .await?;
        let Some(new) = done else {
            continue;
        };
        let stored = events.first().map_or(new, |e| (*e.object).clone());
        return Ok(json_response(
            200,
            &scale_of(&info, &paths, &serve(app, &info, &stored).await?),
            &warnings,
        ));
    }
    Err(ApiError::stale(&info.group, &info.plural, &name))
}

fn set_at(obj: &mut Value, ptr: &str, value: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = ptr.split('/').skip(1).collect();
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let m = cur.as_object_mut().expect("object");
        if i == parts.len() - 1 {
            m.insert(p.to_string(), value);
            return;
        }
        cur = m.entry(p.to_string()).or_insert_with(|| json!({}));
    }
}
