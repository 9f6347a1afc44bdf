//! Fingerprints, for telling whether a write is needed: the host skips an
//! apply (of a child, or of the parent's status) when what it would send
//! is unchanged since its last successful apply and the live object still
//! shows it.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

/// A stable fingerprint of an object to apply.
pub(crate) fn fingerprint(intent: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    intent.to_string().hash(&mut hasher);
    hasher.finish()
}

/// Whether `live` shows everything in `intent`: every field of an intent
/// object is in the live object with a value that shows it in turn; lists
/// must have the same length, element by element. Fields the live object
/// has beyond the intent (defaults, other managers) do not matter.
pub(crate) fn reflects(live: &Value, intent: &Value) -> bool {
    match (live, intent) {
        (Value::Object(live), Value::Object(intent)) => intent
            .iter()
            .all(|(key, want)| live.get(key).is_some_and(|have| reflects(have, want))),
        (Value::Array(live), Value::Array(intent)) => {
            live.len() == intent.len()
                && live
                    .iter()
                    .zip(intent)
                    .all(|(have, want)| reflects(have, want))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (live, intent) => live == intent,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn extra_live_fields_are_fine_changed_or_missing_ones_are_not() {
        let intent = json!({"spec": {"replicas": 3, "template": {"containers": [{"name": "a", "image": "x"}]}}});
        let mut live = json!({"spec": {"replicas": 3, "paused": false,
            "template": {"containers": [{"name": "a", "image": "x", "terminationMessagePath": "/dev/termination-log"}]}},
            "status": {"readyReplicas": 1}});
        assert!(reflects(&live, &intent));
        live["spec"]["replicas"] = 2.into();
        assert!(!reflects(&live, &intent));
        live["spec"]["replicas"] = 3.into();
        live["spec"]["template"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "b"}));
        assert!(!reflects(&live, &intent), "list lengths differ");
        assert!(!reflects(&json!({}), &intent));
        assert!(reflects(&json!({"a": 1.0}), &json!({"a": 1})));
    }

    #[test]
    fn fingerprints_differ_when_intent_differs() {
        assert_eq!(fingerprint(&json!({"a": 1})), fingerprint(&json!({"a": 1})));
        assert_ne!(fingerprint(&json!({"a": 1})), fingerprint(&json!({"a": 2})));
    }
}
