//! Admission policies as a [`Lifecycle`] of the binding loader: ConfigMaps
//! labelled `gantry.dev/policy`, each version prepared (fetched, compiled,
//! its kinds resolved and its settings checked by the policy's own
//! `validate-settings`) off the loop and swapped into [`Policies`]
//! atomically. A version that fails any check never replaces a working
//! one: the old one keeps serving and a Warning Event on the ConfigMap
//! says why.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use kube::Client;
use kube::runtime::events::Reporter;

use super::spec::{self, DIGEST_ANNOTATION, POLICY_KEY, POLICY_LABEL, PolicyBinding, PolicySpec};
use super::{LoadedPolicy, Policies, shadow};
use crate::delivery::loader::{self, Installed, Lifecycle, PendingPlugin, Refusal};
use crate::delivery::source::{FetchSettings, Fetcher, SourceSpec};
use gantry_kube::recorder::Recorder;
use gantry_sandbox::runtime::{CallError, PolicyPlugin, Runtime};

/// Annotation on the ConfigMap: where the policy in service was fetched
/// from; for OCI, the artifact by digest (a tag resolved).
pub const SOURCE_ANNOTATION: &str = "gantry.dev/policy-source";

/// Run the policy manager over the ConfigMaps of `namespace` until
/// `shutdown` completes; remote policies are fetched as `sources` say.
pub async fn run_policy_manager(
    client: Client,
    runtime: Runtime,
    namespace: &str,
    policies: Policies,
    sources: FetchSettings,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let reporter = Reporter {
        controller: "gantry-policies".into(),
        instance: std::env::var("HOSTNAME").ok(),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let manager = Manager {
        client: client.clone(),
        runtime,
        policies,
        active: HashMap::new(),
    };
    loader::run(
        client,
        namespace,
        manager,
        Fetcher::new(sources),
        recorder,
        shutdown,
    )
    .await
}

/// The policies in service.
struct Manager {
    client: Client,
    runtime: Runtime,
    policies: Policies,
    /// Policy names by ConfigMap name.
    active: HashMap<String, String>,
}

/// Load the plugin of `binding` and check its settings, off the executor.
pub fn load_policy(
    runtime: &Runtime,
    binding: &PolicyBinding,
) -> Result<Arc<PolicyPlugin>, (&'static str, String)> {
    let plugin = runtime
        .load_policy_from(&binding.spec.name, &binding.plugin.component)
        .map_err(|e| ("PolicyLoadFailed", e.to_string()))?;
    match plugin.validate_settings_blocking(&binding.spec.settings, &binding.spec.call_limits()) {
        Ok(()) => Ok(plugin),
        Err(CallError::Plugin(e)) => Err(("InvalidSettings", e.message)),
        Err(e) => Err((
            "InvalidSettings",
            format!("checking the settings failed: {e}"),
        )),
    }
}

/// A policy version ready to go into service.
pub struct Ready {
    spec: PolicySpec,
    plugin: Arc<PolicyPlugin>,
    source: Option<String>,
    /// What its shadow run on recent reviews found, if it had one.
    shadow: Option<String>,
}

impl Manager {
    /// The version of policy `name` that ConfigMap `cm_name` has in service.
    fn running(&self, cm_name: &str, name: &str) -> Option<Arc<LoadedPolicy>> {
        self.policies
            .get(name)
            .filter(|policy| policy.config_map == cm_name)
    }
}

impl Lifecycle for Manager {
    type Spec = PolicySpec;
    type Ready = Ready;
    type Signal = ();

    const LABEL: &'static str = POLICY_LABEL;
    const DOCUMENT_KEY: &'static str = POLICY_KEY;
    const DIGEST_ANNOTATION: &'static str = DIGEST_ANNOTATION;
    const SOURCE_ANNOTATION: &'static str = SOURCE_ANNOTATION;
    const FIELD_MANAGER: &'static str = "gantry-policies";
    const ACTION: &'static str = "LoadPolicy";
    const INVALID: &'static str = "InvalidPolicy";
    const LOADED: &'static str = "PolicyLoaded";
    const NOUN: &'static str = "policy";

    fn parse(text: &str) -> Result<PolicySpec, String> {
        spec::parse_spec(text).map_err(|e| e.to_string())
    }

    fn name(spec: &PolicySpec) -> &str {
        &spec.name
    }

    fn component(spec: &PolicySpec) -> (Option<&SourceSpec>, Option<&str>) {
        (spec.source.as_ref(), spec.sha256.as_deref())
    }

    fn conflict(spec: &PolicySpec, other_cm: &str, other: &PolicySpec) -> Option<Refusal> {
        (other.name == spec.name).then(|| {
            Refusal::new(
                "PolicyNameTaken",
                format!(
                    "policy name {} is already used by ConfigMap {other_cm}; it is tried again when that policy goes",
                    spec.name
                ),
            )
            .claimed()
        })
    }

    fn prepare(
        &self,
        cm_name: &str,
        spec: Arc<PolicySpec>,
        plugin: PendingPlugin,
    ) -> impl Future<Output = Result<Ready, Refusal>> + Send + 'static {
        let (client, runtime) = (self.client.clone(), self.runtime.clone());
        let running = self.running(cm_name, &spec.name);
        async move {
            let mut spec = PolicySpec::clone(&spec);
            spec::resolve_kinds(&client, &mut spec.rules)
                .await
                .map_err(|message| {
                    Refusal::new(
                        "PolicyKindNotServed",
                        format!("{message}; tried again every few seconds"),
                    )
                    .transient()
                })?;
            let plugin = plugin.fetch().await?;
            let source = plugin.source.clone();
            let binding = PolicyBinding { spec, plugin };
            let (binding, loaded) = tokio::task::spawn_blocking(move || {
                let loaded = load_policy(&runtime, &binding);
                (binding, loaded)
            })
            .await
            .map_err(|e| Refusal::new("PolicyLoadFailed", e.to_string()))?;
            let plugin = loaded.map_err(|(reason, message)| Refusal::new(reason, message))?;
            let shadow = match running {
                Some(running) => {
                    let report = shadow::shadow_reviews(&running, &plugin, &binding.spec).await;
                    if let Some(why) = report.refusal() {
                        return Err(Refusal::new("ShadowRunFailed", why));
                    }
                    Some(report.summary())
                }
                None => None,
            };
            Ok(Ready {
                spec: binding.spec,
                plugin,
                source,
                shadow,
            })
        }
    }

    async fn install(&mut self, cm_name: &str, ready: Ready) -> Result<Installed, Refusal> {
        let Ready {
            spec,
            plugin,
            source,
            shadow,
        } = ready;
        let name = spec.name.clone();
        let digest = plugin.digest().to_string();
        let spec = Arc::new(spec);
        let recent = self
            .running(cm_name, &name)
            .map(|running| running.recent.clone())
            .unwrap_or_default();
        // Atomic swap: evaluations in flight keep the version they started with.
        self.policies.insert(LoadedPolicy {
            spec: spec.clone(),
            plugin,
            config_map: cm_name.to_string(),
            recent,
        });
        if let Some(old) = self.active.insert(cm_name.to_string(), name.clone())
            && old != name
        {
            self.policies.remove(&old);
        }
        tracing::info!(configmap = %cm_name, policy = %name, %digest, mode = spec.mode.as_str(), mutating = spec.mutating, "policy in service");
        let from = source
            .as_deref()
            .map(|s| format!(" from {s}"))
            .unwrap_or_default();
        Ok(Installed {
            message: format!(
                "policy {name} sha256:{digest}{from} in service ({} mode{}){}",
                spec.mode.as_str(),
                if spec.mutating { ", mutating" } else { "" },
                shadow.map(|s| format!(" ({s})")).unwrap_or_default()
            ),
            digest,
            source,
        })
    }

    async fn retire(&mut self, cm_name: &str) {
        if let Some(name) = self.active.remove(cm_name) {
            self.policies.remove(&name);
        }
    }

    fn refused(&mut self, _cm_name: &str, _spec: Option<&PolicySpec>) {}

    fn settled(&mut self) {
        self.policies.mark_loaded();
    }

    async fn signal(&mut self) {
        std::future::pending::<()>().await;
    }

    async fn on_signal(&mut self, (): ()) {}

    async fn shutdown(&mut self) {}
}
