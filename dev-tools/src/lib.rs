//! # gantry-dev-tools
//!
//! What plugin authors run on their machine, and nothing a cluster runs:
//!
//! - [`dev`]: `gantry dev`: the example CRDs, bindings and objects
//!   installed into a cluster (usually the embedded API server).
//! - [`examples`]: the example plugins, those of `gantry dev` embedded in
//!   the binary.
//! - [`cluster`]: server-side apply of any object, waiting for CRDs.
//! - [`publish`]: `gantry plugin apply`: a plugin's CRDs and binding
//!   ConfigMap applied to a cluster, and the operator's answer awaited.
//! - [`plugin_test`]: `gantry plugin test`, declarative cases for a plugin.
//! - [`bench`]: Gantry measured side by side with its peers.

// Items are private unless another crate uses them.
#![warn(unreachable_pub)]

pub mod bench;
pub mod cluster;
pub mod dev;
pub mod examples;
pub mod plugin_test;
pub mod publish;
