//! Error types.

use crate::conflict::Conflict;

/// Why [`crate::apply`] refused an apply.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ApplyError {
    /// Applied fields are owned by other managers with different values; kube-apiserver answers 409.
    /// Render with [`crate::conflict_message`] and [`crate::conflict_causes`].
    #[error("{}", crate::conflict::conflict_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The applied configuration does not fit the schema (not an object, list-map element
    /// missing a key, duplicate keys, ...); kube-apiserver answers 400/500 with this text.
    #[error("{0}")]
    Invalid(String),
    /// The live object's `metadata.managedFields` could not be decoded.
    #[error("failed to decode managed fields: {0}")]
    ManagedFields(#[from] FieldsError),
}

/// Why [`crate::update`] failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum UpdateError {
    /// The new object is not a JSON object.
    #[error("{0}")]
    Invalid(String),
}

/// A `FieldsV1` document or a `managedFields` list that cannot be decoded.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum FieldsError {
    /// The `FieldsV1` value is not a JSON object of objects.
    #[error("FieldsV1 must be a JSON object of objects, found {0}")]
    NotAnObject(String),
    /// A key of a `FieldsV1` object is not `.`, `f:`, `k:`, `v:` or `i:` followed by valid content.
    #[error("invalid FieldsV1 key {key:?}: {reason}")]
    BadKey {
        /// The offending key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A managedFields entry is invalid (operation, fieldsType).
    #[error("{0}")]
    BadEntry(String),
}

/// Why [`crate::strategic_merge_patch`] failed (kube-apiserver answers 400 or 422).
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum PatchError {
    /// The patch document or the original is not a JSON object.
    #[error("{0}")]
    NotAnObject(String),
    /// A `$patch` directive has an unknown value or is used where it is not allowed.
    #[error("{0}")]
    BadDirective(String),
    /// A list-map element in the patch lacks the merge key.
    #[error("{0}")]
    MissingMergeKey(String),
    /// A `$setElementOrder`, `$retainKeys` or `$deleteFromPrimitiveList` value has the wrong shape.
    #[error("{0}")]
    Invalid(String),
}
