//! Responses: JSON bodies, warnings, Status errors.

use axum::body::Body;
use axum::response::Response;
use serde_json::Value;

use crate::error::ApiError;

/// A JSON response with `Warning` headers.
pub fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response {
    let mut b = Response::builder()
        .status(code)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header("Cache-Control", "no-cache, private");
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        b = b.header("Warning", format!("299 - \"{escaped}\""));
    }
    b.body(Body::from(
        serde_json::to_vec(body).expect("JSON serializes"),
    ))
    .expect("valid response")
}

/// A 200 JSON response with a specific Content-Type (e.g. aggregated discovery).
pub fn typed_json_response(body: &Value, content_type: &str) -> Response {
    Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Body::from(
            serde_json::to_vec(body).expect("JSON serializes"),
        ))
        .expect("valid response")
}

/// A plain-text response.
pub fn text_response(code: u16, text: &str) -> Response {
    Response::builder()
        .status(code)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(text.to_string()))
        .expect("valid response")
}

/// kube-apiserver's answer when it sheds a request (its max-in-flight and
/// priority-and-fairness filters): 429 with `Retry-After: 1` and a plain-text body.
pub fn too_many_requests() -> Response {
    Response::builder()
        .status(429)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .header(hyper::header::RETRY_AFTER, "1")
        .body(Body::from("Too many requests, please try again later.\n"))
        .expect("valid response")
}

/// The Status response of an error.
pub fn error_response(e: &ApiError) -> Response {
    json_response(e.code(), &e.to_status(), &[])
}
