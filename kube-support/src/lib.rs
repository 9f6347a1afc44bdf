//! # gantry-kube
//!
//! Kubernetes helpers shared by Gantry's crates and by its embedded API
//! server, each usable alone:
//!
//! - [`names`]: DNS names as kube validates them (labels, subdomains).
//! - [`rules`] (feature `rules`): admission rules and label selectors
//!   matched as kube matches them.
//! - [`tls`], [`recorder`], [`api_client`] (feature `client`): the rustls
//!   crypto provider, Events that show their current message, and the
//!   API client that counts its writes.
//!
//! Without default features only [`names`] is built, with no dependencies:
//! the build script that embeds `gantry dev`'s examples uses it that way.

// Items are private unless another crate uses them.
#![warn(unreachable_pub)]

#[cfg(feature = "client")]
pub mod api_client;
pub mod names;
#[cfg(feature = "client")]
pub mod recorder;
#[cfg(feature = "rules")]
pub mod rules;
#[cfg(feature = "client")]
pub mod tls;
