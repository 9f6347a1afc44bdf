//! # Gantry
//!
//! Kubernetes operators whose reconcile logic runs in sandboxed WebAssembly
//! components. This crate is the `gantry` command ([`cli`]); the work is
//! done in the crates below it, re-exported here by module, along the data
//! path:
//!
//! - `gantry_kube`: DNS names, admission rule matching, Events, the API
//!   client ([`tls`], [`recorder`], [`api_client`]).
//! - `gantry_sandbox`: everything that touches wasmtime: the WIT
//!   [`contract`], the plugin [`runtime`] and its [`capability`]s.
//! - `gantry_operator`: what runs in a cluster: plugin [`delivery`] from
//!   ConfigMaps, the [`controller`], admission [`policy`], CRD
//!   [`conversion`], the [`webhook`] server, [`rbac`], [`health`] and
//!   [`telemetry`].
//! - `gantry_dev_tools` and `gantry_toolchain` (feature `dev-tools`): what
//!   a plugin author runs: `gantry dev` and its [`examples`], plugin
//!   [`toolchain`]s, [`publish`]ing, [`plugin_test`], [`bench`].
//!
//! The crates depend on each other one way, in that order
//! (`host/tests/module_graph.rs` holds them to it).

// Items are private unless another crate uses them.
#![warn(unreachable_pub)]

pub use gantry_kube::{api_client, recorder, tls};
pub use gantry_operator::{
    controller, conversion, delivery, document, health, policy, rbac, telemetry, watch_scope,
    webhook,
};
pub use gantry_sandbox::{capability, contract, runtime};

#[cfg(feature = "dev-tools")]
pub use gantry_dev_tools::{bench, cluster, dev, examples, plugin_test, publish};
#[cfg(feature = "dev-tools")]
pub use gantry_toolchain as toolchain;
#[cfg(feature = "dev-tools")]
pub use gantry_toolchain::manifest;

pub mod cli;
