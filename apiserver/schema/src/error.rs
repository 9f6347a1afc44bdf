//! Field errors shaped like k8s.io/apimachinery/pkg/util/validation/field.Error.

use serde_json::Value;

/// The kind of a [`FieldError`], as `field.ErrorType` in apimachinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// A required field is missing (`Required value`).
    Required,
    /// A value is malformed or out of range (`Invalid value`).
    Invalid,
    /// A value is not one of an enumerated set (`Unsupported value`).
    NotSupported,
    /// A value is too long (`Too long`).
    TooLong,
    /// A list or map has too many entries (`Too many`).
    TooMany,
    /// A value is duplicated where it must be unique (`Duplicate value`).
    Duplicate,
    /// A field is not allowed here (`Forbidden`).
    Forbidden,
    /// A value has the wrong type (`Invalid value`, reason `FieldValueTypeInvalid`).
    TypeInvalid,
    /// A referenced value was not found (`Not found`).
    NotFound,
    /// An internal error (`Internal error`).
    Internal,
}

impl FieldErrorKind {
    /// The text kube prints for this kind, e.g. `Invalid value`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::NotFound => "Not found",
            FieldErrorKind::Internal => "Internal error",
        }
    }

    /// The `metav1.StatusCause` reason, e.g. `FieldValueInvalid`.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::NotFound => "FieldValueNotFound",
            FieldErrorKind::Internal => "InternalError",
        }
    }
}

/// One validation error at a field path, like apimachinery's `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What went wrong.
    pub kind: FieldErrorKind,
    /// The field path, e.g. `spec.replicas` or `spec.items[2].name` or `metadata.labels[app]`.
    pub field: String,
    /// The offending value; `None` when kube omits it from the message.
    pub value: Option<Value>,
    /// Human-readable detail appended after the value.
    pub detail: String,
}

impl FieldError {
    /// Builds an error.
    pub fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    /// The message kube-apiserver prints, e.g.
    /// `spec.replicas: Invalid value: 7: spec.replicas in body should be less than or equal to 5`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }

    /// The message without the leading `field: `, like `field.Error.ErrorBody()`.
    pub fn body(&self) -> String {
        let mut s = match (self.kind, &self.value) {
            (
                FieldErrorKind::Required
                | FieldErrorKind::Forbidden
                | FieldErrorKind::TooLong
                | FieldErrorKind::Internal,
                _,
            )
            | (_, None) => self.kind.as_str().to_string(),
            (kind, Some(v)) => format!("{}: {}", kind.as_str(), crate::gofmt::error_value(v)),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The reason for a `metav1.StatusCause`, e.g. `FieldValueInvalid`.
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for FieldError {}
