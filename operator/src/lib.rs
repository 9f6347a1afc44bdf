//! # gantry-operator
//!
//! What runs in a cluster. Plugins come in ConfigMaps; this crate puts them
//! into service and runs them. Read along the data path:
//!
//! - [`delivery`]: the binding ConfigMap's envelope (inline, or from a URL
//!   or OCI registry, pinned by sha256), one limits type, and the one
//!   loader that puts each new plugin version into service or refuses it.
//! - [`controller`]: one controller per reconcile binding. A CR event
//!   ([`controller::mappers`]) starts a reconcile
//!   ([`controller::reconcile`]), whose settle loop
//!   ([`controller::settle`]) builds the [`controller::request`], calls
//!   the plugin, runs the [`controller::guardrails`] and applies and
//!   prunes the [`controller::children`]; then [`controller::status`].
//! - [`policy`]: admission policies: their bindings ([`policy::spec`]),
//!   webhook routes, webhook configuration sync, and the guardrail
//!   policies on reconcile output ([`policy::guardrail_policies`]).
//! - [`conversion`]: CRD converters: their bindings
//!   ([`conversion::spec`]), shadow runs on stored objects, webhook
//!   routes, the CRDs' `spec.conversion`.
//! - [`webhook`]: the HTTPS server both are served on, its certificate,
//!   and how the API server reaches it.
//! - [`document`]: a binding, policy or converter document, told apart.
//! - [`watch_scope`]: the namespaces the operator watches.
//! - [`rbac`]: least-privilege RBAC from bindings, and the access reviews
//!   that warn of missing rights when a binding loads.
//! - [`health`] and [`telemetry`]: probes, metrics, logs and traces.
//!
//! The plugin sandbox itself is `gantry_sandbox`.

// Items are private unless another crate uses them.
#![warn(unreachable_pub)]

pub mod controller;
pub mod conversion;
pub mod delivery;
pub mod document;
pub mod health;
pub mod policy;
pub mod rbac;
pub mod telemetry;
pub mod watch_scope;
pub mod webhook;
