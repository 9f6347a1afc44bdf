//! What a watch sends before live events, produced one item at a time as the client
//! reads: the objects of a store snapshot as ADDED events (and, for
//! `sendInitialEvents`, the bookmark that ends them), or the retained events after
//! the resourceVersion the client resumes from.
//!
//! A snapshot is a clone of the store's persistent map: it costs no copy of the store,
//! and each object is encoded only when it is its turn.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use super::filter::Filter;
use crate::storage::{Event, Objects};

/// The items a watch sends before its live events.
pub struct Initial {
    snapshot: Option<Snapshot>,
    /// The bookmark ending the initial events, at the snapshot's resourceVersion.
    end_bookmark: Option<u64>,
    backlog: VecDeque<Arc<Event>>,
}

struct Snapshot {
    objects: Objects,
    /// Where the next object is searched from.
    from: Bound<String>,
}

/// One initial item.
pub enum Item {
    /// An object of the snapshot (an ADDED event).
    Object(Arc<Value>),
    /// The end of the initial events (a BOOKMARK at this resourceVersion).
    EndBookmark(u64),
    /// A retained event.
    Event(Arc<Event>),
}

impl Initial {
    /// Nothing before the live events.
    pub fn none() -> Initial {
        Initial {
            snapshot: None,
            end_bookmark: None,
            backlog: VecDeque::new(),
        }
    }

    /// The objects of `objects` under the watch's prefix, then the end bookmark at
    /// `rv` when `end_bookmark`.
    pub fn snapshot(objects: Objects, prefix: &str, rv: u64, end_bookmark: bool) -> Initial {
        Initial {
            snapshot: Some(Snapshot {
                objects,
                from: Bound::Included(prefix.to_string()),
            }),
            end_bookmark: end_bookmark.then_some(rv),
            backlog: VecDeque::new(),
        }
    }

    /// Retained events, sent after everything else initial.
    #[must_use]
    pub fn then_events(mut self, events: Vec<Arc<Event>>) -> Initial {
        self.backlog.extend(events);
        self
    }

    /// The next item; None when all were sent. Objects the filter does not match are
    /// skipped; events are returned as stored (the caller applies the filter's
    /// transitions).
    pub fn next(&mut self, filter: &Filter) -> Option<Item> {
        if let Some(s) = &mut self.snapshot {
            let range = s.objects.range((s.from.clone(), Bound::Unbounded));
            let mut found = None;
            let mut last = None;
            for (key, obj) in range.take_while(|(k, _)| k.starts_with(&filter.prefix)) {
                last = Some(key);
                if filter.matches(key, obj) {
                    found = Some(obj.clone());
                    break;
                }
            }
            match (found, last) {
                (Some(obj), Some(key)) => {
                    s.from = Bound::Excluded(key.clone());
                    return Some(Item::Object(obj));
                }
                _ => self.snapshot = None,
            }
        }
        if let Some(rv) = self.end_bookmark.take() {
            return Some(Item::EndBookmark(rv));
        }
        self.backlog.pop_front().map(Item::Event)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::selectors::{FieldSelector, LabelSelector, Selectors};
    use crate::storage::EventType;

    fn filter(prefix: &str, labels: &str) -> Filter {
        Filter {
            prefix: prefix.into(),
            name: None,
            selectors: Selectors {
                labels: LabelSelector::parse(labels).unwrap(),
                fields: FieldSelector::default(),
            },
        }
    }

    fn objects() -> Objects {
        let mut m = Objects::new();
        for (ns, name, app) in [
            ("a", "x", "web"),
            ("b", "y", "db"),
            ("b", "z", "web"),
            ("c", "w", "web"),
        ] {
            let obj =
                json!({ "metadata": { "name": name, "namespace": ns, "labels": { "app": app } } });
            m.insert(format!("/configmaps/{ns}/{name}"), Arc::new(obj));
        }
        m.insert(
            "/secrets/b/s".into(),
            Arc::new(json!({ "metadata": { "name": "s" } })),
        );
        m
    }

    fn names(initial: &mut Initial, f: &Filter) -> Vec<String> {
        std::iter::from_fn(|| initial.next(f))
            .map(|item| match item {
                Item::Object(o) => o["metadata"]["name"].as_str().unwrap().to_string(),
                Item::EndBookmark(rv) => format!("bookmark {rv}"),
                Item::Event(e) => format!("event {}", e.rv),
            })
            .collect()
    }

    #[test]
    fn a_snapshot_yields_the_matching_objects_under_the_prefix_then_the_rest() {
        let f = filter("/configmaps/b/", "");
        let mut i = Initial::snapshot(objects(), &f.prefix, 9, true);
        assert_eq!(names(&mut i, &f), ["y", "z", "bookmark 9"]);

        let f = filter("/configmaps/", "app=web");
        let event = Arc::new(Event {
            rv: 10,
            kind: EventType::Added,
            key: "/configmaps/c/v".into(),
            object: Arc::new(json!({})),
            previous: None,
        });
        let mut i = Initial::snapshot(objects(), &f.prefix, 9, false).then_events(vec![event]);
        assert_eq!(names(&mut i, &f), ["x", "z", "w", "event 10"]);
    }

    #[test]
    fn the_snapshot_does_not_see_later_changes_of_the_store() {
        let mut store = objects();
        let f = filter("/configmaps/", "");
        let mut i = Initial::snapshot(store.clone(), &f.prefix, 9, false);
        store.remove("/configmaps/b/z");
        store.insert(
            "/configmaps/b/new".into(),
            Arc::new(json!({ "metadata": { "name": "new" } })),
        );
        assert_eq!(names(&mut i, &f), ["x", "y", "z", "w"]);
        assert!(Initial::none().next(&f).is_none());
    }
}
