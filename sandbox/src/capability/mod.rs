//! Capabilities: what a plugin may ask of the host beyond a log line, each
//! through an import of its own. Metrics are open to every reconcile
//! plugin; outbound HTTP only to plugins whose binding grants it.
//!
//! [`Grants`] is what one call may use; the sandbox holds it in the call's
//! store, and the imports in `runtime` consult it.

pub mod http;
pub mod metrics;
pub(crate) mod origin;
pub mod secrets;
pub mod spec;

use std::sync::Arc;

pub use http::{HttpCall, HttpGrant};
pub use metrics::CapabilityMetrics;
pub use spec::{CapabilitiesSpec, HttpSpec, SecretHeaderSpec};

/// Where one call's metric samples go: the binding and the plugin version
/// become labels.
#[derive(Debug, Clone)]
pub struct MetricsScope {
    /// The store.
    pub metrics: Arc<CapabilityMetrics>,
    /// The binding's name.
    pub binding: String,
    /// The plugin's digest.
    pub digest: String,
}

/// What one call may use besides computing. The default grants nothing:
/// HTTP fails with `not-granted`, metric samples are discarded.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Outbound HTTP, if the binding grants it.
    pub http: Option<Arc<HttpGrant>>,
    /// Where metric samples go, if anywhere.
    pub metrics: Option<MetricsScope>,
    /// A shadow run (rollout or offline comparison): HTTP sends GET only.
    pub shadow: bool,
}
