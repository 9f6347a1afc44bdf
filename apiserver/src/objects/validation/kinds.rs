//! kube's validation of a few kinds' own fields: Service ports, ConfigMap and
//! Secret keys, PVC requests, Ingress path types, RBAC rules.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{invalid, not_supported, required};
use crate::error::Cause;

const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";
const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// A Service's ports: names unique (and required when there are several),
/// port and numeric targetPort in range.
pub fn service_ports(spec: &Value, out: &mut Vec<Cause>) {
    let ports = spec.get("ports").and_then(Value::as_array);
    let ports = ports.map(Vec::as_slice).unwrap_or_default();
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = format!("spec.ports[{i}]");
        match port.get("name").and_then(Value::as_str).unwrap_or("") {
            "" if ports.len() > 1 => out.push(required(&format!("{p}.name"), "")),
            "" => {}
            name if !names.insert(name.to_string()) => out.push(Cause::new(
                "FieldValueDuplicate",
                format!("Duplicate value: {name:?}"),
                format!("{p}.name"),
            )),
            _ => {}
        }
        let n = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&n) {
            out.push(invalid(&format!("{p}.port"), &n.into(), PORT_RANGE));
        }
        if let Some(t) = port.get("targetPort").and_then(Value::as_i64)
            && !(1..=65535).contains(&t)
        {
            out.push(invalid(&format!("{p}.targetPort"), &t.into(), PORT_RANGE));
        }
    }
}

/// kube's `IsConfigMapKey` messages.
fn config_key_errors(key: &str) -> Vec<&'static str> {
    let mut out = vec![];
    if key.len() > 253 {
        out.push("must be no more than 253 characters");
    }
    let ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
    if !ok {
        out.push(CONFIG_KEY);
    }
    if key == "." {
        out.push("must not be '.'");
    } else if key == ".." {
        out.push("must not be '..'");
    } else if key.starts_with("..") {
        out.push("must not start with '..'");
    }
    out
}

/// The keys of a ConfigMap's `data`/`binaryData` (or a Secret's `data`), and a
/// key in both of a ConfigMap's bags.
pub fn config_map_keys(obj: &Value, bags: &[&str], out: &mut Vec<Cause>) {
    let bag = |name: &str| obj.get(name).and_then(Value::as_object);
    for (i, name) in bags.iter().enumerate() {
        if *name == "stringData" {
            continue;
        }
        for key in bag(name).into_iter().flat_map(|m| m.keys()) {
            let field = format!("{name}[{key}]");
            for msg in config_key_errors(key) {
                out.push(invalid(&field, &Value::String(key.clone()), msg));
            }
            if i == 0
                && bags[1] == "binaryData"
                && bag("binaryData").is_some_and(|b| b.contains_key(key))
            {
                out.push(invalid(
                    &field,
                    &Value::String(key.clone()),
                    "duplicate of key present in binaryData",
                ));
            }
        }
    }
}

/// A claim needs access modes and a storage request.
pub fn pvc(spec: &Value, out: &mut Vec<Cause>) {
    if spec
        .get("accessModes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        out.push(required(
            "spec.accessModes",
            "at least 1 access mode is required",
        ));
    }
    if spec.pointer("/resources/requests/storage").is_none() {
        out.push(required("spec.resources[storage]", ""));
    }
}

/// Every HTTP path of an Ingress has a supported `pathType`.
pub fn ingress_paths(spec: &Value, out: &mut Vec<Cause>) {
    let rules = spec.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let paths = rule.pointer("/http/paths").and_then(Value::as_array);
        for (j, path) in paths.into_iter().flatten().enumerate() {
            let field = format!("spec.rules[{i}].http.paths[{j}].pathType");
            // k8s-openapi's round trip makes a missing pathType "".
            match path.get("pathType").and_then(Value::as_str) {
                None | Some("") => out.push(required(&field, "pathType must be specified")),
                Some("Exact" | "Prefix" | "ImplementationSpecific") => {}
                Some(other) => out.push(not_supported(
                    &field,
                    other,
                    &["Exact", "ImplementationSpecific", "Prefix"],
                )),
            }
        }
    }
}

/// Every rule of a Role or ClusterRole has verbs, and either resources with
/// API groups or (cluster roles only) non-resource URLs.
pub fn rules(obj: &Value, namespaced: bool, out: &mut Vec<Cause>) {
    let rules = obj.get("rules").and_then(Value::as_array);
    let len = |rule: &Value, key: &str| rule.get(key).and_then(Value::as_array).map_or(0, Vec::len);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let p = format!("rules[{i}]");
        if len(rule, "verbs") == 0 {
            out.push(required(
                &format!("{p}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        if len(rule, "nonResourceURLs") > 0 {
            let urls = &rule["nonResourceURLs"];
            if namespaced {
                out.push(invalid(
                    &format!("{p}.nonResourceURLs"),
                    urls,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if len(rule, "apiGroups") + len(rule, "resources") + len(rule, "resourceNames") > 0 {
                out.push(invalid(
                    &format!("{p}.nonResourceURLs"),
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if len(rule, "apiGroups") == 0 {
            out.push(required(
                &format!("{p}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if len(rule, "resources") == 0 {
            out.push(required(
                &format!("{p}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}
