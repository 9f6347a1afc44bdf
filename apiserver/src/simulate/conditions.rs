//! Status conditions as kube's controllers write them: `lastTransitionTime`
//! moves only when the status changes, `lastUpdateTime` (Deployments) when
//! anything about the condition does.

use serde::Serialize;
use serde_json::{Value, json};

/// The live conditions of an object, to carry their timestamps over.
pub struct Conditions {
    live: Vec<Value>,
    now: String,
}

impl Conditions {
    /// The conditions `live` (any condition type of k8s-openapi), at `now`.
    pub fn of<T: Serialize>(live: Option<&Vec<T>>) -> Self {
        Self {
            live: live
                .and_then(|l| serde_json::to_value(l).ok())
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default(),
            now: super::now(),
        }
    }

    fn live(&self, kind: &str) -> Option<&Value> {
        self.live.iter().find(|c| c["type"] == kind)
    }

    /// A condition with `lastTransitionTime`.
    pub fn set(&self, kind: &str, status: bool, reason: &str, message: &str) -> Value {
        let status = if status { "True" } else { "False" };
        let since = match self.live(kind) {
            Some(live) if live["status"] == status => live["lastTransitionTime"].clone(),
            _ => json!(self.now),
        };
        let mut c = json!({"type": kind, "status": status, "lastTransitionTime": since});
        if !reason.is_empty() {
            c["reason"] = json!(reason);
        }
        if !message.is_empty() {
            c["message"] = json!(message);
        }
        c
    }

    /// A condition with `lastTransitionTime` and `lastUpdateTime` (Deployments).
    pub fn updated(&self, kind: &str, status: bool, reason: &str, message: &str) -> Value {
        let mut c = self.set(kind, status, reason, message);
        let unchanged = self.live(kind).is_some_and(|live| {
            live["status"] == c["status"]
                && live.get("reason") == c.get("reason")
                && live.get("message") == c.get("message")
        });
        c["lastUpdateTime"] = match self.live(kind) {
            Some(live) if unchanged => live["lastUpdateTime"].clone(),
            _ => json!(self.now),
        };
        c
    }
}
