//! Admission policies: WebAssembly components of the `policy` world,
//! served to the API server as admission webhooks and run as guardrails
//! on reconcile plugins' output.
//!
//! Read top-down: [`binding`] (the ConfigMap format) → [`manager`] (load,
//! check settings, swap into [`Policies`]) → [`review`] (AdmissionReview in
//! and out, the decision) → [`server`] (HTTPS, one path per policy, with
//! [`tls`]) → [`sync`] (the webhook configurations) and [`guardrails`]
//! (the same policies on reconcile output); [`metrics`] counts it all.

pub mod binding;
pub mod guardrails;
pub mod manager;
pub mod metrics;
pub mod recent;
pub mod review;
pub mod server;
pub mod shadow;
pub mod sync;
pub mod tls;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use gantry_sdk::AdmissionRequest;
use serde_json::Value;
use tokio::sync::watch;

pub use binding::{FailurePolicy, Mode, PolicySpec};
pub use metrics::PolicyMetrics;
pub use review::{AdmissionResponse, Decision, Outcome};

use crate::runtime::{CallError, PolicyPlugin};

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
#[derive(Clone)]
pub struct Policies {
    inner: Arc<Inner>,
}

struct Inner {
    by_name: RwLock<BTreeMap<String, Arc<LoadedPolicy>>>,
    changed: watch::Sender<u64>,
    loaded: watch::Sender<bool>,
    metrics: Arc<PolicyMetrics>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.inner.by_name.read().unwrap().keys())
            .finish()
    }
}

impl Default for Policies {
    fn default() -> Self {
        Self::new(Arc::new(PolicyMetrics::default()))
    }
}

impl Policies {
    /// No policies yet; evaluations are counted in `metrics`.
    pub fn new(metrics: Arc<PolicyMetrics>) -> Self {
        Self {
            inner: Arc::new(Inner {
                by_name: RwLock::new(BTreeMap::new()),
                changed: watch::channel(0).0,
                loaded: watch::channel(false).0,
                metrics,
            }),
        }
    }

    /// The metrics evaluations are counted in.
    pub fn metrics(&self) -> &Arc<PolicyMetrics> {
        &self.inner.metrics
    }

    /// The policy `name`, if in service.
    pub fn get(&self, name: &str) -> Option<Arc<LoadedPolicy>> {
        self.inner.by_name.read().unwrap().get(name).cloned()
    }

    /// Every policy in service, by name.
    pub fn all(&self) -> Vec<Arc<LoadedPolicy>> {
        self.inner
            .by_name
            .read()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }

    /// Put `policy` into service, replacing any version of the same name.
    pub fn insert(&self, policy: LoadedPolicy) {
        let name = policy.spec.name.clone();
        self.inner
            .by_name
            .write()
            .unwrap()
            .insert(name, Arc::new(policy));
        self.inner.changed.send_modify(|n| *n += 1);
    }

    /// Take the policy `name` out of service.
    pub fn remove(&self, name: &str) -> Option<Arc<LoadedPolicy>> {
        let removed = self.inner.by_name.write().unwrap().remove(name);
        if removed.is_some() {
            self.inner.changed.send_modify(|n| *n += 1);
        }
        removed
    }

    /// Changes: the value increases each time the set of policies changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Record that the policy bindings found at start are processed.
    pub fn mark_loaded(&self) {
        self.inner.loaded.send_replace(true);
    }

    /// Whether the policy bindings found at start are processed.
    pub fn is_loaded(&self) -> bool {
        *self.inner.loaded.borrow()
    }

    /// Completes once the policy bindings found at start are processed.
    pub async fn loaded(&self) {
        let mut rx = self.inner.loaded.subscribe();
        let _ = rx.wait_for(|loaded| *loaded).await;
    }

    /// Judge `request` with the policy `name`; `None` if it is not in service.
    pub async fn evaluate(&self, name: &str, request: Value) -> Option<Decision> {
        let policy = self.get(name)?;
        Some(policy.evaluate(request, &self.inner.metrics).await)
    }
}
