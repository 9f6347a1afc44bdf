//! A plugin's Events, folded before they are written: one Event per type
//! and reason per response, however many the plugin listed.

use gantry_sdk::{Event, EventType};

/// The first event of each (type, reason), in order of first appearance,
/// with how many more of that type and reason followed it.
pub fn aggregate(events: &[Event]) -> Vec<(&Event, usize)> {
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
