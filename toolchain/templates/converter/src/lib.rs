//! A CRD converter made by `gantry plugin new --converter`: Greeting
//! `example.com/v1alpha1` ↔ `example.com/v1`.
//!
//! | v1alpha1      | v1                           |
//! |---------------|------------------------------|
//! | `spec.name`   | `spec.who` (renamed)         |
//! | —             | `spec.style` (new in v1)     |
//!
//! What v1alpha1 cannot hold (`spec.style`) travels in the annotation
//! [`V1_FIELDS`] while an object is stored or read at v1alpha1, so a round
//! trip either way gives the object back unchanged: the API server and
//! Gantry's shadow run both rely on that. Replace the mapping with yours.

use gantry_sdk::conversion::version_of;
use gantry_sdk::{Converter, Value};

/// Annotation holding, at v1alpha1, the v1 spec fields that version lacks.
pub const V1_FIELDS: &str = "greetings.example.com/v1-fields";

/// The converter.
pub struct GreetingConverter;

impl Converter for GreetingConverter {
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
            (a, b) => return Err(format!("cannot convert a Greeting from {a} to {b}")),
        }
        object["apiVersion"] = desired_api_version.into();
        Ok(object)
    }
}

gantry_sdk::export_converter!(GreetingConverter);

type Map = serde_json::Map<String, Value>;

fn spec_of(object: &mut Value) -> Option<&mut Map> {
    object.get_mut("spec").and_then(Value::as_object_mut)
}

fn annotations_of(object: &mut Value) -> Option<&mut Map> {
    object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
}

/// v1alpha1 → v1: rename `name` to `who`, restore the v1-only fields.
fn up(object: &mut Value) -> Result<(), String> {
    let kept = match annotations_of(object).and_then(|a| a.remove(V1_FIELDS)) {
        Some(Value::String(text)) => serde_json::from_str::<Map>(&text)
            .map_err(|e| format!("annotation {V1_FIELDS} is not a JSON object: {e}"))?,
        Some(_) => return Err(format!("annotation {V1_FIELDS} is not a string")),
        None => Map::new(),
    };
    if annotations_of(object).is_some_and(|a| a.is_empty())
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.remove("annotations");
    }
    if let Some(spec) = spec_of(object) {
        if let Some(name) = spec.remove("name") {
            spec.insert("who".into(), name);
        }
        spec.extend(kept);
    }
    Ok(())
}

/// v1 → v1alpha1: rename `who` to `name`, keep the v1-only fields in the
/// annotation.
fn down(object: &mut Value) -> Result<(), String> {
    let mut kept = Map::new();
    if let Some(spec) = spec_of(object) {
        if let Some(who) = spec.remove("who") {
            spec.insert("name".into(), who);
        }
        if let Some(style) = spec.remove("style") {
            kept.insert("style".into(), style);
        }
    }
    if !kept.is_empty() {
        let metadata = object
            .as_object_mut()
            .ok_or("the object is not a JSON object")?
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or("metadata is not an object")?;
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or("metadata.annotations is not an object")?;
        annotations.insert(V1_FIELDS.into(), Value::Object(kept).to_string().into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_sdk::json;

    fn convert(object: Value, to: &str) -> Value {
        GreetingConverter::convert(object, to).unwrap()
    }

    #[test]
    fn a_round_trip_from_either_version_is_lossless() {
        let alpha = json!({
            "apiVersion": "example.com/v1alpha1", "kind": "Greeting",
            "metadata": {"name": "hello", "annotations": {"team": "a"}},
            "spec": {"name": "world"},
        });
        let v1 = convert(alpha.clone(), "example.com/v1");
        assert_eq!(v1["spec"], json!({"who": "world"}));
        assert_eq!(convert(v1, "example.com/v1alpha1"), alpha);

        let v1 = json!({
            "apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": "hello"},
            "spec": {"who": "world", "style": "formal"},
        });
        let alpha = convert(v1.clone(), "example.com/v1alpha1");
        assert_eq!(alpha["spec"], json!({"name": "world"}));
        assert_eq!(convert(alpha, "example.com/v1"), v1);
    }

    #[test]
    fn unknown_versions_and_broken_annotations_are_refused() {
        let odd = json!({"apiVersion": "example.com/v2", "kind": "Greeting"});
        assert!(GreetingConverter::convert(odd, "example.com/v1").is_err());
        let broken = json!({
            "apiVersion": "example.com/v1alpha1", "kind": "Greeting",
            "metadata": {"annotations": {V1_FIELDS: "not json"}},
        });
        let error = GreetingConverter::convert(broken, "example.com/v1").unwrap_err();
        assert!(error.contains(V1_FIELDS), "{error}");
    }
}
