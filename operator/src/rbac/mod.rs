//! Least-privilege RBAC from bindings: what each binding needs (its
//! parents, children and related kinds) and what the operator needs
//! itself, as the ClusterRole and Roles `gantry rbac` prints, and as the
//! `SelfSubjectAccessReviews` `gantry run` asks when a binding loads.
//!
//! Read top-down: [`needs`] (one need per resource, with its verbs and
//! where) → [`roles`] (needs as Roles, `ClusterRoles` and their bindings) →
//! [`check`] (needs the operator's identity lacks).

pub(crate) mod check;
pub mod needs;
pub mod roles;

pub use needs::{Kind, Need, Where};
