//! Events on a parent: the host's own (deduplicated by the recorder), and
//! the plugin's, folded before they are written: one Event per type and
//! reason per response, however many the plugin listed.

use gantry_sdk::{Event, EventType};
use kube::Resource;
use kube::api::DynamicObject;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType};

use super::context::BindingContext;

/// Event writes in flight at once, over the whole process. An Event is
/// written beside the reconcile, not in its path: a reconcile's writes are
/// its children and the status, and waiting for an Event would add a round
/// trip to each. Past this many, a reconcile waits for a slot, so a slow
/// Events API slows reconciles rather than piling up writes.
const EVENTS_IN_FLIGHT: usize = 64;

static EVENT_SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(EVENTS_IN_FLIGHT);

/// Emit an Event on `parent` (deduplicated by the recorder), written in
/// the background (see [`EVENTS_IN_FLIGHT`]).
pub(crate) async fn publish(
    ctx: &BindingContext,
    parent: &DynamicObject,
    kind: KubeEventType,
    reason: &str,
    message: &str,
) {
    let event = KubeEvent {
        type_: kind,
        reason: reason.chars().take(128).collect(),
        note: Some(message.chars().take(1024).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = parent.object_ref(&ctx.parent.resource);
    let Ok(slot) = EVENT_SLOTS.acquire().await else {
        return; // never closed
    };
    let (recorder, binding) = (ctx.recorder.clone(), ctx.name.clone());
    tokio::spawn(async move {
        if let Err(e) = recorder.publish(&event, &reference).await {
            tracing::warn!(binding = %binding, error = %e, "could not publish event");
        }
        drop(slot);
    });
}

/// The plugin's events, one Event write per type and reason: repeats in
/// one response are folded into the first, with a count.
pub(crate) async fn publish_plugin_events(
    ctx: &BindingContext,
    parent: &DynamicObject,
    events: &[Event],
) {
    for (event, repeats) in aggregate(events) {
        let kind = match event.event_type {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        };
        let message = if repeats > 0 {
            format!(
                "{} (and {repeats} more {} events in the same response)",
                event.message, event.reason
            )
        } else {
            event.message.clone()
        };
        publish(ctx, parent, kind, &event.reason, &message).await;
    }
}

/// The first event of each (type, reason), in order of first appearance,
/// with how many more of that type and reason followed it.
pub(crate) fn aggregate(events: &[Event]) -> Vec<(&Event, usize)> {
    let mut index: std::collections::HashMap<(bool, &str), usize> =
        std::collections::HashMap::new();
    let mut folded: Vec<(&Event, usize)> = Vec::new();
    for event in events {
        let key = (
            event.event_type == EventType::Warning,
            event.reason.as_str(),
        );
        if let Some(&i) = index.get(&key) {
            folded[i].1 += 1;
        } else {
            index.insert(key, folded.len());
            folded.push((event, 0));
        }
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: EventType, reason: &str, message: &str) -> Event {
        Event {
            event_type,
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn repeats_fold_into_the_first_of_their_type_and_reason() {
        let events: Vec<Event> = (0..3000)
            .map(|i| event(EventType::Normal, "Many", &format!("event {i}")))
            .chain([
                event(EventType::Warning, "Many", "a warning"),
                event(EventType::Normal, "Other", "other"),
            ])
            .collect();
        let folded = aggregate(&events);
        let summary: Vec<(&str, &str, usize)> = folded
            .iter()
            .map(|(e, n)| (e.reason.as_str(), e.message.as_str(), *n))
            .collect();
        assert_eq!(
            summary,
            [
                ("Many", "event 0", 2999),
                ("Many", "a warning", 0),
                ("Other", "other", 0)
            ]
        );
    }
}
