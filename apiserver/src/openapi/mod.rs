//! OpenAPI documents, as kube-apiserver serves them.
//!
//! Built-in group-versions get kube-apiserver 1.36's own documents
//! ([`builtin`], captured by `scripts/kube-openapi`); custom resources get a
//! document built from their CRD ([`crd`]) at each request, so it follows CRD
//! changes. `/openapi/v3` lists each group-version with the hash of its
//! document, as kube does; kubectl reads them for `kubectl explain` and, from
//! 1.27, for whether writes take `fieldValidation` (then it leaves validation to
//! the server). kubectl < 1.27 reads `/openapi/v2` as protobuf for `explain` and
//! client-side validation: kube's v2 document plus the CRDs' definitions
//! ([`v2`]).

mod builtin;
mod crd;
mod v2;

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use serde_json::{Value, json};
use sha2::{Digest, Sha512};

use crate::registry::{Registry, ResourceInfo};

/// A serialized document and its hash (SHA-512, upper-case hex, as kube's).
#[derive(Clone, Debug)]
pub struct Document {
    bytes: Vec<u8>,
    hash: String,
}

impl Document {
    fn new(bytes: Vec<u8>) -> Document {
        let hash = Sha512::digest(&bytes)
            .iter()
            .fold(String::new(), |mut hex, b| {
                use std::fmt::Write;
                let _ = write!(hex, "{b:02X}");
                hex
            });
        Document { bytes, hash }
    }
}

/// Every `$ref` under `v`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push(r.clone());
            }
            m.values().for_each(|v| refs(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The served custom resources, as kube's CRD builder sees them.
fn custom_resources(registry: &Registry) -> Vec<Arc<ResourceInfo>> {
    registry
        .all()
        .into_iter()
        .filter(|r| r.crd.is_some())
        .collect()
}

/// The v3 document of a served group-version path (`api/v1`, `apis/G/V`).
fn v3_document(registry: &Registry, path: &str) -> Option<Document> {
    let rs: Vec<_> = registry
        .all()
        .into_iter()
        .filter(|r| gv_path(&r.group, &r.version) == path)
        .collect();
    if rs.is_empty() {
        return None;
    }
    if rs.iter().any(|r| r.crd.is_some()) {
        let doc = crd::v3_document(&rs, path, builtin::shared_schemas());
        return Some(Document::new(serde_json::to_vec(&doc).expect("JSON")));
    }
    builtin::v3_document(path).cloned()
}

/// `/openapi/v3`: each served group-version and its document's URL with hash
/// (kube labels it `text/plain`).
pub fn v3_index_response(registry: &Registry) -> Response {
    let body = serde_json::to_vec(&v3_index(registry)).expect("JSON");
    Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header("Cache-Control", "no-cache, private")
        .body(Body::from(body))
        .expect("valid response")
}

fn v3_index(registry: &Registry) -> Value {
    let mut gvs: Vec<String> = registry
        .all()
        .iter()
        .map(|r| gv_path(&r.group, &r.version))
        .collect();
    gvs.sort();
    gvs.dedup();
    let mut paths = serde_json::Map::new();
    for p in gvs {
        if let Some(doc) = v3_document(registry, &p) {
            let url = format!("/openapi/v3/{p}?hash={}", doc.hash);
            paths.insert(p, json!({ "serverRelativeURL": url }));
        }
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/G/V` (`rest` after `v3`), with the
/// `hash` the client asked for: kube's caching headers when it is current, a
/// redirect to the current one when not; `None` when not served.
pub fn v3_response(registry: &Registry, rest: &[&str], hash: Option<&str>) -> Option<Response> {
    let path = rest.join("/");
    let doc = v3_document(registry, &path)?;
    let etag = format!("\"{}\"", doc.hash);
    let b = Response::builder().header("Etag", etag);
    let b = match hash {
        Some(h) if h != doc.hash => {
            let url = format!("/openapi/v3/{path}?hash={}", doc.hash);
            return Some(
                b.status(301)
                    .header(hyper::header::LOCATION, url)
                    .body(Body::empty())
                    .expect("valid response"),
            );
        }
        Some(_) => b
            .header("Cache-Control", "public, immutable")
            .header("Expires", one_year_from_now()),
        None => b.header("Cache-Control", "no-cache, private"),
    };
    Some(
        b.status(200)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Body::from(doc.bytes))
            .expect("valid response"),
    )
}

fn one_year_from_now() -> String {
    let t = chrono::Utc::now() + chrono::Duration::days(365);
    t.format("%a, %d %b %Y %H:%M:%S UTC").to_string()
}

/// `/openapi/v2` as JSON.
pub fn v2_json(registry: &Registry) -> Response {
    let body = v2::json(&custom_resources(registry));
    Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("valid response")
}

/// `/openapi/v2` as protobuf (what kubectl < 1.27 asks for).
pub fn v2_protobuf(registry: &Registry) -> Response {
    let body = v2::protobuf(&custom_resources(registry));
    Response::builder()
        .status(200)
        .header(
            hyper::header::CONTENT_TYPE,
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        )
        .body(Body::from(body))
        .expect("valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in group-version the server serves has kube's document.
    #[test]
    fn every_builtin_group_version_is_captured() {
        let registry = Registry::with_builtins();
        for r in registry.all() {
            let p = gv_path(&r.group, &r.version);
            let doc = builtin::v3_document(&p).unwrap_or_else(|| panic!("no document for {p}"));
            let v: Value = serde_json::from_slice(&doc.bytes).unwrap();
            let gvk = json!([{ "group": r.group, "kind": r.kind, "version": r.version }]);
            let found = v["components"]["schemas"]
                .as_object()
                .unwrap()
                .values()
                .any(|s| s["x-kubernetes-group-version-kind"] == gvk);
            assert!(found, "{p} has no schema for {}", r.kind);
        }
    }
}
