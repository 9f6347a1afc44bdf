//! GET of one object and LIST with selectors, pagination and Table output.

use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use serde_json::{Value, json};

use crate::app::{App, serve, serve_all};
use crate::error::{ApiError, ApiResult};
use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::selectors::{FieldSelector, LabelSelector, Selectors};
use crate::table::{IncludeObject, partial_object_metadata, table};

/// GET one object.
pub async fn get(app: &Arc<App>, r: &ResourceRequest) -> ApiResult<Response> {
    let info = &r.info;
    let obj = app
        .store
        .get(&r.key())
        .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, r.name()))?;
    let obj = serve(app, info, &obj).await?;
    Ok(super::output::object(r, 200, &obj, &[]))
}

/// Parses `labelSelector` and `fieldSelector`.
pub fn selectors(r: &ResourceRequest) -> ApiResult<Selectors> {
    let labels = LabelSelector::parse(r.query.get("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields = FieldSelector::parse(&r.info, r.query.get("fieldSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(Selectors { labels, fields })
}

/// The position a `continue` token resumes from.
#[derive(serde::Serialize, serde::Deserialize)]
struct Continue {
    /// resourceVersion of the first page; -1: the latest (kube's token for an
    /// inconsistent continue).
    rv: i64,
    /// Last key returned.
    start: String,
}

fn decode_continue(token: &str) -> ApiResult<Continue> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| ApiError::bad_request("continue key is not valid"))
}

fn encode_continue(c: &Continue) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(c).expect("serializes"))
}

/// LIST objects.
pub async fn list(app: &Arc<App>, r: &ResourceRequest) -> ApiResult<Response> {
    let info = &r.info;
    let sel = selectors(r)?;
    let limit: usize = match r.query.get("limit") {
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?
            .max(0)
            .try_into()
            .unwrap_or(usize::MAX),
        None => 0,
    };
    let prefix = info.ns_prefix(r.namespace.as_deref());
    let (after, list_rv) = match r.query.get("continue").filter(|c| !c.is_empty()) {
        Some(tok) => {
            let c = decode_continue(tok)?;
            match u64::try_from(c.rv) {
                Ok(rv) if rv < app.store.oldest_watchable() => {
                    return Err(ApiError::InconsistentContinue(encode_continue(&Continue {
                        rv: -1,
                        start: c.start,
                    })));
                }
                Ok(rv) => (Some(c.start), Some(rv)),
                Err(_) if c.rv == -1 => (Some(c.start), None),
                Err(_) => return Err(ApiError::bad_request("continue key is not valid")),
            }
        }
        None => (None, None),
    };
    let exact = match (
        r.query.get("resourceVersionMatch"),
        r.query.get("resourceVersion"),
    ) {
        (Some("Exact"), Some(v)) => Some(
            v.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v}")))?,
        ),
        _ => None,
    };
    let (all, rv) = match list_rv.or(exact) {
        // A consistent snapshot at the first page's (or the requested) resourceVersion.
        Some(at) => {
            let items = app
                .store
                .list_at(&prefix, after.as_deref(), at)
                .map_err(|oldest| {
                    ApiError::Expired(format!("too old resource version: {at} ({oldest})"))
                })?;
            (items, at)
        }
        None => app.store.list(&prefix, after.as_deref()),
    };
    let mut items = vec![];
    let mut next = None;
    let mut remaining = 0usize;
    for (key, obj) in &all {
        if !sel.matches(obj) {
            continue;
        }
        if limit > 0 && items.len() == limit {
            if next.is_none() {
                next = Some(items_last_key(&all, &items));
            }
            remaining += 1;
            continue;
        }
        items.push((key.clone(), obj.clone()));
    }
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if let Some(Some(last)) = next {
        meta["continue"] = json!(encode_continue(&Continue {
            rv: i64::try_from(rv).unwrap_or(i64::MAX),
            start: last,
        }));
        meta["remainingItemCount"] = json!(remaining);
    } else if info.crd.is_some() && !r.wants_table() {
        // kube's unstructured lists of custom resources always have one (its
        // Tables do not).
        meta["continue"] = json!("");
    }
    let stored: Vec<Arc<Value>> = items.into_iter().map(|(_, o)| o).collect();
    let objects = serve_all(app, info, &stored).await?;
    if r.wants_table() {
        let t = table(
            info,
            &objects,
            &meta,
            IncludeObject::parse(r.query.get("includeObject")),
            true,
        );
        return Ok(json_response(200, &t, &[]));
    }
    let body = if r.wants_metadata() {
        json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "items": objects.iter().map(partial_object_metadata).collect::<Vec<_>>(),
        })
    } else {
        let mut objects = objects;
        if info.crd.is_none() {
            // kube decodes built-ins from storage into typed lists, whose items
            // carry no apiVersion/kind; custom resources keep theirs.
            for o in &mut objects {
                if let Some(m) = o.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
            }
        }
        json!({
            "kind": format!("{}List", info.kind),
            "apiVersion": info.api_version(),
            "metadata": meta,
            "items": objects,
        })
    };
    Ok(json_response(200, &body, &[]))
}

fn items_last_key(_all: &[(String, Arc<Value>)], items: &[(String, Arc<Value>)]) -> Option<String> {
    items.last().map(|(k, _)| k.clone())
}
