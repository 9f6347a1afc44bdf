//! kube's per-kind validations of built-ins, the ones operators and kubectl users
//! most often trip over, with kube's messages: pod specs ([`pod`]), workload
//! selectors and replicas, Job restart policies, Service ports, ConfigMap and
//! Secret keys, Ingress path types, RBAC rules, CronJob schedules ([`cron`]),
//! PVC requests, immutable fields.

mod cron;
mod go_diff;
mod immutable;
mod kinds;
mod pod;

pub use immutable::validate_update;

/// The Pod `old` with only its ephemeral containers from `candidate` (and
/// its managedFields): what an update of `pods/ephemeralcontainers` may
/// change, as kube's `dropNonEphemeralContainerUpdates`.
pub fn with_ephemeral_containers(old: &Value, candidate: &Value) -> Value {
    let mut pod = old.clone();
    match candidate.pointer("/spec/ephemeralContainers") {
        Some(c) => pod["spec"]["ephemeralContainers"] = c.clone(),
        None => {
            pod["spec"]
                .as_object_mut()
                .map(|s| s.remove("ephemeralContainers"));
        }
    }
    if let Some(mf) = candidate.pointer("/metadata/managedFields") {
        crate::objects::meta::meta_mut(&mut pod).insert("managedFields".into(), mf.clone());
    }
    pod
}

/// What kube refuses in an update of `pods/ephemeralcontainers`: changes to
/// the ephemeral containers already there.
pub fn validate_ephemeral_update(old: &Value, new: &Value) -> Vec<Cause> {
    pod::ephemeral_update(old, new)
}

use serde_json::Value;

use pod::{RestartPolicies, pod_spec};

use crate::error::Cause;
use crate::registry::ResourceInfo;

fn required(field: &str, detail: &str) -> Cause {
    let msg = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    Cause::new("FieldValueRequired", msg, field)
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause::new(
        "FieldValueNotSupported",
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
        field,
    )
}

fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
        field,
    )
}

/// Workload selector: required, non-empty, matching the template's labels.
fn selector_matches_template(spec: &Value, kind: &str, out: &mut Vec<Cause>) {
    let Some(sel) = spec.get("selector").filter(|s| s.is_object()) else {
        out.push(required("spec.selector", ""));
        return;
    };
    let match_labels = sel.get("matchLabels").and_then(Value::as_object);
    let has_exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty());
    if match_labels.is_none_or(serde_json::Map::is_empty) && !has_exprs {
        out.push(invalid(
            "spec.selector",
            sel,
            &format!("empty selector is invalid for {kind}"),
        ));
        return;
    }
    let labels = spec
        .pointer("/template/metadata/labels")
        .and_then(Value::as_object);
    let matches = match_labels.is_none_or(|ml| {
        ml.iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    });
    if !matches {
        out.push(invalid(
            "spec.template.metadata.labels",
            &Value::Object(labels.cloned().unwrap_or_default()),
            "`selector` does not match template `labels`",
        ));
    }
}

fn job_template(spec: &Value, path: &str, out: &mut Vec<Cause>) {
    let pod = spec.pointer("/template/spec");
    pod_spec(
        pod,
        &format!("{path}.template.spec"),
        RestartPolicies::Unchecked,
        out,
    );
    let rp = pod
        .and_then(|p| p.get("restartPolicy"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if rp != "OnFailure" && rp != "Never" {
        out.push(Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: {rp:?}: supported values: \"OnFailure\", \"Never\""),
            format!("{path}.template.spec.restartPolicy"),
        ));
    }
}

/// `spec.replicas` is not negative.
fn replicas(spec: &Value, out: &mut Vec<Cause>) {
    if let Some(n) = spec.get("replicas").and_then(Value::as_i64)
        && n < 0
    {
        out.push(invalid(
            "spec.replicas",
            &n.into(),
            "must be greater than or equal to 0",
        ));
    }
}

/// kube's validation errors for `obj` (empty when valid or the kind is not covered).
pub fn validate(info: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let mut out = vec![];
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => {
            pod_spec(obj.get("spec"), "spec", RestartPolicies::Any, &mut out);
            if let Some(spec) = obj.get("spec") {
                pod::ephemeral_containers(spec, &mut out);
            }
        }
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            replicas(&spec, &mut out);
            selector_matches_template(&spec, &info.singular, &mut out);
            pod_spec(
                spec.pointer("/template/spec"),
                "spec.template.spec",
                RestartPolicies::AlwaysOnly,
                &mut out,
            );
        }
        ("", "replicationcontrollers") => replicas(&spec, &mut out),
        ("batch", "jobs") => job_template(&spec, "spec", &mut out),
        ("batch", "cronjobs") => {
            if spec
                .get("schedule")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                out.push(required("spec.schedule", ""));
            } else if let Some(s) = spec.get("schedule").and_then(Value::as_str) {
                for e in cron::errors(s) {
                    out.push(invalid("spec.schedule", &Value::String(s.into()), &e));
                }
            }
            let jt = spec
                .pointer("/jobTemplate/spec")
                .cloned()
                .unwrap_or(Value::Null);
            job_template(&jt, "spec.jobTemplate.spec", &mut out);
        }
        ("", "services") => {
            let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
            let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
            let no_ports = spec
                .get("ports")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
            if no_ports && !headless && !external {
                out.push(required("spec.ports", ""));
            }
            kinds::service_ports(&spec, &mut out);
        }
        ("", "configmaps") => kinds::config_map_keys(obj, &["data", "binaryData"], &mut out),
        ("", "secrets") => kinds::config_map_keys(obj, &["data", "stringData"], &mut out),
        ("", "persistentvolumeclaims") => kinds::pvc(&spec, &mut out),
        ("networking.k8s.io", "ingresses") => kinds::ingress_paths(&spec, &mut out),
        ("autoscaling", "horizontalpodautoscalers") => {
            out.extend(crate::objects::hpa::validation::validate(
                &crate::objects::hpa::as_v2(obj),
            ));
        }
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => {
            kinds::rules(obj, info.namespaced, &mut out);
        }
        (crate::certificates::GROUP, "certificatesigningrequests") => {
            out.extend(crate::certificates::validation::validate(obj));
        }
        _ => {}
    }
    out
}
