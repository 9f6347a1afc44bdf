//! # Gantry host
//!
//! Kubernetes operators whose reconcile logic runs in sandboxed WebAssembly
//! components. Read the data path top-down:
//!
//! - [`contract`]: the WIT contract (`wit/gantry.wit`) on the host side:
//!   generated bindings and checked conversions to `gantry_sdk` types.
//! - [`runtime`]: the wasmtime engine, plugin loading with a digest-keyed
//!   compile cache, and the per-call sandbox with its limits.
//! - [`controller`]: the operator: bindings from ConfigMaps, one
//!   controller per binding, reconcile → guardrails → apply/prune → status.
//! - [`policy`]: admission policies: policy bindings, the HTTPS webhook
//!   server, webhook configuration sync, guardrails on reconcile output.
//! - [`source`]: fetching plugins from URLs and OCI registries, with a
//!   digest-keyed disk cache.
//! - [`toolchain`]: building plugin crates into components.
//! - [`bench`]: side-by-side cost of native and plugin calls.
//! - [`cli`]: the `gantry` command line.

pub mod bench;
pub mod cli;
pub mod contract;
pub mod controller;
pub mod dev;
pub mod health;
pub mod policy;
pub mod runtime;
pub mod source;
pub mod telemetry;
pub mod toolchain;
