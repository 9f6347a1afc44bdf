//! The plugin's answer in the shape a case's `expect` has: the sections of
//! [`super::case::ANSWER_KEYS`], or `error`.

use gantry_sdk::{PluginError, Response};
use serde_json::{Map, Value, json};

/// A successful answer: every section, as `gantry plugin run` prints them
/// (conditions' status `"True"`, events' type `Normal`), `null` for a
/// status or requeue the plugin left out.
pub fn of_response(response: &Response) -> Value {
    let requeue = response
        .requeue_after
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    json!({
        "children": response.children,
        "status": response.status,
        "conditions": response.conditions,
        "events": response.events,
        "requeueAfterMs": requeue,
        "finalized": response.finalized,
    })
}

/// A plugin error, as a case expects it.
pub fn of_error(error: &PluginError) -> Value {
    json!({"error": {
        "reason": error.reason,
        "message": error.message,
        "retryable": error.retryable,
    }})
}

/// The answer as a case spells it out in full: a status, requeue or event
/// list the plugin left empty is left out (such sections are compared
/// only when a case names them).
pub fn written(answer: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(error) = answer.get("error") {
        out.insert("error".into(), error.clone());
        return out;
    }
    for key in super::case::ANSWER_KEYS {
        match answer.get(*key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) if items.is_empty() && *key == "events" => {}
            Some(value) => {
                out.insert((*key).to_string(), value.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_sdk::{Condition, ConditionStatus, Event, EventType};

    #[test]
    fn an_answer_reads_as_plugin_run_prints_it() {
        let response = Response {
            children: vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            ],
            status: Some(json!({"ok": true})),
            conditions: vec![Condition {
                condition_type: "Ready".into(),
                status: ConditionStatus::True,
                reason: "Done".into(),
                message: "done".into(),
            }],
            events: vec![Event {
                event_type: EventType::Warning,
                reason: "Odd".into(),
                message: "odd".into(),
            }],
            requeue_after: Some(std::time::Duration::from_secs(2)),
            finalized: false,
        };
        let answer = of_response(&response);
        assert_eq!(answer["conditions"][0]["status"], "True");
        assert_eq!(answer["conditions"][0]["type"], "Ready");
        assert_eq!(answer["events"][0]["type"], "Warning");
        assert_eq!(answer["requeueAfterMs"], 2000);
        let keys: Vec<_> = written(&answer).keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "children",
                "conditions",
                "events",
                "finalized",
                "requeueAfterMs",
                "status"
            ]
        );
        let quiet = written(&of_response(&Response::new()));
        assert!(!quiet.contains_key("status") && !quiet.contains_key("events"));
        assert_eq!(quiet["children"], json!([]));
    }
}
