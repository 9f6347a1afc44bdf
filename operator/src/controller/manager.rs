//! The running set of binding controllers: reconcile bindings as a
//! [`Lifecycle`] of the binding loader. ConfigMaps labelled
//! `gantry.dev/plugin`, each version prepared (fetched, compiled, its
//! `validate-config` run) off the loop, swapped in atomically, and one
//! kube-runtime controller per binding started (its events routed by
//! [`mappers`]) and stopped. A version that fails any check never
//! replaces a working one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::DynamicObject;
use kube::runtime::Controller;
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::events::Reporter;
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::context::{BindingContext, Current};
use super::mappers;
use super::reconcile::{error_policy, reconcile};
use super::rollout::ShadowReport;
use super::spec::{
    self, BINDING_KEY, BINDING_LABEL, BindingSpec, DIGEST_ANNOTATION, SOURCE_ANNOTATION,
};
use super::watches::{CacheTask, Watches};
use super::{Metrics, OperatorOptions, ReconcileError, Shared};
use crate::delivery::loader::{self, Installed, Lifecycle, PendingPlugin, Refusal};
use crate::delivery::source::{Fetcher, SourceSpec};
use gantry_kube::recorder::Recorder;
use gantry_sandbox::runtime::{ReconcilerPlugin, Runtime};

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
    options.readiness.set_leading(options.leading.clone());
    let fetcher = Fetcher::new(options.plugin_sources.clone());
    let namespace = options.namespace.clone();
    let leading = options.leading.clone();
    let policy_changes = options.policies.subscribe();
    let shared = Arc::new(Shared::new(options, metrics));
    let bindings = Bindings {
        client: client.clone(),
        runtime,
        shared,
        recorder: recorder.clone(),
        controllers: HashMap::new(),
        stopping: JoinSet::new(),
        leading,
        policy_changes,
    };
    loader::run(client, &namespace, bindings, fetcher, recorder, shutdown).await
}

/// The binding and the component of the version a ConfigMap holds.
pub(crate) fn read_binding(
    cm: &k8s_openapi::api::core::v1::ConfigMap,
) -> Result<(BindingSpec, crate::delivery::envelope::Component), Refusal> {
    loader::read::<Bindings>(cm)
}

/// The reconcile bindings in service, one controller each.
struct Bindings {
    client: Client,
    runtime: Runtime,
    shared: Arc<Shared>,
    recorder: Recorder,
    /// By ConfigMap name.
    controllers: HashMap<String, Active>,
    /// Controllers told to stop, draining their in-flight reconciles
    /// without holding up the loop.
    stopping: JoinSet<()>,
    leading: Option<watch::Receiver<bool>>,
    policy_changes: watch::Receiver<u64>,
}

/// A binding in service.
struct Active {
    spec: Arc<BindingSpec>,
    ctx: Arc<BindingContext>,
    reconcile_all: mpsc::UnboundedSender<()>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    /// Keeps the caches current while the binding serves.
    _caches: CacheTask,
}

/// A version ready to go into service.
pub(crate) struct Ready {
    spec: Arc<BindingSpec>,
    plugin: Arc<ReconcilerPlugin>,
    source: Option<String>,
    /// What its shadow run found, if it had one.
    shadow: Option<String>,
    /// Its own caches, when it watches other kinds than the version
    /// serving (or none serves).
    watches: Option<Watches>,
}

/// What the bindings react to besides their ConfigMaps.
pub(crate) enum Signal {
    /// This replica became the leader (or stopped being it).
    Leading,
    /// An admission policy came, went or changed.
    Policies,
    /// A controller told to stop has stopped.
    Stopped,
}

/// Whether `spec` needs a claim `other` (of ConfigMap `other_cm`) holds:
/// its parent kind, in any version, or its name.
fn claim_conflict(spec: &BindingSpec, other_cm: &str, other: &BindingSpec) -> Option<Refusal> {
    if other.parent.same_kind(&spec.parent) {
        return Some(
            Refusal::new(
                "ParentKindClaimed",
                format!(
                    "{} is already reconciled by binding {} (ConfigMap {other_cm}, as {}); it is tried again when that binding goes",
                    spec.parent, other.name, other.parent
                ),
            )
            .claimed(),
        );
    }
    if other.name == spec.name {
        return Some(
            Refusal::new(
                "BindingNameTaken",
                format!(
                    "binding name {} is already used by ConfigMap {other_cm}; it is tried again when that binding goes",
                    spec.name
                ),
            )
            .claimed(),
        );
    }
    None
}

impl Lifecycle for Bindings {
    type Spec = BindingSpec;
    type Ready = Ready;
    type Signal = Signal;

    const LABEL: &'static str = BINDING_LABEL;
    const DOCUMENT_KEY: &'static str = BINDING_KEY;
    const DIGEST_ANNOTATION: &'static str = DIGEST_ANNOTATION;
    const SOURCE_ANNOTATION: &'static str = SOURCE_ANNOTATION;
    const FIELD_MANAGER: &'static str = "gantry";
    const ACTION: &'static str = "LoadPlugin";
    const INVALID: &'static str = "InvalidBinding";
    const LOADED: &'static str = "PluginLoaded";
    const NOUN: &'static str = "binding";

    fn parse(text: &str) -> Result<BindingSpec, String> {
        spec::parse_spec(text).map_err(|e| e.to_string())
    }

    fn name(spec: &BindingSpec) -> &str {
        &spec.name
    }

    fn component(spec: &BindingSpec) -> (Option<&SourceSpec>, Option<&str>) {
        (spec.source.as_ref(), spec.sha256.as_deref())
    }

    fn conflict(spec: &BindingSpec, other_cm: &str, other: &BindingSpec) -> Option<Refusal> {
        claim_conflict(spec, other_cm, other)
    }

    fn prepare(
        &self,
        cm_name: &str,
        spec: Arc<BindingSpec>,
        plugin: PendingPlugin,
    ) -> impl Future<Output = Result<Ready, Refusal>> + Send + 'static {
        let runtime = self.runtime.clone();
        let metrics = self.shared.metrics.clone();
        // The version serving: the new one is shadow-run against it, on
        // its caches when it watches the same kinds, else on caches of its
        // own, built now and handed to its controller.
        let serving = self.controllers.get(cm_name);
        let reuse = serving.is_some_and(|a| a.spec.same_watches(&spec));
        let running = serving.map(|a| a.ctx.clone());
        let starter = (!reuse).then(|| {
            (
                self.client.clone(),
                self.recorder.clone(),
                self.shared.clone(),
            )
        });
        async move {
            let remote = plugin.is_remote();
            let fetch_started = std::time::Instant::now();
            let fetched = plugin.fetch().await;
            if remote {
                metrics.record_fetch(&spec.name, fetched.is_ok(), fetch_started.elapsed());
            }
            let bytes = fetched?;
            let failed = |e: String| Refusal::new("PluginLoadFailed", e);
            let name = spec.name.clone();
            let component = bytes.component;
            let plugin = tokio::task::spawn_blocking(move || {
                runtime.load_reconciler_from(&name, &component)
            })
            .await
            .map_err(|e| failed(e.to_string()))?
            .map_err(|e| failed(e.to_string()))?;
            if plugin.imports_http() && spec.capabilities.http.is_none() {
                return Err(Refusal::new(
                    "CapabilityNotGranted",
                    format!(
                        "the plugin imports {} but the binding grants no capabilities.http",
                        gantry_sandbox::contract::names::HTTP_INTERFACE
                    ),
                ));
            }
            plugin
                .validate_config(spec.config.clone(), spec.call_limits())
                .await
                .map_err(|e| Refusal::new("InvalidConfig", e.to_string()))?;
            let watches = match starter {
                Some((client, recorder, shared)) => {
                    let current = Current {
                        plugin: plugin.clone(),
                        spec: spec.clone(),
                    };
                    Some(Watches::start(&client, spec.clone(), current, recorder, shared).await?)
                }
                None => None,
            };
            let shadow = if spec.rollout.shadow {
                let shadow_started = std::time::Instant::now();
                let report = shadow(watches.as_ref(), running, &plugin, &spec).await;
                if let Some(report) = &report {
                    metrics.record_shadow(&spec.name, report, shadow_started.elapsed());
                    if let Some(why) = report.refusal(&spec.rollout) {
                        let refusal = Refusal::new("ShadowRunFailed", why);
                        return Err(if report.retry_when_judged(&spec.rollout) {
                            refusal.transient()
                        } else {
                            refusal
                        });
                    }
                }
                Some(report.map_or_else(
                    || "shadow run skipped: the caches did not sync in time".to_string(),
                    |r| r.summary(),
                ))
            } else {
                None
            };
            Ok(Ready {
                spec,
                plugin,
                source: bytes.source,
                shadow,
                watches,
            })
        }
    }

    async fn install(&mut self, cm_name: &str, ready: Ready) -> Result<Installed, Refusal> {
        let Ready {
            spec,
            plugin,
            source,
            shadow,
            watches,
        } = ready;
        let current = Current {
            plugin: plugin.clone(),
            spec: spec.clone(),
        };
        let swapped = self.controllers.contains_key(cm_name);
        match self.controllers.get_mut(cm_name) {
            Some(active) if active.spec.same_watches(&spec) => {
                // Atomic swap: in-flight reconciles keep the version they
                // started with; every parent is reconciled with the new one.
                active.ctx.swap(current);
                active.spec = spec.clone();
                let _ = active.reconcile_all.send(());
            }
            _ => {
                let watches = if let Some(watches) = watches {
                    watches
                } else {
                    let (client, recorder) = (&self.client, self.recorder.clone());
                    Watches::start(client, spec.clone(), current, recorder, self.shared.clone())
                        .await?
                };
                let active = Self::start(spec.clone(), watches);
                super::permissions::check_in_background(active.ctx.clone(), cm_name.to_string());
                if let Some(old) = self.controllers.insert(cm_name.to_string(), active) {
                    self.stopping.spawn(stop(old));
                }
            }
        }
        self.shared
            .metrics
            .record_plugin_load(&spec.name, true, swapped);
        // The metrics of versions no longer in service.
        self.shared
            .metrics
            .capabilities()
            .retire(&spec.name, Some(plugin.digest()));
        self.publish();
        tracing::info!(configmap = %cm_name, binding = %spec.name, digest = %plugin.digest(), "plugin in service");
        let from = source
            .as_deref()
            .map(|s| format!(" from {s}"))
            .unwrap_or_default();
        Ok(Installed {
            digest: plugin.digest().to_string(),
            message: format!(
                "plugin sha256:{}{from} in service for {}{}",
                plugin.digest(),
                spec.parent,
                shadow.map(|s| format!(" ({s})")).unwrap_or_default()
            ),
            source,
        })
    }

    async fn retire(&mut self, cm_name: &str) {
        if let Some(active) = self.controllers.remove(cm_name) {
            tracing::info!(binding = %active.spec.name, "its parents are no longer reconciled (nothing is deleted)");
            self.shared
                .metrics
                .capabilities()
                .retire(&active.spec.name, None);
            // Draining its reconciles and letting go of its parents must
            // not hold up other bindings.
            let ctx = active.ctx.clone();
            self.stopping.spawn(async move {
                stop(active).await;
                let_go_of_parents(&ctx).await;
            });
        }
        self.publish();
    }

    fn refused(&mut self, cm_name: &str, spec: Option<&BindingSpec>) {
        let name = spec.map_or(cm_name, |s| s.name.as_str());
        self.shared.metrics.record_plugin_load(name, false, false);
    }

    fn settled(&mut self) {
        self.shared.metrics.set_ready(true);
        self.shared.options.readiness.set_loaded(true);
    }

    async fn signal(&mut self) -> Signal {
        let leading = async {
            match &mut self.leading {
                Some(rx) => rx.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Ok(()) = leading => Signal::Leading,
            Ok(()) = self.policy_changes.changed() => Signal::Policies,
            Some(_) = self.stopping.join_next(), if !self.stopping.is_empty() => Signal::Stopped,
            else => std::future::pending().await,
        }
    }

    async fn on_signal(&mut self, signal: Signal) {
        match signal {
            Signal::Leading if self.shared.leading() => {
                tracing::info!("leading: reconciling every parent");
                for active in self.controllers.values() {
                    let _ = active.reconcile_all.send(());
                }
            }
            // Parents whose children pass guardrail policies are judged again.
            Signal::Policies => {
                for active in self.controllers.values() {
                    if !active.spec.guardrail_policies.is_empty() {
                        let _ = active.reconcile_all.send(());
                    }
                }
            }
            Signal::Leading | Signal::Stopped => {}
        }
    }

    async fn shutdown(&mut self) {
        self.shared.metrics.set_ready(false);
        self.shared.options.readiness.set_loaded(false);
        let all: Vec<Active> = self.controllers.drain().map(|(_, a)| a).collect();
        futures::future::join_all(all.into_iter().map(stop)).await;
        while self.stopping.join_next().await.is_some() {}
    }
}

impl Bindings {
    /// Tell the metrics and the readiness probe which bindings serve.
    fn publish(&self) {
        self.shared
            .metrics
            .set_active_bindings(self.controllers.len());
        self.shared.options.readiness.set_bindings(
            self.controllers
                .values()
                .map(|a| (a.spec.name.clone(), a.ctx.clone())),
        );
    }

    /// Start the controller of `spec` over `watches`: it reconciles every
    /// cached parent, then each one whose parent, children or related
    /// objects change.
    fn start(spec: Arc<BindingSpec>, watches: Watches) -> Active {
        let ctx = watches.ctx.clone();
        let attached = watches.attach();
        // A parent's events that are our own writes, or that come during
        // its reconcile, are judged by its ledger (see `mappers`).
        let news = mappers::parent_changed(ctx.clone());
        let parents = attached
            .parents
            .try_filter(move |parent| std::future::ready(news(parent)));
        let mut controller =
            Controller::for_stream_with(parents, ctx.parents.clone(), ctx.parent.resource.clone());
        for (kind, changes) in ctx.children.iter().zip(attached.children) {
            let mapper = mappers::child_mapper(ctx.clone(), kind.info.clone());
            controller =
                controller.watches_stream_with(changes, mapper, kind.info.resource.clone());
        }
        for (index, (kind, changes)) in ctx.related.iter().zip(attached.related).enumerate() {
            let mapper = mappers::related_mapper(ctx.clone(), index);
            controller =
                controller.watches_stream_with(changes, mapper, kind.info.resource.clone());
        }

        let (reconcile_all, requests) = mpsc::unbounded_channel::<()>();
        let requests = futures::stream::unfold(requests, |mut rx| async move {
            rx.recv().await.map(|()| ((), rx))
        });
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let name = spec.name.clone();
        // kube-runtime's runner keeps what exceeds its bound in a hash set
        // and takes from it in no order, which under load leaves some
        // parents waiting far longer than others. So its bound is wider
        // than the binding's slots, which are taken in order (`reconcile`);
        // a parent waiting for one is queued in its ledger, so its changes
        // do not reach the runner meanwhile.
        let bound = u16::try_from(ctx.runner_bound).unwrap_or(u16::MAX);
        let run = controller
            .with_config(ControllerConfig::default().concurrency(bound))
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
        // Changes seen before the controller was attached are not
        // replayed: every cached parent is reconciled to start.
        let _ = reconcile_all.send(());
        Active {
            spec,
            ctx,
            reconcile_all,
            stop: Some(stop_tx),
            task,
            _caches: attached.caches,
        }
    }
}

/// How long a new version's own caches may take to sync before its shadow
/// run is skipped.
const SHADOW_SYNC_TIMEOUT: Duration = Duration::from_mins(1);

/// Shadow-run `plugin` (with `spec`) on its own `watches` if it has them
/// (else on the running version's caches), against the running version;
/// `None` when the caches are not synced.
async fn shadow(
    watches: Option<&Watches>,
    running: Option<Arc<BindingContext>>,
    plugin: &Arc<ReconcilerPlugin>,
    spec: &BindingSpec,
) -> Option<ShadowReport> {
    let running = running.filter(|ctx| ctx.caches_synced());
    let candidate = match watches {
        Some(watches) => watches
            .synced(SHADOW_SYNC_TIMEOUT)
            .await
            .then(|| watches.ctx.clone()),
        None => running.clone(),
    };
    let Some(candidate) = candidate else {
        tracing::warn!(binding = %spec.name, "caches not synced: the new version serves without a shadow run");
        return None;
    };
    Some(super::rollout::shadow_run(&candidate, plugin, spec, running.as_deref()).await)
}

/// Stop a controller: no new reconciles; in-flight ones may finish (up to
/// the reconcile timeout, the longest one may take). Requeues scheduled for
/// later are dropped.
async fn stop(mut active: Active) {
    if let Some(stop) = active.stop.take() {
        let _ = stop.send(());
    }
    let in_flight = active.ctx.in_flight();
    let grace = active.ctx.shared.options.reconcile_timeout;
    let deadline = tokio::time::Instant::now() + grace;
    while !active.task.is_finished()
        && active.ctx.in_flight() > 0
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let abandoned = active.ctx.in_flight();
    active.task.abort();
    let _ = (&mut active.task).await;
    tracing::info!(
        binding = %active.spec.name,
        in_flight,
        finished = in_flight.saturating_sub(abandoned),
        abandoned,
        "binding stopped"
    );
}

/// Parents written to at once when a binding is deleted.
const LET_GO_CONCURRENCY: usize = 8;

/// The binding of `ctx` was deleted: on each of its parents (that this
/// replica reconciles), remove its finalizer, which nothing would remove
/// any more, and say `Synced=Unknown` (`BindingRemoved`), so that no
/// parent keeps claiming to be reconciled. Children are left as they are.
async fn let_go_of_parents(ctx: &BindingContext) {
    if !ctx.shared.leading() {
        return;
    }
    let finalizer = ctx.spec.finalizer();
    let digest = ctx.current().plugin.digest().to_string();
    let parents: Vec<DynamicObject> = ctx
        .parents
        .state()
        .into_iter()
        .filter(|p| {
            ctx.shared
                .options
                .shard
                .owns(&super::context::object_key(p.as_ref()))
        })
        .map(|p| p.to_object(&ctx.parent.resource))
        .collect();
    futures::stream::iter(parents)
        .for_each_concurrent(LET_GO_CONCURRENCY, |parent| {
            let (finalizer, digest) = (&finalizer, &digest);
            async move {
                let Some(parent) = release_fresh(ctx, &parent, finalizer).await else {
                    return;
                };
                let outcome = super::status::Outcome {
                    plugin_status: None,
                    conditions: &[],
                    synced: super::status::binding_removed(&ctx.name),
                    observed: false,
                    digest,
                };
                if let Err(e) = super::status::write_status(ctx, &parent, outcome).await {
                    tracing::debug!(binding = %ctx.name, error = %e, "could not mark a parent as no longer reconciled");
                }
            }
        })
        .await;
}

/// Tries at removing a deleted binding's finalizer from one parent.
const LET_GO_ATTEMPTS: usize = 5;

/// Remove `finalizer` from the live `parent`, read afresh from the API
/// server: the binding's caches stop with it and may miss its last
/// reconcile's writes (the finalizer it just added, a newer
/// resourceVersion), and nothing would remove the finalizer later. A
/// conflict reads it again. The parent as last read, `None` when it is gone
/// or could not be read.
async fn release_fresh(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizer: &str,
) -> Option<DynamicObject> {
    let api = ctx.parent.api(&ctx.client, parent.namespace().as_deref());
    let name = parent.name_any();
    let mut attempts = 0;
    loop {
        let live = match api.get_opt(&name).await {
            Ok(live) => live?,
            Err(e) => {
                tracing::warn!(binding = %ctx.name, parent = %name, error = %e, "could not read a parent to remove its finalizer");
                return None;
            }
        };
        attempts += 1;
        match super::finalizer::release(ctx, &live, finalizer, "was deleted").await {
            Err(ReconcileError::Kube(kube::Error::Api(e)))
                if e.code == 409 && attempts < LET_GO_ATTEMPTS => {}
            Err(e) => {
                tracing::warn!(binding = %ctx.name, parent = %name, error = %e, "could not remove the finalizer of a parent");
                return Some(live);
            }
            Ok(()) => return Some(live),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, api_version: &str) -> BindingSpec {
        spec::parse_spec(&format!(
            "name: {name}\nparent: {{apiVersion: {api_version}, kind: Widget}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_parent_kind_is_claimed_in_every_version() {
        let first = spec("one", "example.com/v1");
        let conflict = claim_conflict(&spec("two", "example.com/v2"), "first", &first).unwrap();
        assert_eq!(conflict.reason, "ParentKindClaimed");
        assert!(conflict.claimed, "tried again when the claim goes");
        assert!(
            conflict.message.contains("binding one (ConfigMap first"),
            "{}",
            conflict.message
        );
        // Another group's Widget is another kind.
        assert!(claim_conflict(&spec("two", "other.com/v1"), "first", &first).is_none());
        let taken = claim_conflict(&spec("one", "other.com/v1"), "first", &first).unwrap();
        assert_eq!(taken.reason, "BindingNameTaken");
    }
}
