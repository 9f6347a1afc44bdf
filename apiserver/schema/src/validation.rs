//! Validation of custom resources, mirroring kube-openapi's `SchemaValidator` as
//! apiextensions-apiserver drives it, plus list-type and embedded-resource checks.
//!
//! Errors are produced directly as [`FieldError`]s using kube's mapping
//! (`kubeOpenAPIResultToFieldErrors`): the kube-openapi message (with the relative
//! name, e.g. `spec.replicas in body should be ...`) becomes the detail.

use serde_json::{Number, Value};

use crate::MAX_DEPTH;
use crate::error::{FieldError, FieldErrorKind};
use crate::gofmt;
use crate::path::{child, index, key};
use crate::schema::{AdditionalProperties, StructuralSchema};

const IN: &str = "body";

/// Builds errors for one validation run rooted at `prefix` (the `fldPath`).
struct Ctx<'a> {
    prefix: &'a str,
}

impl Ctx<'_> {
    /// The field path for a kube-openapi error name.
    fn field(&self, name: &str) -> String {
        let trimmed = name.strip_prefix('.').unwrap_or(name);
        if name.is_empty() || name == "." {
            if self.prefix.is_empty() {
                "<nil>".to_string()
            } else {
                self.prefix.to_string()
            }
        } else {
            child(self.prefix, trimmed)
        }
    }
    fn err(
        &self,
        kind: FieldErrorKind,
        name: &str,
        value: Option<Value>,
        detail: String,
    ) -> FieldError {
        FieldError::new(kind, self.field(name), value, detail)
    }
    /// A composite (non-`Validation`) kube-openapi error: `field.Invalid(fldPath, "", msg)`.
    fn composite(&self, msg: String) -> FieldError {
        let field = if self.prefix.is_empty() {
            "<nil>".to_string()
        } else {
            self.prefix.to_string()
        };
        FieldError::new(
            FieldErrorKind::Invalid,
            field,
            Some(Value::String(String::new())),
            msg,
        )
    }
}

/// The kube-openapi schema type list of a node.
fn types(s: &StructuralSchema) -> Vec<&str> {
    if s.int_or_string {
        vec!["integer", "string"]
    } else if s.type_.is_empty() {
        vec![]
    } else {
        vec![s.type_.as_str()]
    }
}

/// JSON type name of data as kube-openapi infers it.
fn sch_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// swag.IsFloat64AJSONInteger.
fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    if f.fract() == 0.0 {
        return true;
    }
    let g = f.trunc();
    let diff = (f - g).abs();
    diff / (f.abs() + g.abs()) < 1e-9
}

/// Validates `data` against `s` with field paths under `prefix` ("" for an object).
pub(crate) fn validate_at(s: &StructuralSchema, data: &Value, prefix: &str) -> Vec<FieldError> {
    let ctx = Ctx { prefix };
    let mut errs = Vec::new();
    node(&ctx, s, data, None, "", &mut errs);
    errs
}

/// Old `x-kubernetes-list-type: map` items by key, for correlating new items with
/// old ones (kube's ratcheting correlates only map lists). `None` for other lists.
pub(crate) fn old_items_by_key<'a>(
    s: &StructuralSchema,
    old: Option<&'a Value>,
) -> Option<std::collections::HashMap<String, &'a Value>> {
    if s.list_type.as_deref() != Some("map") || s.list_map_keys.is_empty() {
        return None;
    }
    let items = old?.as_array()?;
    Some(items.iter().map(|o| (list_map_key(s, o), o)).collect())
}

/// The identity of a list-map item's key fields.
pub(crate) fn list_map_key(s: &StructuralSchema, item: &Value) -> String {
    let mut k = serde_json::Map::new();
    for f in &s.list_map_keys {
        if let Some(v) = item.get(f) {
            k.insert(f.clone(), v.clone());
        }
    }
    identity(&Value::Object(k))
}

/// Top-level validation of a custom resource (see [`StructuralSchema::validate`]);
/// with `old`, errors of unchanged values are ratcheted away (kube's
/// `CRDValidationRatcheting`, on by default since 1.30).
pub(crate) fn validate_object(
    s: &StructuralSchema,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    if let Some(err) = depth_error(obj) {
        return vec![err];
    }
    // An old object too deep to compare is simply not used for ratcheting.
    let old = old.filter(|o| depth_error(o).is_none());
    let ctx = Ctx { prefix: "" };
    let mut errs = Vec::new();
    node(&ctx, s, obj, old, "", &mut errs);
    if let Value::Object(m) = obj {
        list_sets_and_maps_object(s, m, "", &mut errs);
    }
    embedded_walk(s, obj, "", true, &mut errs);
    if crate::cel::has_rules(s) {
        let blocking = errs.iter().any(|e| {
            matches!(
                e.kind,
                FieldErrorKind::NotSupported
                    | FieldErrorKind::Required
                    | FieldErrorKind::TooLong
                    | FieldErrorKind::TooMany
                    | FieldErrorKind::TypeInvalid
            )
        });
        if blocking {
            errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                "<nil>",
                Some(Value::Null),
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            let cel_errs = crate::cel::with_big_stack(|| {
                let mut out = Vec::new();
                crate::cel::validate(s, obj, old, "", &mut out);
                out
            });
            errs.extend(cel_errs.unwrap_or_else(|| {
                vec![FieldError::new(
                    FieldErrorKind::Internal,
                    "<nil>",
                    None,
                    "x-kubernetes-validations evaluation failed",
                )]
            }));
        }
    }
    errs
}

/// A clear error when `obj` is nested deeper than [`MAX_DEPTH`].
fn depth_error(obj: &Value) -> Option<FieldError> {
    let mut stack: Vec<(&Value, usize, String)> = vec![(obj, 1, String::new())];
    while let Some((x, d, path)) = stack.pop() {
        if d > MAX_DEPTH {
            let top = path
                .split(['.', '['])
                .next()
                .unwrap_or_default()
                .to_string();
            let field = if top.is_empty() {
                "<nil>".to_string()
            } else {
                top
            };
            return Some(FieldError::new(
                FieldErrorKind::Invalid,
                field,
                Some(Value::String(String::new())),
                format!("object must not be nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        match x {
            Value::Object(m) => {
                for (k, v) in m {
                    stack.push((v, d + 1, if d == 1 { k.clone() } else { path.clone() }));
                }
            }
            Value::Array(a) => {
                for v in a {
                    stack.push((v, d + 1, path.clone()));
                }
            }
            _ => {}
        }
    }
    None
}

/// One `SchemaValidator.Validate` call: validators in kube-openapi's order.
fn node(
    ctx: &Ctx,
    s: &StructuralSchema,
    data: &Value,
    old: Option<&Value>,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    // Ratcheting (CRDValidationRatcheting): an unchanged, correlatable value keeps
    // whatever errors it already had.
    if old.is_some_and(|o| json_eq(o, data)) {
        return;
    }
    if data.is_null() {
        type_validator(ctx, s, data, name, errs);
        enum_validator(ctx, s, data, name, errs);
        return;
    }
    type_validator(ctx, s, data, name, errs);
    junctors(ctx, s, data, old, name, errs);
    if let Value::String(st) = data {
        string_validator(ctx, s, st, name, errs);
        if let Some(f) = crate::formats::supported(&s.format)
            && !crate::formats::validates(&f, st)
        {
            errs.push(ctx.err(
                FieldErrorKind::TypeInvalid,
                name,
                Some(data.clone()),
                format!(
                    "{name} in {IN} must be of type {}: {}",
                    s.format,
                    gofmt::quote(st)
                ),
            ));
        }
    }
    if let Value::Number(n) = data {
        number_validator(ctx, s, n, name, errs);
    }
    if let Value::Array(a) = data {
        slice_validator(ctx, s, a, old, name, errs);
    }
    enum_validator(ctx, s, data, name, errs);
    if let Value::Object(m) = data {
        object_validator(ctx, s, m, old, name, errs);
    }
}

fn type_error(ctx: &Ctx, name: &str, type_name: &str, got: &str) -> FieldError {
    ctx.err(
        FieldErrorKind::TypeInvalid,
        name,
        Some(Value::String(got.to_string())),
        format!(
            "{name} in {IN} must be of type {type_name}: {}",
            gofmt::quote(got)
        ),
    )
}

fn type_validator(
    ctx: &Ctx,
    s: &StructuralSchema,
    data: &Value,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let t = types(s);
    let format = crate::formats::supported(&s.format).map_or("", |_| s.format.as_str());
    if t.is_empty() && format.is_empty() {
        return;
    }
    if data.is_null() {
        if !t.is_empty() && !s.nullable {
            errs.push(type_error(ctx, name, &t.join(","), "null"));
        }
        return;
    }
    let st = sch_type(data);
    let contains = |x: &str| t.contains(&x);
    let is_float_int =
        st == "number" && data.as_f64().is_some_and(is_json_integer) && contains("integer");
    let is_int_float = st == "integer" && contains("number");
    let is_string_or_slice = matches!(data, Value::String(_) | Value::Array(_));
    let type_matches = contains(st) || is_float_int || is_int_float;
    if !(is_string_or_slice || format.is_empty() || type_matches) {
        let data_format = match st {
            "integer" => "int64",
            "number" => "float64",
            _ => "",
        };
        errs.push(type_error(ctx, name, format, data_format));
        return;
    }
    let numeric = contains("number") || contains("integer");
    if is_string_or_slice && !(numeric || format.is_empty()) {
        return;
    }
    if !type_matches {
        errs.push(type_error(ctx, name, &t.join(","), st));
    }
}

/// allOf / anyOf / oneOf / not (`schemaPropsValidator`).
fn junctors(
    ctx: &Ctx,
    s: &StructuralSchema,
    data: &Value,
    old: Option<&Value>,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let quoted = gofmt::quote(name);
    if !s.any_of.is_empty() {
        let mut best: Option<Vec<FieldError>> = None;
        let mut ok = false;
        for alt in &s.any_of {
            let mut r = Vec::new();
            node(ctx, alt, data, old, name, &mut r);
            if r.is_empty() {
                ok = true;
                break;
            }
            if best.as_ref().is_none_or(|b| r.len() < b.len()) {
                best = Some(r);
            }
        }
        if !ok {
            errs.push(ctx.composite(format!(
                "{quoted} must validate at least one schema (anyOf)"
            )));
            errs.extend(best.unwrap_or_default());
        }
    }
    if !s.one_of.is_empty() {
        let mut best: Option<Vec<FieldError>> = None;
        let mut validated = 0;
        for alt in &s.one_of {
            let mut r = Vec::new();
            node(ctx, alt, data, old, name, &mut r);
            if r.is_empty() {
                validated += 1;
                best = None;
            } else if validated == 0 && best.as_ref().is_none_or(|b| r.len() < b.len()) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let extra = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            errs.push(ctx.composite(format!(
                "{quoted} must validate one and only one schema (oneOf). {extra}"
            )));
            errs.extend(best.unwrap_or_default());
        }
    }
    if !s.all_of.is_empty() {
        let mut validated = 0;
        for alt in &s.all_of {
            let mut r = Vec::new();
            node(ctx, alt, data, old, name, &mut r);
            if r.is_empty() {
                validated += 1;
            }
            errs.extend(r);
        }
        if validated != s.all_of.len() {
            let extra = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            errs.push(ctx.composite(format!(
                "{quoted} must validate all the schemas (allOf){extra}"
            )));
        }
    }
    if let Some(not) = &s.not {
        let mut r = Vec::new();
        node(ctx, not, data, old, name, &mut r);
        if r.is_empty() {
            errs.push(ctx.composite(format!("{quoted} must not validate the schema (not)")));
        }
    }
}

fn string_validator(
    ctx: &Ctx,
    s: &StructuralSchema,
    data: &str,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let len = i64::try_from(data.chars().count()).unwrap_or(i64::MAX);
    if let Some(max) = s.max_length
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        errs.push(ctx.err(
            FieldErrorKind::TooLong,
            name,
            Some(Value::String("<value omitted>".into())),
            format!("may not be more than {max} {unit}"),
        ));
        return;
    }
    if let Some(min) = s.min_length
        && len < min
    {
        errs.push(ctx.err(
            FieldErrorKind::Invalid,
            name,
            Some(Value::String(data.to_string())),
            format!("{name} in {IN} should be at least {min} chars long"),
        ));
        return;
    }
    if let Some(p) = &s.pattern
        && !p.regex.is_match(data)
    {
        errs.push(ctx.err(
            FieldErrorKind::Invalid,
            name,
            Some(Value::String(data.to_string())),
            format!("{name} in {IN} should match '{}'", p.source),
        ));
    }
}

// `n`, `f`, `s`, `m` as in kube-openapi's validators; an integer value compares with
// the bounds as `int64(bound)`, truncating as Go does.
#[allow(clippy::many_single_char_names, clippy::cast_possible_truncation)]
fn number_validator(
    ctx: &Ctx,
    s: &StructuralSchema,
    n: &Number,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let value = Some(Value::Number(n.clone()));
    let int = n.as_i64();
    let f = n.as_f64().unwrap_or(f64::NAN);
    let invalid = |detail: String| ctx.err(FieldErrorKind::Invalid, name, value.clone(), detail);
    if let Some(factor) = s.multiple_of {
        let factor_i = factor as i64;
        if factor < 0.0 {
            let shown = match int {
                Some(_) => factor_i.to_string(),
                None => gofmt::float(factor),
            };
            errs.push(ctx.err(
                FieldErrorKind::Invalid,
                name,
                Some(serde_json::json!(factor)),
                format!("factor MultipleOf declared for {name} must be positive: {shown}"),
            ));
        } else if let (Some(d), true) = (int, factor_i != 0) {
            if (d / factor_i) * factor_i != d {
                errs.push(invalid(format!(
                    "{name} in {IN} should be a multiple of {factor_i}"
                )));
            }
        } else {
            let mult = if factor < 1.0 {
                1.0 / factor * f
            } else {
                f / factor
            };
            if !is_json_integer(mult) {
                errs.push(invalid(format!(
                    "{name} in {IN} should be a multiple of {}",
                    gofmt::float(factor)
                )));
            }
        }
    }
    if let Some(min) = s.minimum {
        let excl = s.exclusive_minimum;
        let (fails, shown) = match int {
            Some(d) => {
                let m = min as i64;
                ((!excl && d < m) || (excl && d <= m), m.to_string())
            }
            None => ((!excl && f < min) || (excl && f <= min), gofmt::float(min)),
        };
        if fails {
            let op = if excl {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(invalid(format!("{name} in {IN} should be {op} {shown}")));
        }
    }
    if let Some(max) = s.maximum {
        let excl = s.exclusive_maximum;
        let (fails, shown) = match int {
            Some(d) => {
                let m = max as i64;
                ((!excl && d > m) || (excl && d >= m), m.to_string())
            }
            None => ((!excl && f > max) || (excl && f >= max), gofmt::float(max)),
        };
        if fails {
            let op = if excl {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(invalid(format!("{name} in {IN} should be {op} {shown}")));
        }
    }
}

fn slice_validator(
    ctx: &Ctx,
    s: &StructuralSchema,
    a: &[Value],
    old: Option<&Value>,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(items) = &s.items {
        let old_index = old_items_by_key(s, old);
        for (i, v) in a.iter().enumerate() {
            let old_item = old_index
                .as_ref()
                .and_then(|m| m.get(&list_map_key(s, v)).copied());
            node(ctx, items, v, old_item, &index(name, i), errs);
        }
    }
    let size = i64::try_from(a.len()).unwrap_or(i64::MAX);
    if let Some(min) = s.min_items
        && size < min
    {
        errs.push(ctx.err(
            FieldErrorKind::Invalid,
            name,
            Some(Value::from(size)),
            format!("{name} in {IN} should have at least {min} items"),
        ));
    }
    if let Some(max) = s.max_items
        && size > max
    {
        errs.push(ctx.err(
            FieldErrorKind::TooMany,
            name,
            Some(Value::from(size)),
            too_many_detail(max),
        ));
    }
    if s.unique_items {
        let dup = a
            .iter()
            .enumerate()
            .any(|(i, x)| a[..i].iter().any(|y| json_eq(x, y)));
        if dup {
            errs.push(ctx.err(
                FieldErrorKind::Invalid,
                name,
                Some(Value::String(String::new())),
                format!("{name} in {IN} shouldn't contain duplicates"),
            ));
        }
    }
}

/// `field.TooMany`'s detail ("item" when the maximum is 1).
fn too_many_detail(max: i64) -> String {
    let unit = if max == 1 { "item" } else { "items" };
    format!("must have at most {max} {unit}")
}

/// Deep equality treating numbers by value (`1` equals `1.0`), like Go after decoding.
// `a`/`b` and their contents `x`/`y`, `i`/`j`, `p`/`q`: the two sides, pairwise.
#[allow(clippy::many_single_char_names)]
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn enum_validator(
    ctx: &Ctx,
    s: &StructuralSchema,
    data: &Value,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(values) = &s.enum_ else { return };
    if values.is_empty() {
        return;
    }
    if !data.is_null() && values.iter().any(|e| json_eq(e, data)) {
        return;
    }
    let supported: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::String(s) => gofmt::quote(s),
            other => gofmt::quote(&serde_json::to_string(other).unwrap_or_default()),
        })
        .collect();
    errs.push(ctx.err(
        FieldErrorKind::NotSupported,
        name,
        Some(data.clone()),
        format!("supported values: {}", supported.join(", ")),
    ));
}

fn object_validator(
    ctx: &Ctx,
    s: &StructuralSchema,
    m: &serde_json::Map<String, Value>,
    old: Option<&Value>,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let n = i64::try_from(m.len()).unwrap_or(i64::MAX);
    if let Some(min) = s.min_properties
        && n < min
    {
        errs.push(ctx.err(
            FieldErrorKind::Invalid,
            name,
            Some(Value::from(n)),
            format!("{name} in {IN} should have at least {min} properties"),
        ));
        return;
    }
    if let Some(max) = s.max_properties
        && n > max
    {
        errs.push(ctx.err(
            FieldErrorKind::TooMany,
            name,
            Some(Value::from(n)),
            too_many_detail(max),
        ));
        return;
    }
    match &s.additional_properties {
        Some(AdditionalProperties::Bool(false)) => {
            let mut keys: Vec<&String> = m
                .keys()
                .filter(|k| !s.properties.contains_key(*k))
                .collect();
            keys.sort();
            for k in keys {
                errs.push(ctx.err(
                    FieldErrorKind::Invalid,
                    name,
                    Some(Value::String(k.clone())),
                    format!("{name}.{k} in {IN} is a forbidden property"),
                ));
            }
        }
        Some(AdditionalProperties::Schema(ap)) => {
            for (k, v) in m {
                if !s.properties.contains_key(k) {
                    let old_v = old.and_then(|o| o.get(k));
                    node(ctx, ap, v, old_v, &format!("{name}.{k}"), errs);
                }
            }
        }
        _ => {}
    }
    for (pname, ps) in &s.properties {
        if let Some(v) = m.get(pname) {
            let rname = if name.is_empty() {
                pname.clone()
            } else {
                format!("{name}.{pname}")
            };
            node(ctx, ps, v, old.and_then(|o| o.get(pname)), &rname, errs);
        }
    }
    for r in &s.required {
        if !m.contains_key(r) {
            errs.push(ctx.err(
                FieldErrorKind::Required,
                &format!("{name}.{r}"),
                None,
                String::new(),
            ));
        }
    }
}

/// `listtype.ValidateListSetsAndMaps` for an object.
fn list_sets_and_maps_object(
    s: &StructuralSchema,
    m: &serde_json::Map<String, Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(AdditionalProperties::Schema(ap)) = &s.additional_properties {
        for (k, v) in m {
            list_sets_and_maps(ap, v, &key(path, k), errs);
        }
    }
    for (k, v) in m {
        if let Some(sub) = s.properties.get(k) {
            list_sets_and_maps(sub, v, &child(path, k), errs);
        }
    }
}

fn list_sets_and_maps(s: &StructuralSchema, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => list_sets_and_maps_object(s, m, path, errs),
        Value::Array(a) => {
            match s.list_type.as_deref() {
                Some("set") => {
                    for i in non_unique(a) {
                        errs.push(FieldError::new(
                            FieldErrorKind::Duplicate,
                            index(path, i),
                            Some(a[i].clone()),
                            "",
                        ));
                    }
                }
                Some("map") => list_map(s, a, path, errs),
                _ => {}
            }
            if let Some(items) = &s.items {
                for (i, x) in a.iter().enumerate() {
                    list_sets_and_maps(items, x, &index(path, i), errs);
                }
            }
        }
        _ => {}
    }
}

/// A hashable identity for set/map-key comparison: scalars by type and text (Go
/// compares `int64(1)` and `float64(1)` as different map keys), compounds by their
/// JSON encoding with sorted keys (kube marshals them).
pub(crate) fn identity(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("b:{b}"),
        Value::Number(n) => format!("n:{n}"),
        Value::String(s) => format!("s:{s}"),
        other => format!("c:{}", gofmt::go_json(other)),
    }
}

/// Indices of the second occurrence of each duplicated element (linear time).
fn non_unique(a: &[Value]) -> Vec<usize> {
    let mut seen: std::collections::HashMap<String, usize> =
        std::collections::HashMap::with_capacity(a.len());
    let mut out = Vec::new();
    for (i, x) in a.iter().enumerate() {
        let count = seen.entry(identity(x)).or_insert(0);
        *count += 1;
        if *count == 2 {
            out.push(i);
        }
    }
    out
}

fn list_map(s: &StructuralSchema, a: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    for (i, x) in a.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                index(path, i),
                Some(x.clone()),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if a.len() <= 1 {
        return;
    }
    // Keys as objects holding only the key fields that are present.
    let keys: Vec<Value> = a
        .iter()
        .map(|x| {
            let mut k = serde_json::Map::new();
            for f in &s.list_map_keys {
                if let Some(v) = x.get(f) {
                    k.insert(f.clone(), v.clone());
                }
            }
            Value::Object(k)
        })
        .collect();
    for i in non_unique(&keys) {
        errs.push(FieldError::new(
            FieldErrorKind::Duplicate,
            index(path, i),
            Some(keys[i].clone()),
            "",
        ));
    }
}

/// Walks the schema and validates every `x-kubernetes-embedded-resource` object found.
fn embedded_walk(
    s: &StructuralSchema,
    v: &Value,
    path: &str,
    root: bool,
    errs: &mut Vec<FieldError>,
) {
    match v {
        Value::Object(m) => {
            if s.embedded_resource && !root {
                errs.extend(embedded_resource_errors(v, path));
            }
            for (k, x) in m {
                if let Some(sub) = s.properties.get(k) {
                    embedded_walk(sub, x, &child(path, k), false, errs);
                } else if let Some(AdditionalProperties::Schema(ap)) = &s.additional_properties {
                    embedded_walk(ap, x, &key(path, k), false, errs);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for (i, x) in a.iter().enumerate() {
                    embedded_walk(items, x, &index(path, i), false, errs);
                }
            }
        }
        _ => {}
    }
}

/// objectmeta's checks of an embedded resource: apiVersion and kind present and valid,
/// metadata an object.
pub(crate) fn embedded_resource_errors(v: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Value::Object(m) = v else { return errs };
    for f in ["apiVersion", "kind"] {
        if !m.contains_key(f) {
            errs.push(FieldError::new(
                FieldErrorKind::Required,
                child(path, f),
                None,
                "must not be empty",
            ));
        }
    }
    if let Some(av) = m.get("apiVersion") {
        let p = child(path, "apiVersion");
        match av {
            Value::String(s) if s.is_empty() => errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                p,
                Some(av.clone()),
                "must not be empty",
            )),
            Value::String(s) if s.matches('/').count() > 1 => errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                p,
                Some(av.clone()),
                format!("unexpected GroupVersion string: {s}"),
            )),
            Value::String(_) => {}
            _ => errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                p,
                Some(av.clone()),
                "must be a string",
            )),
        }
    }
    if let Some(k) = m.get("kind") {
        let p = child(path, "kind");
        match k {
            Value::String(s) if s.is_empty() => errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                p,
                Some(k.clone()),
                "must not be empty",
            )),
            Value::String(s) => {
                let problems = dns1035_label_errors(&s.to_lowercase());
                if !problems.is_empty() {
                    errs.push(FieldError::new(
                        FieldErrorKind::Invalid,
                        p,
                        Some(k.clone()),
                        format!(
                            "may have mixed case, but should otherwise match: {}",
                            problems.join(",")
                        ),
                    ));
                }
            }
            _ => errs.push(FieldError::new(
                FieldErrorKind::Invalid,
                p,
                Some(k.clone()),
                "must be a string",
            )),
        }
    }
    match m.get("metadata") {
        Some(Value::Object(md)) => {
            let mpath = child(path, "metadata");
            for f in ["name", "generateName"] {
                if let Some(Value::String(name)) = md.get(f) {
                    for msg in path_segment_name_errors(name) {
                        errs.push(FieldError::new(
                            FieldErrorKind::Invalid,
                            child(&mpath, f),
                            Some(Value::String(name.clone())),
                            msg,
                        ));
                    }
                }
            }
        }
        Some(Value::Null) | None => {}
        Some(md) => errs.push(FieldError::new(
            FieldErrorKind::Invalid,
            child(path, "metadata"),
            Some(md.clone()),
            "must be an object",
        )),
    }
    errs
}

/// apimachinery `IsValidPathSegmentName` (names of embedded resources).
fn path_segment_name_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// apimachinery `IsDNS1035Label`.
fn dns1035_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit());
    if !ok {
        errs.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}
