//! Admission policies: WebAssembly components of the `policy` world,
//! served to the API server as admission webhooks and run as guardrails
//! on reconcile plugins' output.
//!
//! Read top-down: [`spec`] (the policy binding's ConfigMap format) →
//! [`manager`] (load,
//! check settings, swap into [`Policies`]) → [`review`] (AdmissionReview in
//! and out, the decision) → [`server`] (one path per policy on the
//! webhook server, `crate::webhook`) → [`sync`] (the webhook
//! configurations) and [`guardrail_policies`]
//! (the same policies on reconcile output); [`metrics`] counts it all.

pub(crate) mod guardrail_policies;
pub mod manager;
pub(crate) mod metrics;
pub mod recent;
pub mod review;
pub mod server;
pub(crate) mod shadow;
pub mod spec;
pub mod sync;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry_sdk::AdmissionRequest;
use serde_json::Value;

pub use metrics::PolicyMetrics;
pub use review::{AdmissionResponse, Decision, Outcome};
pub use spec::{FailurePolicy, Mode, PolicySpec};

use crate::delivery::registry::InService;
use gantry_sandbox::runtime::{CallError, PolicyPlugin};

/// A policy in service: its binding and its loaded plugin.
pub struct LoadedPolicy {
    /// The binding.
    pub spec: Arc<PolicySpec>,
    /// The plugin, settings checked.
    pub plugin: Arc<PolicyPlugin>,
    /// The ConfigMap that holds the binding.
    pub config_map: String,
    /// The requests it judged last (shared with the versions before and
    /// after it), for trying a new version on.
    pub recent: recent::RecentReviews,
}

impl std::fmt::Debug for LoadedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPolicy")
            .field("name", &self.spec.name)
            .field("digest", &self.plugin.digest())
            .field("config_map", &self.config_map)
            .finish_non_exhaustive()
    }
}

impl LoadedPolicy {
    /// Judge one admission `request` (the `request` of an AdmissionReview):
    /// run the policy in its sandbox, apply mode, `mutating` and
    /// failurePolicy, log and count. Never takes longer than the webhook
    /// timeout allows.
    pub async fn evaluate(&self, request: Value, metrics: &PolicyMetrics) -> Decision {
        let spec = &self.spec;
        let started = Instant::now();
        self.recent.record(&request);
        let admission = AdmissionRequest {
            request: request.clone(),
            settings: spec.settings.clone(),
        };
        // The sandbox's deadline bounds the call itself; this bounds the
        // wait for a free slot too, so the API server always gets an answer.
        let budget = spec.timeout().mul_f64(0.9).max(spec.call_limits().deadline);
        let result =
            match tokio::time::timeout(budget, self.plugin.validate(admission, spec.call_limits()))
                .await
            {
                Ok(result) => result,
                Err(_) => Err(CallError::Timeout { deadline: budget }),
            };
        let decision = review::decide(spec, &request, result);
        let took = started.elapsed();
        metrics.record(
            &spec.name,
            spec.mode.as_str(),
            decision.outcome.as_str(),
            took,
            decision.error.as_deref(),
        );
        log_decision(spec, &request, &decision, took);
        decision
    }
}

fn log_decision(spec: &PolicySpec, request: &Value, decision: &Decision, took: Duration) {
    let text = |pointer: &str| {
        request
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let operation = text("/operation");
    let kind = text("/kind/kind");
    let namespace = text("/namespace");
    let name = text("/name");
    let uid = text("/uid");
    let mode = spec.mode.as_str();
    let outcome = decision.outcome.as_str();
    let allowed = decision.response.allowed;
    let detail = &decision.detail;
    match decision.outcome {
        Outcome::Allowed => {
            tracing::debug!(policy = %spec.name, mode, outcome, allowed, %operation, %kind, %namespace, %name, %uid, ?took, "admission: {detail}");
        }
        Outcome::Mutated => {
            tracing::info!(policy = %spec.name, mode, outcome, allowed, %operation, %kind, %namespace, %name, %uid, ?took, "admission: {detail}");
        }
        Outcome::Denied | Outcome::Error => {
            let note = if spec.mode == Mode::Monitor {
                " (monitor mode: allowed)"
            } else {
                ""
            };
            tracing::warn!(policy = %spec.name, mode, outcome, allowed, %operation, %kind, %namespace, %name, %uid, ?took, "admission {outcome}: {detail}{note}");
        }
    }
}

/// The policies in service, by name. Cheap to clone; the webhook server,
/// the guardrails and the configuration sync all read the same set.
/// Replacing a policy is atomic: evaluations already started finish with
/// the version they began with.
#[derive(Clone, Debug)]
pub struct Policies {
    in_service: InService<LoadedPolicy>,
    metrics: Arc<PolicyMetrics>,
}

impl Default for Policies {
    fn default() -> Self {
        Self::new(Arc::new(PolicyMetrics::default()))
    }
}

impl std::ops::Deref for Policies {
    type Target = InService<LoadedPolicy>;

    fn deref(&self) -> &Self::Target {
        &self.in_service
    }
}

impl Policies {
    /// No policies yet; evaluations are counted in `metrics`.
    pub fn new(metrics: Arc<PolicyMetrics>) -> Self {
        Self {
            in_service: InService::default(),
            metrics,
        }
    }

    /// The metrics evaluations are counted in.
    pub fn metrics(&self) -> &Arc<PolicyMetrics> {
        &self.metrics
    }

    /// Put `policy` into service, replacing any version of the same name.
    pub fn insert(&self, policy: LoadedPolicy) {
        self.in_service.insert(policy.spec.name.clone(), policy);
    }

    /// Judge `request` with the policy `name`; `None` if it is not in service.
    pub async fn evaluate(&self, name: &str, request: Value) -> Option<Decision> {
        let policy = self.get(name)?;
        Some(policy.evaluate(request, &self.metrics).await)
    }
}
