//! Raw requests through a test's kube `Client`: any method, path, content
//! type and `Accept` header, for what the typed APIs cannot express.

use kube::Client;
use serde_json::Value;

/// Sends one request; the status code and the answer as JSON (`Null` when
/// the answer is not JSON).
pub async fn request(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .header("Accept", accept)
        .body(body)
        .unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    let code = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Sends `body` as JSON (a merge patch for PATCH), accepting JSON.
pub async fn json(client: &Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let content_type = match method {
        "PATCH" => "application/merge-patch+json",
        _ => "application/json",
    };
    let bytes = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    request(
        client,
        method,
        path,
        content_type,
        "application/json",
        bytes,
    )
    .await
}

/// [`json`], asserting a 2xx answer, which it returns.
pub async fn json_ok(client: &Client, method: &str, path: &str, body: Option<Value>) -> Value {
    let (code, answer) = json(client, method, path, body).await;
    assert!(code < 300, "{method} {path}: {code} {answer:#}");
    answer
}
