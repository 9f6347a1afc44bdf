//! Which fields each kind can be selected by, and how each is read from a stored
//! object: kube's field label conversions (`pkg/apis/*/v1/conversion.go`, which
//! accept or refuse a field) and selectable field sets (`ToSelectableFields` in
//! each kind's strategy, which give its value).

use serde_json::Value;

use crate::registry::ResourceInfo;

/// How a selectable field's value is read (always compared as a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// A string at a JSON pointer; `""` when absent.
    Text(&'static str),
    /// A boolean at a JSON pointer, `"false"` when absent.
    Bool(&'static str),
    /// An integer at a JSON pointer, `"0"` when absent.
    Int(&'static str),
    /// `status.podIP`: the first of `status.podIPs`.
    PodIp,
    /// An Event's `source`: `source.component`, else `reportingComponent`.
    EventSource,
}

impl Field {
    /// The field's value in `obj`, as kube's field set has it.
    pub fn value(self, obj: &Value) -> String {
        let text = |ptr: &str| {
            obj.pointer(ptr)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match self {
            Field::Text(ptr) => text(ptr),
            Field::Bool(ptr) => obj
                .pointer(ptr)
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .to_string(),
            Field::Int(ptr) => obj
                .pointer(ptr)
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .to_string(),
            Field::PodIp => text("/status/podIPs/0/ip"),
            Field::EventSource => {
                let component = text("/source/component");
                if component.is_empty() {
                    text("/reportingComponent")
                } else {
                    component
                }
            }
        }
    }
}

const NAME: Field = Field::Text("/metadata/name");
const NAMESPACE: Field = Field::Text("/metadata/namespace");

/// The field `label` of `info`'s kind, or kube's error message for a field it
/// does not support. Events of both groups are read in their stored core/v1 form.
pub fn field(info: &ResourceInfo, label: &str) -> Result<Field, String> {
    let not_supported = || Err(format!("field label not supported: {label}"));
    let metadata = match label {
        "metadata.name" => Some(NAME),
        "metadata.namespace" => Some(NAMESPACE),
        _ => None,
    };
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => match label {
            "spec.nodeName" | "spec.host" => Ok(Field::Text("/spec/nodeName")),
            "spec.restartPolicy" => Ok(Field::Text("/spec/restartPolicy")),
            "spec.schedulerName" => Ok(Field::Text("/spec/schedulerName")),
            "spec.serviceAccountName" => Ok(Field::Text("/spec/serviceAccountName")),
            "spec.hostNetwork" => Ok(Field::Bool("/spec/hostNetwork")),
            "status.phase" => Ok(Field::Text("/status/phase")),
            "status.podIP" => Ok(Field::PodIp),
            // Accepted by kube's conversion, absent from its field set: always "".
            "status.podIPs" => Ok(Field::Text("/status/podIPs/-")),
            "status.nominatedNodeName" => Ok(Field::Text("/status/nominatedNodeName")),
            _ => metadata.map_or_else(not_supported, Ok),
        },
        ("", "nodes") => match label {
            "metadata.name" => Ok(NAME),
            "spec.unschedulable" => Ok(Field::Bool("/spec/unschedulable")),
            _ => not_supported(),
        },
        ("", "replicationcontrollers") => match label {
            "status.replicas" => Ok(Field::Int("/status/replicas")),
            _ => metadata.map_or_else(not_supported, Ok),
        },
        ("", "namespaces") => match label {
            "metadata.name" => Ok(NAME),
            "status.phase" => Ok(Field::Text("/status/phase")),
            _ => not_supported(),
        },
        ("", "secrets") => match label {
            "type" => Ok(Field::Text("/type")),
            _ => metadata.map_or_else(not_supported, Ok),
        },
        ("", "services") => match label {
            "spec.clusterIP" => Ok(Field::Text("/spec/clusterIP")),
            "spec.type" => Ok(Field::Text("/spec/type")),
            _ => metadata.map_or_else(not_supported, Ok),
        },
        ("", "events") => core_event_field(label)
            .or(metadata)
            .map_or_else(not_supported, Ok),
        ("events.k8s.io", "events") => {
            let core = match label {
                "reportingController" => Some("reportingComponent"),
                "reason" | "type" => Some(label),
                _ => label
                    .strip_prefix("regarding.")
                    .filter(|f| INVOLVED_OBJECT.contains(f))
                    .map(|_| label),
            };
            let core = core.map(|l| l.replacen("regarding.", "involvedObject.", 1));
            core.and_then(|l| core_event_field(&l))
                .or(metadata)
                .map_or_else(not_supported, Ok)
        }
        ("batch", "jobs") => match label {
            "status.successful" => Ok(Field::Int("/status/succeeded")),
            _ => metadata.ok_or_else(|| format!("field label {label:?} not supported for Job")),
        },
        _ => metadata.ok_or_else(|| {
            format!(
                "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )
        }),
    }
}

/// The `involvedObject` fields an Event can be selected by.
const INVOLVED_OBJECT: [&str; 7] = [
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
];

fn core_event_field(label: &str) -> Option<Field> {
    Some(match label {
        "reason" => Field::Text("/reason"),
        "type" => Field::Text("/type"),
        "reportingComponent" => Field::Text("/reportingComponent"),
        "source" => Field::EventSource,
        _ => {
            let f = label.strip_prefix("involvedObject.")?;
            let i = INVOLVED_OBJECT.iter().position(|x| *x == f)?;
            Field::Text(INVOLVED_OBJECT_POINTERS[i])
        }
    })
}

const INVOLVED_OBJECT_POINTERS: [&str; 7] = [
    "/involvedObject/kind",
    "/involvedObject/namespace",
    "/involvedObject/name",
    "/involvedObject/uid",
    "/involvedObject/apiVersion",
    "/involvedObject/resourceVersion",
    "/involvedObject/fieldPath",
];
