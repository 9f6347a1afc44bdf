//! JSON → [`StructuralSchema`] tree, reporting malformed keywords and depth overflow.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::MAX_DEPTH;
use crate::error::{FieldError, FieldErrorKind};
use crate::path::{child, index, key};
use crate::schema::{AdditionalProperties, Pattern, StructuralSchema};

/// Keywords kube's `JSONSchemaProps` knows but CRDs reject (with kube's messages).
const UNSUPPORTED: &[(&str, &str)] = &[
    ("id", "id is not supported"),
    ("additionalItems", "additionalItems is not supported"),
    ("patternProperties", "patternProperties is not supported"),
    ("definitions", "definitions is not supported"),
    ("dependencies", "dependencies is not supported"),
    ("$ref", "$ref is not supported"),
];

/// Parses one schema node at `path`, `depth` levels below the root.
pub(crate) fn parse_node(
    v: &Value,
    path: &str,
    depth: usize,
    errs: &mut Vec<FieldError>,
) -> StructuralSchema {
    let mut s = StructuralSchema::blank(v.clone());
    if depth > MAX_DEPTH {
        errs.push(FieldError::new(
            FieldErrorKind::Forbidden,
            path,
            None,
            format!("schema must not be nested more than {MAX_DEPTH} levels deep"),
        ));
        return s;
    }
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            FieldErrorKind::Invalid,
            path,
            Some(v.clone()),
            "must be a JSON object (a schema)",
        ));
        return s;
    };
    for (k, msg) in UNSUPPORTED {
        if let Some(x) = m.get(*k) {
            let present = match x {
                Value::String(s) => !s.is_empty(),
                Value::Object(o) => {
                    !(o.is_empty() && (*k == "patternProperties" || *k == "definitions"))
                }
                Value::Null => false,
                _ => true,
            };
            if present {
                errs.push(FieldError::new(
                    FieldErrorKind::Forbidden,
                    child(path, k),
                    None,
                    *msg,
                ));
            }
        }
    }
    s.type_ = string(m, "type", path, errs).unwrap_or_default();
    s.format = string(m, "format", path, errs).unwrap_or_default();
    s.description = string(m, "description", path, errs).unwrap_or_default();
    s.title = string(m, "title", path, errs).unwrap_or_default();
    s.nullable = boolean(m, "nullable", path, errs);
    s.default = match m.get("default") {
        None | Some(Value::Null) => None,
        Some(d) => Some(d.clone()),
    };
    s.preserve_unknown_fields = boolean(m, "x-kubernetes-preserve-unknown-fields", path, errs);
    s.preserve_unknown_fields_explicit_false =
        m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false));
    s.embedded_resource = boolean(m, "x-kubernetes-embedded-resource", path, errs);
    s.int_or_string = boolean(m, "x-kubernetes-int-or-string", path, errs);
    s.list_type = string(m, "x-kubernetes-list-type", path, errs);
    s.map_type = string(m, "x-kubernetes-map-type", path, errs);
    s.list_map_keys = strings(m, "x-kubernetes-list-map-keys", path, errs);
    s.maximum = number(m, "maximum", path, errs);
    s.minimum = number(m, "minimum", path, errs);
    s.exclusive_maximum = boolean(m, "exclusiveMaximum", path, errs);
    s.exclusive_minimum = boolean(m, "exclusiveMinimum", path, errs);
    s.multiple_of = number(m, "multipleOf", path, errs);
    s.max_length = integer(m, "maxLength", path, errs);
    s.min_length = integer(m, "minLength", path, errs);
    s.max_items = integer(m, "maxItems", path, errs);
    s.min_items = integer(m, "minItems", path, errs);
    s.max_properties = integer(m, "maxProperties", path, errs);
    s.min_properties = integer(m, "minProperties", path, errs);
    s.unique_items = boolean(m, "uniqueItems", path, errs);
    s.required = strings(m, "required", path, errs);
    s.rules = crate::cel::parse_rules(m.get("x-kubernetes-validations"), path, errs);
    s.has_validations = m
        .get("x-kubernetes-validations")
        .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()));
    s.has_external_docs = m.get("externalDocs").is_some_and(|v| !v.is_null());
    if let Some(p) = string(m, "pattern", path, errs).filter(|p| !p.is_empty()) {
        match crate::regex_compat::compile(&p) {
            Ok(regex) => s.pattern = Some(Pattern { source: p, regex }),
            Err(e) => {
                let detail = regex_error_summary(&e);
                errs.push(FieldError::new(
                    FieldErrorKind::Invalid,
                    child(path, "pattern"),
                    Some(Value::String(p)),
                    format!("must be a valid regular expression, but isn't: error parsing regexp: {detail}"),
                ));
            }
        }
    }
    match m.get("enum") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => s.enum_ = Some(a.clone()),
        Some(other) => errs.push(FieldError::new(
            FieldErrorKind::Invalid,
            child(path, "enum"),
            Some(other.clone()),
            "must be an array",
        )),
    }
    match m.get("properties") {
        None | Some(Value::Null) => {}
        Some(Value::Object(props)) => {
            let ppath = child(path, "properties");
            let mut out = BTreeMap::new();
            for (name, sub) in props {
                out.insert(
                    name.clone(),
                    parse_node(sub, &key(&ppath, name), depth + 1, errs),
                );
            }
            s.properties = out;
        }
        Some(other) => errs.push(FieldError::new(
            FieldErrorKind::Invalid,
            child(path, "properties"),
            Some(other.clone()),
            "must be an object",
        )),
    }
    match m.get("items") {
        None | Some(Value::Null) => {}
        Some(Value::Array(_)) => errs.push(FieldError::new(
            FieldErrorKind::Forbidden,
            child(path, "items"),
            None,
            "items must be a schema object and not an array",
        )),
        Some(item) => {
            s.items = Some(Box::new(parse_node(
                item,
                &child(path, "items"),
                depth + 1,
                errs,
            )));
        }
    }
    match m.get("additionalProperties") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => s.additional_properties = Some(AdditionalProperties::Bool(*b)),
        Some(ap) => {
            s.additional_properties = Some(AdditionalProperties::Schema(Box::new(parse_node(
                ap,
                &child(path, "additionalProperties"),
                depth + 1,
                errs,
            ))));
        }
    }
    for (kw, target) in [("allOf", 0usize), ("oneOf", 1), ("anyOf", 2)] {
        let list = match m.get(kw) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => {
                let kpath = child(path, kw);
                a.iter()
                    .enumerate()
                    .map(|(i, x)| parse_node(x, &index(&kpath, i), depth + 1, errs))
                    .collect()
            }
            Some(other) => {
                errs.push(FieldError::new(
                    FieldErrorKind::Invalid,
                    child(path, kw),
                    Some(other.clone()),
                    "must be an array",
                ));
                Vec::new()
            }
        };
        match target {
            0 => s.all_of = list,
            1 => s.one_of = list,
            _ => s.any_of = list,
        }
    }
    if let Some(n) = m.get("not").filter(|n| !n.is_null()) {
        s.not = Some(Box::new(parse_node(
            n,
            &child(path, "not"),
            depth + 1,
            errs,
        )));
    }
    s
}

/// A one-line version of the regex crate's (multi-line) error.
fn regex_error_summary(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find(|l| l.trim_start().starts_with("error:"))
        .map_or_else(
            || text.lines().last().unwrap_or_default().trim().to_string(),
            |l| {
                l.trim_start()
                    .trim_start_matches("error:")
                    .trim()
                    .to_string()
            },
        )
}

fn type_err(path: &str, k: &str, v: &Value, what: &str) -> FieldError {
    FieldError::new(
        FieldErrorKind::Invalid,
        child(path, k),
        Some(v.clone()),
        format!("must be {what}"),
    )
}

fn string(
    m: &Map<String, Value>,
    k: &str,
    path: &str,
    errs: &mut Vec<FieldError>,
) -> Option<String> {
    match m.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            errs.push(type_err(path, k, other, "a string"));
            None
        }
    }
}

fn boolean(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> bool {
    match m.get(k) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errs.push(type_err(path, k, other, "a boolean"));
            false
        }
    }
}

fn number(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<f64> {
    match m.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(other) => {
            errs.push(type_err(path, k, other, "a number"));
            None
        }
    }
}

fn integer(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<i64> {
    match m.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Some(i)
            } else {
                errs.push(type_err(path, k, &Value::Number(n.clone()), "an integer"));
                None
            }
        }
        Some(other) => {
            errs.push(type_err(path, k, other, "an integer"));
            None
        }
    }
}

fn strings(m: &Map<String, Value>, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Vec<String> {
    match m.get(k) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        Some(other) => {
            errs.push(type_err(path, k, other, "an array of strings"));
            Vec::new()
        }
    }
}

/// Nesting depth of a JSON value, computed without recursion.
pub(crate) fn json_depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((x, d)) = stack.pop() {
        max = max.max(d);
        match x {
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    max
}
