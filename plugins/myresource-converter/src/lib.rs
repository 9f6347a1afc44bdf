//! The conversion webhook of `MyResource` as a Gantry converter:
//! `example.com/v1alpha1` ↔ `example.com/v1`.
//!
//! | v1alpha1               | v1                                        |
//! |------------------------|-------------------------------------------|
//! | `spec.replicas`        | `spec.instances` (renamed)                |
//! | `spec.image: "r:t@d"`  | `spec.image: {repository, tag, digest}` (split) |
//! | —                      | `spec.paused` (new in v1)                 |
//!
//! Every other field goes across unchanged. What v1alpha1 cannot hold (the
//! fields new in v1) travels in the annotation [`V1_FIELDS`] while an
//! object is at v1alpha1, and comes back from it at v1, so a round trip
//! either way gives the object back unchanged.

use gantry_sdk::conversion::version_of;
use gantry_sdk::{Converter, Value, json};

/// Annotation holding, at v1alpha1, the v1 fields that version lacks.
pub const V1_FIELDS: &str = "myresource.example.com/v1-fields";
/// Spec fields only v1 has.
const V1_ONLY: &[&str] = &["paused"];

/// The converter.
pub struct MyResourceConverter;

impl Converter for MyResourceConverter {
    fn convert(mut object: Value, desired_api_version: &str) -> Result<Value, String> {
        let from = version_of(&object).unwrap_or_default().to_string();
        let to = desired_api_version
            .rsplit('/')
            .next()
            .unwrap_or(desired_api_version);
        match (from.as_str(), to) {
            (a, b) if a == b => {}
            ("v1alpha1", "v1") => up(&mut object)?,
            ("v1", "v1alpha1") => down(&mut object)?,
            (a, b) => return Err(format!("cannot convert MyResource from {a} to {b}")),
        }
        object["apiVersion"] = desired_api_version.into();
        Ok(object)
    }
}

gantry_sdk::export_converter!(MyResourceConverter);

/// `repository[:tag][@digest]` split into its parts; a `:` before the last
/// `/` is a registry port, not a tag.
pub fn split_image(image: &str) -> Value {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match name[slash..].rfind(':') {
        Some(i) => (&name[..slash + i], Some(&name[slash + i + 1..])),
        None => (name, None),
    };
    let mut parts = json!({"repository": repository});
    if let Some(tag) = tag {
        parts["tag"] = tag.into();
    }
    if let Some(digest) = digest {
        parts["digest"] = digest.into();
    }
    parts
}

/// The parts of an image joined again; refuses a repository that would
/// not split back into itself.
pub fn join_image(parts: &Value) -> Result<String, String> {
    let text = |field: &str| -> Result<Option<&str>, String> {
        match parts.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("spec.image.{field} must be a string, not {other}")),
        }
    };
    let repository = text("repository")?.ok_or("spec.image.repository is missing")?;
    let last = &repository[repository.rfind('/').map_or(0, |i| i + 1)..];
    if repository.contains('@') || last.contains(':') {
        return Err(format!(
            "spec.image.repository {repository:?} must not carry a tag or digest; use spec.image.tag and spec.image.digest"
        ));
    }
    let mut image = repository.to_string();
    if let Some(tag) = text("tag")? {
        image = format!("{image}:{tag}");
    }
    if let Some(digest) = text("digest")? {
        image = format!("{image}@{digest}");
    }
    Ok(image)
}

fn spec_of(object: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    object.get_mut("spec").and_then(Value::as_object_mut)
}

fn annotations_of(object: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
}

/// v1alpha1 → v1.
fn up(object: &mut Value) -> Result<(), String> {
    let kept = match annotations_of(object).and_then(|a| a.remove(V1_FIELDS)) {
        Some(Value::String(text)) => Some(
            serde_json::from_str::<serde_json::Map<String, Value>>(&text)
                .map_err(|e| format!("annotation {V1_FIELDS} is not a JSON object: {e}"))?,
        ),
        Some(_) => return Err(format!("annotation {V1_FIELDS} is not a string")),
        None => None,
    };
    if annotations_of(object).is_some_and(|a| a.is_empty())
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.remove("annotations");
    }
    let Some(spec) = spec_of(object) else {
        return Ok(());
    };
    if let Some(replicas) = spec.remove("replicas") {
        spec.insert("instances".into(), replicas);
    }
    match spec.remove("image") {
        Some(Value::String(image)) => {
            spec.insert("image".into(), split_image(&image));
        }
        Some(other) => {
            return Err(format!(
                "spec.image must be a string at v1alpha1, not {other}"
            ));
        }
        None => {}
    }
    for (field, value) in kept.into_iter().flatten() {
        spec.insert(field, value);
    }
    Ok(())
}

/// v1 → v1alpha1.
fn down(object: &mut Value) -> Result<(), String> {
    let mut kept = serde_json::Map::new();
    if let Some(spec) = spec_of(object) {
        if let Some(instances) = spec.remove("instances") {
            spec.insert("replicas".into(), instances);
        }
        if let Some(parts) = spec.remove("image") {
            spec.insert("image".into(), join_image(&parts)?.into());
        }
        for field in V1_ONLY {
            if let Some(value) = spec.remove(*field) {
                kept.insert((*field).to_string(), value);
            }
        }
    }
    if !kept.is_empty() {
        let metadata = object
            .as_object_mut()
            .ok_or("the object is not a JSON object")?
            .entry("metadata")
            .or_insert_with(|| json!({}));
        let annotations = metadata
            .as_object_mut()
            .ok_or("metadata is not an object")?
            .entry("annotations")
            .or_insert_with(|| json!({}));
        annotations[V1_FIELDS] = Value::Object(kept).to_string().into();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha(image: &str) -> Value {
        json!({
            "apiVersion": "example.com/v1alpha1", "kind": "MyResource",
            "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
            "spec": {"replicas": 3, "image": image, "owner": "ops"},
        })
    }

    fn convert(object: Value, to: &str) -> Value {
        MyResourceConverter::convert(object, to).unwrap()
    }

    #[test]
    fn up_renames_and_splits() {
        let v1 = convert(alpha("registry:5000/web:1.2@sha256:ab"), "example.com/v1");
        assert_eq!(
            v1["spec"],
            json!({"instances": 3, "owner": "ops", "image": {
                "repository": "registry:5000/web", "tag": "1.2", "digest": "sha256:ab"}})
        );
        assert_eq!(v1["apiVersion"], "example.com/v1");
    }

    #[test]
    fn round_trips_are_lossless_both_ways() {
        for image in [
            "web",
            "web:",
            "web:1",
            "host:5000/web",
            "web@sha256:1",
            "a/b:c@d",
        ] {
            let original = alpha(image);
            let back = convert(
                convert(original.clone(), "example.com/v1"),
                "example.com/v1alpha1",
            );
            assert_eq!(back, original, "{image}");
        }
        let mut v1 = convert(alpha("web:1"), "example.com/v1");
        v1["spec"]["paused"] = true.into();
        let alpha = convert(v1.clone(), "example.com/v1alpha1");
        assert_eq!(
            alpha["metadata"]["annotations"][V1_FIELDS],
            r#"{"paused":true}"#
        );
        assert!(alpha["spec"].get("paused").is_none());
        assert_eq!(convert(alpha, "example.com/v1"), v1);
    }

    #[test]
    fn what_cannot_be_converted_says_why() {
        let mut v1 = convert(alpha("web:1"), "example.com/v1");
        v1["spec"]["image"]["repository"] = "web:2".into();
        let err = MyResourceConverter::convert(v1, "example.com/v1alpha1").unwrap_err();
        assert!(err.contains("must not carry a tag"), "{err}");
        let err = MyResourceConverter::convert(alpha("web"), "example.com/v2").unwrap_err();
        assert_eq!(err, "cannot convert MyResource from v1alpha1 to v2");
    }
}
