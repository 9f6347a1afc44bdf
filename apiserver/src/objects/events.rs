//! events.k8s.io/v1 Events are stored as core/v1 Events (one store, as in kube) and
//! converted field by field on the way in and out.

use serde_json::{Map, Value, json};

use crate::registry::ResourceInfo;

/// (events.k8s.io/v1 name, core/v1 name) of the renamed fields.
const RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Whether `info` is events.k8s.io Events (stored in the core Events store).
pub fn is_events_v1(info: &ResourceInfo) -> bool {
    info.group == "events.k8s.io" && info.plural == "events"
}

fn rename(obj: &Value, api_version: &str, to_core: bool) -> Value {
    let Some(m) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = RENAMES
            .iter()
            .find_map(|(new, core)| match to_core {
                true if k == new => Some(*core),
                false if k == core => Some(*new),
                _ => None,
            })
            .unwrap_or(k.as_str());
        out.insert(renamed.to_string(), v.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    Value::Object(out)
}

/// Fields Go writes even when unset, with the value it writes then (`null` for a
/// zero time, `{}` for an empty struct, `""` for a string without `omitempty`),
/// for each view of an Event.
type Always = (&'static str, fn() -> Value);

const CORE_ALWAYS: [Always; 7] = [
    ("involvedObject", empty_object),
    ("source", empty_object),
    ("firstTimestamp", null),
    ("lastTimestamp", null),
    ("eventTime", null),
    ("reportingComponent", empty_string),
    ("reportingInstance", empty_string),
];
const EVENTS_V1_ALWAYS: [Always; 5] = [
    ("eventTime", null),
    ("regarding", empty_object),
    ("deprecatedSource", empty_object),
    ("deprecatedFirstTimestamp", null),
    ("deprecatedLastTimestamp", null),
];

fn empty_object() -> Value {
    json!({})
}
fn null() -> Value {
    Value::Null
}
fn empty_string() -> Value {
    json!("")
}

/// An Event as kube writes it in one view: the fields Go never omits filled in,
/// a zero count (`omitempty`) left out.
fn as_go_writes(mut obj: Value, always: &[Always], count: &str) -> Value {
    if let Some(m) = obj.as_object_mut() {
        for (field, value) in always {
            m.entry(*field).or_insert_with(value);
        }
        if m.get(count).is_some_and(|c| c.as_i64() == Some(0)) {
            m.remove(count);
        }
    }
    obj
}

/// `obj` without the fields [`present_core`] or [`from_core`] fill in that hold
/// their zero value (which decoding drops again), for telling whether an update
/// of an Event changes anything. Other kinds are left as they are.
pub fn without_zero_fields(info: &ResourceInfo, mut obj: Value) -> Value {
    let always: &[Always] = if is_events_v1(info) {
        &EVENTS_V1_ALWAYS
    } else if info.group.is_empty() && info.plural == "events" {
        &CORE_ALWAYS
    } else {
        return obj;
    };
    if let Some(m) = obj.as_object_mut() {
        for (field, zero) in always {
            if m.get(*field).is_some_and(|v| *v == zero() || v.is_null()) {
                m.remove(*field);
            }
        }
    }
    obj
}

/// A stored core/v1 Event as kube serves it at core/v1.
pub fn present_core(obj: &Value) -> Value {
    as_go_writes(obj.clone(), &CORE_ALWAYS, "count")
}

/// An events.k8s.io/v1 Event as the core/v1 Event kube stores.
pub fn to_core(obj: &Value) -> Value {
    rename(obj, "v1", true)
}

/// A stored core/v1 Event as events.k8s.io/v1.
pub fn from_core(obj: &Value) -> Value {
    as_go_writes(
        rename(obj, "events.k8s.io/v1", false),
        &EVENTS_V1_ALWAYS,
        "deprecatedCount",
    )
}

/// The stored form of an object written at `info` (identity except events.k8s.io).
pub fn to_storage(info: &ResourceInfo, obj: Value) -> Value {
    if is_events_v1(info) {
        to_core(&obj)
    } else {
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let e = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "regarding": {"name": "p"}, "note": "hi", "reason": "R"});
        let core = to_core(&e);
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["apiVersion"], "v1");
        let back = from_core(&core);
        assert_eq!(back["note"], "hi");
        assert_eq!(back["deprecatedFirstTimestamp"], Value::Null);
        assert_eq!(back["deprecatedSource"], json!({}));
        let served = present_core(&core);
        assert_eq!(served["firstTimestamp"], Value::Null);
        assert_eq!(served["reportingInstance"], "");
    }
}
