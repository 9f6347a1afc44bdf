//! kube's validation of a pod spec (a Pod's or a template's): containers with
//! names and images, their ports, requests within limits, the restart policy.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{invalid, not_supported, required};
use crate::error::Cause;
use crate::objects::quantity::Quantity;

const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// The restart policies a pod spec may have where it is.
#[derive(Clone, Copy)]
pub enum RestartPolicies {
    /// A Pod: `Always`, `OnFailure`, `Never`.
    Any,
    /// A workload's template (Deployments, ...): Always only.
    AlwaysOnly,
    /// A Job's template: checked by the Job's own rule.
    Unchecked,
}

/// Errors of a pod spec at `path`.
pub fn pod_spec(spec: Option<&Value>, path: &str, policies: RestartPolicies, out: &mut Vec<Cause>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers.filter(|c| !c.is_empty()) {
        None => out.push(required(&format!("{path}.containers"), "")),
        Some(containers) => {
            let mut names = BTreeSet::new();
            for (i, c) in containers.iter().enumerate() {
                container(c, &format!("{path}.containers[{i}]"), &mut names, out);
            }
        }
    }
    let rp = spec
        .and_then(|s| s.get("restartPolicy"))
        .and_then(Value::as_str);
    let field = format!("{path}.restartPolicy");
    match (policies, rp) {
        (RestartPolicies::Any, Some(rp)) if !["Always", "OnFailure", "Never"].contains(&rp) => {
            out.push(not_supported(&field, rp, &["Always", "OnFailure", "Never"]));
        }
        (RestartPolicies::AlwaysOnly, Some(rp)) if rp != "Always" => {
            out.push(not_supported(&field, rp, &["Always"]));
        }
        _ => {}
    }
}

fn container(c: &Value, p: &str, names: &mut BTreeSet<String>, out: &mut Vec<Cause>) {
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
    ports(c, p, out);
    resources(c, p, out);
}

/// Port names unique within the container, port numbers in range.
fn ports(c: &Value, p: &str, out: &mut Vec<Cause>) {
    let mut names = BTreeSet::new();
    for (j, port) in c
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let pp = format!("{p}.ports[{j}]");
        if let Some(name) = port
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            && !names.insert(name.to_string())
        {
            out.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: {name:?}"),
                format!("{pp}.name"),
            ));
        }
        match port
            .get("containerPort")
            .and_then(Value::as_i64)
            .unwrap_or(0)
        {
            0 => out.push(required(&format!("{pp}.containerPort"), "")),
            n if !(1..=65535).contains(&n) => {
                out.push(invalid(
                    &format!("{pp}.containerPort"),
                    &n.into(),
                    PORT_RANGE,
                ));
            }
            _ => {}
        }
        if let Some(n) = port.get("hostPort").and_then(Value::as_i64)
            && n != 0
            && !(1..=65535).contains(&n)
        {
            out.push(invalid(&format!("{pp}.hostPort"), &n.into(), PORT_RANGE));
        }
    }
}

/// Each request at most its limit.
fn resources(c: &Value, p: &str, out: &mut Vec<Cause>) {
    let Some(requests) = c.pointer("/resources/requests").and_then(Value::as_object) else {
        return;
    };
    let limits = c.pointer("/resources/limits").and_then(Value::as_object);
    for (name, request) in requests {
        let limit = limits.and_then(|l| l.get(name)).and_then(Value::as_str);
        let (Some(req), Some(lim)) = (request.as_str(), limit) else {
            continue;
        };
        if let (Some(rq), Some(lq)) = (Quantity::parse(req), Quantity::parse(lim))
            && rq > lq
        {
            out.push(invalid(
                &format!("{p}.resources.requests"),
                &Value::String(req.to_string()),
                &format!("must be less than or equal to {name} limit of {lim}"),
            ));
        }
    }
}

const POD_UPDATE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// A Pod's spec with what an update may change blanked out: images, the
/// deadline, added tolerations, the grace period, and (for the embedded
/// scheduler, which has no `pods/binding`) a first `nodeName`.
fn frozen(spec: &Value, old: &Value) -> Value {
    let mut s = spec.clone();
    for list in ["containers", "initContainers"] {
        for c in s
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(m) = c.as_object_mut() {
                m.remove("image");
            }
        }
    }
    if let Some(m) = s.as_object_mut() {
        m.remove("activeDeadlineSeconds");
        m.remove("terminationGracePeriodSeconds");
        if old.get("nodeName").is_none() {
            m.remove("nodeName");
        }
        let old_tolerations = old.get("tolerations").and_then(Value::as_array);
        if let Some(Value::Array(t)) = m.get_mut("tolerations") {
            let kept = old_tolerations.is_some_and(|o| o.iter().all(|x| t.contains(x)));
            if kept || old_tolerations.is_none() {
                t.retain(|x| old_tolerations.is_some_and(|o| o.contains(x)));
            }
            if t.is_empty() {
                m.remove("tolerations");
            }
        }
    }
    s
}

/// kube's refusal of a Pod update that changes more than it may (kube appends
/// a diff of its internal types, which is not reproduced).
pub fn update(old: &Value, new: &Value) -> Option<Cause> {
    let (old_spec, new_spec) = (old.get("spec")?, new.get("spec")?);
    (frozen(old_spec, old_spec) != frozen(new_spec, old_spec)).then(|| {
        Cause::new(
            "FieldValueForbidden",
            format!("Forbidden: {POD_UPDATE}"),
            "spec",
        )
    })
}

/// Fields of a container an ephemeral container may not set (kube's
/// `allowedEphemeralContainerFields`, the other way round).
const NOT_FOR_EPHEMERAL: [&str; 10] = [
    "ports",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resizePolicy",
    "restartPolicy",
    "restartPolicyRules",
    "stopSignal",
];

/// kube's `validateEphemeralContainers`: each a valid container with a name
/// unique among all the Pod's containers, a target that is one of its
/// other containers, none of the fields ephemeral containers may not have.
pub fn ephemeral_containers(spec: &Value, out: &mut Vec<Cause>) {
    let Some(ephemeral) = spec.get("ephemeralContainers").and_then(Value::as_array) else {
        return;
    };
    let mut others = BTreeSet::new();
    for list in ["containers", "initContainers"] {
        for c in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = c.get("name").and_then(Value::as_str) {
                others.insert(n.to_string());
            }
        }
    }
    let mut names = others.clone();
    for (i, c) in ephemeral.iter().enumerate() {
        let p = format!("spec.ephemeralContainers[{i}]");
        container(c, &p, &mut names, out);
        if let Some(target) = c
            .get("targetContainerName")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty() && !others.contains(*t))
        {
            out.push(Cause::new(
                "FieldValueNotFound",
                format!("Not found: {target:?}"),
                format!("{p}.targetContainerName"),
            ));
        }
        for field in NOT_FOR_EPHEMERAL {
            if c.get(field).is_some_and(|v| !is_zero(v)) {
                out.push(Cause::new(
                    "FieldValueForbidden",
                    "Forbidden: cannot be set for an Ephemeral Container",
                    format!("{p}.{field}"),
                ));
            }
        }
        for (j, mount) in c
            .get("volumeMounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            for field in ["subPath", "subPathExpr"] {
                if mount
                    .get(field)
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
                {
                    out.push(Cause::new(
                        "FieldValueForbidden",
                        "Forbidden: cannot be set for an Ephemeral Container",
                        format!("{p}.volumeMounts[{j}].{field}"),
                    ));
                }
            }
        }
    }
}

/// Whether `v` is what Go decodes to a zero value (`null`, `{}`, `[]`, `""`,
/// `0`, `false`): kube writes some unset structs as `{}`.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.values().all(is_zero),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
    }
}

/// kube's `ValidatePodEphemeralContainersUpdate`: the ephemeral containers
/// already there stay as they were (kube appends a diff, not reproduced).
pub fn ephemeral_update(old: &Value, new: &Value) -> Vec<Cause> {
    let list = |o: &Value| {
        o.pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let after = list(new);
    let mut out = Vec::new();
    for before in list(old) {
        let name = before["name"].as_str().unwrap_or_default();
        let message = match after.iter().find(|c| c["name"] == before["name"]) {
            None => format!("existing ephemeral containers {name:?} may not be removed\n"),
            Some(c) if *c != before => {
                format!("existing ephemeral containers {name:?} may not be changed\n")
            }
            Some(_) => continue,
        };
        out.push(Cause::new(
            "FieldValueForbidden",
            format!("Forbidden: {message}"),
            "spec.ephemeralContainers",
        ));
    }
    out
}
