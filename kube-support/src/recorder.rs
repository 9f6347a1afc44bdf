//! Events whose message is always the current one.
//!
//! kube-runtime's [`Recorder`](kube::runtime::events::Recorder) counts a
//! repeat of an Event by its type, reason, action and object, not by its
//! note: a second Event with a new message becomes "(x2)" of the first, and
//! the first message stays. After a swap, `PluginLoaded (x2)` would name the
//! previous digest; a binding refused for a new reason would still show the
//! old one. No library keeps the note in the key, so this wraps one: it
//! keeps a kube-runtime recorder per object and message, so that repeats of
//! a message are still counted on one Event, and a new message is a new
//! Event.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Reporter};

/// Distinct messages remembered; past that the memory starts over (a repeat
/// then opens a new Event rather than counting on the old one).
const MESSAGES: usize = 4096;

/// Publishes Events, one per object and message, repeats counted.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    by_message: Arc<Mutex<HashMap<u64, kube::runtime::events::Recorder>>>,
}

/// What makes two Events the same one: the object, and everything shown.
fn key(event: &Event, reference: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    (
        &reference.uid,
        &reference.kind,
        &reference.namespace,
        &reference.name,
    )
        .hash(&mut hasher);
    matches!(event.type_, EventType::Warning).hash(&mut hasher);
    (&event.reason, &event.action, &event.note).hash(&mut hasher);
    hasher.finish()
}

impl Recorder {
    /// A recorder writing as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            by_message: Arc::default(),
        }
    }

    /// Publish `event` about `reference`: a new Event, or one more count
    /// of the Event with the same message.
    pub async fn publish(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let recorder = {
            let mut by_message = self.by_message.lock().expect("recorder map");
            if by_message.len() >= MESSAGES {
                by_message.clear();
            }
            by_message
                .entry(key(event, reference))
                .or_insert_with(|| {
                    kube::runtime::events::Recorder::new(self.client.clone(), self.reporter.clone())
                })
                .clone()
        };
        recorder.publish(event, reference).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note.into()),
            action: "LoadPlugin".into(),
            secondary: None,
        }
    }

    #[test]
    fn a_new_message_is_a_new_event_and_a_repeat_is_not() {
        let object = ObjectReference {
            kind: Some("ConfigMap".into()),
            name: Some("memcached".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        let loaded = |digest: &str| event("PluginLoaded", &format!("plugin sha256:{digest}"));
        assert_eq!(key(&loaded("a"), &object), key(&loaded("a"), &object));
        assert_ne!(key(&loaded("a"), &object), key(&loaded("b"), &object));
        let other = ObjectReference {
            uid: Some("u2".into()),
            ..object.clone()
        };
        assert_ne!(key(&loaded("a"), &object), key(&loaded("a"), &other));
    }
}
