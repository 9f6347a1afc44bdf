//! One stored event as the hub hands it to every watch that sees it, with its lines
//! encoded once and shared (kube's cacher does the same with its `cachingObject`).

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

use super::encode::Format;
use crate::storage::{Event, EventType};

/// A stored event on its way to the watches. Each distinct line (format, type, with or
/// without Table columns) is encoded by the first watch that sends it and reused by
/// the others; the lines go when the last watch has sent the event, as in kube, where
/// cached serializations live only while an event is dispatched.
pub struct SharedEvent {
    /// The stored event.
    pub event: Arc<Event>,
    size: OnceLock<usize>,
    lines: Mutex<Vec<(Key, Bytes)>>,
}

struct Key {
    format: Format,
    kind: EventType,
    columns: bool,
}

impl SharedEvent {
    /// Wraps a stored event.
    pub fn new(event: Arc<Event>) -> Arc<SharedEvent> {
        Arc::new(SharedEvent {
            event,
            size: OnceLock::new(),
            lines: Mutex::new(Vec::new()),
        })
    }

    /// The length of the event's object as JSON, measured once: what a watch that has
    /// not sent it yet is charged for it.
    pub fn size(&self) -> usize {
        *self
            .size
            .get_or_init(|| crate::storage::json_len(&self.event.object))
    }

    /// The event's line as `format` sends it with `kind`: encoded on first use, then shared.
    pub fn line(&self, format: &Format, kind: EventType, columns: bool) -> Bytes {
        let mut lines = self
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = lines
            .iter()
            .find(|(k, _)| k.kind == kind && k.columns == columns && k.format.same_as(format));
        if let Some((_, line)) = found {
            return line.clone();
        }
        let line = format.object_line(kind, &self.event.object, columns);
        let key = Key {
            format: format.clone(),
            kind,
            columns,
        };
        lines.push((key, line.clone()));
        line
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::Registry;
    use crate::watch::encode::Form;

    #[test]
    fn each_line_is_encoded_once_and_shared() {
        let registry = Registry::with_builtins();
        let info = registry.get("", "v1", "configmaps").unwrap();
        let object = json!({ "metadata": { "name": "a" }, "data": { "k": "v".repeat(1000) } });
        let shared = SharedEvent::new(Arc::new(Event {
            rv: 5,
            kind: EventType::Added,
            key: "/configmaps/default/a".into(),
            object: Arc::new(object.clone()),
            previous: None,
        }));
        let one = Format {
            info: info.clone(),
            form: Form::Object,
        };
        let other_watch_same_format = Format {
            info: info.clone(),
            form: Form::Object,
        };
        let a = shared.line(&one, EventType::Added, false);
        let b = shared.line(&other_watch_same_format, EventType::Added, false);
        assert_eq!(a.as_ptr(), b.as_ptr(), "the same bytes, not a copy");
        // Another form or another type is another line.
        let meta = Format {
            info,
            form: Form::Metadata,
        };
        let c = shared.line(&meta, EventType::Added, false);
        assert_ne!(a, c);
        let d = shared.line(&one, EventType::Deleted, false);
        assert!(d.starts_with(br#"{"type":"DELETED""#));
        assert_eq!(shared.lines.lock().unwrap().len(), 3);
        assert_eq!(shared.size(), serde_json::to_vec(&object).unwrap().len());
    }
}
