//! A few of kube's per-kind validations for built-ins, the ones operators most often
//! trip over: pod templates need containers with names and images, workload selectors
//! must be non-empty and match their template labels, Job pods cannot restart Always,
//! non-headless Services need ports.

use serde_json::Value;

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

fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
        field,
    )
}

fn pod_spec(spec: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    let Some(containers) = containers.filter(|c| !c.is_empty()) else {
        out.push(required(&format!("{path}.containers"), ""));
        return;
    };
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = format!("{path}.containers[{i}]");
        match c
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            None => out.push(required(&format!("{p}.name"), "")),
            Some(n) if !names.insert(n.to_string()) => out.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: {n:?}"),
                format!("{p}.name"),
            )),
            Some(_) => {}
        }
        if c.get("image")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            out.push(required(&format!("{p}.image"), ""));
        }
    }
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
    pod_spec(pod, &format!("{path}.template.spec"), out);
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

/// Fields kube refuses to change after create, per kind (JSON pointers and field paths).
fn immutable_fields(info: &ResourceInfo) -> &'static [(&'static str, &'static str)] {
    match (info.group.as_str(), info.plural.as_str()) {
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            &[("/spec/selector", "spec.selector")]
        }
        ("batch", "jobs") => &[
            ("/spec/selector", "spec.selector"),
            ("/spec/completionMode", "spec.completionMode"),
        ],
        ("", "services") => &[("/spec/clusterIP", "spec.clusterIP")],
        ("", "secrets") => &[("/type", "type")],
        _ => &[],
    }
}

/// kube's errors for changing immutable fields from `old` to `new`.
pub fn validate_update(info: &ResourceInfo, old: &Value, new: &Value) -> Vec<Cause> {
    immutable_fields(info)
        .iter()
        .filter(|(ptr, _)| old.pointer(ptr).is_some() && old.pointer(ptr) != new.pointer(ptr))
        .map(|(ptr, field)| {
            let value = new.pointer(ptr).cloned().unwrap_or(Value::Null);
            Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {value}: field is immutable"),
                *field,
            )
        })
        .collect()
}

/// kube's validation errors for `obj` (empty when valid or the kind is not covered).
pub fn validate(info: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let mut out = vec![];
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => pod_spec(obj.get("spec"), "spec", &mut out),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            selector_matches_template(&spec, &info.singular, &mut out);
            pod_spec(
                spec.pointer("/template/spec"),
                "spec.template.spec",
                &mut out,
            );
        }
        ("batch", "jobs") => job_template(&spec, "spec", &mut out),
        ("batch", "cronjobs") => {
            if spec
                .get("schedule")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                out.push(required("spec.schedule", ""));
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
        }
        _ => {}
    }
    out
}
