//! Getting a binding version ready for service, off the binding manager's
//! loop: fetch the component if it is remote, compile it (or take it from
//! the cache), and run its `validate-config`. A slow download, a slow
//! compile or a plugin that sleeps in `validate-config` holds up only its
//! own binding.

use std::sync::Arc;

use super::Metrics;
use super::binding::{Binding, BindingSpec};
use crate::runtime::{ReconcilerPlugin, Runtime};
use crate::source::{Fetcher, PluginSource};

/// Where the component of a version is.
pub enum Component {
    /// In the ConfigMap, already read.
    Inline(Binding),
    /// To be downloaded.
    Remote(BindingSpec, PluginSource),
}

/// A version ready to go into service.
pub struct Ready {
    /// The binding, with its component.
    pub binding: Binding,
    /// The component, loaded, its config accepted.
    pub plugin: Arc<ReconcilerPlugin>,
}

/// Why a version could not be made ready.
#[derive(Debug)]
pub struct Failure {
    /// The Event reason: `PluginFetchFailed`, `PluginLoadFailed`, `InvalidConfig`.
    pub reason: &'static str,
    /// What went wrong.
    pub message: String,
    /// The cause may pass by itself (a registry that is down).
    pub transient: bool,
}

fn failure(reason: &'static str, message: impl Into<String>) -> Failure {
    Failure {
        reason,
        message: message.into(),
        transient: false,
    }
}

/// Fetch (if remote), compile on the blocking pool, and check the config.
pub async fn prepare(
    component: Component,
    runtime: Runtime,
    fetcher: Fetcher,
    metrics: Arc<Metrics>,
) -> Result<Ready, Failure> {
    let binding = match component {
        Component::Inline(binding) => binding,
        Component::Remote(spec, source) => {
            tracing::info!(binding = %spec.name, %source, "fetching plugin");
            let started = std::time::Instant::now();
            let fetched = fetcher.fetch(&source, spec.sha256.as_deref()).await;
            metrics.record_fetch(&spec.name, fetched.is_ok(), started.elapsed());
            match fetched {
                Ok(fetched) => Binding::fetched(spec, fetched, &source),
                Err(e) => {
                    return Err(Failure {
                        reason: "PluginFetchFailed",
                        message: format!("fetching {source}: {e}"),
                        transient: e.is_transient(),
                    });
                }
            }
        }
    };
    let name = binding.spec.name.clone();
    let bytes = binding.plugin.clone();
    let plugin = tokio::task::spawn_blocking(move || runtime.load_reconciler(&name, &bytes))
        .await
        .map_err(|e| failure("PluginLoadFailed", e.to_string()))?
        .map_err(|e| failure("PluginLoadFailed", e.to_string()))?;
    plugin
        .validate_config(binding.spec.config.clone(), binding.spec.call_limits())
        .await
        .map_err(|e| failure("InvalidConfig", e.to_string()))?;
    Ok(Ready { binding, plugin })
}
