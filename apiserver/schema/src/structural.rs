//! The checks kube-apiserver runs on a CRD schema: the generic CRD schema rules
//! (`ValidateCustomResourceDefinitionOpenAPISchema`), structural invariants
//! (`ValidateStructural`), completeness, and default validation (`ValidateDefaults`).

use serde_json::Value;

use crate::error::{FieldError, FieldErrorKind};
use crate::path::{child, index, key};
use crate::schema::{AdditionalProperties, StructuralSchema};

const META_FIELDS: [&str; 3] = ["metadata", "apiVersion", "kind"];
const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

fn forbidden(path: String, detail: impl Into<String>) -> FieldError {
    FieldError::new(FieldErrorKind::Forbidden, path, None, detail)
}
fn required(path: String, detail: impl Into<String>) -> FieldError {
    FieldError::new(FieldErrorKind::Required, path, None, detail)
}
fn invalid(path: String, v: Value, detail: impl Into<String>) -> FieldError {
    FieldError::new(FieldErrorKind::Invalid, path, Some(v), detail)
}
fn not_supported(path: String, v: &str, supported: &[&str]) -> FieldError {
    let quoted: Vec<String> = supported.iter().map(|s| crate::gofmt::quote(s)).collect();
    FieldError::new(
        FieldErrorKind::NotSupported,
        path,
        Some(Value::String(v.to_string())),
        format!("supported values: {}", quoted.join(", ")),
    )
}
fn strings_value(v: &[String]) -> Value {
    Value::Array(v.iter().cloned().map(Value::String).collect())
}

/// Context of `specStandardValidatorV3`.
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_reason: String,
    inside_resource_meta: bool,
}

impl Ssv {
    fn forbid_defaults(&self, reason: &str) -> Ssv {
        Ssv {
            allow_defaults: false,
            disallow_reason: reason.to_string(),
            ..self.clone()
        }
    }
}

/// `ValidateCustomResourceDefinitionOpenAPISchema` for the root schema.
pub(crate) fn crd_schema_checks(s: &StructuralSchema, path: &str, errs: &mut Vec<FieldError>) {
    let ssv = Ssv {
        allow_defaults: true,
        disallow_reason: String::new(),
        inside_resource_meta: false,
    };
    crd_checks(s, path, &ssv, true, errs);
}

fn crd_checks(
    s: &StructuralSchema,
    path: &str,
    ssv: &Ssv,
    is_root: bool,
    errs: &mut Vec<FieldError>,
) {
    crate::cel::cost_checks(s, path, errs);
    // specStandardValidatorV3.validate
    if !s.type_.is_empty() && !OPENAPI_V3_TYPES.contains(&s.type_.as_str()) {
        errs.push(not_supported(
            child(path, "type"),
            &s.type_,
            &OPENAPI_V3_TYPES,
        ));
    }
    if s.default.is_some() && !ssv.allow_defaults {
        let mut detail = "must not be set".to_string();
        if !ssv.disallow_reason.is_empty() {
            detail.push(' ');
            detail.push_str(&ssv.disallow_reason);
        }
        errs.push(forbidden(child(path, "default"), detail));
    }
    if s.type_ == "null" {
        errs.push(forbidden(
            child(path, "type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if ssv.inside_resource_meta && s.embedded_resource {
        errs.push(forbidden(
            child(path, "x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }

    if s.unique_items {
        errs.push(forbidden(
            child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = &s.additional_properties {
        let restricts = matches!(
            ap,
            AdditionalProperties::Bool(false) | AdditionalProperties::Schema(_)
        );
        if !s.properties.is_empty() && restricts {
            errs.push(forbidden(
                child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let AdditionalProperties::Schema(sub) = ap {
            let sub_ssv = if ssv.inside_resource_meta {
                ssv.forbid_defaults("inside additionalProperties applying to object metadata")
            } else {
                ssv.clone()
            };
            crd_checks(
                sub,
                &child(path, "additionalProperties"),
                &sub_ssv,
                false,
                errs,
            );
        }
    }
    let ppath = child(path, "properties");
    for (name, sub) in &s.properties {
        let mut sub_ssv = ssv.clone();
        if (is_root || s.embedded_resource) && META_FIELDS.contains(&name.as_str()) {
            sub_ssv.inside_resource_meta = true;
            if is_root {
                sub_ssv = sub_ssv.forbid_defaults(&format!("in top-level {name}"));
            }
        }
        crd_checks(sub, &key(&ppath, name), &sub_ssv, false, errs);
    }
    if let Some(not) = &s.not {
        crd_checks(not, &child(path, "not"), ssv, false, errs);
    }
    for (kw, list) in [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ] {
        let kpath = child(path, kw);
        for (i, sub) in list.iter().enumerate() {
            crd_checks(sub, &index(&kpath, i), ssv, false, errs);
        }
    }
    if let Some(items) = &s.items {
        crd_checks(items, &child(path, "items"), ssv, false, errs);
    }
    if s.preserve_unknown_fields_explicit_false {
        errs.push(invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if let Some(mt) = &s.map_type {
        if s.type_ != "object" {
            errs.push(type_must_be(
                path,
                &s.type_,
                "must be object if x-kubernetes-map-type is specified",
            ));
        }
        if mt != "atomic" && mt != "granular" {
            errs.push(not_supported(
                child(path, "x-kubernetes-map-type"),
                mt,
                &["atomic", "granular"],
            ));
        }
    }
    if let Some(lt) = &s.list_type {
        if s.type_ != "array" {
            errs.push(type_must_be(
                path,
                &s.type_,
                "must be array if x-kubernetes-list-type is specified",
            ));
        }
        if lt != "atomic" && lt != "set" && lt != "map" {
            errs.push(not_supported(
                child(path, "x-kubernetes-list-type"),
                lt,
                &["atomic", "set", "map"],
            ));
        }
    }
    if !s.list_map_keys.is_empty() {
        match s.list_type.as_deref() {
            None => errs.push(required(
                child(path, "x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => errs.push(invalid(
                child(path, "x-kubernetes-list-type"),
                Value::String(other.to_string()),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }
    if s.list_type.as_deref() == Some("map") {
        list_map_checks(s, path, errs);
    }
    map_list_keys_map_set(s, path, errs);
}

fn type_must_be(path: &str, type_: &str, detail: &str) -> FieldError {
    if type_.is_empty() {
        required(child(path, "type"), detail)
    } else {
        invalid(
            child(path, "type"),
            Value::String(type_.to_string()),
            detail,
        )
    }
}

fn list_map_checks(s: &StructuralSchema, path: &str, errs: &mut Vec<FieldError>) {
    if s.list_map_keys.is_empty() {
        errs.push(required(
            child(path, "x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = &s.items else {
        errs.push(required(
            child(path, "items"),
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    let ipath = child(path, "items");
    if items.type_ != "object" {
        errs.push(invalid(
            child(&ipath, "type"),
            Value::String(items.type_.clone()),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for k in &s.list_map_keys {
        match items.properties.get(k) {
            Some(p) if p.type_ == "array" || p.type_ == "object" => errs.push(invalid(
                child(&key(&child(&ipath, "properties"), k), "type"),
                Value::String(items.type_.clone()),
                "must be a scalar type if parent array's x-kubernetes-list-type is map",
            )),
            Some(_) => {}
            None => errs.push(invalid(
                child(path, "x-kubernetes-list-map-keys"),
                strings_value(&s.list_map_keys),
                "entries must all be names of item properties",
            )),
        }
        if !seen.insert(k) {
            errs.push(invalid(
                child(path, "x-kubernetes-list-map-keys"),
                strings_value(&s.list_map_keys),
                "must not contain duplicate entries",
            ));
        }
    }
}

/// `validateMapListKeysMapSet`: set/map items not nullable; map keys required or defaulted.
fn map_list_keys_map_set(s: &StructuralSchema, path: &str, errs: &mut Vec<FieldError>) {
    let (Some(items), Some(lt)) = (&s.items, &s.list_type) else {
        return;
    };
    if lt != "set" && lt != "map" {
        return;
    }
    let ipath = child(path, "items");
    if items.nullable {
        errs.push(forbidden(
            child(&ipath, "nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
        ));
    }
    if lt == "map" {
        for k in &s.list_map_keys {
            let Some(p) = items.properties.get(k) else {
                continue;
            };
            let kpath = key(&child(&ipath, "properties"), k);
            if !items.required.contains(k) && p.default.is_none() {
                errs.push(required(
                    child(&kpath, "default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if p.nullable {
                errs.push(forbidden(
                    child(&kpath, "nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// `ValidateStructural`: invariants plus completeness, sorted by message like kube.
pub(crate) fn structural_checks(s: &StructuralSchema, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    invariants(s, Level::Root, path, &mut errs);
    completeness_everywhere(s, path, &mut errs);
    errs.sort_by_key(super::error::FieldError::message);
    errs.dedup();
    errs
}

fn is_plain_type(s: &StructuralSchema, t: &str) -> bool {
    let expected = serde_json::json!({ "type": t });
    s.raw == expected
}

fn is_int_or_string_any_of(any_of: &[StructuralSchema]) -> bool {
    any_of.len() == 2 && is_plain_type(&any_of[0], "integer") && is_plain_type(&any_of[1], "string")
}

fn invariants(s: &StructuralSchema, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    if s.type_ == "array" && s.items.is_none() {
        errs.push(required(child(path, "items"), "must be specified"));
    }
    if let Some(items) = &s.items {
        invariants(items, Level::Item, &child(path, "items"), errs);
    }
    let ppath = child(path, "properties");
    for (name, sub) in &s.properties {
        invariants(sub, Level::Field, &key(&ppath, name), errs);
    }
    if let Some(ap) = &s.additional_properties {
        if lvl == Level::Root {
            errs.push(forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let AdditionalProperties::Schema(sub) = ap {
            invariants(
                sub,
                Level::Field,
                &child(path, "additionalProperties"),
                errs,
            );
        }
    }
    if s.int_or_string && s.preserve_unknown_fields {
        errs.push(invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string && s.embedded_resource {
        errs.push(invalid(
            child(path, "x-kubernetes-embedded-resource"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(&s.any_of);
    let skip_first_all_of_any_of = s
        .all_of
        .first()
        .is_some_and(|a| is_int_or_string_any_of(&a.any_of));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, lvl, path, errs);

    let check_metadata = lvl == Level::Root || s.embedded_resource;
    if s.embedded_resource && s.type_ != "object" {
        errs.push(type_must_be(
            path,
            &s.type_,
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    } else if s.type_.is_empty() && !s.int_or_string && !s.preserve_unknown_fields {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(required(child(path, "type"), detail));
    }
    if s.embedded_resource && s.additional_properties.is_some() {
        errs.push(forbidden(
            child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !s.type_.is_empty() && s.type_ != "object" {
        errs.push(invalid(
            child(path, "type"),
            Value::String(s.type_.clone()),
            "must be object at the root",
        ));
    }
    for name in ["kind", "apiVersion"] {
        if let Some(p) = s.properties.get(name)
            && check_metadata
            && p.type_ != "string"
        {
            errs.push(invalid(
                child(&key(&ppath, name), "type"),
                Value::String(p.type_.clone()),
                "must be string",
            ));
        }
    }
    if let Some(meta) = s.properties.get("metadata") {
        let mpath = key(&ppath, "metadata");
        if check_metadata && meta.type_ != "object" {
            errs.push(invalid(
                child(&mpath, "type"),
                Value::String(meta.type_.clone()),
                "must be object",
            ));
        }
        if lvl == Level::Root && !root_metadata_is_trivial(meta) {
            errs.push(forbidden(
                mpath,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if s.embedded_resource && !s.preserve_unknown_fields && s.properties.is_empty() {
        errs.push(required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Root `metadata` may only carry `type`, `default` (checked elsewhere) and properties
/// restricting exactly `name` and/or `generateName`.
fn root_metadata_is_trivial(meta: &StructuralSchema) -> bool {
    let names: Vec<&str> = meta.properties.keys().map(String::as_str).collect();
    let props_ok = matches!(
        names.as_slice(),
        [] | ["name" | "generateName"] | ["generateName", "name"]
    );
    let Some(m) = meta.raw.as_object() else {
        return false;
    };
    let others_ok = m.iter().all(|(k, v)| match k.as_str() {
        "type" | "default" | "properties" => true,
        // zero values are what kube compares against
        _ => {
            v.is_null()
                || *v == Value::Bool(false)
                || v.as_str() == Some("")
                || v.as_array().is_some_and(Vec::is_empty)
        }
    });
    props_ok && others_ok
}

/// `validateValueValidation` for the junctors of a node.
fn value_validation(
    s: &StructuralSchema,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        let kpath = child(path, "anyOf");
        for (i, sub) in s.any_of.iter().enumerate() {
            nested(sub, false, false, lvl, &index(&kpath, i), errs);
        }
    }
    let kpath = child(path, "allOf");
    for (i, sub) in s.all_of.iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        nested(sub, skip, false, lvl, &index(&kpath, i), errs);
    }
    let kpath = child(path, "oneOf");
    for (i, sub) in s.one_of.iter().enumerate() {
        nested(sub, false, false, lvl, &index(&kpath, i), errs);
    }
    if let Some(not) = &s.not {
        nested(not, false, false, lvl, &child(path, "not"), errs);
    }
}

/// `validateNestedValueValidation`: nodes under allOf/anyOf/oneOf/not carry value
/// validations only.
fn nested(
    v: &StructuralSchema,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    value_validation(v, skip_any_of, skip_all_of_any_of, lvl, path, errs);
    if let Some(items) = &v.items {
        nested(items, false, false, lvl, &child(path, "items"), errs);
    }
    let ppath = child(path, "properties");
    for (name, sub) in &v.properties {
        nested(sub, false, false, Level::Field, &key(&ppath, name), errs);
    }
    if !v.type_.is_empty() {
        errs.push(forbidden(
            child(path, "type"),
            "must be empty to be structural",
        ));
    }
    if v.additional_properties.is_some() {
        errs.push(forbidden(
            child(path, "additionalProperties"),
            "must be undefined to be structural",
        ));
    }
    if v.default.is_some() {
        errs.push(forbidden(
            child(path, "default"),
            "must be undefined to be structural",
        ));
    }
    if !v.title.is_empty() {
        errs.push(forbidden(
            child(path, "title"),
            "must be empty to be structural",
        ));
    }
    if !v.description.is_empty() {
        errs.push(forbidden(
            child(path, "description"),
            "must be empty to be structural",
        ));
    }
    if v.nullable {
        errs.push(forbidden(
            child(path, "nullable"),
            "must be false to be structural",
        ));
    }
    if v.has_external_docs {
        errs.push(forbidden(
            child(path, "externalDocs"),
            "must be undefined to be structural",
        ));
    }
    if v.preserve_unknown_fields {
        errs.push(forbidden(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            "must be false to be structural",
        ));
    }
    if v.embedded_resource {
        errs.push(forbidden(
            child(path, "x-kubernetes-embedded-resource"),
            "must be false to be structural",
        ));
    }
    if v.int_or_string {
        errs.push(forbidden(
            child(path, "x-kubernetes-int-or-string"),
            "must be false to be structural",
        ));
    }
    if !v.list_map_keys.is_empty() {
        errs.push(forbidden(
            child(path, "x-kubernetes-list-map-keys"),
            "must be empty to be structural",
        ));
    }
    if v.list_type.is_some() {
        errs.push(forbidden(
            child(path, "x-kubernetes-list-type"),
            "must be undefined to be structural",
        ));
    }
    if v.map_type.is_some() {
        errs.push(forbidden(
            child(path, "x-kubernetes-map-type"),
            "must be undefined to be structural",
        ));
    }
    if v.has_validations {
        errs.push(forbidden(
            child(path, "x-kubernetes-validations"),
            "must be empty to be structural",
        ));
    }
    if v.properties.contains_key("metadata") {
        errs.push(forbidden(
            key(&ppath, "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// Completeness: every field named in a junctor is also specified structurally.
/// Applied at every structural node.
fn completeness_everywhere(s: &StructuralSchema, path: &str, errs: &mut Vec<FieldError>) {
    junctor_completeness(s, s, path, path, errs);
    if let Some(items) = &s.items {
        completeness_everywhere(items, &child(path, "items"), errs);
    }
    let ppath = child(path, "properties");
    for (name, sub) in &s.properties {
        completeness_everywhere(sub, &key(&ppath, name), errs);
    }
    if let Some(AdditionalProperties::Schema(sub)) = &s.additional_properties {
        completeness_everywhere(sub, &child(path, "additionalProperties"), errs);
    }
}

fn junctor_completeness(
    v: &StructuralSchema,
    s: &StructuralSchema,
    spath: &str,
    vpath: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(not) = &v.not {
        nested_completeness(not, Some(s), spath, &child(vpath, "not"), errs);
    }
    for (kw, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        let kpath = child(vpath, kw);
        for (i, sub) in list.iter().enumerate() {
            nested_completeness(sub, Some(s), spath, &index(&kpath, i), errs);
        }
    }
}

fn nested_completeness(
    v: &StructuralSchema,
    s: Option<&StructuralSchema>,
    spath: &str,
    vpath: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(required(
            spath.to_string(),
            format!("because it is defined in {vpath}"),
        ));
        return;
    };
    junctor_completeness(v, s, spath, vpath, errs);
    if let Some(items) = &v.items {
        nested_completeness(
            items,
            s.items.as_deref(),
            &child(spath, "items"),
            &child(vpath, "items"),
            errs,
        );
    }
    let sp = child(spath, "properties");
    let vp = child(vpath, "properties");
    for (name, sub) in &v.properties {
        match s.properties.get(name) {
            Some(sf) => nested_completeness(sub, Some(sf), &key(&sp, name), &key(&vp, name), errs),
            None => errs.push(required(
                key(&sp, name),
                format!("because it is defined in {}", key(&vp, name)),
            )),
        }
    }
}

/// `ValidateDefaults`: defaults must be pruned-clean and validate against their node.
pub(crate) fn validate_defaults(root: &StructuralSchema, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    defaults_rec(root, path, true, false, &mut errs);
    errs
}

fn defaults_rec(
    s: &StructuralSchema,
    path: &str,
    is_resource_root: bool,
    inside_meta: bool,
    errs: &mut Vec<FieldError>,
) {
    let embedded = s.embedded_resource || is_resource_root;
    let inside_meta = inside_meta && !embedded;
    if let Some(def) = &s.default {
        let dpath = child(path, "default");
        if !inside_meta {
            let mut pruned = def.clone();
            crate::pruning::prune_for_defaults(&mut pruned, s, embedded);
            if &pruned != def {
                errs.push(invalid(
                    dpath.clone(),
                    def.clone(),
                    "must not have unknown fields",
                ));
            }
        }
        if s.embedded_resource {
            errs.extend(crate::validation::embedded_resource_errors(def, &dpath));
        }
        let schema_errs = crate::validation::validate_at(s, def, &dpath);
        if schema_errs.is_empty() && crate::cel::has_rules(s) {
            let cel_errs = crate::cel::with_big_stack(|| {
                let mut out = Vec::new();
                crate::cel::validate(s, def, None, &dpath, &mut out);
                out
            });
            errs.extend(cel_errs.unwrap_or_default());
        }
        errs.extend(schema_errs);
    }
    if let Some(items) = &s.items {
        defaults_rec(items, &child(path, "items"), false, inside_meta, errs);
    }
    let ppath = child(path, "properties");
    for (name, sub) in &s.properties {
        let sub_inside = inside_meta || (embedded && META_FIELDS.contains(&name.as_str()));
        defaults_rec(sub, &key(&ppath, name), false, sub_inside, errs);
    }
}
