//! # Gantry host
//!
//! Kubernetes operators whose reconcile logic runs in sandboxed WebAssembly
//! components. Read the data path top-down:
//!
//! - [`contract`]: the WIT contract (`wit/gantry.wit`) on the host side:
//!   the code wasmtime generates from it ([`contract::generated`]) and
//!   checked conversions to `gantry_sdk` types.
//! - [`runtime`]: the wasmtime engine, plugin loading with a digest-keyed
//!   compile cache, and the per-call sandbox with its limits.
//! - [`delivery`]: plugins delivered in ConfigMaps: the envelope (inline or
//!   from a URL or OCI registry, pinned by sha256), one limits type, and the
//!   one loader that puts each new version into service or refuses it.
//! - [`controller`]: the operator, one controller per reconcile binding.
//!   A CR event ([`controller::mappers`]) starts a reconcile
//!   ([`controller::reconcile`]), whose settle loop ([`controller::settle`])
//!   builds the [`controller::request`], calls the plugin, runs the
//!   [`controller::guardrails`] and applies and prunes the
//!   [`controller::children`]; then [`controller::status`].
//! - [`policy`]: admission policies: policy bindings ([`policy::spec`]),
//!   their webhook routes, webhook configuration sync, and the guardrail
//!   policies on reconcile output ([`policy::guardrail_policies`]).
//! - [`conversion`]: CRD converters: converter bindings
//!   ([`conversion::spec`]), shadow runs on
//!   stored objects, their webhook routes, the CRDs' `spec.conversion`.
//! - [`webhook`]: the HTTPS server both are served on, its certificate,
//!   and how the API server reaches it.
//! - [`publish`]: `gantry plugin apply`: a plugin's CRDs and binding
//!   ConfigMap applied to a cluster, and the operator's answer awaited.
//! - [`rbac`]: least-privilege RBAC from bindings (`gantry rbac`), and the
//!   access reviews that warn of missing rights when a binding loads.
//! - [`toolchain`]: building plugin crates into components.
//! - [`plugin_test`]: `gantry plugin test`, declarative cases for a plugin.
//! - [`bench`]: side-by-side cost of native and plugin calls.
//! - [`recorder`]: Kubernetes Events that always show their current message.
//! - [`manifest`]: reading objects and values from YAML or JSON files.
//! - [`cli`]: the `gantry` command line, a leaf: nothing else imports it.

pub mod api_client;
pub mod bench;
pub mod capability;
pub mod cli;
pub mod contract;
pub mod controller;
pub mod conversion;
pub mod delivery;
pub mod dev;
pub mod health;
pub mod manifest;
pub mod plugin_test;
pub mod policy;
pub mod publish;
pub mod rbac;
pub mod recorder;
pub mod runtime;
pub mod telemetry;
pub mod tls;
pub mod toolchain;
pub mod webhook;
