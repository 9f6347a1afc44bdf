//! The cells of kube's printers (`pkg/printers/internalversion/printers.go`) for the
//! built-in kinds, by column name; server-side Tables always carry the wide
//! (priority 1) columns. The column definitions are kube's, in `columns.json`.

use serde_json::{Value, json};

use super::age_of;

fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn int(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn len(v: Option<&Value>) -> usize {
    match v {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn items<'a>(obj: &'a Value, ptr: &str) -> impl Iterator<Item = &'a Value> {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `"<none>"` for an empty string, as kube's printers write it.
fn or_none(s: String) -> Value {
    json!(if s.is_empty() { "<none>".into() } else { s })
}

/// `labels.FormatLabels` / a selector map: `a=b,c=d` sorted, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// `metav1.LabelSelectorAsSelector(...).String()`: requirements sorted by key,
/// empty for an empty selector.
fn label_selector(sel: Option<&Value>) -> String {
    let mut reqs: Vec<(String, String)> = vec![];
    let Some(sel) = sel.filter(|s| s.is_object()) else {
        return String::new();
    };
    for (k, v) in sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
    }
    for e in items(sel, "/matchExpressions") {
        let key = text(e, "/key");
        let mut values: Vec<&str> = items(e, "/values").filter_map(Value::as_str).collect();
        values.sort_unstable();
        let values = values.join(",");
        let req = match text(e, "/operator") {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key.to_string(), req));
    }
    reqs.sort();
    reqs.into_iter()
        .map(|(_, r)| r)
        .collect::<Vec<_>>()
        .join(",")
}

/// `layoutContainerCells`: names and images of the containers at `ptr`.
fn containers(obj: &Value, ptr: &str, field: &str) -> Value {
    let list: Vec<&str> = items(obj, ptr).map(|c| text(c, field)).collect();
    json!(list.join(","))
}

/// A Pod's status column, as far as a Pod without a kubelet can show it.
fn pod_status(pod: &Value) -> String {
    let mut reason = match text(pod, "/status/reason") {
        "" => text(pod, "/status/phase").to_string(),
        r => r.to_string(),
    };
    if items(pod, "/status/conditions")
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    for c in items(pod, "/status/containerStatuses")
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        if let Some(r) = c.pointer("/state/waiting/reason").and_then(Value::as_str) {
            reason = r.to_string();
        } else if let Some(r) = c
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str)
        {
            reason = r.to_string();
        }
    }
    let terminal = matches!(text(pod, "/status/phase"), "Succeeded" | "Failed");
    if pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
        && !terminal
    {
        reason = "Terminating".into();
    }
    reason
}

fn pod(column: &str, pod: &Value) -> Option<Value> {
    Some(match column {
        "Ready" => {
            let ready = items(pod, "/status/containerStatuses")
                .filter(|c| c["ready"] == true)
                .count();
            json!(format!("{ready}/{}", len(pod.pointer("/spec/containers"))))
        }
        "Status" => json!(pod_status(pod)),
        "Restarts" => {
            let n: i64 = items(pod, "/status/containerStatuses")
                .map(|c| int(c, "/restartCount"))
                .sum();
            json!(n.to_string())
        }
        "IP" => or_none(text(pod, "/status/podIPs/0/ip").to_string()),
        "Node" => or_none(text(pod, "/spec/nodeName").to_string()),
        "Nominated Node" => or_none(text(pod, "/status/nominatedNodeName").to_string()),
        "Readiness Gates" => {
            let gates: Vec<&str> = items(pod, "/spec/readinessGates")
                .map(|g| text(g, "/conditionType"))
                .collect();
            if gates.is_empty() {
                json!("<none>")
            } else {
                let ok = gates
                    .iter()
                    .filter(|g| {
                        items(pod, "/status/conditions")
                            .find(|c| c["type"] == **g)
                            .is_some_and(|c| c["status"] == "True")
                    })
                    .count();
                json!(format!("{ok}/{}", gates.len()))
            }
        }
        _ => return None,
    })
}

fn service(column: &str, svc: &Value) -> Option<Value> {
    Some(match column {
        "Type" => json!(text(svc, "/spec/type")),
        "Cluster-IP" => or_none(text(svc, "/spec/clusterIPs/0").to_string()),
        "External-IP" => {
            let external: Vec<&str> = items(svc, "/spec/externalIPs")
                .filter_map(Value::as_str)
                .collect();
            let lb: Vec<&str> = items(svc, "/status/loadBalancer/ingress")
                .map(|i| match text(i, "/ip") {
                    "" => text(i, "/hostname"),
                    ip => ip,
                })
                .collect();
            json!(match text(svc, "/spec/type") {
                "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
                "ClusterIP" | "NodePort" => external.join(","),
                "LoadBalancer" if lb.is_empty() && external.is_empty() => "<pending>".into(),
                "LoadBalancer" => [lb, external].concat().join(","),
                "ExternalName" => text(svc, "/spec/externalName").to_string(),
                _ => "<unknown>".into(),
            })
        }
        "Port(s)" => {
            let ports: Vec<String> = items(svc, "/spec/ports")
                .map(|p| {
                    let protocol = text(p, "/protocol");
                    match int(p, "/nodePort") {
                        0 => format!("{}/{protocol}", int(p, "/port")),
                        node => format!("{}:{node}/{protocol}", int(p, "/port")),
                    }
                })
                .collect();
            or_none(ports.join(","))
        }
        "Selector" => json!(format_labels(svc.pointer("/spec/selector"))),
        _ => return None,
    })
}

/// The columns workloads share: containers, images and selector of a template.
fn workload(column: &str, obj: &Value, template: &str) -> Option<Value> {
    Some(match column {
        "Containers" => containers(obj, &format!("{template}/spec/containers"), "/name"),
        "Images" => containers(obj, &format!("{template}/spec/containers"), "/image"),
        "Selector" => json!(label_selector(obj.pointer("/spec/selector"))),
        _ => return None,
    })
}

fn event(column: &str, e: &Value) -> Option<Value> {
    let first = || {
        let t = e
            .get("firstTimestamp")
            .filter(|t| t.is_string())
            .or_else(|| e.get("eventTime").filter(|t| t.is_string()));
        age_of(t.and_then(Value::as_str))
    };
    Some(match column {
        "Last Seen" => match e
            .pointer("/series/lastObservedTime")
            .and_then(Value::as_str)
        {
            Some(t) => age_of(Some(t)),
            None => match e.get("lastTimestamp").and_then(Value::as_str) {
                Some(t) => age_of(Some(t)),
                None => first(),
            },
        },
        "First Seen" => first(),
        "Type" => json!(text(e, "/type")),
        "Reason" => json!(text(e, "/reason")),
        "Object" => {
            let kind = text(e, "/involvedObject/kind").to_ascii_lowercase();
            json!(match text(e, "/involvedObject/name") {
                "" => kind,
                name => format!("{kind}/{name}"),
            })
        }
        "Subobject" => json!(text(e, "/involvedObject/fieldPath")),
        "Source" => {
            let pick = |a: &str, b: &str| {
                if a.is_empty() {
                    b.to_string()
                } else {
                    a.to_string()
                }
            };
            let component = pick(text(e, "/source/component"), text(e, "/reportingComponent"));
            let instance = pick(text(e, "/source/host"), text(e, "/reportingInstance"));
            json!(if instance.is_empty() {
                component
            } else {
                format!("{component}, {instance}")
            })
        }
        "Message" => json!(text(e, "/message").trim()),
        "Count" => json!(match e.pointer("/series/count").and_then(Value::as_i64) {
            Some(n) => n,
            None => int(e, "/count").max(1),
        }),
        _ => return None,
    })
}

/// `Users`, `Groups`, `ServiceAccounts` of a (Cluster)RoleBinding.
fn subjects(b: &Value, kind: &str) -> Value {
    let names: Vec<String> = items(b, "/subjects")
        .filter(|s| s["kind"] == kind)
        .map(|s| match kind {
            "ServiceAccount" => format!("{}/{}", text(s, "/namespace"), text(s, "/name")),
            _ => text(s, "/name").to_string(),
        })
        .collect();
    json!(names.join(", "))
}

/// `Request`/`Limit` of a `ResourceQuota`: `name: used/hard` of each resource in
/// `status.hard` (the `limits.` ones under Limit), sorted.
fn quota(q: &Value, limits: bool) -> Value {
    let mut parts: Vec<String> = q
        .pointer("/status/hard")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, _)| name.starts_with("limits.") == limits)
        .map(|(name, h)| {
            let used = q
                .pointer(&format!("/status/used/{}", name.replace('/', "~1")))
                .and_then(Value::as_str)
                .unwrap_or("0");
            format!("{name}: {used}/{}", h.as_str().unwrap_or(""))
        })
        .collect();
    parts.sort();
    json!(parts.join(", "))
}

/// A Job's status column (`printJob`).
fn job_status(job: &Value) -> &'static str {
    let has =
        |t: &str| items(job, "/status/conditions").any(|c| c["type"] == t && c["status"] == "True");
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if job
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

/// A binding's paramRef as kube prints it: `NAMESPACE/NAME`, `*/NAME` without a
/// namespace, the selector (Go's struct rendering, which is not reproduced: the
/// selector's `metav1.FormatLabelSelector` instead), or `<unset>`.
fn param_ref(obj: &Value) -> String {
    let Some(pr) = obj.pointer("/spec/paramRef").filter(|p| p.is_object()) else {
        return "<unset>".into();
    };
    let (name, ns) = (text(pr, "/name"), text(pr, "/namespace"));
    match (name, ns) {
        ("", _) if pr.get("selector").is_some_and(Value::is_object) => {
            label_selector(pr.get("selector"))
        }
        ("", _) => "<unset>".into(),
        (n, "") => format!("*/{n}"),
        (n, ns) => format!("{ns}/{n}"),
    }
}

/// `metav1.FormatLabelSelector`: `<none>` for an empty selector.
fn format_label_selector(sel: Option<&Value>) -> Value {
    or_none(label_selector(sel))
}

/// The cell of `column` for `obj` of the built-in `group`/`plural`; None when the
/// embedded server does not compute that column (its cell is then empty).
/// kube's printer of `CertificateSigningRequests`.
fn certificate_signing_request(column: &str, obj: &Value) -> Option<Value> {
    let or_none = |s: &str| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s.to_string()
        }
    };
    Some(match column {
        "SignerName" => json!(or_none(text(obj, "/spec/signerName"))),
        "Requestor" => json!(text(obj, "/spec/username")),
        "RequestedDuration" => json!(
            obj.pointer("/spec/expirationSeconds")
                .and_then(Value::as_i64)
                .map_or_else(|| "<none>".to_string(), super::human_duration)
        ),
        "Condition" => {
            let has = |kind: &str| items(obj, "/status/conditions").any(|c| c["type"] == kind);
            let mut status = if has("Denied") {
                "Denied"
            } else if has("Approved") {
                "Approved"
            } else {
                "Pending"
            }
            .to_string();
            if has("Failed") {
                status.push_str(",Failed");
            }
            if !text(obj, "/status/certificate").is_empty() {
                status.push_str(",Issued");
            }
            json!(status)
        }
        _ => return None,
    })
}

pub(super) fn cell(group: &str, plural: &str, column: &str, obj: &Value) -> Option<Value> {
    let replicas = |ptr: &str| obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(1);
    Some(match (group, plural, column) {
        (_, _, "Age") => age_of(
            obj.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str),
        ),
        (_, _, "Created At") => obj
            .pointer("/metadata/creationTimestamp")
            .cloned()
            .unwrap_or(Value::Null),
        (_, _, "Name") => json!(text(obj, "/metadata/name")),
        ("apiregistration.k8s.io", "apiservices", "Service") => {
            match obj.pointer("/spec/service").filter(|s| s.is_object()) {
                Some(s) => json!(format!("{}/{}", text(s, "/namespace"), text(s, "/name"))),
                None => json!("Local"),
            }
        }
        ("apiregistration.k8s.io", "apiservices", "Available") => {
            let available = items(obj, "/status/conditions").find(|c| c["type"] == "Available");
            match available {
                None => json!("Unknown"),
                Some(c) if c["status"] == "True" => json!("True"),
                Some(c) => json!(format!("{} ({})", text(c, "/status"), text(c, "/reason"))),
            }
        }
        ("autoscaling", "horizontalpodautoscalers", _) => {
            return crate::objects::hpa::table::cell(column, &crate::objects::hpa::as_v2(obj));
        }
        ("certificates.k8s.io", "certificatesigningrequests", _) => {
            return certificate_signing_request(column, obj);
        }
        ("", "pods", _) => return pod(column, obj),
        ("", "services", _) => return service(column, obj),
        ("" | "events.k8s.io", "events", _) => return event(column, obj),
        ("", "configmaps", "Data") => {
            json!(len(obj.get("data")) + len(obj.get("binaryData")))
        }
        ("", "secrets", "Type") => json!(text(obj, "/type")),
        ("", "secrets", "Data") => json!(len(obj.get("data"))),
        ("", "namespaces", "Status") => json!(text(obj, "/status/phase")),
        ("", "resourcequotas", "Request") => quota(obj, false),
        ("", "resourcequotas", "Limit") => quota(obj, true),
        ("apps", "deployments" | "statefulsets", "Ready") => json!(format!(
            "{}/{}",
            int(obj, "/status/readyReplicas"),
            replicas("/spec/replicas")
        )),
        ("apps", "deployments", "Up-to-date") => json!(int(obj, "/status/updatedReplicas")),
        ("apps", "deployments", "Available") => json!(int(obj, "/status/availableReplicas")),
        ("apps" | "", "replicasets" | "replicationcontrollers", "Desired") => {
            json!(replicas("/spec/replicas"))
        }
        ("apps" | "", "replicasets" | "replicationcontrollers", "Current") => {
            json!(int(obj, "/status/replicas"))
        }
        ("apps" | "", "replicasets" | "replicationcontrollers", "Ready") => {
            json!(int(obj, "/status/readyReplicas"))
        }
        ("", "replicationcontrollers", "Selector") => {
            json!(format_labels(obj.pointer("/spec/selector")))
        }
        ("apps", "daemonsets", "Desired") => json!(int(obj, "/status/desiredNumberScheduled")),
        ("apps", "daemonsets", "Current") => json!(int(obj, "/status/currentNumberScheduled")),
        ("apps", "daemonsets", "Ready") => json!(int(obj, "/status/numberReady")),
        ("apps", "daemonsets", "Up-to-date") => json!(int(obj, "/status/updatedNumberScheduled")),
        ("apps", "daemonsets", "Available") => json!(int(obj, "/status/numberAvailable")),
        ("apps", "daemonsets", "Node Selector") => {
            json!(format_labels(
                obj.pointer("/spec/template/spec/nodeSelector")
            ))
        }
        ("apps", "replicasets", "Selector") => format_label_selector(obj.pointer("/spec/selector")),
        ("apps" | "" | "batch", _, "Containers" | "Images" | "Selector")
            if plural != "cronjobs" =>
        {
            return workload(column, obj, "/spec/template");
        }
        ("batch", "cronjobs", "Containers" | "Images") => {
            return workload(column, obj, "/spec/jobTemplate/spec/template");
        }
        ("batch", "cronjobs", "Selector") => {
            format_label_selector(obj.pointer("/spec/jobTemplate/spec/selector"))
        }
        ("batch", "cronjobs", "Schedule") => json!(text(obj, "/spec/schedule")),
        ("batch", "cronjobs", "Timezone") => or_none(text(obj, "/spec/timeZone").to_string()),
        ("batch", "cronjobs", "Suspend") => {
            json!(
                obj.pointer("/spec/suspend")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            )
        }
        ("batch", "cronjobs", "Active") => json!(len(obj.pointer("/status/active"))),
        ("batch", "cronjobs", "Last Schedule") => {
            match obj
                .pointer("/status/lastScheduleTime")
                .and_then(Value::as_str)
            {
                Some(t) => age_of(Some(t)),
                None => json!("<none>"),
            }
        }
        ("batch", "jobs", "Status") => json!(job_status(obj)),
        ("batch", "jobs", "Completions") => {
            let succeeded = int(obj, "/status/succeeded");
            json!(
                match obj.pointer("/spec/completions").and_then(Value::as_i64) {
                    Some(n) => format!("{succeeded}/{n}"),
                    None => match int(obj, "/spec/parallelism") {
                        p if p > 1 => format!("{succeeded}/1 of {p}"),
                        _ => format!("{succeeded}/1"),
                    },
                }
            )
        }
        ("batch", "jobs", "Duration") if obj.pointer("/status/startTime").is_none() => json!(""),
        ("batch", "jobs", "Selector") => format_label_selector(obj.pointer("/spec/selector")),
        ("coordination.k8s.io", "leases", "Holder") => json!(text(obj, "/spec/holderIdentity")),
        ("admissionregistration.k8s.io", _, "Webhooks") => json!(len(obj.get("webhooks"))),
        ("admissionregistration.k8s.io", _, "Validations") => {
            json!(len(obj.pointer("/spec/validations")))
        }
        ("admissionregistration.k8s.io", _, "ParamKind") => match obj.pointer("/spec/paramKind") {
            Some(pk) if pk.is_object() => {
                json!(format!("{}/{}", text(pk, "/apiVersion"), text(pk, "/kind")))
            }
            _ => json!("<unset>"),
        },
        ("admissionregistration.k8s.io", _, "PolicyName") => json!(text(obj, "/spec/policyName")),
        ("admissionregistration.k8s.io", _, "ParamRef") => json!(param_ref(obj)),
        ("rbac.authorization.k8s.io", _, "Role") => json!(format!(
            "{}/{}",
            text(obj, "/roleRef/kind"),
            text(obj, "/roleRef/name")
        )),
        ("rbac.authorization.k8s.io", _, "Users") => subjects(obj, "User"),
        ("rbac.authorization.k8s.io", _, "Groups") => subjects(obj, "Group"),
        ("rbac.authorization.k8s.io", _, "ServiceAccounts") => subjects(obj, "ServiceAccount"),
        ("scheduling.k8s.io", "priorityclasses", "Value") => json!(int(obj, "/value")),
        ("scheduling.k8s.io", "priorityclasses", "Global-Default") => {
            json!(
                obj.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            )
        }
        ("scheduling.k8s.io", "priorityclasses", "PreemptionPolicy") => {
            json!(text(obj, "/preemptionPolicy"))
        }
        _ => return None,
    })
}
