//! What kube-apiserver refuses in a CRD's `spec.conversion` (its
//! `validateCustomResourceConversion`, and `preserveUnknownFields`, which v1 CRDs may
//! not set). Field paths are kube's internal ones (`spec.conversion.webhookClientConfig`).

use k8s_openapi::api::admissionregistration::v1 as admreg;
use serde_json::Value;

use crate::error::Cause;

const PATH: &str = "spec.conversion";

/// The causes kube gives for the conversion settings of `crd` (a v1 CRD, conversion
/// defaulted).
pub fn causes(crd: &Value) -> Vec<Cause> {
    let mut out = vec![];
    let conversion = crd.pointer("/spec/conversion").cloned().unwrap_or_default();
    let strategy = conversion
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or("None");
    let preserve_unknown = crd.pointer("/spec/preserveUnknownFields") == Some(&Value::Bool(true));
    if preserve_unknown && has_default(crd) {
        out.push(invalid(
            "spec.preserveUnknownFields",
            "true",
            "must be false in order to use defaults in the schema",
        ));
    }
    if preserve_unknown && strategy != "None" {
        out.push(invalid(
            &format!("{PATH}.strategy"),
            &format!("{strategy:?}"),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    let webhook = conversion.get("webhook");
    let client_config = webhook
        .and_then(|w| w.get("clientConfig"))
        .filter(|c| !c.is_null());
    let review_versions: Vec<String> = webhook
        .and_then(|w| w.get("conversionReviewVersions"))
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    let cc_path = format!("{PATH}.webhookClientConfig");
    let rv_path = format!("{PATH}.conversionReviewVersions");
    match strategy {
        "Webhook" => {
            match client_config
                .map(|c| serde_json::from_value::<admreg::WebhookClientConfig>(c.clone()))
            {
                None => out.push(Cause::new(
                    "FieldValueRequired",
                    "Required value: required when strategy is set to Webhook",
                    cc_path,
                )),
                Some(Ok(cc)) => {
                    crate::admission::config::validate_client_config(&cc, &cc_path, &mut out);
                }
                Some(Err(e)) => out.push(invalid(&cc_path, "", &e.to_string())),
            }
            review_version_causes(&review_versions, &rv_path, &mut out);
        }
        "None" => {
            let forbidden = "Forbidden: should not be set when strategy is not set to Webhook";
            if client_config.is_some() {
                out.push(Cause::new("FieldValueForbidden", forbidden, cc_path));
            }
            if !review_versions.is_empty() {
                out.push(Cause::new("FieldValueForbidden", forbidden, rv_path));
            }
        }
        other => out.push(Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""),
            format!("{PATH}.strategy"),
        )),
    }
    if preserve_unknown {
        out.push(invalid(
            "spec.preserveUnknownFields",
            "true",
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    out
}

fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
        field,
    )
}

/// kube's `validateConversionReviewVersions` (v1 and v1beta1 are understood).
fn review_version_causes(versions: &[String], path: &str, out: &mut Vec<Cause>) {
    if versions.is_empty() {
        out.push(Cause::new("FieldValueRequired", "Required value", path));
        return;
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(v) {
            out.push(invalid(
                &format!("{path}[{i}]"),
                &format!("{v:?}"),
                "duplicate version",
            ));
            continue;
        }
        if !crate::objects::names::is_dns1035_label(v) {
            out.push(invalid(
                &format!("{path}[{i}]"),
                &format!("{v:?}"),
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ));
        }
    }
    if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
        let shown = format!(
            "[{}]",
            versions
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        out.push(invalid(
            path,
            &shown,
            "must include at least one of v1, v1beta1",
        ));
    }
}

/// Whether any version's schema sets a `default`.
fn has_default(crd: &Value) -> bool {
    fn walk(schema: &Value) -> bool {
        let Some(m) = schema.as_object() else {
            return false;
        };
        if m.contains_key("default") {
            return true;
        }
        let nested = |k: &str| {
            m.get(k)
                .and_then(Value::as_object)
                .is_some_and(|p| p.values().any(walk))
        };
        let listed = |k: &str| {
            m.get(k)
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(walk))
        };
        nested("properties")
            || ["items", "additionalProperties", "not"]
                .iter()
                .any(|k| m.get(*k).is_some_and(walk))
            || ["allOf", "anyOf", "oneOf"].iter().any(|k| listed(k))
    }
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .is_some_and(|vs| {
            vs.iter()
                .any(|v| v.pointer("/schema/openAPIV3Schema").is_some_and(walk))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // Takes a `json!` literal by value so each call reads as data.
    #[allow(clippy::needless_pass_by_value)]
    fn crd(conversion: Value) -> Value {
        json!({ "spec": { "conversion": conversion, "versions": [] } })
    }

    fn messages(crd: &Value) -> Vec<(String, String)> {
        causes(crd)
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect()
    }

    #[test]
    fn webhook_needs_client_config_and_review_versions() {
        assert_eq!(
            messages(&crd(json!({ "strategy": "Webhook" }))),
            vec![
                (
                    "spec.conversion.webhookClientConfig".into(),
                    "Required value: required when strategy is set to Webhook".into()
                ),
                (
                    "spec.conversion.conversionReviewVersions".into(),
                    "Required value".into()
                ),
            ]
        );
        let ok = json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"], "clientConfig": { "url": "https://x/convert" } } });
        assert!(causes(&crd(ok)).is_empty());
        let v3 = json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v3"], "clientConfig": { "url": "https://x/convert" } } });
        assert_eq!(
            messages(&crd(v3))[0].1,
            r#"Invalid value: ["v3"]: must include at least one of v1, v1beta1"#
        );
    }

    #[test]
    fn none_must_not_have_a_webhook_nor_preserve_unknown_fields() {
        let none = json!({ "strategy": "None", "webhook": { "conversionReviewVersions": ["v1"], "clientConfig": { "url": "https://x/" } } });
        assert_eq!(messages(&crd(none)).len(), 2);
        let mut c = crd(
            json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"], "clientConfig": { "url": "https://x/" } } }),
        );
        c["spec"]["preserveUnknownFields"] = json!(true);
        let m = messages(&c);
        assert_eq!(
            m[0].1,
            r#"Invalid value: "Webhook": must be None if spec.preserveUnknownFields is true"#
        );
        assert_eq!(m.len(), 2);
    }
}
