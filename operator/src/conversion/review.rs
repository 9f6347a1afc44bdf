//! `apiextensions.k8s.io/v1` `ConversionReview` in and out, and the checks a
//! converter's answer must pass before the API server sees it.
//!
//! An answer keeps every object's identity: as many objects as were sent,
//! in order, each at the desired version and of its original kind. Metadata
//! other than labels and annotations is put back as it was sent (the API
//! server does the same), so a converter cannot rename, move or re-own an
//! object.

use serde_json::{Map, Value, json};

/// What a `ConversionReview` asks.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversionRequest {
    /// The review's `request.uid`, echoed in the answer.
    pub uid: String,
    /// `group/version` to convert to.
    pub desired_api_version: String,
    /// The objects, each at its own version.
    pub objects: Vec<Value>,
}

/// Read a `ConversionReview` v1.
pub fn parse_review(body: &[u8]) -> Result<ConversionRequest, String> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| format!("not a ConversionReview: {e}"))?;
    if review["apiVersion"] != "apiextensions.k8s.io/v1" || review["kind"] != "ConversionReview" {
        return Err(format!(
            "expected an apiextensions.k8s.io/v1 ConversionReview, got {} {}",
            review["apiVersion"], review["kind"]
        ));
    }
    let request = &review["request"];
    let text = |field: &str| {
        request[field]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("request.{field} is missing"))
    };
    let objects = request["objects"]
        .as_array()
        .cloned()
        .ok_or("request.objects is missing")?;
    Ok(ConversionRequest {
        uid: text("uid")?,
        desired_api_version: text("desiredAPIVersion")?,
        objects,
    })
}

/// The `ConversionReview` that answers `uid`: the converted objects, or a
/// failure with `message`, which the API server passes to its client.
pub fn answer(uid: &str, result: Result<Vec<Value>, String>) -> Value {
    let response = match result {
        Ok(objects) => json!({
            "uid": uid,
            "convertedObjects": objects,
            "result": {"status": "Success"},
        }),
        Err(message) => json!({
            "uid": uid,
            "convertedObjects": [],
            "result": {"status": "Failure", "message": message},
        }),
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": response,
    })
}

/// `namespace/name` (or `name`) of an object, for messages.
pub fn describe(object: &Value) -> String {
    let text = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match text("namespace").as_str() {
        "" => text("name"),
        namespace => format!("{namespace}/{}", text("name")),
    }
}

/// The group of `group/version` (empty for the core group).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Check that `request` is for the CRD of `group` before any plugin sees
/// it: the desired version and every object in that group.
pub fn check_request(request: &ConversionRequest, group: &str) -> Result<(), String> {
    if group_of(&request.desired_api_version) != group {
        return Err(format!(
            "desiredAPIVersion {} is not in group {group}",
            request.desired_api_version
        ));
    }
    for (i, object) in request.objects.iter().enumerate() {
        let api_version = object["apiVersion"].as_str().unwrap_or("");
        if group_of(api_version) != group {
            return Err(format!(
                "object {i} has apiVersion {api_version:?}, not in group {group}"
            ));
        }
    }
    Ok(())
}

/// A converter's `converted` answer for `originals`, checked and with
/// each original's metadata restored except labels and annotations.
pub fn check_answer(
    originals: &[Value],
    converted: Vec<Value>,
    desired_api_version: &str,
) -> Result<Vec<Value>, String> {
    if converted.len() != originals.len() {
        return Err(format!(
            "the converter returned {} objects for {} sent",
            converted.len(),
            originals.len()
        ));
    }
    originals
        .iter()
        .zip(converted)
        .enumerate()
        .map(|(i, (original, mut object))| {
            if object["apiVersion"] != desired_api_version {
                return Err(format!(
                    "object {i} came back at apiVersion {}, not {desired_api_version}",
                    object["apiVersion"]
                ));
            }
            if object["kind"] != original["kind"] {
                return Err(format!(
                    "object {i} came back as kind {}, not {}",
                    object["kind"], original["kind"]
                ));
            }
            if !object["metadata"].is_object() {
                return Err(format!("object {i} came back without metadata"));
            }
            object["metadata"] = Value::Object(restore_metadata(i, original, &object)?);
            Ok(object)
        })
        .collect()
}

/// The original's metadata with the converted object's labels and
/// annotations (each a map of strings).
fn restore_metadata(
    i: usize,
    original: &Value,
    converted: &Value,
) -> Result<Map<String, Value>, String> {
    let mut metadata = original["metadata"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match converted.pointer(&format!("/metadata/{field}")) {
            None | Some(Value::Null) => {
                metadata.remove(field);
            }
            Some(Value::Object(map)) if map.values().all(Value::is_string) => {
                if map.is_empty() {
                    metadata.remove(field);
                } else {
                    metadata.insert(field.to_string(), Value::Object(map.clone()));
                }
            }
            Some(_) => {
                return Err(format!(
                    "object {i}: metadata.{field} must be a map of strings"
                ));
            }
        }
    }
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(version: &str, name: &str) -> Value {
        json!({
            "apiVersion": format!("example.gantry.dev/{version}"),
            "kind": "MyResource",
            "metadata": {"name": name, "namespace": "ns", "uid": "u-1", "labels": {"a": "1"}},
            "spec": {"replicas": 2},
        })
    }

    #[test]
    fn reviews_are_read_and_answered() {
        let body = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "r1", "desiredAPIVersion": "example.gantry.dev/v1", "objects": [object("v1alpha1", "a")]},
        });
        let request = parse_review(body.to_string().as_bytes()).unwrap();
        assert_eq!(request.uid, "r1");
        assert_eq!(request.objects.len(), 1);
        check_request(&request, "example.gantry.dev").unwrap();
        let err = check_request(&request, "other.dev").unwrap_err();
        assert!(err.contains("not in group other.dev"), "{err}");
        let failure = answer("r1", Err("no".into()));
        assert_eq!(
            failure["response"]["result"],
            json!({"status": "Failure", "message": "no"})
        );
        assert_eq!(failure["response"]["uid"], "r1");
        assert!(
            parse_review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#)
                .is_err()
        );
        let no_uid = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {"desiredAPIVersion": "x/v1", "objects": []}});
        assert_eq!(
            parse_review(no_uid.to_string().as_bytes()).unwrap_err(),
            "request.uid is missing"
        );
    }

    #[test]
    fn answers_keep_identity_and_metadata() {
        let original = object("v1alpha1", "a");
        let mut converted = object("v1", "renamed");
        converted["metadata"]["uid"] = "forged".into();
        converted["metadata"]["ownerReferences"] = json!([{"name": "x"}]);
        converted["metadata"]["annotations"] = json!({"kept": "yes"});
        converted["metadata"]["labels"] = json!({});
        let out = check_answer(
            std::slice::from_ref(&original),
            vec![converted],
            "example.gantry.dev/v1",
        )
        .unwrap();
        assert_eq!(
            out[0]["metadata"],
            json!({"name": "a", "namespace": "ns", "uid": "u-1", "annotations": {"kept": "yes"}})
        );

        let err = check_answer(
            std::slice::from_ref(&original),
            vec![],
            "example.gantry.dev/v1",
        )
        .unwrap_err();
        assert_eq!(err, "the converter returned 0 objects for 1 sent");
        let err = check_answer(
            std::slice::from_ref(&original),
            vec![object("v1alpha1", "a")],
            "example.gantry.dev/v1",
        )
        .unwrap_err();
        assert!(err.contains("not example.gantry.dev/v1"), "{err}");
        let mut other_kind = object("v1", "a");
        other_kind["kind"] = "Other".into();
        let err = check_answer(
            std::slice::from_ref(&original),
            vec![other_kind],
            "example.gantry.dev/v1",
        )
        .unwrap_err();
        assert!(err.contains("as kind \"Other\""), "{err}");
        let mut bad_labels = object("v1", "a");
        bad_labels["metadata"]["labels"] = json!({"a": 1});
        let err = check_answer(&[original], vec![bad_labels], "example.gantry.dev/v1").unwrap_err();
        assert!(
            err.contains("metadata.labels must be a map of strings"),
            "{err}"
        );
    }
}
