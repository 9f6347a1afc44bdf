//! `conversion` interface: the converter's answer, checked for size and
//! shape. Whether each object is the one asked for (same kind, same
//! identity) is judged by `conversion::check`, which knows the request.

use serde_json::Value;

use crate::{error::CallError, limits::Limits};

/// Check a converter's answer against `limits`: within the output cap,
/// every element a JSON object. A plugin's own error becomes
/// [`CallError::Plugin`] with reason `ConversionFailed`.
pub fn from_wit_converted(
    answer: Result<Vec<String>, String>,
    limits: &Limits,
) -> Result<Vec<Value>, CallError> {
    let texts = match answer {
        Ok(texts) => texts,
        Err(message) => {
            if message.len() > limits.output_bytes {
                return Err(CallError::OutputTooLarge {
                    size: message.len(),
                    limit: limits.output_bytes,
                });
            }
            return Err(CallError::Plugin(gantry_sdk::PluginError::permanent(
                "ConversionFailed",
                message,
            )));
        }
    };
    let size: usize = texts.iter().map(String::len).sum();
    if size > limits.output_bytes {
        return Err(CallError::OutputTooLarge {
            size,
            limit: limits.output_bytes,
        });
    }
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let object: Value =
                serde_json::from_str(text).map_err(|e| CallError::ContractViolation {
                    detail: format!("converted object {i} is not valid JSON: {e}"),
                })?;
            if object.is_object() {
                Ok(object)
            } else {
                Err(CallError::ContractViolation {
                    detail: format!("converted object {i} is not a JSON object"),
                })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_objects_within_the_cap() {
        let limits = Limits::default();
        let ok = from_wit_converted(Ok(vec![r#"{"a":1}"#.into()]), &limits).unwrap();
        assert_eq!(ok, vec![serde_json::json!({"a": 1})]);
        let err = from_wit_converted(Ok(vec!["[1]".into()]), &limits).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");
        let err = from_wit_converted(Ok(vec!["{".into()]), &limits).unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        let small = Limits {
            output_bytes: 4,
            ..Limits::default()
        };
        let err = from_wit_converted(Ok(vec![r#"{"a":1}"#.into()]), &small).unwrap_err();
        assert!(matches!(err, CallError::OutputTooLarge { size: 7, .. }));
        let err = from_wit_converted(Err("no field x".into()), &limits).unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugin error (ConversionFailed): no field x"
        );
    }
}
