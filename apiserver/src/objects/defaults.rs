//! Defaults kube-apiserver applies to the most used built-in kinds (its
//! `SetDefaults_*` functions), so objects read back look like a real cluster's.
//! Only fields that are absent are filled in.

use serde_json::{Value, json};

use crate::registry::ResourceInfo;

/// Sets `obj[key] = value` when absent (or null); `obj` must be an object.
fn default(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.to_string(), value);
    }
}

/// The object at `key`, created empty when absent.
fn child<'a>(obj: &'a mut Value, key: &str) -> &'a mut Value {
    default(obj, key, json!({}));
    &mut obj[key]
}

fn container(c: &mut Value) {
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let last = image.rsplit('/').next().unwrap_or("");
    let latest = !image.contains('@') && (!last.contains(':') || last.ends_with(":latest"));
    default(
        c,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            default(p, "protocol", json!("TCP"));
        }
    }
    default(c, "resources", json!({}));
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            // SetDefaults_Probe.
            default(p, "timeoutSeconds", json!(1));
            default(p, "periodSeconds", json!(10));
            default(p, "successThreshold", json!(1));
            default(p, "failureThreshold", json!(3));
            http_get(p);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(h) = c.pointer_mut(&format!("/lifecycle/{hook}")) {
            http_get(h);
        }
    }
}

/// `SetDefaults_HTTPGetAction`, for a probe or lifecycle handler with `httpGet`.
fn http_get(handler: &mut Value) {
    if let Some(get) = handler.get_mut("httpGet").filter(|g| g.is_object()) {
        default(get, "path", json!("/"));
        default(get, "scheme", json!("HTTP"));
    }
}

/// `SetDefaults_PodSpec` and the container defaults.
fn pod_spec(spec: &mut Value) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(container);
        }
    }
}

/// `SetDefaults_ReplicationController`: selector and labels from the template's
/// labels when empty, one replica, and the template's defaults.
fn replication_controller(obj: &mut Value) {
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|l| !l.is_empty()))
        .cloned();
    if let Some(labels) = labels {
        let empty = |v: Option<&Value>| {
            v.and_then(Value::as_object)
                .is_none_or(serde_json::Map::is_empty)
        };
        if empty(obj.pointer("/spec/selector")) {
            child(obj, "spec")["selector"] = labels.clone();
        }
        if empty(obj.pointer("/metadata/labels")) {
            child(obj, "metadata")["labels"] = labels;
        }
    }
    let spec = child(obj, "spec");
    default(spec, "replicas", json!(1));
    if spec.get("template").is_some_and(Value::is_object) {
        template(spec);
    }
}

/// `SetDefaults_Pod`: what a Pod gets and a pod template does not (requests
/// defaulted from limits, `enableServiceLinks`).
fn pod(obj: &mut Value) {
    let spec = child(obj, "spec");
    for list in ["containers", "initContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(limits) = c
                .pointer("/resources/limits")
                .and_then(Value::as_object)
                .cloned()
            else {
                continue;
            };
            let requests = child(child(c, "resources"), "requests");
            for (name, quantity) in limits {
                default(requests, &name, quantity);
            }
        }
    }
    default(spec, "enableServiceLinks", json!(true));
    pod_spec(spec);
}

fn template(spec: &mut Value) {
    let t = child(spec, "template");
    pod_spec(child(t, "spec"));
}

fn job_spec(spec: &mut Value) {
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        default(spec, "completions", json!(1));
        default(spec, "parallelism", json!(1));
    }
    default(spec, "parallelism", json!(1));
    default(spec, "backoffLimit", json!(6));
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    template(spec);
}

/// kube's `kubernetes.io/metadata.name` label: always the namespace's name
/// (set again on every write; a generated name gets it on create).
pub fn namespace_name_label(obj: &mut Value) {
    let Some(name) = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
    else {
        return;
    };
    let metadata = child(obj, "metadata");
    let labels = child(metadata, "labels");
    if !labels.is_object() {
        *labels = json!({});
    }
    labels["kubernetes.io/metadata.name"] = json!(name);
}

/// A Secret's `stringData` folded into `data`, base64-encoded, as kube's
/// conversion of every write does: a key in both takes the `stringData`
/// value, and `stringData` itself is never stored or returned.
fn fold_string_data(secret: &mut Value) {
    use base64::Engine as _;
    let Some(Value::Object(strings)) = secret
        .as_object_mut()
        .and_then(|fields| fields.remove("stringData"))
    else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    let data = child(secret, "data");
    if !data.is_object() {
        *data = json!({});
    }
    for (key, value) in strings {
        if let Value::String(text) = value {
            data[key] = base64::engine::general_purpose::STANDARD
                .encode(text)
                .into();
        }
    }
}

/// Applies the defaults of `info`'s kind to `obj` (built-ins only).
pub fn apply(info: &ResourceInfo, obj: &mut Value) {
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => pod(obj),
        ("", "secrets") => {
            fold_string_data(obj);
            default(obj, "type", json!("Opaque"));
        }
        ("", "namespaces") => namespace_name_label(obj),
        ("autoscaling", "horizontalpodautoscalers") => {
            crate::objects::hpa::defaults::apply(info, obj);
        }
        (crate::admission::GROUP, crate::admission::MUTATING | crate::admission::VALIDATING) => {
            crate::admission::config::default(info, obj);
        }
        (
            crate::admission::GROUP,
            crate::admission::policy::POLICIES | crate::admission::policy::BINDINGS,
        ) => crate::admission::policy::config::default(info, obj),
        ("", "services") => {
            let spec = child(obj, "spec");
            default(spec, "type", json!("ClusterIP"));
            default(spec, "sessionAffinity", json!("None"));
            if spec["type"] != "ExternalName" {
                default(spec, "internalTrafficPolicy", json!("Cluster"));
            }
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports {
                    default(p, "protocol", json!("TCP"));
                    if let Some(port) = p.get("port").cloned() {
                        default(p, "targetPort", port);
                    }
                }
            }
        }
        ("apps", "deployments") => {
            let spec = child(obj, "spec");
            default(spec, "replicas", json!(1));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            default(spec, "strategy", json!({}));
            let strategy = &mut spec["strategy"];
            default(strategy, "type", json!("RollingUpdate"));
            if strategy["type"] == "RollingUpdate" {
                default(strategy, "rollingUpdate", json!({}));
                default(
                    &mut strategy["rollingUpdate"],
                    "maxUnavailable",
                    json!("25%"),
                );
                default(&mut strategy["rollingUpdate"], "maxSurge", json!("25%"));
            }
            template(spec);
        }
        ("apps", "statefulsets") => {
            let spec = child(obj, "spec");
            default(spec, "replicas", json!(1));
            default(spec, "podManagementPolicy", json!("OrderedReady"));
            default(spec, "revisionHistoryLimit", json!(10));
            default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            template(spec);
        }
        ("apps", "daemonsets") => {
            let spec = child(obj, "spec");
            default(spec, "revisionHistoryLimit", json!(10));
            default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            template(spec);
        }
        ("", "replicationcontrollers") => replication_controller(obj),
        ("apps", "replicasets") => {
            let spec = child(obj, "spec");
            default(spec, "replicas", json!(1));
            template(spec);
        }
        ("batch", "jobs") => job_spec(child(obj, "spec")),
        ("batch", "cronjobs") => {
            let spec = child(obj, "spec");
            default(spec, "concurrencyPolicy", json!("Allow"));
            default(spec, "suspend", json!(false));
            default(spec, "successfulJobsHistoryLimit", json!(3));
            default(spec, "failedJobsHistoryLimit", json!(1));
            let jt = child(spec, "jobTemplate");
            job_spec(child(jt, "spec"));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_defaults_keep_given_values() {
        let info = crate::registry::builtin::all()
            .into_iter()
            .find(|r| r.plural == "deployments")
            .unwrap();
        let mut d = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "a", "image": "nginx"}, {"name": "b", "image": "reg.io/x:1.2", "ports": [{"containerPort": 80}]}
        ]}}}});
        apply(&info, &mut d);
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let cs = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[0]["imagePullPolicy"], "Always");
        assert_eq!(cs[1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(cs[1]["ports"][0]["protocol"], "TCP");
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let mut again = d.clone();
        apply(&info, &mut again);
        assert_eq!(again, d, "idempotent");
    }
}
