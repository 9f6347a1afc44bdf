//! CRD conversion: WebAssembly components of the `converter` world, served
//! to the API server as the conversion webhooks of the CustomResourceDefinitions
//! they name.
//!
//! Read top-down: [`spec`] (the converter binding's ConfigMap format) →
//! [`manager`] (load,
//! shadow-run on the stored objects with [`shadow`], swap into
//! [`Converters`]) → [`review`] (`ConversionReview` in and out, the answer
//! checked) → [`server`] (the route `/convert/<crd>` on the webhook
//! server) → [`sync`] (the CRD's `spec.conversion`); [`metrics`] counts it
//! all.

pub mod manager;
pub(crate) mod metrics;
pub mod review;
pub mod server;
pub mod shadow;
pub mod spec;
pub mod sync;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use metrics::ConversionMetrics;
pub use review::ConversionRequest;
pub use spec::ConverterSpec;

use crate::delivery::registry::InService;
use gantry_sandbox::runtime::{CallError, ConverterPlugin, Limits};

/// Longest a review may take, waiting for a call slot included: below the
/// API server's fixed 30 s timeout for conversion webhooks.
pub const REVIEW_BUDGET: Duration = Duration::from_secs(25);

/// A converter in service: its binding and its loaded plugin.
pub struct LoadedConverter {
    /// The binding.
    pub spec: Arc<ConverterSpec>,
    /// The plugin.
    pub plugin: Arc<ConverterPlugin>,
    /// The ConfigMap that holds the binding.
    pub config_map: String,
}

impl std::fmt::Debug for LoadedConverter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedConverter")
            .field("crd", &self.spec.crd)
            .field("digest", &self.plugin.digest())
            .field("config_map", &self.config_map)
            .finish_non_exhaustive()
    }
}

/// What the API server's client reads when a conversion fails.
fn failure_message(error: &CallError) -> String {
    match error {
        CallError::Plugin(e) => e.message.clone(),
        other => other.to_string(),
    }
}

/// Convert `objects` to `desired_api_version` with `plugin` under
/// `limits`: objects already there are passed through, the others go to
/// the plugin in one call, and its answer is checked (see
/// [`review::check_answer`]; a broken answer is a contract violation).
pub async fn convert_with(
    plugin: &Arc<ConverterPlugin>,
    limits: Limits,
    objects: &[Value],
    desired_api_version: &str,
) -> Result<Vec<Value>, CallError> {
    let pending: Vec<usize> = (0..objects.len())
        .filter(|&i| objects[i]["apiVersion"] != desired_api_version)
        .collect();
    let mut out = objects.to_vec();
    if pending.is_empty() {
        return Ok(out);
    }
    let sent: Vec<Value> = pending.iter().map(|&i| objects[i].clone()).collect();
    let call = plugin.convert(sent.clone(), desired_api_version.to_string(), limits);
    let converted = tokio::time::timeout(REVIEW_BUDGET, call)
        .await
        .map_err(|_| CallError::Timeout {
            deadline: REVIEW_BUDGET,
        })??;
    let converted = review::check_answer(&sent, converted, desired_api_version)
        .map_err(|detail| CallError::ContractViolation { detail })?;
    for (i, object) in pending.into_iter().zip(converted) {
        out[i] = object;
    }
    Ok(out)
}

impl LoadedConverter {
    /// Answer one `ConversionReview` request: checked to be for this CRD,
    /// converted, logged and counted.
    pub async fn convert(
        &self,
        request: &ConversionRequest,
        metrics: &ConversionMetrics,
    ) -> Result<Vec<Value>, String> {
        let started = Instant::now();
        let result = match review::check_request(request, self.spec.group()) {
            Ok(()) => convert_with(
                &self.plugin,
                self.spec.call_limits(),
                &request.objects,
                &request.desired_api_version,
            )
            .await
            .map_err(|e| failure_message(&e)),
            Err(e) => Err(e),
        };
        let took = started.elapsed();
        metrics.record(&self.spec.crd, result.is_ok(), request.objects.len(), took);
        let crd = &self.spec.crd;
        let digest = self.plugin.digest();
        let objects = request.objects.len();
        let to = &request.desired_api_version;
        match &result {
            Ok(_) => tracing::debug!(%crd, %digest, objects, %to, ?took, "converted"),
            Err(e) => tracing::warn!(%crd, %digest, objects, %to, ?took, "conversion failed: {e}"),
        }
        result
    }
}

/// The converters in service, by CRD name. Cheap to clone; the webhook
/// server and the CRD sync read the same set.
#[derive(Clone, Debug, Default)]
pub struct Converters {
    in_service: InService<LoadedConverter>,
    metrics: Arc<ConversionMetrics>,
}

impl std::ops::Deref for Converters {
    type Target = InService<LoadedConverter>;

    fn deref(&self) -> &Self::Target {
        &self.in_service
    }
}

impl Converters {
    /// No converters yet; reviews are counted in `metrics`.
    pub fn new(metrics: Arc<ConversionMetrics>) -> Self {
        Self {
            in_service: InService::default(),
            metrics,
        }
    }

    /// The metrics reviews are counted in.
    pub fn metrics(&self) -> &Arc<ConversionMetrics> {
        &self.metrics
    }

    /// Put `converter` into service, replacing any version for its CRD.
    pub fn insert(&self, converter: LoadedConverter) {
        self.in_service
            .insert(converter.spec.crd.clone(), converter);
    }

    /// Answer `request` with the converter of `crd`; `None` if none is in
    /// service.
    pub async fn convert(
        &self,
        crd: &str,
        request: &ConversionRequest,
    ) -> Option<Result<Vec<Value>, String>> {
        let converter = self.get(crd)?;
        Some(converter.convert(request, &self.metrics).await)
    }
}
