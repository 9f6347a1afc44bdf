//! The status a new built-in object gets, as kube-apiserver gives it: each kind's
//! `PrepareForCreate` resets `status` (a Pod's to `Pending` with its `QoS` class), and Go
//! then writes the empty status struct with the fields it never omits (`replicas: 0`,
//! `loadBalancer: {}`). Reading back applies the status defaults (a claim is
//! `Pending`).

use serde_json::{Value, json};

use crate::objects::{meta, qos};
use crate::registry::ResourceInfo;

/// The condition kube adds to a Pod created with scheduling gates.
fn scheduling_gated() -> Value {
    json!({
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": null,
        "lastTransitionTime": meta::now_rfc3339(),
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates",
    })
}

fn pod_status(pod: &Value) -> Value {
    let mut status = json!({ "phase": "Pending", "qosClass": qos::pod_qos_class(pod) });
    if pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty())
    {
        status["conditions"] = json!([scheduling_gated()]);
    }
    status
}

/// kube's status of a new object of `info`'s kind, or None where the embedded
/// server has none to give (custom resources and the kinds whose strategies set
/// their own: namespaces, CRDs).
pub fn initial_status(info: &ResourceInfo, obj: &Value) -> Option<Value> {
    if info.is_custom() {
        return None;
    }
    Some(match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => pod_status(obj),
        ("", "services") | ("networking.k8s.io", "ingresses") => json!({ "loadBalancer": {} }),
        ("", "persistentvolumeclaims") => json!({ "phase": "Pending" }),
        ("", "persistentvolumes") => {
            json!({ "phase": "Pending", "lastPhaseTransitionTime": meta::now_rfc3339() })
        }
        ("", "replicationcontrollers") | ("apps", "replicasets") => json!({ "replicas": 0 }),
        ("apps", "statefulsets") => json!({ "replicas": 0, "availableReplicas": 0 }),
        ("apps", "daemonsets") => json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        }),
        ("policy", "poddisruptionbudgets") => json!({
            "disruptionsAllowed": 0,
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0,
        }),
        ("autoscaling", "horizontalpodautoscalers") => {
            json!({ "currentReplicas": 0, "desiredReplicas": 0 })
        }
        ("", "resourcequotas")
        | ("apps", "deployments")
        | ("batch", "jobs" | "cronjobs")
        | ("admissionregistration.k8s.io", "validatingadmissionpolicies") => json!({}),
        _ => return None,
    })
}

/// Replaces the status a client sent with a new object by kube's (see
/// [`initial_status`]); kinds without one lose what was sent. Nodes keep theirs:
/// kube's node strategy keeps a new Node's status.
pub fn set_initial_status(info: &ResourceInfo, obj: &mut Value) {
    if !info.has_status || (info.group.is_empty() && info.plural == "nodes") {
        return;
    }
    let status = initial_status(info, obj);
    if let Some(m) = obj.as_object_mut() {
        match status {
            Some(s) => m.insert("status".into(), s),
            None => m.remove("status"),
        };
    }
}
