//! What a create and each kind of update may change in a
//! `CertificateSigningRequest`, as kube's strategies: a create records its
//! requester and drops any status; an update of the object changes
//! metadata only; `/status` may not approve or deny (kube's validation);
//! `/approval` keeps the certificate. New conditions get their times.

use serde_json::{Value, json};

use super::validation::{self, Update};
use crate::admission::UserInfo;
use crate::error::{ApiError, ApiResult};

/// Records the requesting user in the spec and drops any status.
pub fn on_create(user: &UserInfo, obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    let spec = &mut obj["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    for field in ["username", "uid", "groups", "extra"] {
        spec.as_object_mut().map(|s| s.remove(field));
    }
    spec["username"] = json!(user.username);
    if let Some(uid) = user.uid.as_deref().filter(|u| !u.is_empty()) {
        spec["uid"] = json!(uid);
    }
    if !user.groups.is_empty() {
        spec["groups"] = json!(user.groups);
    }
}

fn conditions_of(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// kube's `populateConditionTimestamps`: `lastUpdateTime` now when unset,
/// `lastTransitionTime` that of the same old condition, else now.
fn stamp_conditions(old: &Value, new: &mut Value) {
    let now = crate::objects::meta::now_rfc3339();
    let old_conditions = conditions_of(old);
    let Some(conditions) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in conditions {
        let unset = |c: &Value, f: &str| c.get(f).is_none_or(|t| t.is_null() || t == "");
        if unset(c, "lastUpdateTime") {
            c["lastUpdateTime"] = json!(now);
        }
        if unset(c, "lastTransitionTime") {
            let earlier = old_conditions
                .iter()
                .find(|o| {
                    o["type"] == c["type"]
                        && o["status"] == c["status"]
                        && !unset(o, "lastTransitionTime")
                })
                .map(|o| o["lastTransitionTime"].clone());
            c["lastTransitionTime"] = earlier.unwrap_or_else(|| json!(now));
        }
    }
}

/// Applies the rules of an update of `subresource` to `new`, then kube's
/// validation of the update (422 with its causes).
pub fn on_update(old: &Value, new: &mut Value, subresource: Option<&str>) -> ApiResult<()> {
    new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
    let update = match subresource {
        Some("status") => {
            stamp_conditions(old, new);
            Update::Status
        }
        Some("approval") => {
            match old.pointer("/status/certificate") {
                Some(c) => new["status"]["certificate"] = c.clone(),
                None => {
                    new.get_mut("status")
                        .and_then(Value::as_object_mut)
                        .map(|s| s.remove("certificate"));
                }
            }
            stamp_conditions(old, new);
            Update::Approval
        }
        _ => {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    new.as_object_mut().map(|m| m.remove("status"));
                }
            }
            Update::Object
        }
    };
    let causes = validation::validate_update(old, new, update);
    if causes.is_empty() {
        return Ok(());
    }
    let name = crate::objects::meta::meta_str(new, "name").unwrap_or_default();
    Err(ApiError::invalid(
        super::GROUP,
        "CertificateSigningRequest",
        name,
        causes,
    ))
}
