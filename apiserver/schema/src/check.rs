//! The CRD-create pipeline for a schema: parse, generic CRD checks, structural checks,
//! default validation — in kube's order and with kube's staging.

use serde_json::Value;

use crate::MAX_DEPTH;
use crate::error::{FieldError, FieldErrorKind};
use crate::parse::{json_depth, parse_node};
use crate::schema::StructuralSchema;

/// Maximum JSON nesting of a schema document (each schema level uses up to two JSON
/// levels, e.g. `properties` → name).
const MAX_JSON_DEPTH: usize = 2 * MAX_DEPTH + 10;

/// Parses and checks an `openAPIV3Schema`; errors are rooted at `base`.
pub(crate) fn build(v: &Value, base: &str) -> Result<StructuralSchema, Vec<FieldError>> {
    if json_depth(v) > MAX_JSON_DEPTH {
        return Err(vec![FieldError::new(
            FieldErrorKind::Forbidden,
            base,
            None,
            format!("schema must not be nested more than {MAX_DEPTH} levels deep"),
        )]);
    }
    let mut parse_errs = Vec::new();
    let schema = parse_node(v, base, 0, &mut parse_errs);
    // Invalid regexes and CEL rules are validation errors (kube reports them alongside
    // structural errors); anything else kube reports while decoding / NewStructural
    // (unsupported keywords, bad keyword types, depth) stops the pipeline.
    let (soft, fatal): (Vec<FieldError>, Vec<FieldError>) = parse_errs.into_iter().partition(|e| {
        e.field.ends_with(".pattern") || e.field.contains("x-kubernetes-validations[")
    });
    let mut errs = fatal;
    let stop = !errs.is_empty();
    errs.extend(soft);
    crate::structural::crd_schema_checks(&schema, base, &mut errs);
    if !stop {
        let structural = crate::structural::structural_checks(&schema, base);
        if structural.is_empty() {
            errs.extend(crate::structural::validate_defaults(&schema, base));
        } else {
            errs.extend(structural);
        }
    }
    if errs.is_empty() {
        Ok(schema)
    } else {
        Err(dedup(errs))
    }
}

fn dedup(errs: Vec<FieldError>) -> Vec<FieldError> {
    let mut out: Vec<FieldError> = Vec::with_capacity(errs.len());
    for e in errs {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}
