//! # gantry-sandbox
//!
//! Everything that touches wasmtime: the one crate that runs untrusted
//! plugin code. Read top-down:
//!
//! - [`contract`]: the WIT contract (`wit/gantry.wit`) on the host side:
//!   the code wasmtime generates from it ([`contract::generated`]) and
//!   checked conversions to `gantry_sdk` types.
//! - [`limits`] and [`error`]: what one call may use, and how a load or a
//!   call fails.
//! - [`capability`]: what a plugin may ask of the host beyond a log line
//!   (metrics, outbound HTTP), each behind an import of its own.
//! - [`runtime`]: the wasmtime engine, plugin loading with a digest-keyed
//!   compile cache, and the per-call sandbox with its limits.

// Items are private unless another crate uses them.
#![warn(unreachable_pub)]

pub mod capability;
pub mod contract;
pub mod error;
pub mod limits;
pub mod runtime;
