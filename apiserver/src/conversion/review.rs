//! The `ConversionReview` sent to a conversion webhook and kube's checks of the one
//! received (`getConvertedObjectsFromResponse`, `validateConvertedObject`,
//! `restoreObjectMeta` in kube's `webhook_converter.go`). Messages are kube's, without
//! the `conversion webhook for GVK ...` prefix [`super::call`] adds.

use serde_json::{Map, Value, json};

/// The review kube sends: `request.{uid, desiredAPIVersion, objects}` in
/// `apiextensions.k8s.io/<review_version>`.
pub fn request(review_version: &str, uid: &str, desired: &str, objects: &[Value]) -> Value {
    json!({
        "kind": "ConversionReview",
        "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
        "request": { "uid": uid, "desiredAPIVersion": desired, "objects": objects },
        "response": { "uid": "", "convertedObjects": null, "result": { "metadata": {} } },
    })
}

/// The converted objects of a response body, checked as kube checks them: the kind
/// and apiVersion of the review (v1 only), a response, its uid (v1 only), and
/// `result.status` Success (else the webhook's `result.message`).
pub fn converted(review_version: &str, uid: &str, body: &[u8]) -> Result<Vec<Value>, String> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|e| format!("couldn't get version/kind; json parse error: {e}"))?;
    if review_version == "v1" {
        let (av, kind) = (s(&review, "/apiVersion"), s(&review, "/kind"));
        if av != "apiextensions.k8s.io/v1" || kind != "ConversionReview" {
            let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {group}/{version}, Kind={kind}"
            ));
        }
    }
    let Some(response) = review.get("response").filter(|r| r.is_object()) else {
        return Err("no response provided".into());
    };
    if review_version == "v1" {
        let got = s(response, "/uid");
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
    }
    let status = s(response, "/result/status");
    if status != "Success" {
        let message = s(response, "/result/message");
        return Err(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_string()
        });
    }
    Ok(response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// Why a converted object was refused.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// Not at the desired `group/version`.
    GroupVersion {
        /// The desired one.
        expected: String,
        /// The object's.
        received: String,
    },
    /// Another kind than the original's.
    Kind {
        /// The original's.
        expected: String,
        /// The object's.
        received: String,
    },
    /// Another name, namespace or uid than the original's.
    Object(String),
    /// Metadata that cannot be restored, or invalid labels/annotations.
    Metadata(String),
}

/// Checks one converted object against its original and returns it with the
/// original's metadata, keeping only the webhook's labels and annotations.
pub fn check(original: &Value, mut converted: Value, desired: &str) -> Result<Value, Refused> {
    let received = s(&converted, "/apiVersion");
    if received != desired {
        return Err(Refused::GroupVersion {
            expected: desired.to_string(),
            received: received.to_string(),
        });
    }
    let (expected, received) = (s(original, "/kind"), s(&converted, "/kind"));
    if expected != received {
        return Err(Refused::Kind {
            expected: expected.to_string(),
            received: received.to_string(),
        });
    }
    for (field, label) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let ptr = format!("/metadata/{field}");
        let (a, b) = (s(original, &ptr), s(&converted, &ptr));
        if a != b {
            return Err(Refused::Object(format!(
                "must have the same {label}: {a} != {b}"
            )));
        }
    }
    restore_metadata(original, &mut converted).map_err(Refused::Metadata)?;
    Ok(converted)
}

/// kube's `restoreObjectMeta`: the original's metadata with the converted object's
/// labels and annotations (validated when they changed).
fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let response = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ));
        }
    };
    let mut meta = original
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        let theirs = match response.get(field) {
            None | Some(Value::Null) => {
                meta.remove(field);
                continue;
            }
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ));
            }
        };
        let ours = meta.get(field).and_then(Value::as_object);
        let mut changed = ours.map_or(0, Map::len) != theirs.len();
        for (k, v) in theirs {
            if !v.is_string() {
                return Err(format!(
                    "metadata.{field}[{k}] must be a string, but is {} in converted object",
                    go_type(v)
                ));
            }
            changed |= ours.and_then(|o| o.get(k)) != Some(v);
        }
        if changed {
            let errors = if field == "labels" {
                label_errors(theirs)
            } else {
                annotation_errors(theirs)
            };
            match errors.len() {
                0 => {}
                1 => return Err(errors[0].clone()),
                _ => return Err(format!("[{}]", errors.join(", "))),
            }
        }
        meta.insert(field.to_string(), Value::Object(theirs.clone()));
    }
    converted["metadata"] = Value::Object(meta);
    Ok(())
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// The Go type name kube's `%T` prints for a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// kube's `IsQualifiedName` messages for a label or annotation key.
pub(crate) fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut out = vec![];
    let (prefix, name) = match key.split('/').collect::<Vec<_>>()[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => {
            return vec![
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    .to_string(),
            ];
        }
    };
    match prefix {
        Some("") => out.push("prefix part must be non-empty".into()),
        Some(p) if !crate::objects::names::is_dns1123_subdomain(p) => out.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into()),
        _ => {}
    }
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 bytes".into());
    }
    if !name.is_empty() && !is_qualified_part(name) {
        out.push(QUALIFIED_NAME.into());
    }
    out
}

fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn label_errors(labels: &Map<String, Value>) -> Vec<String> {
    let mut out = vec![];
    for (k, v) in labels {
        for m in qualified_name_errors(k) {
            out.push(format!("metadata.labels: Invalid value: {k:?}: {m}"));
        }
        let v = v.as_str().unwrap_or("");
        if v.len() > 63 {
            out.push(format!(
                "metadata.labels: Invalid value: {v:?}: must be no more than 63 bytes"
            ));
        }
        if !v.is_empty() && !is_qualified_part(v) {
            out.push(format!(
                "metadata.labels: Invalid value: {v:?}: {LABEL_VALUE}"
            ));
        }
    }
    out
}

/// Largest total size of an object's annotations, as kube.
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

fn annotation_errors(annotations: &Map<String, Value>) -> Vec<String> {
    let mut out = vec![];
    let mut total = 0;
    for (k, v) in annotations {
        for m in qualified_name_errors(&k.to_ascii_lowercase()) {
            out.push(format!("metadata.annotation: Invalid value: {k:?}: {m}"));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_LIMIT {
        out.push(format!(
            "metadata.annotation: Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn original() -> Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": { "name": "a", "namespace": "default", "uid": "u1", "resourceVersion": "5",
                          "generation": 1, "labels": { "x": "1" } },
            "spec": { "newField": "x" },
        })
    }

    #[test]
    fn answers_are_checked_as_kube() {
        let ok = |objects: Value| {
            serde_json::to_vec(&json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": { "uid": "id", "result": { "status": "Success" }, "convertedObjects": objects },
            }))
            .unwrap()
        };
        assert_eq!(
            converted("v1", "id", &ok(json!([1]))).unwrap(),
            vec![json!(1)]
        );
        assert_eq!(
            converted("v1", "other", &ok(json!([]))).unwrap_err(),
            r#"expected response.uid="other", got "id""#
        );
        let failure = |message: &str| {
            serde_json::to_vec(&json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": { "uid": "id", "result": { "status": "Failure", "message": message } },
            }))
            .unwrap()
        };
        assert_eq!(converted("v1", "id", &failure("no")).unwrap_err(), "no");
        assert_eq!(
            converted("v1", "id", &failure("")).unwrap_err(),
            "response.result.status was 'Failure', not 'Success'"
        );
        assert_eq!(
            converted(
                "v1",
                "id",
                br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}"#
            )
            .unwrap_err(),
            "no response provided"
        );
    }

    #[test]
    fn metadata_comes_from_the_original_but_labels_from_the_webhook() {
        let mut conv = original();
        conv["apiVersion"] = json!("example.com/v1alpha1");
        conv["metadata"]["resourceVersion"] = json!("999");
        conv["metadata"]["generation"] = json!(7);
        conv["metadata"]["labels"] = json!({ "added": "yes" });
        let out = check(&original(), conv, "example.com/v1alpha1").unwrap();
        assert_eq!(out["metadata"]["resourceVersion"], "5");
        assert_eq!(out["metadata"]["generation"], 1);
        assert_eq!(out["metadata"]["labels"], json!({ "added": "yes" }));

        let mut dropped = original();
        dropped["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("labels");
        let out = check(&original(), dropped, "example.com/v1").unwrap();
        assert!(
            out["metadata"].get("labels").is_none(),
            "the webhook's (none)"
        );
    }

    #[test]
    fn refusals() {
        let mut renamed = original();
        renamed["metadata"]["name"] = json!("other");
        assert_eq!(
            check(&original(), renamed, "example.com/v1").unwrap_err(),
            Refused::Object("must have the same name: a != other".into())
        );
        assert!(matches!(
            check(&original(), original(), "example.com/v2").unwrap_err(),
            Refused::GroupVersion { .. }
        ));
        let mut bad = original();
        bad["metadata"]["labels"] = json!({ "bad key!": "x" });
        let Refused::Metadata(m) = check(&original(), bad, "example.com/v1").unwrap_err() else {
            panic!()
        };
        assert!(
            m.starts_with(r#"metadata.labels: Invalid value: "bad key!": name part must consist"#)
        );
    }
}
