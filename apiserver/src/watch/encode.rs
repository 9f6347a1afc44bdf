//! Watch event lines: `{"type":"ADDED","object":{...}}` and a newline, in the form
//! the client asked for (the object, its `PartialObjectMetadata`, or a Table row).

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use crate::app::present;
use crate::registry::ResourceInfo;
use crate::storage::EventType;
use crate::table::{IncludeObject, partial_object_metadata, table};

/// What a watch's objects look like on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The object itself.
    Object,
    /// `Accept: ...;as=PartialObjectMetadata`: its metadata.
    Metadata,
    /// `Accept: ...;as=Table`: a one-row Table.
    Table(IncludeObject),
}

/// How one watch encodes its events: the served version of the resource (custom
/// resources get its `apiVersion` and schema defaults) and the [`Form`].
#[derive(Clone, Debug)]
pub struct Format {
    /// The resource at the version the watch asked for.
    pub info: Arc<ResourceInfo>,
    /// The wire form.
    pub form: Form,
}

impl Format {
    /// Whether two watches encode every event alike (the same resource version, by
    /// identity, and the same form).
    pub fn same_as(&self, other: &Format) -> bool {
        Arc::ptr_eq(&self.info, &other.info) && self.form == other.form
    }

    /// The line of a stored object. `columns`: a Table with its column definitions
    /// (only the first Table event of a watch has them, as in kube).
    pub fn object_line(&self, kind: EventType, obj: &Value, columns: bool) -> Bytes {
        let obj = present(&self.info, obj);
        match self.form {
            Form::Object => line(kind.as_str(), &obj),
            Form::Metadata => line(kind.as_str(), &partial_object_metadata(&obj)),
            Form::Table(include) => {
                let t = table(
                    &self.info,
                    std::slice::from_ref(&obj),
                    &json!({}),
                    include,
                    columns,
                );
                line(kind.as_str(), &t)
            }
        }
    }

    /// A BOOKMARK at `rv`; `initial_end` marks the end of the initial events
    /// (`k8s.io/initial-events-end`, for `sendInitialEvents`).
    pub fn bookmark_line(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let obj = json!({
            "kind": self.info.kind,
            "apiVersion": self.info.api_version(),
            "metadata": meta,
        });
        match self.form {
            Form::Metadata => line("BOOKMARK", &partial_object_metadata(&obj)),
            _ => line("BOOKMARK", &obj),
        }
    }
}

/// An ERROR line carrying a Status (in every form).
pub fn error_line(status: &Value) -> Bytes {
    line("ERROR", status)
}

/// One watch event as JSON, `type` first as kube writes it.
#[derive(Serialize)]
struct WatchEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: &'a Value,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&WatchEvent { kind, object }).expect("JSON serializes");
    v.push(b'\n');
    Bytes::from(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn format(form: Form) -> Format {
        let info = Registry::with_builtins()
            .get("", "v1", "configmaps")
            .unwrap();
        Format { info, form }
    }

    fn parse(b: &Bytes) -> Value {
        assert_eq!(b.last(), Some(&b'\n'), "a line");
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn lines_in_every_form() {
        let cm = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a", "resourceVersion": "7" }, "data": { "k": "v" } });
        let obj = parse(&format(Form::Object).object_line(EventType::Added, &cm, false));
        assert_eq!(obj["type"], "ADDED");
        assert_eq!(obj["object"]["data"]["k"], "v");
        let text = format(Form::Object).object_line(EventType::Modified, &cm, false);
        assert!(
            text.starts_with(br#"{"type":"MODIFIED","object":"#),
            "type first, as kube"
        );

        let meta = parse(&format(Form::Metadata).object_line(EventType::Deleted, &cm, false));
        assert_eq!(meta["type"], "DELETED");
        assert_eq!(meta["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(meta["object"]["metadata"]["name"], "a");

        let table = format(Form::Table(IncludeObject::Metadata));
        let first = parse(&table.object_line(EventType::Added, &cm, true));
        assert_eq!(first["object"]["kind"], "Table");
        assert!(
            !first["object"]["columnDefinitions"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        let later = parse(&table.object_line(EventType::Added, &cm, false));
        assert!(
            later["object"]["columnDefinitions"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            later["object"]["rows"][0]["object"]["metadata"]["name"],
            "a"
        );
    }

    #[test]
    fn bookmarks_and_errors() {
        let b = parse(&format(Form::Object).bookmark_line(12, true));
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(b["object"]["kind"], "ConfigMap");
        assert_eq!(b["object"]["metadata"]["resourceVersion"], "12");
        assert_eq!(
            b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        let m = parse(&format(Form::Metadata).bookmark_line(12, false));
        assert_eq!(m["object"]["kind"], "PartialObjectMetadata");
        assert!(m["object"]["metadata"].get("annotations").is_none());
        let e = parse(&error_line(&json!({ "kind": "Status", "code": 410 })));
        assert_eq!(e["type"], "ERROR");
        assert_eq!(e["object"]["code"], 410);
    }
}
