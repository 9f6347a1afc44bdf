//! `reconcile` interface: request out, response in.

use std::time::Duration;

use gantry_sdk::{
    Condition, ConditionStatus, Event, EventType, ObjectRef, Request, Response, Trigger,
};
use serde_json::Value;

use super::generated::reconciler::exports::gantry::plugin::reconcile as wit;
use super::generated::reconciler::gantry::plugin::types::ObjectRef as WitObjectRef;
use crate::{error::CallError, limits::Limits};

/// `obj` without `metadata.managedFields` (plugins never see them).
pub fn strip_managed_fields(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    obj
}

fn json_text(value: &Value) -> String {
    super::json::text(value)
}

fn object_text(obj: &Value) -> String {
    super::json::object_text(obj)
}

fn wit_ref(r: &ObjectRef) -> WitObjectRef {
    WitObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

/// The WIT request for `request`; managedFields are stripped from every object.
pub fn to_wit_request(request: &Request) -> wit::Request {
    wit::Request {
        parent: object_text(&request.parent),
        observed: request.observed.iter().map(object_text).collect(),
        related: request.related.iter().map(object_text).collect(),
        config: json_text(&request.config),
        finalizing: request.finalizing,
        trigger: match &request.trigger {
            Trigger::ParentChanged => wit::Trigger::ParentChanged,
            Trigger::ChildChanged(r) => wit::Trigger::ChildChanged(wit_ref(r)),
            Trigger::RelatedChanged(r) => wit::Trigger::RelatedChanged(wit_ref(r)),
            Trigger::Resync => wit::Trigger::Resync,
            Trigger::Requeue => wit::Trigger::Requeue,
            Trigger::PluginChanged => wit::Trigger::PluginChanged,
        },
    }
}

/// A request in the form it crosses the sandbox boundary: each object
/// serialized once, so that one request can go to two versions of a plugin
/// (a shadow run) without serializing it twice.
#[derive(Clone)]
pub struct EncodedRequest(pub(crate) wit::Request);

impl EncodedRequest {
    /// `request`, serialized (without managedFields).
    pub fn new(request: &Request) -> Self {
        Self(to_wit_request(request))
    }

    /// The same request with another binding config.
    #[must_use]
    pub fn with_config(&self, config: &Value) -> Self {
        let mut request = self.0.clone();
        request.config = json_text(config);
        Self(request)
    }
}

fn violation(detail: impl Into<String>) -> CallError {
    CallError::ContractViolation {
        detail: detail.into(),
    }
}

/// Bytes of JSON text and strings a response carries.
fn response_size(r: &wit::Response) -> usize {
    r.children.iter().map(String::len).sum::<usize>()
        + r.status.as_ref().map_or(0, String::len)
        + r.conditions
            .iter()
            .map(|c| c.condition_type.len() + c.reason.len() + c.message.len())
            .sum::<usize>()
        + r.events
            .iter()
            .map(|e| e.reason.len() + e.message.len())
            .sum::<usize>()
}

fn check_child(index: usize, text: &str) -> Result<Value, CallError> {
    let child: Value = serde_json::from_str(text)
        .map_err(|e| violation(format!("child {index} is not valid JSON: {e}")))?;
    let Some(map) = child.as_object() else {
        return Err(violation(format!("child {index} is not a JSON object")));
    };
    for field in ["apiVersion", "kind"] {
        if map
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(violation(format!("child {index} has no {field}")));
        }
    }
    if child
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(violation(format!(
            "child {index} ({}) has no metadata.name",
            map["kind"].as_str().unwrap_or_default()
        )));
    }
    Ok(child)
}

fn check_camel_case(what: &str, value: &str) -> Result<(), CallError> {
    let ok = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '/' || c == '-')
        && value.len() <= 316;
    if ok {
        Ok(())
    } else {
        Err(violation(format!(
            "{what} {value:?} must be a CamelCase word"
        )))
    }
}

/// Most conditions one response may carry (the host merges them into the
/// parent's status on every reconcile).
pub const MAX_CONDITIONS: usize = 64;
/// Most events one response may carry (each type and reason is one Event
/// write).
pub const MAX_EVENTS: usize = 32;

/// Check a plugin's response against `limits` and the contract, and turn it
/// into the SDK's type. Size and count are checked before anything is parsed.
pub fn from_wit_response(r: wit::Response, limits: &Limits) -> Result<Response, CallError> {
    if r.children.len() > limits.max_children {
        return Err(CallError::TooManyChildren {
            count: r.children.len(),
            limit: limits.max_children,
        });
    }
    for (what, count, limit) in [
        ("conditions", r.conditions.len(), MAX_CONDITIONS),
        ("events", r.events.len(), MAX_EVENTS),
    ] {
        if count > limit {
            return Err(violation(format!(
                "the response has {count} {what}, more than the limit of {limit}"
            )));
        }
    }
    let size = response_size(&r);
    if size > limits.output_bytes {
        return Err(CallError::OutputTooLarge {
            size,
            limit: limits.output_bytes,
        });
    }
    let children = r
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| check_child(i, c))
        .collect::<Result<Vec<_>, _>>()?;
    let status = match r.status {
        None => None,
        Some(text) => {
            let status: Value = serde_json::from_str(&text)
                .map_err(|e| violation(format!("status is not valid JSON: {e}")))?;
            if !status.is_object() {
                return Err(violation("status is not a JSON object"));
            }
            Some(status)
        }
    };
    let conditions = r
        .conditions
        .into_iter()
        .map(|c| {
            check_camel_case("condition type", &c.condition_type)?;
            check_camel_case("condition reason", &c.reason)?;
            Ok(Condition {
                condition_type: c.condition_type,
                status: match c.status {
                    wit::ConditionStatus::True => ConditionStatus::True,
                    wit::ConditionStatus::False => ConditionStatus::False,
                    wit::ConditionStatus::Unknown => ConditionStatus::Unknown,
                },
                reason: c.reason,
                message: c.message,
            })
        })
        .collect::<Result<Vec<_>, CallError>>()?;
    let events = r
        .events
        .into_iter()
        .map(|e| {
            check_camel_case("event reason", &e.reason)?;
            Ok(Event {
                event_type: match e.event_type {
                    wit::EventType::Normal => EventType::Normal,
                    wit::EventType::Warning => EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            })
        })
        .collect::<Result<Vec<_>, CallError>>()?;
    Ok(Response {
        children,
        status,
        conditions,
        events,
        requeue_after: r.requeue_after_ms.map(Duration::from_millis),
        finalized: r.finalized,
    })
}

/// The plugin's own error, as the SDK type.
pub fn reconcile_error(e: wit::PluginError) -> gantry_sdk::PluginError {
    gantry_sdk::PluginError {
        message: e.message,
        reason: e.reason,
        retryable: e.retryable,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response(children: Vec<String>) -> wit::Response {
        wit::Response {
            children,
            status: None,
            conditions: vec![],
            events: vec![],
            requeue_after_ms: Some(250),
            finalized: false,
        }
    }

    #[test]
    fn request_strips_managed_fields_everywhere() {
        let with_mf = json!({"metadata": {"name": "a", "managedFields": [{"manager": "x"}]}});
        let mut request = Request::for_parent(with_mf.clone());
        request.observed.push(with_mf.clone());
        request.related.push(with_mf);
        let wit = to_wit_request(&request);
        for text in [&wit.parent, &wit.observed[0], &wit.related[0]] {
            assert!(!text.contains("managedFields"), "{text}");
            assert!(text.contains("\"name\":\"a\""));
        }
        assert_eq!(wit.config, "null");
    }

    #[test]
    fn accepts_a_well_formed_response() {
        let child = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        let r = from_wit_response(response(vec![child.to_string()]), &Limits::default()).unwrap();
        assert_eq!(r.children, vec![child]);
        assert_eq!(r.requeue_after, Some(Duration::from_millis(250)));
    }

    #[test]
    fn rejects_children_that_break_the_contract() {
        let cases = [
            ("{", "not valid JSON"),
            ("[1]", "not a JSON object"),
            (
                r#"{"kind": "ConfigMap", "metadata": {"name": "x"}}"#,
                "has no apiVersion",
            ),
            (
                r#"{"apiVersion": "v1", "metadata": {"name": "x"}}"#,
                "has no kind",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}"#,
                "has no metadata.name",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ""}}"#,
                "has no metadata.name",
            ),
        ];
        for (text, expected) in cases {
            let err =
                from_wit_response(response(vec![text.into()]), &Limits::default()).unwrap_err();
            assert!(
                matches!(&err, CallError::ContractViolation { detail } if detail.contains(expected)),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn enforces_size_and_count_limits_before_parsing() {
        let limits = Limits {
            output_bytes: 10,
            max_children: 2,
            ..Limits::default()
        };
        let err =
            from_wit_response(response(vec!["{not parsed but long".into()]), &limits).unwrap_err();
        assert!(matches!(
            err,
            CallError::OutputTooLarge {
                size: 20,
                limit: 10
            }
        ));
        let err = from_wit_response(response(vec!["1".into(), "2".into(), "3".into()]), &limits)
            .unwrap_err();
        assert!(matches!(
            err,
            CallError::TooManyChildren { count: 3, limit: 2 }
        ));
    }

    #[test]
    fn caps_conditions_and_events() {
        let condition = |i: usize| wit::Condition {
            condition_type: format!("C{i}"),
            status: wit::ConditionStatus::True,
            reason: "R".into(),
            message: String::new(),
        };
        let event = || wit::Event {
            event_type: wit::EventType::Normal,
            reason: "R".into(),
            message: String::new(),
        };
        let mut r = response(vec![]);
        r.conditions = (0..MAX_CONDITIONS).map(condition).collect();
        r.events = (0..MAX_EVENTS).map(|_| event()).collect();
        assert!(from_wit_response(r, &Limits::default()).is_ok());
        let mut r = response(vec![]);
        r.conditions = (0..100_000).map(condition).collect();
        let err = from_wit_response(r, &Limits::default()).unwrap_err();
        assert!(
            matches!(&err, CallError::ContractViolation { detail } if detail == "the response has 100000 conditions, more than the limit of 64"),
            "{err}"
        );
        let mut r = response(vec![]);
        r.events = (0..3000).map(|_| event()).collect();
        let err = from_wit_response(r, &Limits::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("3000 events, more than the limit of 32"),
            "{err}"
        );
    }

    #[test]
    fn rejects_non_object_status_and_bad_reasons() {
        let mut r = response(vec![]);
        r.status = Some("[]".into());
        assert!(from_wit_response(r, &Limits::default()).is_err());
        let mut r = response(vec![]);
        r.events.push(wit::Event {
            event_type: wit::EventType::Normal,
            reason: "has spaces".into(),
            message: String::new(),
        });
        assert!(from_wit_response(r, &Limits::default()).is_err());
    }
}
