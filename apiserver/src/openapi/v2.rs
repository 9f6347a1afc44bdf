//! `/openapi/v2`: kube's v2 document of the built-ins plus the definitions of
//! the custom resources, as JSON and as gnostic protobuf (what kubectl < 1.27
//! reads). A CRD's v2 schema is kube's `ToStructuralOpenAPIV2` view of it
//! (no junctors or defaults; nullable and unknown-field-preserving nodes lose
//! their type and children). CRDs add definitions only, not paths.

use std::sync::Arc;

use prost::encoding::{WireType, encode_key, encode_varint};
use serde_json::{Map, Value, json};

use super::{builtin, crd};
use crate::registry::ResourceInfo;

const PREFIX: &str = "#/definitions/";

/// The v2 definitions of the custom resources `rs`, by name.
fn definitions(rs: &[Arc<ResourceInfo>]) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for r in rs {
        let raw = r.crd.as_ref().and_then(|c| c.raw_schema.as_ref());
        let kind = match raw {
            Some(s) if s.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) => {
                json!({ "type": "object", "x-kubernetes-group-version-kind": [{ "group": r.group, "kind": r.kind, "version": r.version }] })
            }
            _ => {
                let mut k = crd::kind_schema(r, PREFIX);
                // The added apiVersion/kind/metadata are not affected by the conversion.
                let props = k["properties"].as_object().cloned().unwrap_or_default();
                to_v2(&mut k);
                for p in ["apiVersion", "kind", "metadata"] {
                    k["properties"][p] = props[p].clone();
                }
                k
            }
        };
        out.push((crd::schema_name(&r.group, &r.version, &r.kind), kind));
        out.push((
            crd::schema_name(&r.group, &r.version, &format!("{}List", r.kind)),
            crd::list_schema(r, PREFIX),
        ));
    }
    out
}

fn is_true(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key) == Some(&Value::Bool(true))
}

/// kube's `ToStructuralOpenAPIV2`, on a JSON schema.
fn to_v2(schema: &mut Value) {
    let Value::Object(m) = schema else { return };
    // kube's v2 also publishes no defaults (seen on kube-apiserver 1.36).
    for k in ["allOf", "oneOf", "anyOf", "not", "default"] {
        m.remove(k);
    }
    if is_true(m, "nullable") {
        for k in ["type", "nullable", "items", "properties"] {
            m.remove(k);
        }
    }
    if is_true(m, "x-kubernetes-preserve-unknown-fields") {
        m.remove("items");
        m.remove("properties");
    }
    if !m.contains_key("items") && m.get("type") == Some(&json!("array")) {
        m.remove("type");
    }
    if is_true(m, "x-kubernetes-preserve-unknown-fields") && m.get("type") == Some(&json!("object"))
    {
        m.remove("type");
    }
    let nullable_props: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, s)| s.get("nullable") == Some(&json!(true)))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(req)) = m.get_mut("required") {
        req.retain(|f| {
            !nullable_props
                .iter()
                .any(|n| Some(n.as_str()) == f.as_str())
        });
        if req.is_empty() {
            m.remove("required");
        }
    }
    if m.get("additionalProperties")
        .and_then(|a| a.get("nullable"))
        == Some(&json!(true))
    {
        m.remove("required");
    }
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.values_mut().for_each(to_v2);
    }
    if let Some(items) = m.get_mut("items") {
        to_v2(items);
    }
    if let Some(add @ Value::Object(_)) = m.get_mut("additionalProperties") {
        to_v2(add);
    }
}

/// `/openapi/v2` as JSON.
pub fn json(rs: &[Arc<ResourceInfo>]) -> Vec<u8> {
    if rs.is_empty() {
        return builtin::v2_json().to_vec();
    }
    let mut doc: Value = serde_json::from_slice(builtin::v2_json()).expect("v2 is JSON");
    let defs = doc["definitions"].as_object_mut().expect("definitions");
    for (name, schema) in definitions(rs) {
        defs.insert(name, schema);
    }
    serde_json::to_vec(&doc).expect("JSON")
}

/// `/openapi/v2` as protobuf: kube's document, then one more `definitions`
/// field with the custom resources' (a protobuf parser merges repeated
/// occurrences of a message field, so they add to the built-ins').
pub fn protobuf(rs: &[Arc<ResourceInfo>]) -> Vec<u8> {
    let mut out = builtin::v2_protobuf().to_vec();
    if rs.is_empty() {
        return out;
    }
    let mut defs = Vec::new();
    for (name, schema) in definitions(rs) {
        put_bytes(&mut defs, 1, &named_schema(&name, &schema));
    }
    put_bytes(&mut out, 9, &defs);
    out
}

fn put_bytes(buf: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(bytes.len() as u64, buf);
    buf.extend_from_slice(bytes);
}

fn put_str(buf: &mut Vec<u8>, tag: u32, s: &str) {
    if !s.is_empty() {
        put_bytes(buf, tag, s.as_bytes());
    }
}

fn put_varint(buf: &mut Vec<u8>, tag: u32, v: u64) {
    if v != 0 {
        encode_key(tag, WireType::Varint, buf);
        encode_varint(v, buf);
    }
}

fn named_schema(name: &str, schema: &Value) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, 1, name);
    put_bytes(&mut b, 2, &encode_schema(schema));
    b
}

/// gnostic's `Any`: the value as YAML text (JSON is YAML).
fn any(v: &Value) -> Vec<u8> {
    let mut b = Vec::new();
    put_str(&mut b, 2, &v.to_string());
    b
}

/// A JSON schema as gnostic's `openapi_v2.Schema` (fields kube's CRD schemas use).
fn encode_schema(schema: &Value) -> Vec<u8> {
    let mut b = Vec::new();
    let Some(m) = schema.as_object() else {
        return b;
    };
    let text = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
    let integer = |k: &str| m.get(k).and_then(Value::as_u64).unwrap_or(0);
    let boolean = |k: &str| u64::from(is_true(m, k));
    put_str(&mut b, 1, text("$ref"));
    put_str(&mut b, 2, text("format"));
    put_str(&mut b, 3, text("title"));
    put_str(&mut b, 4, text("description"));
    if let Some(d) = m.get("default") {
        put_bytes(&mut b, 5, &any(d));
    }
    for (tag, key) in [(6, "multipleOf"), (7, "maximum"), (9, "minimum")] {
        if let Some(f) = m.get(key).and_then(Value::as_f64).filter(|f| *f != 0.0) {
            encode_key(tag, WireType::SixtyFourBit, &mut b);
            b.extend_from_slice(&f.to_le_bytes());
        }
        if tag == 7 {
            put_varint(&mut b, 8, boolean("exclusiveMaximum"));
        }
        if tag == 9 {
            put_varint(&mut b, 10, boolean("exclusiveMinimum"));
        }
    }
    put_varint(&mut b, 11, integer("maxLength"));
    put_varint(&mut b, 12, integer("minLength"));
    put_str(&mut b, 13, text("pattern"));
    put_varint(&mut b, 14, integer("maxItems"));
    put_varint(&mut b, 15, integer("minItems"));
    put_varint(&mut b, 16, boolean("uniqueItems"));
    put_varint(&mut b, 17, integer("maxProperties"));
    put_varint(&mut b, 18, integer("minProperties"));
    for r in m
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_str(&mut b, 19, r.as_str().unwrap_or(""));
    }
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        put_bytes(&mut b, 20, &any(e));
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(x)) => {
            let mut a = Vec::new();
            encode_key(2, WireType::Varint, &mut a);
            encode_varint(u64::from(*x), &mut a);
            put_bytes(&mut b, 21, &a);
        }
        Some(add @ Value::Object(_)) => {
            let mut a = Vec::new();
            put_bytes(&mut a, 1, &encode_schema(add));
            put_bytes(&mut b, 21, &a);
        }
        _ => {}
    }
    if let Some(t) = m.get("type").and_then(Value::as_str) {
        let mut ti = Vec::new();
        put_str(&mut ti, 1, t);
        put_bytes(&mut b, 22, &ti);
    }
    if let Some(items) = m.get("items") {
        let mut ii = Vec::new();
        match items {
            Value::Array(a) => a
                .iter()
                .for_each(|i| put_bytes(&mut ii, 1, &encode_schema(i))),
            i => put_bytes(&mut ii, 1, &encode_schema(i)),
        }
        put_bytes(&mut b, 23, &ii);
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        let mut p = Vec::new();
        for (name, schema) in props {
            put_bytes(&mut p, 1, &named_schema(name, schema));
        }
        put_bytes(&mut b, 25, &p);
    }
    for (k, val) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut na = Vec::new();
        put_str(&mut na, 1, k);
        put_bytes(&mut na, 2, &any(val));
        put_bytes(&mut b, 31, &na);
    }
    b
}
