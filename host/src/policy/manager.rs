//! The policy manager: watches ConfigMaps labelled `gantry.dev/policy`,
//! loads each new version, checks its settings with the policy's own
//! `validate-settings`, and swaps it into [`Policies`] atomically. A
//! version that fails any check never replaces a working one: the old one
//! keeps serving and a Warning Event on the ConfigMap says why. Compiling a
//! policy and checking its settings run in a task per version, so a slow
//! one never holds up the others.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::binding::{self, DIGEST_ANNOTATION, POLICY_LABEL, PolicyBinding};
use super::{LoadedPolicy, Policies};
use crate::controller::bindings::content_of;
use crate::runtime::{CallError, PolicyPlugin, Runtime};

/// Run the policy manager over the ConfigMaps of `namespace` until
/// `shutdown` completes.
pub async fn run_policy_manager(
    client: Client,
    runtime: Runtime,
    namespace: &str,
    policies: Policies,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let reporter = Reporter {
        controller: "gantry-policies".into(),
        instance: std::env::var("HOSTNAME").ok(),
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let (loaded_tx, mut loaded_rx) = mpsc::unbounded_channel::<Loaded>();
    let mut manager = Manager {
        client: client.clone(),
        api: api.clone(),
        runtime,
        policies,
        recorder: Recorder::new(client, reporter),
        active: HashMap::new(),
        refused: HashMap::new(),
        retry: HashMap::new(),
        loading: HashMap::new(),
        loaded_tx,
        initial: None,
    };
    let mut retry = tokio::time::interval(crate::controller::bindings::RETRY_EVERY);
    let mut events = watcher(api, watcher::Config::default().labels(POLICY_LABEL))
        .default_backoff()
        .boxed();
    let mut initial: Vec<ConfigMap> = Vec::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = retry.tick() => manager.retry_refused().await,
            Some(done) = loaded_rx.recv() => manager.loaded(done).await,
            event = events.next() => match event {
                Some(Ok(watcher::Event::Init)) => initial.clear(),
                Some(Ok(watcher::Event::InitApply(cm))) => initial.push(cm),
                Some(Ok(watcher::Event::InitDone)) => {
                    let seen: Vec<String> = initial.iter().map(ResourceExt::name_any).collect();
                    for cm in initial.drain(..) {
                        manager.upsert(cm).await;
                    }
                    let gone: Vec<String> = manager
                        .active
                        .keys()
                        .filter(|k| !seen.contains(k))
                        .cloned()
                        .collect();
                    for name in gone {
                        manager.remove(&name);
                    }
                    // Loaded once the versions found now are settled.
                    manager.initial = Some(manager.loading.keys().cloned().collect());
                    manager.check_loaded();
                }
                Some(Ok(watcher::Event::Apply(cm))) => manager.upsert(cm).await,
                Some(Ok(watcher::Event::Delete(cm))) => manager.remove(&cm.name_any()),
                Some(Err(e)) => tracing::warn!(error = %e, "watching policy bindings failed; retrying"),
                None => break,
            },
        }
    }
    for (_, loading) in manager.loading.drain() {
        loading.task.abort();
    }
    Ok(())
}

/// A policy binding in service: the content it was loaded from, and the
/// policy's name.
struct Active {
    content: u64,
    name: String,
}

struct Manager {
    client: Client,
    api: Api<ConfigMap>,
    runtime: Runtime,
    policies: Policies,
    recorder: Recorder,
    active: HashMap<String, Active>,
    refused: HashMap<String, u64>,
    /// Refused versions whose cause may pass (a kind not served yet).
    retry: HashMap<String, ConfigMap>,
    /// Versions being compiled and checked, each in a task of its own.
    loading: HashMap<String, Loading>,
    loaded_tx: mpsc::UnboundedSender<Loaded>,
    /// After the initial list: the versions found in it still loading.
    initial: Option<HashSet<String>>,
}

/// A version being loaded: its content, its policy name (claimed
/// meanwhile), and the task.
struct Loading {
    content: u64,
    name: String,
    task: JoinHandle<()>,
}

/// A version loaded (or refused).
struct Loaded {
    cm: ConfigMap,
    content: u64,
    binding: PolicyBinding,
    result: Result<Arc<PolicyPlugin>, (&'static str, String)>,
}

/// Why a policy version was refused.
struct Refusal {
    reason: &'static str,
    message: String,
    /// The cause may pass by itself: try the version again later.
    transient: bool,
}

fn refusal(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        message: message.into(),
        transient: false,
    }
}

/// Load the plugin of `binding` and check its settings, off the executor.
pub fn load_policy(
    runtime: &Runtime,
    binding: &PolicyBinding,
) -> Result<std::sync::Arc<crate::runtime::PolicyPlugin>, (&'static str, String)> {
    let plugin = runtime
        .load_policy(&binding.spec.name, &binding.plugin)
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

impl Manager {
    async fn upsert(&mut self, cm: ConfigMap) {
        let cm_name = cm.name_any();
        let content = content_of(&cm);
        if self
            .active
            .get(&cm_name)
            .is_some_and(|a| a.content == content)
            || self.refused.get(&cm_name) == Some(&content)
            || self
                .loading
                .get(&cm_name)
                .is_some_and(|l| l.content == content)
        {
            return; // e.g. our own digest annotation
        }
        self.retry.remove(&cm_name);
        // A newer version supersedes one being loaded.
        if let Some(old) = self.loading.remove(&cm_name) {
            old.task.abort();
        }
        if let Err(refused) = self.start_load(&cm, content).await {
            self.refuse(&cm, content, refused).await;
        }
    }

    /// Record a refused version with a Warning Event; the old version, if
    /// any, keeps serving.
    async fn refuse(&mut self, cm: &ConfigMap, content: u64, refused: Refusal) {
        let cm_name = cm.name_any();
        let serving = if self.active.contains_key(&cm_name) {
            "; the previous version keeps serving"
        } else {
            ""
        };
        tracing::warn!(configmap = %cm_name, reason = refused.reason, "policy refused: {}{serving}", refused.message);
        self.event(
            cm,
            EventType::Warning,
            refused.reason,
            &format!("{}{serving}", refused.message),
        )
        .await;
        if refused.transient {
            self.retry.insert(cm_name.clone(), cm.clone());
        }
        self.refused.insert(cm_name, content);
    }

    /// Try again the versions refused for a cause that may have passed.
    async fn retry_refused(&mut self) {
        let retry: Vec<(String, ConfigMap)> = self.retry.drain().collect();
        for (cm_name, cm) in retry {
            self.refused.remove(&cm_name);
            self.upsert(cm).await;
        }
    }

    /// Read the version and resolve its kinds, then compile it and check
    /// its settings in a task; [`Manager::loaded`] carries on.
    async fn start_load(&mut self, cm: &ConfigMap, content: u64) -> Result<(), Refusal> {
        let cm_name = cm.name_any();
        let mut binding =
            binding::from_config_map(cm).map_err(|e| refusal("InvalidPolicy", e.to_string()))?;
        binding::resolve_kinds(&self.client, &mut binding.spec.rules)
            .await
            .map_err(|message| Refusal {
                reason: "PolicyKindNotServed",
                message: format!("{message}; tried again every few seconds"),
                transient: true,
            })?;
        let name = binding.spec.name.clone();
        let taken = self
            .active
            .iter()
            .map(|(other, a)| (other, &a.name))
            .chain(self.loading.iter().map(|(other, l)| (other, &l.name)))
            .find(|(other, n)| **other != cm_name && **n == name);
        if let Some((other, _)) = taken {
            return Err(refusal(
                "PolicyNameTaken",
                format!("policy name {name} is already used by ConfigMap {other}"),
            ));
        }
        let runtime = self.runtime.clone();
        let tx = self.loaded_tx.clone();
        let cm = cm.clone();
        let task = tokio::spawn(async move {
            let loading = binding.clone();
            let result = tokio::task::spawn_blocking(move || load_policy(&runtime, &loading))
                .await
                .unwrap_or_else(|e| Err(("PolicyLoadFailed", e.to_string())));
            let _ = tx.send(Loaded {
                cm,
                content,
                binding,
                result,
            });
        });
        self.loading.insert(
            cm_name,
            Loading {
                content,
                name,
                task,
            },
        );
        Ok(())
    }

    /// A version finished loading: put it into service unless a newer one
    /// superseded it.
    async fn loaded(&mut self, done: Loaded) {
        let cm_name = done.cm.name_any();
        if self
            .loading
            .get(&cm_name)
            .is_none_or(|l| l.content != done.content)
        {
            return; // superseded or deleted meanwhile
        }
        self.loading.remove(&cm_name);
        match done.result {
            Ok(plugin) => {
                self.install(&done.cm, done.content, done.binding, plugin)
                    .await;
                self.refused.remove(&cm_name);
            }
            Err((reason, message)) => {
                self.refuse(&done.cm, done.content, refusal(reason, message))
                    .await;
            }
        }
        if let Some(initial) = &mut self.initial {
            initial.remove(&cm_name);
        }
        self.check_loaded();
    }

    /// Mark the policies loaded once the initial versions are settled.
    fn check_loaded(&mut self) {
        if self.initial.as_ref().is_some_and(HashSet::is_empty) {
            self.initial = None;
            self.policies.mark_loaded();
        }
    }

    /// Swap a loaded version into service.
    async fn install(
        &mut self,
        cm: &ConfigMap,
        content: u64,
        binding: PolicyBinding,
        plugin: Arc<PolicyPlugin>,
    ) {
        let cm_name = cm.name_any();
        let name = binding.spec.name.clone();
        let digest = plugin.digest().to_string();
        let spec = Arc::new(binding.spec);
        // Atomic swap: evaluations in flight keep the version they started with.
        self.policies.insert(LoadedPolicy {
            spec: spec.clone(),
            plugin,
            config_map: cm_name.clone(),
        });
        if let Some(old) = self.active.insert(
            cm_name.clone(),
            Active {
                content,
                name: name.clone(),
            },
        ) && old.name != name
        {
            self.policies.remove(&old.name);
        }
        tracing::info!(configmap = %cm_name, policy = %name, %digest, mode = spec.mode.as_str(), mutating = spec.mutating, "policy in service");
        self.annotate(&cm_name, &digest).await;
        self.event(
            cm,
            EventType::Normal,
            "PolicyLoaded",
            &format!(
                "policy {name} sha256:{digest} in service ({} mode{})",
                spec.mode.as_str(),
                if spec.mutating { ", mutating" } else { "" }
            ),
        )
        .await;
    }

    fn remove(&mut self, cm_name: &str) {
        self.refused.remove(cm_name);
        self.retry.remove(cm_name);
        if let Some(loading) = self.loading.remove(cm_name) {
            loading.task.abort();
        }
        if let Some(initial) = &mut self.initial {
            initial.remove(cm_name);
        }
        self.check_loaded();
        if let Some(active) = self.active.remove(cm_name) {
            tracing::info!(configmap = cm_name, policy = %active.name, "policy binding deleted; the policy is out of service");
            self.policies.remove(&active.name);
        }
    }

    async fn annotate(&self, cm_name: &str, digest: &str) {
        let patch = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm_name, "annotations": {DIGEST_ANNOTATION: digest}}
        });
        if let Err(e) = self
            .api
            .patch(
                cm_name,
                &PatchParams::apply("gantry-policies").force(),
                &Patch::Apply(&patch),
            )
            .await
        {
            tracing::warn!(configmap = cm_name, error = %e, "could not annotate the policy binding with its digest");
        }
    }

    async fn event(&self, cm: &ConfigMap, kind: EventType, reason: &str, message: &str) {
        crate::controller::bindings::config_map_event(
            &self.recorder,
            cm,
            "LoadPolicy",
            kind,
            reason,
            message,
        )
        .await;
    }
}
