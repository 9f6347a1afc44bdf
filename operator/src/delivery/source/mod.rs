//! Plugin sources: where a binding's component comes from when it is too
//! large for a ConfigMap (1 MiB), and how it is fetched.
//!
//! - [`spec`]: the `source` field of `binding.yaml` (`url:` or `oci:`),
//!   checked strictly: plain HTTP only to loopback hosts or with
//!   `insecure: true`, and a sha256 pin for URLs.
//! - [`fetch`]: [`Fetcher`] downloads with timeouts, a size cap while
//!   streaming, retries with exponential backoff and jitter, and verifies
//!   the digest before anything is used.
//! - [`cache`]: the on-disk cache, `<root>/sha256/<hex>`, written
//!   atomically and verified on every read.
//! - [`http`] and [`oci`]: the two transports. OCI artifacts follow the
//!   CNCF Wasm OCI artifact layout: config `application/vnd.wasm.config.v0+json`
//!   and one `application/wasm` layer.
//!
//! Fetching is async and never blocks the executor: hashing and file I/O
//! run on the blocking pool.

pub(crate) mod cache;
pub(crate) mod fetch;
pub(crate) mod http;
pub mod oci;
pub(crate) mod spec;

pub use cache::DigestCache;
pub use fetch::{FetchError, FetchSettings, Fetched, Fetcher};
pub use spec::{PluginSource, SourceSpec};
