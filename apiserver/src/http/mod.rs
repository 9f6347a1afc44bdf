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

use crate::admission::UserInfo;
use crate::app::App;
use crate::auth::{self, rbac::Attributes};
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
    if let Err(e) = crate::access::check(app.config.listen, &req) {
        return error_response(&e);
    }
    let user = match auth::authenticate(&app, &req) {
        Ok(user) => user,
        Err(e) => return error_response(&e),
    };
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
    let resource_path = matches!(
        segs.as_slice(),
        ["api", "v1", _, ..] | ["apis", _, _, _, ..]
    );
    if !resource_path {
        let attributes = Attributes::NonResource {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.clone(),
        };
        if let Err(e) = auth::authorize(&app.store, &user, &attributes) {
            return error_response(&e);
        }
    }
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
            openapi::v2_protobuf(&app.registry)
        }
        ["openapi", "v2"] if get => openapi::v2_json(&app.registry),
        ["openapi", "v3"] if get => openapi::v3_index_response(&app.registry),
        ["openapi", "v3", rest @ ..] if get => {
            match openapi::v3_response(&app.registry, rest, query.get("hash")) {
                Some(response) => response,
                None => error_response(&not_found_path()),
            }
        }
        ["api", "v1", rest @ ..] => {
            let target = Target {
                group: "",
                version: "v1",
                rest,
            };
            resource(app, target, user, req, query, accept).await
        }
        ["apis", group, version, rest @ ..] => {
            let target = Target {
                group,
                version,
                rest,
            };
            resource(app, target, user, req, query, accept).await
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

/// The group, version and the rest of a resource path.
struct Target<'a> {
    group: &'a str,
    version: &'a str,
    rest: &'a [&'a str],
}

/// The verb kube's authorizer sees: `create` for every POST, else as the
/// handlers' verb.
fn authorization_verb(method: &Method, named: bool, query: &Query) -> String {
    if *method == Method::POST {
        return "create".into();
    }
    Verb::of(method, named, query).map_or_else(
        || method.as_str().to_ascii_lowercase(),
        |v| v.as_str().to_string(),
    )
}

async fn resource(
    app: Arc<App>,
    target: Target<'_>,
    user: UserInfo,
    req: Request<Body>,
    query: Query,
    accept: String,
) -> Response {
    let Target {
        group,
        version,
        rest,
    } = target;
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
    let attributes = Attributes::Resource {
        verb: authorization_verb(req.method(), parsed.name.is_some(), &query),
        namespace: parsed.namespace.clone().unwrap_or_default(),
        group: group.to_string(),
        resource: parsed.resource.clone(),
        subresource: parsed.subresource.clone().unwrap_or_default(),
        name: parsed.name.clone().unwrap_or_default(),
    };
    if let Err(e) = auth::authorize(&app.store, &user, &attributes) {
        return error_response(&e);
    }
    if let Some(plural) = auth::reviews::plural(group, version, &parsed) {
        return review(&app, &user, plural, parsed.namespace.as_deref(), req).await;
    }
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
            "token" => info.group.is_empty() && info.plural == "serviceaccounts",
            "eviction" | "ephemeralcontainers" => info.group.is_empty() && info.plural == "pods",
            "approval" => crate::certificates::is_csr(&info),
            _ => false,
        };
        if !ok {
            return error_response(&not_found_path());
        }
        if sub == "token" {
            return token_request(&app, &parsed, req).await;
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
    // A POST to a named object's subresource (`pods/NAME/eviction`) creates, as
    // kube's named creaters do.
    let verb = if parts.method == Method::POST && parsed.subresource.is_some() {
        Some(Verb::Create)
    } else {
        Verb::of(&parts.method, parsed.name.is_some(), &query)
    };
    let Some(verb) = verb else {
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
        user,
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

/// The body of a POST, decoded as kube decodes it (JSON, YAML, protobuf);
/// other methods are not allowed.
async fn posted_object(app: &App, req: Request<Body>) -> Result<serde_json::Value, ApiError> {
    if req.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({})",
            req.method()
        )));
    }
    let (parts, body) = req.into_parts();
    let bytes = body::read_body(body, app.config.max_body_bytes).await?;
    let content_type = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    depth::check(content_type, &bytes)?;
    body::object(content_type, &bytes)
}

/// A review (`kubectl auth can-i`, `auth whoami`, a webhook's access or
/// token review), answered with 201 as kube answers the create it is.
async fn review(
    app: &App,
    user: &UserInfo,
    plural: &str,
    namespace: Option<&str>,
    req: Request<Body>,
) -> Response {
    let answer = match posted_object(app, req).await {
        Ok(body) => auth::reviews::answer(app, user, plural, namespace, &body),
        Err(e) => Err(e),
    };
    match answer {
        Ok(review) => json_response(201, &review, &[]),
        Err(e) => error_response(&e),
    }
}

/// A `TokenRequest` for the service account the path names (`kubectl create
/// token`): 201 with a token, 404 when the account does not exist.
async fn token_request(app: &App, parsed: &request::ResourcePath, req: Request<Body>) -> Response {
    let namespace = parsed.namespace.clone().unwrap_or_default();
    let name = parsed.name.clone().unwrap_or_default();
    let body = match posted_object(app, req).await {
        Ok(body) => body,
        Err(e) => return error_response(&e),
    };
    match auth::tokens::issue_for(app, &namespace, &name, &body) {
        Ok(answer) => json_response(201, &answer, &[]),
        Err(e) => error_response(&e),
    }
}
