//! Minimal OpenAPI documents: just enough for kubectl.
//!
//! kubectl (1.27+) asks `/openapi/v3` whether an endpoint supports the
//! `fieldValidation` query parameter and, if so, leaves validation to the server.
//! Older kubectl downloads `/openapi/v2` and validates only kinds it finds there:
//! an empty definitions map makes it skip client-side validation.

use serde_json::{Value, json};

use crate::registry::Registry;

/// `/openapi/v2`.
pub fn v2() -> Value {
    json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": {},
        "definitions": {}
    })
}

/// `/openapi/v2` as protobuf (what kubectl < 1.27 asks for): an empty
/// `openapi_v2.Document` is zero bytes, and makes kubectl skip client-side validation.
pub fn v2_protobuf() -> axum::response::Response {
    axum::response::Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, "application/octet-stream")
        .body(axum::body::Body::empty())
        .expect("valid response")
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group/version.
pub fn v3_index(registry: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for r in registry.all() {
        let p = gv_path(&r.group, &r.version);
        paths.insert(
            p.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{p}?hash=0") }),
        );
    }
    json!({ "paths": paths })
}

fn param(name: &str) -> Value {
    json!({ "name": name, "in": "query", "schema": { "type": "string", "uniqueItems": true } })
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
pub fn v3_group_version(registry: &Registry, rest: &[&str]) -> Option<Value> {
    let (group, version) = match rest {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let rs: Vec<_> = registry
        .all()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let write_params = json!([
        param("dryRun"),
        param("fieldManager"),
        param("fieldValidation"),
        param("force")
    ]);
    for r in rs {
        let gvk = json!({ "group": r.group, "version": r.version, "kind": r.kind });
        let base = if r.namespaced {
            format!(
                "/{}/namespaces/{{namespace}}/{}",
                gv_path(group, version),
                r.plural
            )
        } else {
            format!("/{}/{}", gv_path(group, version), r.plural)
        };
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", r.kind),
                "parameters": write_params,
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "responses": { "200": { "description": "OK" } }
            })
        };
        paths.insert(base.clone(), json!({ "post": op("post") }));
        paths.insert(
            format!("{base}/{{name}}"),
            json!({ "put": op("put"), "patch": op("patch") }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": {} }
    }))
}
