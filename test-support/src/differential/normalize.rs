//! What must differ between two servers, replaced by placeholders before
//! bodies are compared: uids, resourceVersions, continue tokens,
//! service-account tokens, timestamps and ages, allocated cluster IPs (in
//! Tables too), generated names, the port
//! in `serverAddressByClientCIDRs`, uids inside `managedFields` keys and
//! selfLinks; and what names the server itself ([`server_identity`]: its
//! port in the `kubernetes` Service's endpoints, its CA in
//! `kube-root-ca.crt`). `managedFields` entries
//! are sorted by manager, operation and subresource: kube orders them by
//! time, and times differ. Everything else is compared as is.

use std::collections::HashMap;

use serde_json::Value;

/// Names a server generated (from `metadata.generateName`), each with its
/// prefix: a generated name anywhere in a body becomes `PREFIX<suffix>`.
pub type GeneratedNames = HashMap<String, String>;

/// Columns of a Table whose cells are ages ("5s"), or allocated addresses.
const AGE_COLUMNS: [&str; 3] = ["age", "last seen", "first seen"];
const IP_COLUMNS: [&str; 1] = ["cluster-ip"];

/// Normalize `value` in place.
pub fn normalize(value: &mut Value, generated: &GeneratedNames) {
    if value.get("kind").and_then(Value::as_str) == Some("Table") {
        blank_age_cells(value);
    }
    walk(value, None, generated);
}

fn walk(value: &mut Value, key: Option<&str>, generated: &GeneratedNames) {
    match value {
        Value::Object(map) => {
            map.remove("selfLink");
            if let Some(Value::Array(entries)) = map.get_mut("managedFields") {
                entries.sort_by_key(|e| {
                    ["manager", "operation", "subresource"]
                        .map(|k| e[k].as_str().unwrap_or("").to_string())
                });
            }
            if let (Some(Value::String(prefix)), Some(Value::String(name))) =
                (map.get("generateName"), map.get("name"))
                && name.starts_with(prefix.as_str())
                && name.len() > prefix.len()
            {
                let placeholder = format!("{prefix}<suffix>");
                map.insert("name".into(), Value::String(placeholder));
            }
            // managedFields keys name list items by uid (`k:{"uid":"..."}`).
            if map.keys().any(|k| replace_uuids(k).is_some()) {
                let entries = std::mem::take(map);
                for (k, v) in entries {
                    map.insert(replace_uuids(&k).unwrap_or(k), v);
                }
            }
            for (k, v) in map.iter_mut() {
                walk(v, Some(k), generated);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, key, generated);
            }
        }
        Value::String(s) => {
            if let Some(replacement) = placeholder(key, s, generated) {
                *s = replacement;
            }
        }
        _ => {}
    }
}

fn placeholder(key: Option<&str>, s: &str, generated: &GeneratedNames) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    match key {
        Some("uid") => return Some("<uid>".into()),
        Some("resourceVersion") => return Some("<rv>".into()),
        Some("continue") => return Some("<continue>".into()),
        // A TokenRequest's token: signed by each server's own key.
        Some("token") => return Some("<token>".into()),
        Some("clusterIP" | "clusterIPs") if s.parse::<std::net::IpAddr>().is_ok() => {
            return Some("<ip>".into());
        }
        Some("serverAddress") => {
            if let Some((host, port)) = s.rsplit_once(':')
                && port.parse::<u16>().is_ok()
            {
                return Some(format!("{host}:<port>"));
            }
        }
        _ => {}
    }
    if is_timestamp(s) {
        return Some("<time>".into());
    }
    if let Some(prefix) = generated.get(s) {
        return Some(format!("{prefix}<suffix>"));
    }
    replace_uuids(s)
}

/// Replaces, in place, what names the server answering: its `port` as a
/// number under `port` or `targetPort` (the `kubernetes` Service, its
/// `Endpoints` and `EndpointSlice`) by `<server-port>`, its CA (`ca_pem`) as
/// `ca.crt` data by `<ca>`.
pub fn server_identity(value: &mut Value, port: u16, ca_pem: Option<&str>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match (k.as_str(), &*v) {
                    ("port" | "targetPort", Value::Number(n))
                        if n.as_u64() == Some(port.into()) =>
                    {
                        *v = Value::String("<server-port>".into());
                    }
                    ("ca.crt", Value::String(s)) if Some(s.as_str()) == ca_pem => {
                        *v = Value::String("<ca>".into());
                    }
                    _ => server_identity(v, port, ca_pem),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                server_identity(item, port, ca_pem);
            }
        }
        _ => {}
    }
}

/// RFC 3339 date-times as Kubernetes writes them (`2026-01-02T03:04:05Z`,
/// with optional fraction and offset).
pub fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 || !b.iter().take(4).all(u8::is_ascii_digit) {
        return false;
    }
    let shape = b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':' && b[16] == b':';
    shape && (s.ends_with('Z') || s[19..].contains(['+', '-']))
}

/// `s` with every UUID inside it replaced by `<uid>` (messages quote uids),
/// or None when it has none.
fn replace_uuids(s: &str) -> Option<String> {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let b = s.as_bytes();
    let is_uuid_at = |i: usize| {
        let mut at = i;
        for (n, len) in SHAPE.iter().enumerate() {
            if at + len > b.len() || !b[at..at + len].iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            at += len;
            if n < 4 {
                if b.get(at) != Some(&b'-') {
                    return false;
                }
                at += 1;
            }
        }
        true
    };
    let mut out = String::new();
    let mut i = 0;
    let mut found = false;
    while i < b.len() {
        if (i == 0 || !b[i - 1].is_ascii_hexdigit()) && is_uuid_at(i) {
            out.push_str("<uid>");
            i += 36;
            found = true;
        } else {
            let c = s[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    found.then_some(out)
}

fn blank_age_cells(table: &mut Value) {
    blank_cells(table, &AGE_COLUMNS, "<age>");
    blank_cells(table, &IP_COLUMNS, "<ip>");
}

/// Replaces the cells of the columns named (case aside) in `names`.
fn blank_cells(table: &mut Value, names: &[&str], placeholder: &str) {
    let columns: Vec<usize> = table["columnDefinitions"]
        .as_array()
        .map(|columns| {
            columns
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c["name"]
                        .as_str()
                        .is_some_and(|n| names.contains(&n.to_ascii_lowercase().as_str()))
                })
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default();
    if let Some(rows) = table["rows"].as_array_mut() {
        for row in rows {
            for &i in &columns {
                if let Some(cell) = row["cells"].get_mut(i) {
                    *cell = Value::String(placeholder.into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders() {
        let mut v = json!({
            "metadata": {"uid": "0f8fad5b-d9cb-469f-a165-70867728950e", "resourceVersion": "12",
                "creationTimestamp": "2026-12-01T20:11:15Z", "selfLink": "/x",
                "generateName": "w-", "name": "w-x7k2p",
                "managedFields": [{"time": "2026-12-01T20:11:15.123456Z"}]},
            "spec": {"clusterIP": "10.96.0.7", "ref": "w-abcde"},
            "message": "UID in precondition: 0f8fad5b-d9cb-469f-a165-70867728950e, no",
            "f:ownerReferences": {"k:{\"uid\":\"0f8fad5b-d9cb-469f-a165-70867728950e\"}": {}},
        });
        let generated = GeneratedNames::from([("w-abcde".into(), "w-".into())]);
        normalize(&mut v, &generated);
        assert_eq!(
            v,
            json!({
                "metadata": {"uid": "<uid>", "resourceVersion": "<rv>",
                    "creationTimestamp": "<time>", "generateName": "w-", "name": "w-<suffix>",
                    "managedFields": [{"time": "<time>"}]},
                "spec": {"clusterIP": "<ip>", "ref": "w-<suffix>"},
                "message": "UID in precondition: <uid>, no",
                "f:ownerReferences": {"k:{\"uid\":\"<uid>\"}": {}},
            })
        );
    }

    #[test]
    fn server_port_and_ca() {
        let mut v = json!({"subsets": [{"ports": [{"port": 6443}, {"port": 80}]}],
            "spec": {"ports": [{"port": 443, "targetPort": 6443}]},
            "data": {"ca.crt": "PEM", "other": "PEM"}});
        server_identity(&mut v, 6443, Some("PEM"));
        assert_eq!(
            v,
            json!({"subsets": [{"ports": [{"port": "<server-port>"}, {"port": 80}]}],
                "spec": {"ports": [{"port": 443, "targetPort": "<server-port>"}]},
                "data": {"ca.crt": "<ca>", "other": "PEM"}})
        );
    }

    #[test]
    fn table_ages() {
        let mut v = json!({"kind": "Table",
            "columnDefinitions": [{"name": "Name"}, {"name": "Age"}, {"name": "Cluster-IP"}],
            "rows": [{"cells": ["a", "5s", "10.96.0.1"]}]});
        normalize(&mut v, &GeneratedNames::new());
        assert_eq!(v["rows"][0]["cells"], json!(["a", "<age>", "<ip>"]));
    }
}
