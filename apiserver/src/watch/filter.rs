//! Which stored objects a watch sees, and how a stored event looks to it.

use serde_json::Value;

use crate::selectors::Selectors;
use crate::storage::{Event, EventType};

/// What one watch sees: a key prefix (resource, and namespace if any), an optional
/// object name (`GET .../{name}?watch=1`), and label/field selectors.
pub struct Filter {
    /// Storage key prefix, e.g. `/configmaps/default/`.
    pub prefix: String,
    /// Only the object of this name.
    pub name: Option<String>,
    /// Label and field selectors.
    pub selectors: Selectors,
}

impl Filter {
    /// Whether the object stored at `key` is visible to the watch.
    pub fn matches(&self, key: &str, obj: &Value) -> bool {
        key.starts_with(&self.prefix)
            && self
                .name
                .as_deref()
                .is_none_or(|n| obj.pointer("/metadata/name").and_then(Value::as_str) == Some(n))
            && self.selectors.matches(obj)
    }

    /// The type a stored event has for this watch after selector transitions, as
    /// kube's cacher decides it: an object that starts matching is ADDED, one that
    /// stops matching is DELETED; None when the watch does not see it at all.
    // One arm per transition (kube's cacher), though two of them yield ADDED.
    #[allow(clippy::match_same_arms)]
    pub fn event_type(&self, e: &Event) -> Option<EventType> {
        if !e.key.starts_with(&self.prefix) {
            return None;
        }
        let now = self.matches(&e.key, &e.object);
        let before = e.previous.as_ref().is_some_and(|p| self.matches(&e.key, p));
        match e.kind {
            EventType::Added if now => Some(EventType::Added),
            EventType::Modified if now && before => Some(EventType::Modified),
            EventType::Modified if now => Some(EventType::Added),
            EventType::Modified if before => Some(EventType::Deleted),
            EventType::Deleted if before || now => Some(EventType::Deleted),
            _ => None,
        }
    }
}

/// For tests: the ConfigMaps of namespace `default` whose labels match
/// `labels`.
#[cfg(test)]
pub(crate) fn config_maps_in_default(labels: &str) -> Filter {
    use crate::selectors::{FieldSelector, LabelSelector};
    Filter {
        prefix: "/configmaps/default/".into(),
        name: None,
        selectors: Selectors {
            labels: LabelSelector::parse(labels).unwrap(),
            fields: FieldSelector::default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn filter(labels: &str) -> Filter {
        config_maps_in_default(labels)
    }

    fn event(kind: EventType, key: &str, app: &str, previous_app: Option<&str>) -> Event {
        let obj =
            |app: &str| Arc::new(json!({ "metadata": { "name": "m", "labels": { "app": app } } }));
        Event {
            rv: 2,
            kind,
            key: key.into(),
            object: obj(app),
            previous: previous_app.map(obj),
        }
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let f = filter("app=web");
        let key = "/configmaps/default/m";
        let cases = [
            (EventType::Added, "web", None, Some(EventType::Added)),
            (EventType::Added, "db", None, None),
            (
                EventType::Modified,
                "web",
                Some("web"),
                Some(EventType::Modified),
            ),
            (
                EventType::Modified,
                "web",
                Some("db"),
                Some(EventType::Added),
            ),
            (
                EventType::Modified,
                "db",
                Some("web"),
                Some(EventType::Deleted),
            ),
            (EventType::Modified, "db", Some("db"), None),
            (
                EventType::Deleted,
                "web",
                Some("web"),
                Some(EventType::Deleted),
            ),
            (EventType::Deleted, "db", Some("db"), None),
        ];
        for (kind, app, before, want) in cases {
            assert_eq!(
                f.event_type(&event(kind, key, app, before)),
                want,
                "{kind:?} {app} {before:?}"
            );
        }
        let elsewhere = event(EventType::Added, "/configmaps/other/m", "web", None);
        assert_eq!(f.event_type(&elsewhere), None, "another namespace");
    }
}
