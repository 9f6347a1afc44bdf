//! Kind-specific behaviour on create and update (what kube's per-kind strategies do):
//! namespaces get the `kubernetes` finalizer and a phase, CRDs are validated and
//! their status is computed, webhook configurations, admission policies and bindings are validated.

use serde_json::{Value, json};

use crate::error::ApiResult;
use crate::registry::ResourceInfo;

fn is(info: &ResourceInfo, group: &str, plural: &str) -> bool {
    info.group == group && info.plural == plural
}

fn is_policy(info: &ResourceInfo) -> bool {
    info.group == crate::admission::GROUP
        && (info.plural == crate::admission::policy::POLICIES
            || info.plural == crate::admission::policy::BINDINGS)
}

/// Called for every new object after admission.
pub fn on_create(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    if is(info, "", "namespaces") {
        obj["spec"] = json!({ "finalizers": ["kubernetes"] });
        obj["status"] = json!({ "phase": "Active" });
        // For a name generated after the defaults ran (kube's Canonicalize).
        crate::objects::defaults::namespace_name_label(obj);
    } else if is(info, crate::crd::GROUP, crate::crd::PLURAL) {
        crate::crd::admit(obj, None)?;
    } else if is(info, "", "services") {
        allocate_cluster_ip(obj);
    } else if crate::admission::is_webhook_configuration(info) {
        crate::admission::config::admit(info, obj, None)?;
    } else if is_policy(info) {
        crate::admission::policy::config::admit(info, obj)?;
    }
    Ok(())
}

/// Gives a Service a cluster IP from 10.96.0.0/12 (as kube's allocator does; uniqueness
/// is only probabilistic here), unless it has one, is headless or `ExternalName`.
fn allocate_cluster_ip(svc: &mut Value) {
    use rand::Rng;
    let spec = &mut svc["spec"];
    if spec["type"] == "ExternalName" {
        return;
    }
    let ip = if let Some(ip) = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
    {
        ip.to_string()
    } else {
        let mut rng = rand::rng();
        format!(
            "10.{}.{}.{}",
            rng.random_range(96..112),
            rng.random_range(0..=255),
            rng.random_range(1..255)
        )
    };
    spec["clusterIP"] = json!(ip);
    if spec.get("clusterIPs").is_none_or(Value::is_null) {
        spec["clusterIPs"] = json!([ip]);
    }
    if spec.get("ipFamilies").is_none_or(Value::is_null) {
        spec["ipFamilies"] = json!(["IPv4"]);
    }
    if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
        spec["ipFamilyPolicy"] = json!("SingleStack");
    }
}

/// Called for every update after subresource rules and admission.
pub fn on_update(
    info: &ResourceInfo,
    old: &Value,
    new: &mut Value,
    subresource: Option<&str>,
) -> ApiResult<()> {
    if is(info, "", "namespaces") {
        if subresource != Some("finalize") {
            new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        }
    } else if is(info, crate::crd::GROUP, crate::crd::PLURAL) && subresource.is_none() {
        crate::crd::admit(new, Some(old))?;
    } else if crate::admission::is_webhook_configuration(info) {
        crate::admission::config::admit(info, new, Some(old))?;
    } else if is_policy(info) && subresource.is_none() {
        crate::admission::policy::config::admit(info, new)?;
    } else if crate::certificates::is_csr(info) {
        crate::certificates::strategy::on_update(old, new, subresource)?;
    } else if is(info, "", "services") {
        // Allocated fields survive updates that do not mention them.
        for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if new
                .pointer(&format!("/spec/{f}"))
                .is_none_or(|v| v.is_null() || v == "")
                && let Some(v) = old.pointer(&format!("/spec/{f}"))
            {
                new["spec"][f] = v.clone();
            }
        }
    }
    Ok(())
}

/// Whether something besides `metadata.finalizers` keeps a deleting object alive
/// (a namespace's `spec.finalizers`).
pub fn holds_deletion(info: &ResourceInfo, obj: &Value) -> bool {
    is(info, "", "namespaces") && spec_finalizers_nonempty(obj)
}

/// Whether a namespace still has `spec.finalizers`.
pub fn spec_finalizers_nonempty(obj: &Value) -> bool {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}
