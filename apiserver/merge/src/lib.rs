//! Kubernetes structured merge for the embedded API server.
//!
//! This crate re-implements, over [`serde_json::Value`], what
//! `sigs.k8s.io/structured-merge-diff` and kube-apiserver's `fieldmanager`
//! package do:
//!
//! * [`apply`]: server-side apply (merge, conflicts, pruning of fields a manager
//!   stopped applying, `metadata.managedFields` bookkeeping);
//! * [`update`]: ownership tracking for every non-apply write (create, update,
//!   json/merge/strategic patch, status writes);
//! * [`strategic_merge_patch`]: the `application/strategic-merge-patch+json` patch type;
//! * [`FieldSet`]: the set-of-paths type and its exact `FieldsV1` encoding;
//! * [`Schema`]: how each path merges, built from a CRD's OpenAPI v3 schema
//!   ([`Schema::from_openapi`]) or, for built-in kinds, from tables generated from
//!   k8s-openapi plus kube's markers it lacks ([`Schema::builtin`]).
//!
//! No HTTP and no storage live here; the caller passes the live object, the
//! request body and the decoded `managedFields`, and stores what comes back.

// Others build on this crate, so its fallible and panicking functions say when
// they fail (the workspace allows both lints for the application crates).
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod apply;
mod compare;
mod conflict;
mod error;
mod fieldset;
mod last_applied;
mod managers;
mod merge;
mod ownership;
mod path;
mod remove;
mod reset;
mod schema;
mod smp;
mod typed;
mod update;

pub use apply::{ApplyOptions, BEFORE_FIRST_APPLY, Merged, apply};
pub use conflict::{Conflict, conflict_causes, conflict_message};
pub use error::{ApplyError, FieldsError, PatchError, UpdateError};
pub use fieldset::FieldSet;
pub use last_applied::LAST_APPLIED_ANNOTATION;
pub use managers::{
    FIELDS_TYPE_V1, OPERATION_APPLY, OPERATION_UPDATE, managed_fields_changed,
    validate_managed_fields,
};
pub use path::{Path, PathElement};
pub use reset::reset_ignored;
pub use schema::{ListKind, Schema};
pub use smp::strategic_merge_patch;
pub use update::{UpdateOptions, update};

/// Re-export of the k8s-openapi `ManagedFieldsEntry` used for input and output.
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
/// Re-export of the k8s-openapi `Time` used for `managedFields[].time`.
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
