//! Reading Kubernetes objects and config from YAML or JSON files.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

/// Every object in a YAML/JSON file: documents of a multi-document stream,
/// and the `items` of `kind: List` documents. Empty documents are skipped.
pub fn read_objects(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    // One message with the path in front, as the document's error reads.
    parse_objects(&text).map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))
}

/// Every object in YAML/JSON `text`, as [`read_objects`] reads a file.
pub fn parse_objects(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .with_context(|| format!("document {} is not valid YAML", index + 1))?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                let items = map
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                objects.extend(items);
            }
            Value::Object(_) => objects.push(value),
            other => bail!(
                "document {} is not an object but {}",
                index + 1,
                type_name(&other)
            ),
        }
    }
    Ok(objects)
}

/// Exactly one object from `path`.
pub fn read_object(path: &Path) -> anyhow::Result<Value> {
    let mut objects = read_objects(path)?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        n => bail!("{}: expected one object, found {n}", path.display()),
    }
}

/// Any YAML/JSON value (a plugin's config).
pub fn read_value(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text)
        .with_context(|| format!("{} is not valid YAML or JSON", path.display()))
}

/// A value's JSON type, for messages: "a string", "an object", ...
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn reads_multi_document_streams_and_lists() {
        let f = file("a: 1\n---\n---\nkind: List\nitems: [{b: 2}, {c: 3}]\n");
        let objects = read_objects(f.path()).unwrap();
        assert_eq!(
            objects,
            vec![
                serde_json::json!({"a": 1}),
                serde_json::json!({"b": 2}),
                serde_json::json!({"c": 3})
            ]
        );
    }

    #[test]
    fn rejects_scalars_and_broken_yaml_with_the_document_number() {
        let err = read_objects(file("a: 1\n---\n42\n").path()).unwrap_err();
        assert!(
            err.to_string()
                .contains("document 2 is not an object but a number"),
            "{err}"
        );
        let err = read_objects(file("a: [1,\n").path()).unwrap_err();
        assert!(format!("{err:#}").contains("not valid YAML"), "{err:#}");
        let err = read_object(file("a: 1\n---\nb: 2\n").path()).unwrap_err();
        assert!(err.to_string().contains("expected one object, found 2"));
    }
}
