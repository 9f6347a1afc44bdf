//! Request bodies: size limit and decoding by content type.

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// Reads the whole body, failing with 413 above `limit` bytes.
pub async fn read_body(body: Body, limit: usize) -> ApiResult<Bytes> {
    let limited = http_body_util::Limited::new(body, limit);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::TooLarge(format!(
                "Request entity too large: limit is {limit}"
            )))
        }
        Err(e) => Err(ApiError::bad_request(format!("reading request body: {e}"))),
    }
}

/// Decodes a JSON body.
pub fn json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))
}

/// Decodes a YAML (or JSON) body.
pub fn yaml(body: &[u8]) -> ApiResult<Value> {
    let v: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    Ok(v)
}

/// Decodes an object body (create/update) by Content-Type: JSON or YAML; 415 otherwise.
pub fn object(content_type: &str, body: &[u8]) -> ApiResult<Value> {
    let v = match content_type {
        "" | "application/json" | "*/*" => json(body)?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => yaml(body)?,
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(body)?,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other})"
            )));
        }
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(v)
}
