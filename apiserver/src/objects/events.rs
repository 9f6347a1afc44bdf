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

/// An events.k8s.io/v1 Event as the core/v1 Event kube stores.
pub fn to_core(obj: &Value) -> Value {
    rename(obj, "v1", true)
}

/// A stored core/v1 Event as events.k8s.io/v1.
pub fn from_core(obj: &Value) -> Value {
    rename(obj, "events.k8s.io/v1", false)
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
        assert_eq!(from_core(&core), e);
    }
}
