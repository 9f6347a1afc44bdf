//! Kube's Table columns for common built-in kinds (beyond Name and Age).

use serde_json::{Value, json};

use super::{Cell, Column, col};
use crate::registry::ResourceInfo;

fn count(v: Option<&Value>) -> usize {
    match v {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn int_at(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

pub(super) fn builtin_columns(info: &ResourceInfo) -> Vec<Column> {
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "configmaps") => vec![col(
            "Data",
            "integer",
            Cell::Builtin(|o| json!(count(o.get("data")) + count(o.get("binaryData")))),
        )],
        ("", "secrets") => vec![
            col(
                "Type",
                "string",
                Cell::Builtin(|o| o.get("type").cloned().unwrap_or(json!("Opaque"))),
            ),
            col(
                "Data",
                "integer",
                Cell::Builtin(|o| json!(count(o.get("data")))),
            ),
        ],
        ("", "namespaces") => vec![col(
            "Status",
            "string",
            Cell::Builtin(|o| {
                o.pointer("/status/phase")
                    .cloned()
                    .unwrap_or(json!("Active"))
            }),
        )],
        ("", "serviceaccounts") => vec![col(
            "Secrets",
            "integer",
            Cell::Builtin(|o| json!(count(o.get("secrets")))),
        )],
        ("", "pods") => vec![
            col(
                "Ready",
                "string",
                Cell::Builtin(|o| {
                    let total = count(o.pointer("/spec/containers"));
                    let ready = o
                        .pointer("/status/containerStatuses")
                        .and_then(Value::as_array)
                        .map_or(0, |a| {
                            a.iter()
                                .filter(|c| c.get("ready") == Some(&json!(true)))
                                .count()
                        });
                    json!(format!("{ready}/{total}"))
                }),
            ),
            col(
                "Status",
                "string",
                Cell::Builtin(|o| {
                    o.pointer("/status/phase")
                        .cloned()
                        .unwrap_or(json!("Pending"))
                }),
            ),
            col(
                "Restarts",
                "string",
                Cell::Builtin(|o| {
                    let n: i64 = o
                        .pointer("/status/containerStatuses")
                        .and_then(Value::as_array)
                        .map_or(0, |a| a.iter().map(|c| int_at(c, "/restartCount")).sum());
                    json!(n.to_string())
                }),
            ),
        ],
        ("apps", "deployments") => vec![
            col(
                "Ready",
                "string",
                Cell::Builtin(|o| {
                    json!(format!(
                        "{}/{}",
                        int_at(o, "/status/readyReplicas"),
                        o.pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(1)
                    ))
                }),
            ),
            col(
                "Up-to-date",
                "integer",
                Cell::Builtin(|o| json!(int_at(o, "/status/updatedReplicas"))),
            ),
            col(
                "Available",
                "integer",
                Cell::Builtin(|o| json!(int_at(o, "/status/availableReplicas"))),
            ),
        ],
        ("", "services") => vec![
            col(
                "Type",
                "string",
                Cell::Builtin(|o| {
                    o.pointer("/spec/type")
                        .cloned()
                        .unwrap_or(json!("ClusterIP"))
                }),
            ),
            col(
                "Cluster-IP",
                "string",
                Cell::Builtin(|o| {
                    o.pointer("/spec/clusterIP")
                        .cloned()
                        .unwrap_or(json!("<none>"))
                }),
            ),
        ],
        ("apps", "statefulsets") => vec![col(
            "Ready",
            "string",
            Cell::Builtin(|o| {
                json!(format!(
                    "{}/{}",
                    int_at(o, "/status/readyReplicas"),
                    o.pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                ))
            }),
        )],
        ("apps", "replicasets") => vec![
            col(
                "Desired",
                "integer",
                Cell::Builtin(|o| {
                    json!(
                        o.pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(1)
                    )
                }),
            ),
            col(
                "Current",
                "integer",
                Cell::Builtin(|o| json!(int_at(o, "/status/replicas"))),
            ),
            col(
                "Ready",
                "integer",
                Cell::Builtin(|o| json!(int_at(o, "/status/readyReplicas"))),
            ),
        ],
        ("apps", "daemonsets") => vec![
            col(
                "Desired",
                "integer",
                Cell::Builtin(|o| json!(int_at(o, "/status/desiredNumberScheduled"))),
            ),
            col(
                "Current",
                "integer",
                Cell::Builtin(|o| json!(int_at(o, "/status/currentNumberScheduled"))),
            ),
            col(
                "Ready",
                "integer",
                Cell::Builtin(|o| json!(int_at(o, "/status/numberReady"))),
            ),
        ],
        ("batch", "jobs") => vec![col(
            "Completions",
            "string",
            Cell::Builtin(|o| {
                json!(format!(
                    "{}/{}",
                    int_at(o, "/status/succeeded"),
                    o.pointer("/spec/completions")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                ))
            }),
        )],
        ("batch", "cronjobs") => vec![
            col(
                "Schedule",
                "string",
                Cell::Builtin(|o| o.pointer("/spec/schedule").cloned().unwrap_or(json!(""))),
            ),
            col(
                "Suspend",
                "boolean",
                Cell::Builtin(|o| o.pointer("/spec/suspend").cloned().unwrap_or(json!(false))),
            ),
            col(
                "Active",
                "integer",
                Cell::Builtin(|o| json!(count(o.pointer("/status/active")))),
            ),
        ],
        ("coordination.k8s.io", "leases") => vec![col(
            "Holder",
            "string",
            Cell::Builtin(|o| {
                o.pointer("/spec/holderIdentity")
                    .cloned()
                    .unwrap_or(json!(""))
            }),
        )],
        ("", "events") => vec![
            col(
                "Type",
                "string",
                Cell::Builtin(|o| o.get("type").cloned().unwrap_or(json!(""))),
            ),
            col(
                "Reason",
                "string",
                Cell::Builtin(|o| o.get("reason").cloned().unwrap_or(json!(""))),
            ),
            col(
                "Object",
                "string",
                Cell::Builtin(|o| {
                    let kind = o
                        .pointer("/involvedObject/kind")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let name = o
                        .pointer("/involvedObject/name")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    json!(format!("{}/{name}", kind.to_ascii_lowercase()))
                }),
            ),
            col(
                "Message",
                "string",
                Cell::Builtin(|o| o.get("message").cloned().unwrap_or(json!(""))),
            ),
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => vec![col(
            "Created At",
            "date",
            Cell::Builtin(|o| {
                o.pointer("/metadata/creationTimestamp")
                    .cloned()
                    .unwrap_or(Value::Null)
            }),
        )],
        _ => vec![],
    }
}
