//! The binding manager: watches ConfigMaps labelled `gantry.dev/plugin`,
//! loads and checks each new version of a binding, swaps plugins in
//! atomically, and starts and stops one controller per binding. A version
//! that fails any check never replaces a working one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use gantry_sdk::Trigger;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::{GroupVersionKind, Selector};
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};

use super::binding::{
    self, BINDING_LABEL, BindingSpec, CHILD_LABEL, DIGEST_ANNOTATION, KindRef, Plugin,
    SOURCE_ANNOTATION,
};
use super::context::{BindingContext, ChildKind, Current, KindInfo, RelatedKind, controller_owner};
use super::intent::fingerprint;
use super::prepare::{self, Component, Ready};
use super::reconcile::{error_policy, reconcile};
use super::{Metrics, OperatorOptions, Shared};
use crate::runtime::Runtime;
use crate::source::Fetcher;

/// How often bindings that failed for a reason that may pass (a kind not
/// served yet) are tried again.
pub(crate) const RETRY_EVERY: Duration = Duration::from_secs(5);
/// Run the operator until `shutdown` completes: then stop taking new work,
/// let in-flight reconciles finish, and return.
pub async fn run_operator(
    client: Client,
    runtime: Runtime,
    options: OperatorOptions,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let reporter = Reporter {
        controller: options.reporter.clone(),
        instance: std::env::var("HOSTNAME").ok(),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &options.namespace);
    options.readiness.set_leading(options.leading.clone());
    let fetcher = Fetcher::new(options.plugin_sources.clone());
    let shared = Arc::new(Shared::new(options, metrics));
    let (prepared_tx, mut prepared_rx) = mpsc::unbounded_channel::<Prepared>();
    let mut manager = Manager {
        client,
        runtime,
        shared,
        recorder,
        active: HashMap::new(),
        refused: HashMap::new(),
        fetcher,
        preparing: HashMap::new(),
        prepared_tx,
        stopping: JoinSet::new(),
        initial: None,
    };
    let mut events = watcher(api, watcher::Config::default().labels(BINDING_LABEL))
        .default_backoff()
        .boxed();
    let mut initial: Vec<ConfigMap> = Vec::new();
    let mut retry = tokio::time::interval(RETRY_EVERY);
    let mut leading = manager.shared.options.leading.clone();
    let mut policy_changes = manager.shared.options.policies.subscribe();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Ok(()) = async { match &mut leading { Some(rx) => rx.changed().await, None => std::future::pending().await } } => {
                if manager.shared.leading() {
                    tracing::info!("leading: reconciling every parent");
                    manager.reconcile_all();
                }
            }
            Ok(()) = policy_changes.changed() => manager.reconcile_guarded(),
            _ = retry.tick() => manager.retry_refused().await,
            Some(done) = prepared_rx.recv() => manager.prepared(done).await,
            Some(_) = manager.stopping.join_next(), if !manager.stopping.is_empty() => {}
            event = events.next() => match event {
                Some(Ok(watcher::Event::Init)) => initial.clear(),
                Some(Ok(watcher::Event::InitApply(cm))) => initial.push(cm),
                Some(Ok(watcher::Event::InitDone)) => {
                    // Oldest first, so the oldest binding of a parent kind wins.
                    initial.sort_by_key(|cm| cm.metadata.creation_timestamp.clone().map(|t| t.0));
                    let seen: Vec<String> = initial.iter().map(ResourceExt::name_any).collect();
                    for cm in initial.drain(..) {
                        manager.upsert(cm).await;
                    }
                    manager.forget_missing(&seen).await;
                    // Ready once the inline versions found now are settled
                    // (remote ones never held readiness up).
                    manager.initial = Some(
                        manager
                            .preparing
                            .iter()
                            .filter(|(_, p)| !p.remote)
                            .map(|(name, _)| name.clone())
                            .collect(),
                    );
                    manager.check_loaded();
                }
                Some(Ok(watcher::Event::Apply(cm))) => manager.upsert(cm).await,
                Some(Ok(watcher::Event::Delete(cm))) => manager.remove(&cm.name_any()).await,
                Some(Err(e)) => tracing::warn!(error = %e, "watching bindings failed; retrying"),
                None => break,
            },
        }
    }
    manager.shared.metrics.set_ready(false);
    manager.shared.options.readiness.set_loaded(false);
    for (_, preparing) in manager.preparing.drain() {
        preparing.task.abort();
    }
    manager.stop_all().await;
    Ok(())
}

/// A binding in service.
struct Active {
    content: u64,
    spec: Arc<BindingSpec>,
    ctx: Arc<BindingContext>,
    reconcile_all: mpsc::UnboundedSender<()>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// A binding version that was refused.
struct Refused {
    content: u64,
    /// The cause may pass by itself (e.g. its CRD is not served yet).
    retry: Option<ConfigMap>,
    /// Refused because another binding claims its parent kind or name:
    /// tried again when a claim is released.
    claimed: Option<ConfigMap>,
}

/// A version being made ready ([`prepare`]) in a task of its own, so that
/// other bindings are not held up. It claims its parent kind and name
/// meanwhile, so that the oldest binding of a kind still wins.
struct Preparing {
    content: u64,
    spec: Arc<BindingSpec>,
    remote: bool,
    task: JoinHandle<()>,
}

/// A preparation finished.
struct Prepared {
    cm: ConfigMap,
    content: u64,
    result: Result<Ready, prepare::Failure>,
}

struct Manager {
    client: Client,
    runtime: Runtime,
    shared: Arc<Shared>,
    recorder: Recorder,
    active: HashMap<String, Active>,
    refused: HashMap<String, Refused>,
    fetcher: Fetcher,
    preparing: HashMap<String, Preparing>,
    prepared_tx: mpsc::UnboundedSender<Prepared>,
    /// Controllers told to stop, draining their in-flight reconciles
    /// without holding up the loop.
    stopping: JoinSet<()>,
    /// After the initial list: the inline versions found in it that are
    /// still being prepared (readiness waits for them).
    initial: Option<std::collections::HashSet<String>>,
}

/// Why a binding version was refused.
struct Refusal {
    reason: &'static str,
    message: String,
    transient: bool,
}

fn refusal(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        message: message.into(),
        transient: false,
    }
}

impl From<prepare::Failure> for Refusal {
    fn from(f: prepare::Failure) -> Self {
        Refusal {
            reason: f.reason,
            message: f.message,
            transient: f.transient,
        }
    }
}

/// Whether a binding other than `cm_name` among `others` (ConfigMap name
/// and spec) already claims `spec`'s parent kind, in any version, or its
/// name.
fn claim_conflict<'a>(
    others: impl IntoIterator<Item = (&'a String, &'a BindingSpec)>,
    cm_name: &str,
    spec: &BindingSpec,
) -> Option<Refusal> {
    for (other, claimant) in others {
        if other == cm_name {
            continue;
        }
        if claimant.parent.same_kind(&spec.parent) {
            return Some(refusal(
                "ParentKindClaimed",
                format!(
                    "{} is already reconciled by binding {} (ConfigMap {other}, as {}); it is tried again when that binding goes",
                    spec.parent, claimant.name, claimant.parent
                ),
            ));
        }
        if claimant.name == spec.name {
            return Some(refusal(
                "BindingNameTaken",
                format!(
                    "binding name {} is already used by ConfigMap {other}; it is tried again when that binding goes",
                    spec.name
                ),
            ));
        }
    }
    None
}

/// A fingerprint of what a binding ConfigMap holds (data, and binaryData by
/// digest): metadata changes such as our own annotation are not news.
pub(crate) fn content_of(cm: &ConfigMap) -> u64 {
    let binary: Vec<(String, String)> = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), crate::runtime::digest(&v.0)))
        .collect();
    fingerprint(&json!({"data": cm.data, "binary": binary}))
}

impl Manager {
    async fn upsert(&mut self, cm: ConfigMap) {
        self.upsert_inner(cm).await;
        self.publish_bindings();
    }

    async fn upsert_inner(&mut self, cm: ConfigMap) {
        let name = cm.name_any();
        let content = content_of(&cm);
        if self.active.get(&name).is_some_and(|a| a.content == content)
            || self
                .refused
                .get(&name)
                .is_some_and(|r| r.content == content)
            || self
                .preparing
                .get(&name)
                .is_some_and(|p| p.content == content)
        {
            return; // e.g. our own digest annotation
        }
        // A newer version supersedes one being prepared.
        if let Some(old) = self.preparing.remove(&name) {
            old.task.abort();
        }
        let component = match binding::read_config_map(&cm) {
            Ok(Plugin::Inline(binding)) => Component::Inline(binding),
            Ok(Plugin::Remote(spec, source)) => Component::Remote(spec, source),
            Err(e) => {
                self.refuse(&cm, content, refusal("InvalidBinding", e.to_string()))
                    .await;
                return;
            }
        };
        let spec = match &component {
            Component::Inline(binding) => &binding.spec,
            Component::Remote(spec, _) => spec,
        };
        if let Some(conflict) = self.conflict(&name, spec) {
            self.refuse(&cm, content, conflict).await;
            if let Some(r) = self.refused.get_mut(&name) {
                r.claimed = Some(cm);
            }
            return;
        }
        // An older refused version must not be retried over this one.
        self.refused.remove(&name);
        self.start_prepare(cm, content, component);
    }

    /// Who claims `spec`'s parent kind or name: bindings in service and
    /// versions being prepared.
    fn conflict(&self, cm_name: &str, spec: &BindingSpec) -> Option<Refusal> {
        let active = self.active.iter().map(|(n, a)| (n, a.spec.as_ref()));
        let preparing = self.preparing.iter().map(|(n, p)| (n, p.spec.as_ref()));
        claim_conflict(active.chain(preparing), cm_name, spec)
    }

    /// Make a version ready in its own task; [`Manager::prepared`] carries
    /// on with it.
    fn start_prepare(&mut self, cm: ConfigMap, content: u64, component: Component) {
        let name = cm.name_any();
        let (spec, remote) = match &component {
            Component::Inline(binding) => (binding.spec.clone(), false),
            Component::Remote(spec, _) => (spec.clone(), true),
        };
        let tx = self.prepared_tx.clone();
        let work = prepare::prepare(
            component,
            self.runtime.clone(),
            self.fetcher.clone(),
            self.shared.metrics.clone(),
        );
        let task = tokio::spawn(async move {
            let result = work.await;
            let _ = tx.send(Prepared {
                cm,
                content,
                result,
            });
        });
        self.preparing.insert(
            name,
            Preparing {
                content,
                spec: Arc::new(spec),
                remote,
                task,
            },
        );
    }

    /// A preparation finished: put the version into service, unless a
    /// newer one superseded it.
    async fn prepared(&mut self, done: Prepared) {
        let name = done.cm.name_any();
        if self
            .preparing
            .get(&name)
            .is_none_or(|p| p.content != done.content)
        {
            return; // superseded or deleted meanwhile
        }
        self.preparing.remove(&name);
        let result = match done.result {
            Ok(ready) => self.install(&done.cm, ready, done.content).await,
            Err(failure) => Err(failure.into()),
        };
        match result {
            Ok(()) => {
                self.refused.remove(&name);
            }
            Err(refused) => {
                self.refuse(&done.cm, done.content, refused).await;
                // Its claim on a parent kind is gone.
                self.release_claims().await;
            }
        }
        if let Some(initial) = &mut self.initial {
            initial.remove(&name);
        }
        self.check_loaded();
        self.publish_bindings();
    }

    /// Set readiness once the initial versions are settled.
    fn check_loaded(&mut self) {
        if self.initial.as_ref().is_some_and(|i| i.is_empty()) {
            self.initial = None;
            self.shared.metrics.set_ready(true);
            self.shared.options.readiness.set_loaded(true);
        }
    }

    /// Record a refused version with a Warning Event; the old version, if
    /// any, keeps serving.
    async fn refuse(&mut self, cm: &ConfigMap, content: u64, refused: Refusal) {
        let name = cm.name_any();
        let binding = cm
            .data
            .as_ref()
            .and_then(|d| d.get(binding::BINDING_KEY))
            .and_then(|t| binding::parse_spec(t).ok())
            .map(|s| s.name)
            .unwrap_or_else(|| name.clone());
        self.shared
            .metrics
            .record_plugin_load(&binding, false, false);
        let serving = if self.active.contains_key(&name) {
            "; the previous version keeps serving"
        } else {
            ""
        };
        tracing::warn!(configmap = %name, reason = refused.reason, "binding refused: {}{serving}", refused.message);
        self.event(
            cm,
            EventType::Warning,
            refused.reason,
            &format!("{}{serving}", refused.message),
        )
        .await;
        self.refused.insert(
            name,
            Refused {
                content,
                retry: refused.transient.then(|| cm.clone()),
                claimed: None,
            },
        );
    }

    /// A binding went (or gave up its parent kind): try again the versions
    /// refused because of a claim.
    async fn release_claims(&mut self) {
        let waiting: Vec<ConfigMap> = self
            .refused
            .values_mut()
            .filter_map(|r| r.claimed.take())
            .collect();
        for cm in waiting {
            self.refused.remove(&cm.name_any());
            self.upsert_inner(cm).await;
        }
    }

    /// Tell the metrics and the readiness probe which bindings serve.
    fn publish_bindings(&self) {
        self.shared.metrics.set_active_bindings(self.active.len());
        self.shared.options.readiness.set_bindings(
            self.active
                .values()
                .map(|a| (a.spec.name.clone(), a.ctx.clone())),
        );
    }

    /// Reconcile every parent of every binding (e.g. on becoming leader).
    fn reconcile_all(&self) {
        for active in self.active.values() {
            let _ = active.reconcile_all.send(());
        }
    }

    /// Reconcile every parent of the bindings with guardrail policies: a
    /// policy came, went or changed.
    fn reconcile_guarded(&self) {
        for active in self.active.values() {
            if !active.spec.guardrail_policies.is_empty() {
                let _ = active.reconcile_all.send(());
            }
        }
    }

    async fn retry_refused(&mut self) {
        let retry: Vec<ConfigMap> = self
            .refused
            .values_mut()
            .filter_map(|r| r.retry.take())
            .collect();
        for cm in retry {
            self.refused.remove(&cm.name_any());
            self.upsert(cm).await;
        }
    }

    /// Put a ready version into service: swap the plugin atomically, or
    /// start a controller for it.
    async fn install(&mut self, cm: &ConfigMap, ready: Ready, content: u64) -> Result<(), Refusal> {
        let Ready { binding, plugin } = ready;
        let cm_name = cm.name_any();
        let spec = Arc::new(binding.spec.clone());
        let active = self.active.iter().map(|(n, a)| (n, a.spec.as_ref()));
        if let Some(conflict) = claim_conflict(active, &cm_name, &spec) {
            return Err(conflict);
        }
        let current = Current {
            plugin: plugin.clone(),
            spec: spec.clone(),
        };
        let swapped = self.active.contains_key(&cm_name);
        let mut released = false;
        match self.active.get_mut(&cm_name) {
            Some(active) if active.spec.same_watches(&spec) => {
                // Atomic swap: in-flight reconciles keep the version they
                // started with; every parent is reconciled with the new one.
                active.ctx.swap(current);
                active.spec = spec.clone();
                active.content = content;
                let _ = active.reconcile_all.send(());
            }
            _ => {
                let active = self.start(spec.clone(), current, content).await?;
                if let Some(old) = self.active.insert(cm_name.clone(), active) {
                    released = !old.spec.parent.same_kind(&spec.parent);
                    self.stopping.spawn(stop(old));
                }
            }
        }
        self.shared
            .metrics
            .record_plugin_load(&spec.name, true, swapped);
        tracing::info!(configmap = %cm_name, binding = %spec.name, digest = %plugin.digest(), "plugin in service");
        self.annotate(&cm_name, plugin.digest(), binding.source.as_deref())
            .await;
        let from = binding
            .source
            .as_deref()
            .map(|s| format!(" from {s}"))
            .unwrap_or_default();
        self.event(
            cm,
            EventType::Normal,
            "PluginLoaded",
            &format!(
                "plugin sha256:{}{from} in service for {}",
                plugin.digest(),
                spec.parent
            ),
        )
        .await;
        if released {
            Box::pin(self.release_claims()).await;
        }
        Ok(())
    }

    async fn remove(&mut self, cm_name: &str) {
        self.remove_inner(cm_name).await;
        self.publish_bindings();
    }

    async fn remove_inner(&mut self, cm_name: &str) {
        self.refused.remove(cm_name);
        if let Some(initial) = &mut self.initial {
            initial.remove(cm_name);
        }
        let mut released = false;
        if let Some(preparing) = self.preparing.remove(cm_name) {
            preparing.task.abort();
            released = true;
        }
        if let Some(active) = self.active.remove(cm_name) {
            tracing::info!(configmap = cm_name, binding = %active.spec.name, "binding deleted; its parents are no longer reconciled (nothing is deleted)");
            // Draining its reconciles must not hold up other bindings.
            self.stopping.spawn(stop(active));
            released = true;
        }
        if released {
            self.release_claims().await;
        }
        self.check_loaded();
    }

    async fn forget_missing(&mut self, seen: &[String]) {
        let gone: Vec<String> = self
            .active
            .keys()
            .filter(|k| !seen.contains(k))
            .cloned()
            .collect();
        for name in gone {
            self.remove(&name).await;
        }
    }

    async fn stop_all(&mut self) {
        let all: Vec<Active> = self.active.drain().map(|(_, a)| a).collect();
        futures::future::join_all(all.into_iter().map(stop)).await;
        while self.stopping.join_next().await.is_some() {}
    }

    async fn annotate(&self, cm_name: &str, digest: &str, source: Option<&str>) {
        let api: Api<ConfigMap> =
            Api::namespaced(self.client.clone(), &self.shared.options.namespace);
        let mut patch = json!({"metadata": {"annotations": {DIGEST_ANNOTATION: digest}}});
        if let Some(source) = source {
            patch["metadata"]["annotations"][SOURCE_ANNOTATION] = json!(source);
        }
        if let Err(e) = api.patch(cm_name, &PatchParams::apply("gantry").force(), &Patch::Apply(&json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm_name, "annotations": patch["metadata"]["annotations"]}
        }))).await {
            tracing::warn!(configmap = cm_name, error = %e, "could not annotate the binding with its digest");
        }
    }

    async fn event(&self, cm: &ConfigMap, kind: EventType, reason: &str, message: &str) {
        config_map_event(&self.recorder, cm, "LoadPlugin", kind, reason, message).await;
    }

    async fn resolve(&self, kind: &KindRef) -> Result<KindInfo, Refusal> {
        let (group, version) = match kind.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", kind.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
        match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((resource, caps)) => Ok(KindInfo {
                kind: kind.clone(),
                resource,
                namespaced: caps.scope == kube::discovery::Scope::Namespaced,
                has_status: caps.subresources.iter().any(|(r, _)| r.plural == "status"),
            }),
            Err(e) => Err(Refusal {
                reason: "UnknownKind",
                message: format!("kind {kind} is not served by the API server: {e}"),
                transient: true,
            }),
        }
    }

    /// Resolve the kinds, build the caches and start the controller.
    async fn start(
        &self,
        spec: Arc<BindingSpec>,
        current: Current,
        content: u64,
    ) -> Result<Active, Refusal> {
        let parent = self.resolve(&spec.parent).await?;
        let mut child_infos = Vec::new();
        for child in &spec.children {
            child_infos.push(self.resolve(child).await?);
        }
        let mut related_infos = Vec::new();
        for related in &spec.related {
            let selector = match &related.selector {
                Some(s) => Some(Selector::try_from(s.clone()).map_err(|e| {
                    refusal(
                        "InvalidBinding",
                        format!("related {}: selector: {e}", related.kind),
                    )
                })?),
                None => None,
            };
            related_infos.push((
                related.clone(),
                self.resolve(&related.kind_ref()).await?,
                selector,
            ));
        }

        let client = &self.client;
        let parent_writer = reflector::store::Writer::<DynamicObject>::new(parent.resource.clone());
        let parents = parent_writer.as_reader();
        let child_writers: Vec<_> = child_infos
            .iter()
            .map(|i| reflector::store::Writer::<DynamicObject>::new(i.resource.clone()))
            .collect();
        let related_writers: Vec<_> = related_infos
            .iter()
            .map(|(_, i, _)| reflector::store::Writer::<DynamicObject>::new(i.resource.clone()))
            .collect();
        let children = child_infos
            .iter()
            .zip(&child_writers)
            .map(|(info, w)| ChildKind {
                info: info.clone(),
                store: w.as_reader(),
                owners: Arc::default(),
            })
            .collect::<Vec<_>>();
        let owner_indexes: Vec<_> = children.iter().map(|c| c.owners.clone()).collect();
        let related = related_infos
            .iter()
            .zip(&related_writers)
            .map(|((spec, info, selector), w)| RelatedKind {
                spec: spec.clone(),
                info: info.clone(),
                selector: selector.clone(),
                store: w.as_reader(),
            })
            .collect();
        let ctx = Arc::new(BindingContext::new(
            spec.clone(),
            current,
            client.clone(),
            parent.clone(),
            parents.clone(),
            children,
            related,
            self.recorder.clone(),
            self.shared.clone(),
        ));

        let parent_stream = reflector::reflector(
            parent_writer,
            watcher(
                Api::all_with(client.clone(), &parent.resource),
                watcher::Config::default(),
            )
            .default_backoff(),
        )
        .applied_objects();
        let mut controller =
            Controller::for_stream_with(parent_stream, parents, parent.resource.clone());
        let child_selector = format!("{CHILD_LABEL}={}", spec.name);
        for ((info, writer), owners) in child_infos
            .into_iter()
            .zip(child_writers)
            .zip(owner_indexes)
        {
            let api = Api::all_with(client.clone(), &info.resource);
            let resource = info.resource.clone();
            let stream = reflector::reflector(
                writer,
                watcher(api, watcher::Config::default().labels(&child_selector)).default_backoff(),
            )
            .inspect_ok(move |event| owners.observe(event, &resource))
            .touched_objects();
            let mapper = child_mapper(ctx.clone(), info.clone());
            controller = controller.watches_stream_with(stream, mapper, info.resource.clone());
        }
        for (index, ((_, info, selector), writer)) in
            related_infos.into_iter().zip(related_writers).enumerate()
        {
            let api = Api::all_with(client.clone(), &info.resource);
            let config = match &selector {
                Some(s) => watcher::Config::default().labels_from(s),
                None => watcher::Config::default(),
            };
            let stream = reflector::reflector(writer, watcher(api, config).default_backoff())
                .touched_objects();
            let mapper = related_mapper(ctx.clone(), index);
            controller = controller.watches_stream_with(stream, mapper, info.resource.clone());
        }

        let (reconcile_all, requests) = mpsc::unbounded_channel::<()>();
        let requests = futures::stream::unfold(requests, |mut rx| async move {
            rx.recv().await.map(|()| ((), rx))
        });
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let concurrency = u16::try_from(self.shared.options.concurrency).unwrap_or(u16::MAX);
        let name = spec.name.clone();
        let run = controller
            .with_config(ControllerConfig::default().concurrency(concurrency))
            .reconcile_all_on(requests)
            .graceful_shutdown_on(async move {
                let _ = stop_rx.await;
            })
            .run(reconcile, error_policy, ctx.clone())
            .for_each(move |result| {
                if let Err(e) = result {
                    tracing::debug!(binding = %name, error = %e, "controller reported an error");
                }
                std::future::ready(())
            });
        let task = tokio::spawn(run);
        Ok(Active {
            content,
            spec,
            ctx,
            reconcile_all,
            stop: Some(stop_tx),
            task,
        })
    }
}

/// Publish an Event about a binding ConfigMap (a reconcile or a policy
/// binding); its note is cut to Kubernetes' 1 KiB.
pub async fn config_map_event(
    recorder: &Recorder,
    cm: &ConfigMap,
    action: &str,
    kind: EventType,
    reason: &str,
    message: &str,
) {
    let event = Event {
        type_: kind,
        reason: reason.into(),
        note: Some(message.chars().take(1024).collect()),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &cm.object_ref(&())).await {
        tracing::warn!(error = %e, "could not publish event");
    }
}

/// Stop a controller: no new reconciles; in-flight ones may finish (up to
/// the reconcile timeout, the longest one may take). Requeues scheduled for
/// later are dropped.
async fn stop(mut active: Active) {
    if let Some(stop) = active.stop.take() {
        let _ = stop.send(());
    }
    let grace = active.ctx.shared.options.reconcile_timeout;
    let deadline = tokio::time::Instant::now() + grace;
    while !active.task.is_finished()
        && active.ctx.in_flight() > 0
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    active.task.abort();
    let _ = (&mut active.task).await;
}

/// A child event → its controller parent (and note why).
fn child_mapper(
    ctx: Arc<BindingContext>,
    info: KindInfo,
) -> impl Fn(DynamicObject) -> Option<ObjectRef<DynamicObject>> + Send + Sync + 'static {
    move |child: DynamicObject| {
        let owner = controller_owner(&child)?;
        if owner.kind != ctx.parent.kind.kind || owner.api_version != ctx.parent.kind.api_version {
            return None;
        }
        let namespace = if ctx.parent.namespaced {
            child.namespace()
        } else {
            None
        };
        let key = match &namespace {
            Some(ns) => format!("{ns}/{}", owner.name),
            None => owner.name.clone(),
        };
        ctx.note_trigger(
            &key,
            Trigger::ChildChanged(BindingContext::object_ref(&info, &child)),
        );
        let parent = ObjectRef::new_with(&owner.name, ctx.parent.resource.clone());
        Some(match namespace {
            Some(ns) => parent.within(&ns),
            None => parent,
        })
    }
}

/// A related object's event → every parent that reads it.
fn related_mapper(
    ctx: Arc<BindingContext>,
    index: usize,
) -> impl Fn(DynamicObject) -> Vec<ObjectRef<DynamicObject>> + Send + Sync + 'static {
    move |obj: DynamicObject| {
        let related = &ctx.related[index];
        let reference = BindingContext::object_ref(&related.info, &obj);
        ctx.parents
            .state()
            .into_iter()
            .filter(|parent| related.matches(&obj, parent.namespace().as_deref()))
            .map(|parent| {
                ctx.note_trigger(
                    &super::context::object_key(&parent),
                    Trigger::RelatedChanged(reference.clone()),
                );
                ObjectRef::from_obj_with(parent.as_ref(), ctx.parent.resource.clone())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, api_version: &str) -> BindingSpec {
        binding::parse_spec(&format!(
            "name: {name}\nparent: {{apiVersion: {api_version}, kind: Widget}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_parent_kind_is_claimed_in_every_version() {
        let v1 = spec("one", "example.com/v1");
        let others = [("first".to_string(), v1)];
        let others = || others.iter().map(|(n, s)| (n, s));
        let conflict = claim_conflict(others(), "second", &spec("two", "example.com/v2")).unwrap();
        assert_eq!(conflict.reason, "ParentKindClaimed");
        assert!(
            conflict.message.contains("binding one (ConfigMap first"),
            "{}",
            conflict.message
        );
        // Another group's Widget is another kind.
        assert!(claim_conflict(others(), "second", &spec("two", "other.com/v1")).is_none());
        // A binding does not conflict with itself.
        assert!(claim_conflict(others(), "first", &spec("one", "example.com/v2")).is_none());
        let taken = claim_conflict(others(), "second", &spec("one", "other.com/v1")).unwrap();
        assert_eq!(taken.reason, "BindingNameTaken");
    }
}
