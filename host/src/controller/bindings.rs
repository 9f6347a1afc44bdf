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
use tokio::task::JoinHandle;

use super::binding::{
    self, BINDING_LABEL, Binding, BindingSpec, CHILD_LABEL, DIGEST_ANNOTATION, KindRef, Plugin,
    SOURCE_ANNOTATION,
};
use super::context::{BindingContext, ChildKind, Current, KindInfo, RelatedKind, controller_owner};
use super::intent::fingerprint;
use super::reconcile::{error_policy, reconcile};
use super::{Metrics, OperatorOptions, Shared};
use crate::runtime::{ReconcilerPlugin, Runtime};
use crate::source::{Fetcher, PluginSource};

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
    let (fetched_tx, mut fetched_rx) = mpsc::unbounded_channel::<FetchDone>();
    let mut manager = Manager {
        client,
        runtime,
        shared,
        recorder,
        active: HashMap::new(),
        refused: HashMap::new(),
        fetcher,
        fetching: HashMap::new(),
        fetched_tx,
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
            Some(done) = fetched_rx.recv() => manager.fetched(done).await,
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
                    manager.shared.metrics.set_ready(true);
                    manager.shared.options.readiness.set_loaded(true);
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
    for (_, fetch) in manager.fetching.drain() {
        fetch.task.abort();
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
}

/// A remote plugin being downloaded, off the manager's loop so that other
/// bindings are not held up.
struct Fetching {
    content: u64,
    task: JoinHandle<()>,
}

/// A download finished (or failed for good).
struct FetchDone {
    cm: ConfigMap,
    content: u64,
    result: Result<Binding, Refusal>,
}

struct Manager {
    client: Client,
    runtime: Runtime,
    shared: Arc<Shared>,
    recorder: Recorder,
    active: HashMap<String, Active>,
    refused: HashMap<String, Refused>,
    fetcher: Fetcher,
    fetching: HashMap<String, Fetching>,
    fetched_tx: mpsc::UnboundedSender<FetchDone>,
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
                .fetching
                .get(&name)
                .is_some_and(|f| f.content == content)
        {
            return; // e.g. our own digest annotation
        }
        // A newer version supersedes a download in flight.
        if let Some(old) = self.fetching.remove(&name) {
            old.task.abort();
        }
        let binding = match binding::read_config_map(&cm) {
            Ok(Plugin::Inline(binding)) => Ok(binding),
            Ok(Plugin::Remote(spec, source)) => {
                // An older refused version must not be retried over this one.
                self.refused.remove(&name);
                self.start_fetch(cm, content, spec, source);
                return;
            }
            Err(e) => Err(refusal("InvalidBinding", e.to_string())),
        };
        self.settle(cm, content, binding).await;
    }

    /// Download a remote plugin in its own task; [`Manager::fetched`]
    /// carries on with it.
    fn start_fetch(
        &mut self,
        cm: ConfigMap,
        content: u64,
        spec: BindingSpec,
        source: PluginSource,
    ) {
        let name = cm.name_any();
        let fetcher = self.fetcher.clone();
        let tx = self.fetched_tx.clone();
        tracing::info!(configmap = %name, %source, "fetching plugin");
        let metrics = self.shared.metrics.clone();
        let task = tokio::spawn(async move {
            let started = std::time::Instant::now();
            let fetched = fetcher.fetch(&source, spec.sha256.as_deref()).await;
            metrics.record_fetch(&spec.name, fetched.is_ok(), started.elapsed());
            let result = match fetched {
                Ok(fetched) => Ok(Binding::fetched(spec, fetched, &source)),
                Err(e) => Err(Refusal {
                    reason: "PluginFetchFailed",
                    message: format!("fetching {source}: {e}"),
                    transient: e.is_transient(),
                }),
            };
            let _ = tx.send(FetchDone {
                cm,
                content,
                result,
            });
        });
        self.fetching.insert(name, Fetching { content, task });
    }

    /// A download finished: go on with the version it was for, unless a
    /// newer one superseded it.
    async fn fetched(&mut self, done: FetchDone) {
        let name = done.cm.name_any();
        if self
            .fetching
            .get(&name)
            .is_none_or(|f| f.content != done.content)
        {
            return; // superseded or deleted meanwhile
        }
        self.fetching.remove(&name);
        self.settle(done.cm, done.content, done.result).await;
        self.shared.metrics.set_active_bindings(self.active.len());
    }

    /// Put a read (and, if remote, fetched) binding into service, or
    /// refuse it with a Warning Event while the old version keeps serving.
    async fn settle(&mut self, cm: ConfigMap, content: u64, binding: Result<Binding, Refusal>) {
        let name = cm.name_any();
        let result = match binding {
            Ok(binding) => self.try_upsert(&cm, binding, content).await,
            Err(refused) => Err(refused),
        };
        match result {
            Ok(()) => {
                self.refused.remove(&name);
            }
            Err(refused) => {
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
                    &cm,
                    EventType::Warning,
                    refused.reason,
                    &format!("{}{serving}", refused.message),
                )
                .await;
                self.refused.insert(
                    name,
                    Refused {
                        content,
                        retry: refused.transient.then_some(cm),
                    },
                );
            }
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

    async fn try_upsert(
        &mut self,
        cm: &ConfigMap,
        binding: Binding,
        content: u64,
    ) -> Result<(), Refusal> {
        let cm_name = cm.name_any();
        let spec = Arc::new(binding.spec.clone());
        for (other, active) in &self.active {
            if *other == cm_name {
                continue;
            }
            if active.spec.parent == spec.parent {
                return Err(refusal(
                    "ParentKindClaimed",
                    format!(
                        "{} is already reconciled by binding {} (ConfigMap {other})",
                        spec.parent, active.spec.name
                    ),
                ));
            }
            if active.spec.name == spec.name {
                return Err(refusal(
                    "BindingNameTaken",
                    format!(
                        "binding name {} is already used by ConfigMap {other}",
                        spec.name
                    ),
                ));
            }
        }
        let plugin = self.load(&binding).await?;
        let current = Current {
            plugin: plugin.clone(),
            spec: spec.clone(),
        };
        let swapped = self.active.contains_key(&cm_name);
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
                    stop(old).await;
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
        Ok(())
    }

    /// Compile (off the executor) and check config.
    async fn load(&self, binding: &Binding) -> Result<Arc<ReconcilerPlugin>, Refusal> {
        let runtime = self.runtime.clone();
        let name = binding.spec.name.clone();
        let bytes = binding.plugin.clone();
        let plugin = tokio::task::spawn_blocking(move || runtime.load_reconciler(&name, &bytes))
            .await
            .map_err(|e| refusal("PluginLoadFailed", e.to_string()))?
            .map_err(|e| refusal("PluginLoadFailed", e.to_string()))?;
        plugin
            .validate_config(binding.spec.config.clone(), binding.spec.call_limits())
            .await
            .map_err(|e| refusal("InvalidConfig", e.to_string()))?;
        Ok(plugin)
    }

    async fn remove(&mut self, cm_name: &str) {
        self.remove_inner(cm_name).await;
        self.publish_bindings();
    }

    async fn remove_inner(&mut self, cm_name: &str) {
        self.refused.remove(cm_name);
        if let Some(fetch) = self.fetching.remove(cm_name) {
            fetch.task.abort();
        }
        if let Some(active) = self.active.remove(cm_name) {
            tracing::info!(configmap = cm_name, binding = %active.spec.name, "binding deleted; its parents are no longer reconciled (nothing is deleted)");
            stop(active).await;
        }
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
