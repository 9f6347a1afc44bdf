//! A binding's reconcile reproduced away from the operator, for `gantry
//! plugin diff` and `capture`: the binding read from its ConfigMap in a
//! live cluster, its version loaded from there (or from its source), and
//! requests built from caches filled by the operator's own [`Watches`].
//! Nothing is written to the cluster.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::events::Reporter;
use kube::{Api, Client, ResourceExt};

use super::context::{BindingContext, Current, object_key};
use super::spec::{BINDING_LABEL, BindingSpec, DIGEST_ANNOTATION};
use super::watches::Watches;
use super::{Metrics, OperatorOptions, Shared};
use crate::delivery::loader::PendingPlugin;
use crate::delivery::source::{FetchSettings, Fetcher};
use gantry_kube::recorder::Recorder;
use gantry_sandbox::runtime::{ReconcilerPlugin, Runtime};

/// A binding of a live cluster, its caches synced.
pub struct OfflineBinding {
    /// The ConfigMap that holds it.
    pub config_map: String,
    /// The binding as the plugins are called with it here (guardrail
    /// policies left out: they are not loaded here).
    pub spec: Arc<BindingSpec>,
    /// The version its ConfigMap holds.
    pub current: Arc<ReconcilerPlugin>,
    /// What the reader should know about how this differs from the
    /// operator's view.
    pub notes: Vec<String>,
    watches: Watches,
}

impl OfflineBinding {
    /// Read the binding `name` (by its name, or its ConfigMap's) from the
    /// ConfigMaps of `namespace`, load its version with `runtime`, and fill
    /// its caches (waiting at most `sync_timeout`).
    pub async fn open(
        client: &Client,
        runtime: &Runtime,
        namespace: &str,
        name: &str,
        sync_timeout: Duration,
    ) -> anyhow::Result<Self> {
        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .list(&ListParams::default().labels(BINDING_LABEL))
            .await
            .with_context(|| format!("listing the bindings of namespace {namespace}"))?;
        let found = config_maps.items.into_iter().find_map(|cm| {
            let read = super::manager::read_binding(&cm);
            let named = match &read {
                Ok((spec, _)) => spec.name == name,
                Err(_) => false,
            };
            (named || cm.name_any() == name).then_some((cm, read))
        });
        let Some((cm, read)) = found else {
            bail!(
                "no binding named {name} among the ConfigMaps labelled {BINDING_LABEL} in namespace {namespace}"
            );
        };
        let config_map = cm.name_any();
        let (spec, component) =
            read.map_err(|r| anyhow!("ConfigMap {config_map}: {}: {}", r.reason, r.message))?;
        let pin = spec.sha256.clone();
        let bytes = PendingPlugin::new(component, pin, Fetcher::new(FetchSettings::default()))
            .fetch()
            .await
            .map_err(|r| anyhow!("{}: {}", r.reason, r.message))?;
        let current = runtime
            .load_reconciler_from(&spec.name, &bytes.component)
            .with_context(|| format!("loading the version of ConfigMap {config_map}"))?;

        let mut notes = Vec::new();
        let serving = cm.annotations().get(DIGEST_ANNOTATION);
        if serving.is_some_and(|digest| digest != current.digest()) {
            notes.push(format!(
                "ConfigMap {config_map} holds sha256:{}, but the operator serves sha256:{} (it refused this version): compared with the ConfigMap's",
                current.digest(),
                serving.map_or("", String::as_str)
            ));
        }
        let mut spec = spec;
        if !spec.guardrail_policies.is_empty() {
            notes.push(format!(
                "guardrail policies ({}) are not evaluated here",
                spec.guardrail_policies.join(", ")
            ));
            spec.guardrail_policies.clear();
        }
        let spec = Arc::new(spec);

        let shared = Arc::new(Shared::new(
            OperatorOptions {
                namespace: namespace.to_string(),
                ..OperatorOptions::default()
            },
            Arc::new(Metrics::default()),
        ));
        let reporter = Reporter {
            controller: "gantry-offline".into(),
            instance: None,
        };
        let watches = Watches::start(
            client,
            spec.clone(),
            Current {
                plugin: current.clone(),
                spec: spec.clone(),
            },
            Recorder::new(client.clone(), reporter),
            shared,
        )
        .await
        .map_err(|r| anyhow!("{}: {}", r.reason, r.message))?;
        if !watches.synced(sync_timeout).await {
            bail!(
                "the caches of binding {} did not sync in {sync_timeout:?}",
                spec.name
            );
        }
        Ok(Self {
            config_map,
            spec,
            current,
            notes,
            watches,
        })
    }

    /// The binding's context over the synced caches.
    pub fn ctx(&self) -> &BindingContext {
        &self.watches.ctx
    }

    /// Its parents (only `only`, as `namespace/name`, when given), by key.
    pub fn parents(&self, only: Option<&str>) -> anyhow::Result<Vec<DynamicObject>> {
        let ctx = self.ctx();
        let mut parents: Vec<_> = ctx
            .parents
            .state()
            .into_iter()
            .filter(|p| only.is_none_or(|key| object_key(p.as_ref()) == key))
            .map(|p| p.to_object(&ctx.parent.resource))
            .collect();
        parents.sort_by_key(object_key);
        if let Some(key) = only
            && parents.is_empty()
        {
            bail!("no {} {key} in the cluster", self.spec.parent);
        }
        Ok(parents)
    }
}
