//! HTTP: the router, request parsing, body decoding, responses.
//!
//! Every request enters [`handle`]: [`crate::access`] checks, then non-resource paths
//! (version, discovery, openapi), then resource paths which are parsed into a
//! [`request::ResourceRequest`] and dispatched to [`crate::handlers`] by verb.

pub mod body;
pub mod depth;
pub mod request;
pub mod respond;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use hyper::{Method, Request};

use crate::app::App;
use crate::error::ApiError;
use crate::{discovery, handlers, openapi};
use request::{Query, ResourceRequest, Verb};
use respond::{error_response, json_response};

/// The router serving the whole API.
pub fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

/// Handles one request (and logs it at debug level).
pub async fn handle(State(app): State<Arc<App>>, req: Request<Body>) -> Response {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let resp = route(app, req).await;
    tracing::debug!(%method, %uri, status = resp.status().as_u16(), "request");
    resp
}

async fn route(app: Arc<App>, req: Request<Body>) -> Response {
    if let Err(e) = crate::access::check(&app.config, app.config.listen, &req) {
        return error_response(&e);
    }
    let path = req.uri().path().to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let method = req.method().clone();
    let query = Query::parse(req.uri().query());
    let get = method == Method::GET;
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    match segs.as_slice() {
        [] if get => json_response(200, &discovery::root_paths(), &[]),
        ["version"] if get => json_response(200, &discovery::version(), &[]),
        ["healthz" | "livez" | "readyz", ..] if get => respond::text_response(200, "ok"),
        ["api" | "apis"] if get && discovery::wants_aggregated(&accept).is_some() => {
            let v = discovery::wants_aggregated(&accept).unwrap_or("v2");
            let doc = discovery::aggregated(&app.registry, segs[0] == "api", v);
            respond::typed_json_response(
                &doc,
                &format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"),
            )
        }
        ["api"] if get => json_response(200, &discovery::core_versions(app.config.listen), &[]),
        ["apis"] if get => json_response(200, &discovery::group_list(&app.registry), &[]),
        ["apis", group] if get => match discovery::group(&app.registry, group) {
            Some(g) => json_response(200, &g, &[]),
            None => respond::page_not_found(),
        },
        ["openapi", "v2"] | ["swagger-2.0.0.pb-v1"] if get && accept.contains("protobuf") => {
            openapi::v2_protobuf()
        }
        ["openapi", "v2"] if get => json_response(200, &openapi::v2(), &[]),
        ["openapi", "v3"] if get => json_response(200, &openapi::v3_index(&app.registry), &[]),
        ["openapi", "v3", rest @ ..] if get => match openapi::v3_group_version(&app.registry, rest)
        {
            Some(doc) => json_response(200, &doc, &[]),
            None => error_response(&not_found_path()),
        },
        ["api", "v1", rest @ ..] => resource(app, "", "v1", rest, req, query, accept).await,
        ["apis", group, version, rest @ ..] => {
            let (g, v) = (group.to_string(), version.to_string());
            resource(app, &g, &v, rest, req, query, accept).await
        }
        _ if !get => error_response(&ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource".into(),
        )),
        ["api", ..] => error_response(&not_found_path()),
        // kube's mux: paths outside the API groups it serves.
        _ => respond::page_not_found(),
    }
}

/// kube's generic 404 (`NewGenericServerResponse`): empty `details`.
fn not_found_path() -> ApiError {
    ApiError::NotFound {
        message: "the server could not find the requested resource".into(),
        details: Some(crate::error::Details::default()),
    }
}

async fn resource(
    app: Arc<App>,
    group: &str,
    version: &str,
    rest: &[&str],
    req: Request<Body>,
    query: Query,
    accept: String,
) -> Response {
    if !group.is_empty() && discovery::group(&app.registry, group).is_none() {
        // A group not served is not the API's: kube's mux answers.
        return respond::page_not_found();
    }
    if rest.is_empty() {
        if req.method() != Method::GET {
            return error_response(&ApiError::MethodNotAllowed(
                "the server does not allow this method on the requested resource".into(),
            ));
        }
        return match discovery::resource_list(&app.registry, group, version) {
            Some(list) => json_response(200, &list, &[]),
            None => error_response(&not_found_path()),
        };
    }
    let Some(parsed) = request::parse_resource_path(rest) else {
        return error_response(&not_found_path());
    };
    let Some(info) = app.registry.get(group, version, &parsed.resource) else {
        return error_response(&not_found_path());
    };
    if parsed.namespace.is_some() && !info.namespaced {
        return error_response(&not_found_path());
    }
    if let Some(sub) = &parsed.subresource {
        let ok = match sub.as_str() {
            "status" => info.has_status,
            "scale" => info.scale.is_some(),
            "finalize" => info.group.is_empty() && info.plural == "namespaces",
            _ => false,
        };
        if !ok {
            return error_response(&not_found_path());
        }
    }
    let (parts, body) = req.into_parts();
    let bytes = match body::read_body(body, app.config.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    let content_type = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if let Err(e) = depth::check(content_type, &bytes) {
        return error_response(&e);
    }
    let Some(verb) = Verb::of(&parts.method, parsed.name.is_some(), &query) else {
        return error_response(&ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({})",
            parts.method
        )));
    };
    let rr = ResourceRequest {
        info,
        namespace: parsed.namespace,
        name: parsed.name,
        subresource: parsed.subresource,
        query,
        headers: parts.headers,
        body: bytes,
        accept,
        verb,
        user: if app.config.token.is_some() {
            crate::admission::UserInfo::admin()
        } else {
            crate::admission::UserInfo::anonymous()
        },
    };
    let dry_run = rr.dry_run();
    let (verb_name, resource_name) = (rr.verb.as_str(), rr.counted_resource());
    let response = match handlers::dispatch(&app, rr).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    if verb.is_write() && response.status().is_success() && !dry_run {
        app.count_write(verb_name, resource_name);
    }
    response
}
