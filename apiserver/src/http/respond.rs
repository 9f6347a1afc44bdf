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
    b.body(Body::from(json_bytes(body)))
        .expect("valid response")
}

/// A body as kube's JSON encoder writes it: a `Status` with its fields in Go's
/// order (other objects' keys sorted), then a newline.
pub fn json_bytes(body: &Value) -> Vec<u8> {
    let mut out = String::new();
    if body.get("kind").and_then(Value::as_str) == Some("Status") {
        write_ordered(body, STATUS, &mut out);
    } else {
        out = body.to_string();
    }
    out.push('\n');
    out.into_bytes()
}

/// Go's field order of `metav1.Status` and of its parts.
const STATUS: &[&str] = &[
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];
const LIST_META: &[&str] = &[
    "selfLink",
    "resourceVersion",
    "continue",
    "remainingItemCount",
];
const DETAILS: &[&str] = &[
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];
const CAUSE: &[&str] = &["reason", "message", "field"];

/// Writes `v` with the keys of its objects in `order` (the rest after, sorted);
/// the Status parts below get their own order.
fn write_ordered(v: &Value, order: &[&str], out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(order.len()));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                let inner = match (order == STATUS || order == DETAILS, k.as_str()) {
                    (true, "metadata") => LIST_META,
                    (true, "details") => DETAILS,
                    (true, "causes") => CAUSE,
                    _ => &[],
                };
                write_ordered(&m[k], inner, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_ordered(item, order, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A 200 JSON response with a specific Content-Type (e.g. aggregated discovery).
pub fn typed_json_response(body: &Value, content_type: &str) -> Response {
    Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Body::from(json_bytes(body)))
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

/// kube's mux for a path outside the API it serves (an unknown group, `/foo`):
/// plain-text `404 page not found`.
pub fn page_not_found() -> Response {
    Response::builder()
        .status(404)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .body(Body::from("404 page not found\n"))
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
    let status = e.to_status();
    let mut response = json_response(e.code(), &status, &[]);
    // kube sends a Status's retry delay as `Retry-After` too.
    if let Some(seconds) = status
        .pointer("/details/retryAfterSeconds")
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
    {
        response
            .headers_mut()
            .insert(hyper::header::RETRY_AFTER, seconds.into());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_in_go_order() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "m", "reason": "Invalid", "code": 422,
            "details": {"name": "a", "kind": "widgets", "group": "g",
                "causes": [{"field": "f", "message": "bad", "reason": "FieldValueInvalid"}]}});
        assert_eq!(
            String::from_utf8(json_bytes(&status)).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"Invalid","details":{"name":"a","group":"g","kind":"widgets","causes":[{"reason":"FieldValueInvalid","message":"bad","field":"f"}]},"code":422}"#.to_string() + "\n"
        );
    }
}
