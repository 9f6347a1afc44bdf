//! The CRD conversion contract (the `conversion` interface of
//! `wit/gantry.wit`) as plain Rust.

use serde_json::Value;

/// A CRD converter: one object of a custom resource from the version its
/// `apiVersion` names to another.
///
/// The host calls it for the API server's `ConversionReviews`. It keeps the
/// object's metadata other than labels and annotations as it was, so a
/// converter changes only `apiVersion`, labels, annotations and the
/// object's own fields. A conversion must be lossless both ways: what one
/// version cannot hold goes into an annotation and comes back from it.
pub trait Converter {
    /// Convert `object` to `desired_api_version` (`group/version`).
    ///
    /// # Errors
    ///
    /// Why the object cannot be converted; the API server's client sees
    /// the message, and nothing is stored.
    fn convert(object: Value, desired_api_version: &str) -> Result<Value, String>;
}

/// The `version` of an object's `apiVersion` (`group/version`), if it has one.
pub fn version_of(object: &Value) -> Option<&str> {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(|api_version| api_version.rsplit('/').next().unwrap_or(api_version))
}

/// Convert each of `objects` with `C`; an error names the object it is about.
///
/// # Errors
///
/// The first object that could not be converted, with the converter's message.
pub fn convert_all<C: Converter>(
    objects: Vec<Value>,
    desired_api_version: &str,
) -> Result<Vec<Value>, String> {
    objects
        .into_iter()
        .map(|object| {
            let name = describe(&object);
            C::convert(object, desired_api_version).map_err(|e| format!("{name}: {e}"))
        })
        .collect()
}

/// `namespace/name` (or `name`) of an object, for messages.
fn describe(object: &Value) -> String {
    let text = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    match text("namespace") {
        "" => text("name").to_string(),
        namespace => format!("{namespace}/{}", text("name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Upper;

    impl Converter for Upper {
        fn convert(mut object: Value, desired: &str) -> Result<Value, String> {
            if object["spec"]["bad"] == true {
                return Err("spec.bad is set".into());
            }
            object["apiVersion"] = desired.into();
            Ok(object)
        }
    }

    #[test]
    fn each_object_is_converted_and_errors_name_it() {
        let a = json!({"apiVersion": "x.dev/v1alpha1", "metadata": {"name": "a", "namespace": "n"}, "spec": {}});
        let b = json!({"apiVersion": "x.dev/v1alpha1", "metadata": {"name": "b"}, "spec": {"bad": true}});
        let out = convert_all::<Upper>(vec![a.clone()], "x.dev/v1").unwrap();
        assert_eq!(version_of(&out[0]), Some("v1"));
        assert_eq!(
            convert_all::<Upper>(vec![a, b], "x.dev/v1").unwrap_err(),
            "b: spec.bad is set"
        );
        assert_eq!(version_of(&json!({"apiVersion": "v1"})), Some("v1"));
    }
}
