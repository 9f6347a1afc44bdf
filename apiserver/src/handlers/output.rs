//! The body a verb answers with, in the form `Accept` asks for, as kube's
//! `transformResponseObject`: the object itself, its `PartialObjectMetadata`
//! (`as=PartialObjectMetadata`), or a Table of it (`as=Table`, rows per
//! `includeObject`). A `Status` is sent as it is.

use axum::response::Response;
use serde_json::{Value, json};

use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::table::{IncludeObject, partial_object_metadata, table};

/// `obj` (one object or a Status) answered with `code` in the form `r` asks for.
pub fn object(r: &ResourceRequest, code: u16, obj: &Value, warnings: &[String]) -> Response {
    if obj.get("kind").and_then(Value::as_str) == Some("Status") {
        return json_response(code, obj, warnings);
    }
    if r.wants_table() {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(json!(""));
        let t = table(
            &r.info,
            std::slice::from_ref(obj),
            &json!({ "resourceVersion": rv }),
            IncludeObject::parse(r.query.get("includeObject")),
            true,
        );
        return json_response(code, &t, warnings);
    }
    if r.wants_metadata() {
        return json_response(code, &partial_object_metadata(obj), warnings);
    }
    json_response(code, obj, warnings)
}
