//! The capabilities a binding's calls get: its HTTP grant (built once per
//! binding and `capabilities.http`, with Secrets read from the operator's
//! namespace) and its metrics scope.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gantry_sandbox::capability::HttpSpec;
use gantry_sandbox::capability::secrets::KubeSecrets;
use gantry_sandbox::capability::{Grants, HttpGrant, MetricsScope};
use gantry_sandbox::runtime::ReconcilerPlugin;

use super::context::BindingContext;
use super::spec::BindingSpec;

/// HTTP grants by binding, rebuilt when the binding's `capabilities.http`
/// changes.
#[derive(Default)]
pub struct HttpGrants(Mutex<HashMap<String, (HttpSpec, Arc<HttpGrant>)>>);

impl HttpGrants {
    fn get(&self, ctx: &BindingContext, spec: &BindingSpec) -> Option<Arc<HttpGrant>> {
        let http = spec.capabilities.http.as_ref()?;
        let mut grants = self.0.lock().unwrap();
        if let Some((built_from, grant)) = grants.get(&spec.name)
            && built_from == http
        {
            return Some(grant.clone());
        }
        let secrets = Arc::new(KubeSecrets::new(
            ctx.client.clone(),
            &ctx.shared.options.namespace,
        ));
        let metrics = Some(ctx.shared.metrics.capabilities().clone());
        match HttpGrant::new(&spec.name, http, secrets, metrics) {
            Ok(grant) => {
                let grant = Arc::new(grant);
                grants.insert(spec.name.clone(), (http.clone(), grant.clone()));
                Some(grant)
            }
            Err(e) => {
                tracing::error!(binding = %spec.name, error = %e, "HTTP client could not be built");
                None
            }
        }
    }
}

/// What a call of `plugin` under `spec` may use; `shadow`: a shadow run,
/// which sends GET only and records no metrics (its answer is compared,
/// not acted on, and it calls the version in service too).
pub(crate) fn grants(
    ctx: &BindingContext,
    spec: &BindingSpec,
    plugin: &ReconcilerPlugin,
    shadow: bool,
) -> Grants {
    Grants {
        http: ctx.shared.http_grants.get(ctx, spec),
        metrics: (!shadow).then(|| MetricsScope {
            metrics: ctx.shared.metrics.capabilities().clone(),
            binding: spec.name.clone(),
            digest: plugin.digest().to_string(),
        }),
        shadow,
    }
}
