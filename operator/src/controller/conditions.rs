//! Conditions in `status.conditions`, merged by type: `lastTransitionTime`
//! moves only when a condition's status changes. Every step is linear in
//! the number of conditions.

use std::collections::HashMap;

use gantry_sdk::{Condition, ConditionStatus};
use serde_json::{Value, json};

/// The host's own condition types.
pub(crate) const READY: &str = "Ready";
/// Whether the last reconcile applied the plugin's desired state.
pub(crate) const SYNCED: &str = "Synced";

/// A condition the host wants on the parent.
pub(crate) fn condition(
    condition_type: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
) -> Condition {
    Condition {
        condition_type: condition_type.to_string(),
        status,
        reason: reason.to_string(),
        message: message.to_string(),
    }
}

/// Conditions as JSON for the status, keeping the live `lastTransitionTime`
/// of every condition whose status did not change, and `now` for the rest.
pub(crate) fn merge(
    live: Option<&Value>,
    wanted: &[Condition],
    generation: i64,
    now: &str,
) -> Vec<Value> {
    let live: &[Value] = live
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    // The first live condition of each type, as a linear scan would find.
    let mut by_type: HashMap<&str, &Value> = HashMap::with_capacity(live.len());
    for l in live {
        if let Some(t) = l["type"].as_str() {
            by_type.entry(t).or_insert(l);
        }
    }
    wanted
        .iter()
        .map(|c| {
            let previous = by_type.get(c.condition_type.as_str());
            let since = match previous {
                Some(p) if p["status"].as_str() == Some(c.status.as_str()) => {
                    p["lastTransitionTime"].as_str().unwrap_or(now).to_string()
                }
                _ => now.to_string(),
            };
            let reason = if c.reason.is_empty() {
                "Unspecified"
            } else {
                c.reason.as_str()
            };
            json!({
                "type": c.condition_type,
                "status": c.status.as_str(),
                "reason": reason,
                "message": c.message,
                "lastTransitionTime": since,
                "observedGeneration": generation,
            })
        })
        .collect()
}

/// The plugin's conditions plus `Synced`, and `Ready` unless the plugin
/// set it, each type once (the last one wins). The host's `Ready` is True
/// only when `Synced` and every plugin condition are True; otherwise it
/// carries the reason and message of the first that is not.
pub(crate) fn with_host_conditions(plugin: &[Condition], synced: Condition) -> Vec<Condition> {
    // Each type once, the last one winning, at the place of the last one.
    let last: HashMap<&str, usize> = plugin
        .iter()
        .enumerate()
        .map(|(i, c)| (c.condition_type.as_str(), i))
        .collect();
    let mut all: Vec<Condition> = plugin
        .iter()
        .enumerate()
        .filter(|(i, c)| c.condition_type != SYNCED && last[c.condition_type.as_str()] == *i)
        .map(|(_, c)| c.clone())
        .collect();
    if !all.iter().any(|c| c.condition_type == READY) {
        let blocking = std::iter::once(&synced)
            .chain(all.iter())
            .find(|c| c.status != ConditionStatus::True);
        let ready = match blocking {
            Some(c) => Condition {
                condition_type: READY.into(),
                status: if c.status == ConditionStatus::Unknown {
                    ConditionStatus::Unknown
                } else {
                    ConditionStatus::False
                },
                reason: c.reason.clone(),
                message: format!("{}: {}", c.condition_type, c.message),
            },
            None => Condition {
                condition_type: READY.into(),
                ..synced.clone()
            },
        };
        all.push(ready);
    }
    all.push(synced);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let live = json!([
            {"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Synced", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]);
        let wanted = [
            condition("Available", ConditionStatus::True, "Ready", "new message"),
            condition("Synced", ConditionStatus::False, "PluginError", "boom"),
            condition("Fresh", ConditionStatus::Unknown, "", ""),
        ];
        let merged = merge(Some(&live), &wanted, 4, "2026-02-02T00:00:00Z");
        assert_eq!(merged[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(merged[0]["message"], "new message");
        assert_eq!(merged[1]["lastTransitionTime"], "2026-02-02T00:00:00Z");
        assert_eq!(merged[2]["reason"], "Unspecified");
        assert!(merged.iter().all(|c| c["observedGeneration"] == 4));
    }

    #[test]
    fn host_adds_ready_and_synced_without_duplicates() {
        let synced = condition(SYNCED, ConditionStatus::True, "ReconcileSucceeded", "");
        let types = |cs: &[Condition]| {
            cs.iter()
                .map(|c| c.condition_type.clone())
                .collect::<Vec<_>>()
        };
        let plugin = [
            condition("Available", ConditionStatus::True, "A", ""),
            condition("Synced", ConditionStatus::False, "X", ""),
        ];
        assert_eq!(
            types(&with_host_conditions(&plugin, synced.clone())),
            ["Available", "Ready", "Synced"]
        );
        let plugin = [
            condition("Ready", ConditionStatus::False, "Waiting", ""),
            condition("Ready", ConditionStatus::True, "Done", ""),
        ];
        let all = with_host_conditions(&plugin, synced.clone());
        assert_eq!(types(&all), ["Ready", "Synced"]);
        assert_eq!(all[0].reason, "Done");
        // The last of a type wins, in its place.
        let plugin = [
            condition("A", ConditionStatus::True, "First", ""),
            condition("B", ConditionStatus::True, "B", ""),
            condition("A", ConditionStatus::True, "Second", ""),
        ];
        let all = with_host_conditions(&plugin, synced);
        assert_eq!(types(&all), ["B", "A", "Ready", "Synced"]);
        assert_eq!(all[1].reason, "Second");
    }

    #[test]
    fn merge_keeps_the_first_live_condition_of_a_type() {
        let live = json!([
            {"type": "A", "status": "True", "lastTransitionTime": "first"},
            {"type": "A", "status": "True", "lastTransitionTime": "second"}
        ]);
        let wanted = [condition("A", ConditionStatus::True, "R", "")];
        let merged = merge(Some(&live), &wanted, 1, "now");
        assert_eq!(merged[0]["lastTransitionTime"], "first");
    }
}
