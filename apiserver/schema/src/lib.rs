//! CRD structural-schema machinery of kube-apiserver (k8s.io/apiextensions-apiserver),
//! as a pure library over [`serde_json::Value`].
//!
//! - [`StructuralSchema::new`] parses an `openAPIV3Schema` and checks it the way
//!   kube-apiserver does on CRD create/update (structural rules, defaults, regexes, ...).
//! - [`StructuralSchema::default`] applies defaults, [`StructuralSchema::prune`] drops
//!   unknown fields, [`StructuralSchema::validate`] validates a custom resource.
//! - [`printer_column_value`] evaluates `additionalPrinterColumns` for Table output.
//!
//! Errors are [`FieldError`]s whose [`FieldError::message`] reproduces kube's text.
//!
//! Typical use by an API server on create (kube's order: prune, default, validate):
//!
//! ```
//! use gantry_schema::StructuralSchema;
//! use serde_json::json;
//!
//! let schema = StructuralSchema::new_at(
//!     &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
//!         "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1}}}}}),
//!     "spec.versions[0].schema.openAPIV3Schema",
//! )
//! .expect("structural schema");
//!
//! let mut obj = json!({"apiVersion": "cache.example.com/v1", "kind": "Memcached",
//!                      "metadata": {"name": "m"}, "spec": {"typo": true}});
//! let unknown = schema.prune(&mut obj); // -> warnings `unknown field "spec.typo"`
//! assert_eq!(unknown, vec!["spec.typo"]);
//! schema.default(&mut obj);
//! assert_eq!(obj["spec"]["size"], 1);
//! assert!(schema.validate(&obj).is_empty());
//!
//! obj["spec"]["size"] = json!(11);
//! let errs = schema.validate(&obj);
//! assert_eq!(
//!     errs[0].message(),
//!     "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"
//! );
//! assert_eq!(errs[0].reason(), "FieldValueInvalid");
//! ```

// Others build on this crate, so its fallible and panicking functions say when
// they fail (the workspace allows both lints for the application crates).
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod cel;
mod check;
mod defaulting;
mod error;
mod formats;
mod gofmt;
mod jsonpath;
mod parse;
mod path;
mod printer;
mod pruning;
mod regex_compat;
mod schema;
mod structural;
mod validation;

pub use error::{FieldError, FieldErrorKind};
pub use jsonpath::{JsonPath, JsonPathError};
pub use printer::{
    printer_column_value, printer_column_value_at, validate_printer_column,
    validate_printer_column_json_path,
};
pub use schema::{AdditionalProperties, StructuralSchema};

/// Maximum nesting depth of schemas and of objects walked by this crate; deeper input
/// is rejected with a clear error instead of overflowing the stack.
pub const MAX_DEPTH: usize = 100;
