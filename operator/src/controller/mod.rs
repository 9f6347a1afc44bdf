//! The operator: bindings (ConfigMaps labelled `gantry.dev/plugin`) each
//! run a kube-runtime controller over their parent kind; every reconcile
//! calls the binding's plugin, checks its answer, applies and prunes the
//! children with server-side apply, and writes status.
//!
//! Read along the data path, CR event → request → plugin → guardrails →
//! apply → status:
//!
//! 1. [`spec`]: the binding document a ConfigMap holds, with its
//!    `rollout` and `handOver`.
//! 2. [`manager`]: the running set of binding controllers (load, swap,
//!    start and stop them); [`watches`]: each binding's caches and watch
//!    streams; [`context`]: what a binding's reconciles share.
//! 3. [`mappers`]: which watch event calls for which parent's reconcile,
//!    judged by the parent's [`ledger`].
//! 4. [`reconcile`]: one reconcile of one parent, from its trigger and
//!    [`finalizer`] to its outcome.
//! 5. [`settle`]: the loop of plugin calls within a reconcile: the
//!    [`request`], the plugin call, the [`guardrails`] and guardrail
//!    policies, then the writes.
//! 6. [`children`]: applying the children: intents, skip or apply with
//!    server-side apply, prune, and what was written, recorded in the
//!    [`ledger`] once per reconcile.
//! 7. [`status`] (with [`conditions`]), [`events`] and [`report`]: what
//!    the parent and the log are told.
//!
//! Beside the path: [`rollout`] (shadow runs of a new version),
//! [`grants`], [`permissions`], [`readiness`], [`metrics`],
//! [`leader`], [`shard`], [`scope`], [`offline`] (a binding's reconcile
//! away from the operator), and the cache helpers [`cached`] and
//! [`owners`].

pub(crate) mod cached;
pub(crate) mod children;
pub(crate) mod conditions;
pub mod context;
pub(crate) mod events;
pub(crate) mod finalizer;
pub(crate) mod grants;
pub mod guardrails;
pub mod leader;
pub(crate) mod ledger;
pub(crate) mod manager;
pub(crate) mod mappers;
pub(crate) mod metrics;
pub mod offline;
pub(crate) mod owners;
pub mod permissions;
pub(crate) mod readiness;
pub(crate) mod reconcile;
pub mod report;
pub mod request;
pub mod rollout;
pub(crate) mod scope;
pub(crate) mod settle;
pub mod shard;
pub mod spec;
pub(crate) mod status;
pub mod watches;

use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::sync::Semaphore;

pub use manager::run_operator;
pub use metrics::Metrics;
pub use readiness::Readiness;

use gantry_sandbox::error::CallError;

/// Operator settings.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// Namespace whose ConfigMaps hold the bindings.
    pub namespace: String,
    /// Reconciles running at once, across all bindings.
    pub concurrency: usize,
    /// Longest a single reconcile may take.
    pub reconcile_timeout: Duration,
    /// First retry delay after a failure.
    pub backoff_base: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Name reported on Events.
    pub reporter: String,
    /// The parents this replica reconciles.
    pub shard: shard::Shard,
    /// With leader election: whether this replica leads now. A follower
    /// keeps its bindings loaded and its caches warm but reconciles
    /// nothing; on becoming leader it reconciles every parent. `None`:
    /// always leading.
    pub leading: Option<tokio::sync::watch::Receiver<bool>>,
    /// What `/readyz` reads.
    pub readiness: Arc<Readiness>,
    /// Admission policies in service, for bindings' `guardrailPolicies`.
    pub policies: crate::policy::Policies,
    /// How remote plugins (`source: {url|oci}`) are downloaded and cached.
    pub plugin_sources: crate::delivery::source::FetchSettings,
    /// The namespaces whose parents, children and related objects are
    /// watched.
    pub watch_scope: crate::watch_scope::WatchScope,
}

impl Default for OperatorOptions {
    fn default() -> Self {
        Self {
            namespace: "gantry-system".into(),
            concurrency: 16,
            reconcile_timeout: Duration::from_mins(1),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_mins(5),
            reporter: "gantry".into(),
            shard: shard::Shard::default(),
            leading: None,
            readiness: Arc::default(),
            policies: crate::policy::Policies::default(),
            plugin_sources: crate::delivery::source::FetchSettings::default(),
            watch_scope: crate::watch_scope::WatchScope::default(),
        }
    }
}

/// State shared by every binding of the operator.
pub struct Shared {
    /// Settings.
    pub options: OperatorOptions,
    /// Bounds reconciles across bindings.
    pub reconciles: Semaphore,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// HTTP grants of the bindings.
    pub http_grants: grants::HttpGrants,
}

impl Shared {
    /// Whether this replica may reconcile now.
    pub fn leading(&self) -> bool {
        self.options.leading.as_ref().is_none_or(|rx| *rx.borrow())
    }

    /// Shared state for `options`.
    pub fn new(options: OperatorOptions, metrics: Arc<Metrics>) -> Self {
        let reconciles = Semaphore::new(options.concurrency.max(1));
        Self {
            options,
            reconciles,
            metrics,
            http_grants: grants::HttpGrants::default(),
        }
    }
}

/// Why a reconcile failed.
#[derive(Debug, Error)]
pub enum ReconcileError {
    /// The plugin failed or breached a limit.
    #[error("{0}")]
    Plugin(CallError),
    /// The plugin's output broke the guardrails.
    #[error("plugin output rejected by guardrails: {}", .0.join("; "))]
    Guardrails(Vec<String>),
    /// A guardrail policy denied a desired child (or could not judge it
    /// and its failurePolicy is Fail).
    #[error("{}", .0.join("; "))]
    PolicyDenied(Vec<String>),
    /// A guardrail policy the binding names is not in service (yet).
    #[error("{}", .0.join("; "))]
    PolicyUnavailable(Vec<String>),
    /// A desired child exists but is controlled by something else.
    #[error("{child} exists and is controlled by {owner}, not by this parent")]
    NotOwned {
        /// The child.
        child: String,
        /// Its controller.
        owner: String,
    },
    /// Server-side apply of a child failed.
    #[error("applying {child}: {source}")]
    Apply {
        /// The child.
        child: String,
        /// The API error.
        source: kube::Error,
    },
    /// Another API call failed.
    #[error("API request failed: {0}")]
    Kube(kube::Error),
    /// The caches did not sync in time.
    #[error("caches of children and related objects are not ready yet")]
    CachesNotReady,
    /// The reconcile ran past the operator's deadline.
    #[error("reconcile took longer than {0:?}")]
    Timeout(Duration),
    /// The operator is stopping.
    #[error("the operator is shutting down")]
    ShuttingDown,
    /// The reconcile panicked: a bug in Gantry, retried with the backoff.
    #[error("the reconcile panicked (a bug in Gantry; see the operator's log)")]
    Panicked,
}

impl ReconcileError {
    /// CamelCase reason for `Synced=False` and Events.
    pub fn reason(&self) -> String {
        match self {
            Self::Plugin(e) => e.reason(),
            Self::Guardrails(_) => "GuardrailViolation".into(),
            Self::PolicyDenied(_) => "PolicyDenied".into(),
            Self::PolicyUnavailable(_) => "GuardrailPolicyUnavailable".into(),
            Self::NotOwned { .. } => "ChildNotOwned".into(),
            Self::Apply { .. } => "ApplyFailed".into(),
            Self::Kube(_) => "ApiError".into(),
            Self::CachesNotReady => "CachesNotReady".into(),
            Self::Timeout(_) => "ReconcileTimeout".into(),
            Self::ShuttingDown => "ShuttingDown".into(),
            Self::Panicked => "InternalError".into(),
        }
    }

    /// Whether the failure is retried with the binding's backoff: all are,
    /// as in controller-runtime, except an error the plugin itself calls
    /// permanent. A trap, a limit or a refused child can depend on what the
    /// plugin observes (children, related objects, the clock) as much as on
    /// the spec, so waiting for a spec change could wait forever.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Plugin(CallError::Plugin(e)) => e.retryable,
            _ => true,
        }
    }
}

impl From<crate::policy::guardrail_policies::GuardrailError> for ReconcileError {
    fn from(error: crate::policy::guardrail_policies::GuardrailError) -> Self {
        use crate::policy::guardrail_policies::GuardrailError;
        match error {
            GuardrailError::Denied(denials) => Self::PolicyDenied(denials),
            GuardrailError::Unavailable(missing) => Self::PolicyUnavailable(missing),
            GuardrailError::Kube(e) => Self::Kube(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use gantry_sdk::PluginError;

    use super::{CallError, ReconcileError};

    fn plugin_error(retryable: bool) -> ReconcileError {
        ReconcileError::Plugin(CallError::Plugin(PluginError {
            message: "no".into(),
            reason: "No".into(),
            retryable,
        }))
    }

    #[test]
    fn every_failure_is_retried_but_the_plugins_permanent_error() {
        let retried = [
            ReconcileError::Plugin(CallError::Trap {
                message: "panic".into(),
            }),
            ReconcileError::Plugin(CallError::Timeout {
                deadline: Duration::from_millis(500),
            }),
            ReconcileError::Plugin(CallError::ContractViolation {
                detail: "not an object".into(),
            }),
            ReconcileError::Guardrails(vec!["kube-system".into()]),
            ReconcileError::PolicyDenied(vec!["denied".into()]),
            ReconcileError::NotOwned {
                child: "a".into(),
                owner: "b".into(),
            },
            plugin_error(true),
        ];
        for error in retried {
            assert!(error.retryable(), "{error}");
        }
        assert!(!plugin_error(false).retryable());
    }
}
