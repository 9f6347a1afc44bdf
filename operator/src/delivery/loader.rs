//! The one way a plugin in a ConfigMap goes into service, for every kind of
//! binding (a [`Lifecycle`]: reconcile bindings, admission policies).
//!
//! The loader watches the ConfigMaps with the kind's label. Each new
//! version (its content changed, not merely its metadata) is read
//! ([`envelope`](super::envelope)), checked against the claims of the
//! versions in service or in preparation, then prepared in a task of its
//! own (fetched if remote, compiled, its config checked) so that no version
//! holds up another, and finally installed. A version that fails any step is
//! refused with a Warning Event and never replaces the one serving. A
//! refusal whose cause may pass is tried again every [`RETRY_EVERY`]; one
//! refused for a claim is tried again when a claim is given up. After a
//! restart, the versions found are taken oldest first, so the oldest
//! binding of a claim keeps it.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::envelope::{self, Component, PluginBytes, content_of};
use super::source::{Fetcher, SourceSpec};
use gantry_kube::recorder::Recorder;

/// How often versions refused for a cause that may pass (a kind not served
/// yet, a registry down) are tried again.
pub(crate) const RETRY_EVERY: Duration = Duration::from_secs(5);

/// Why a version was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The Event reason (`InvalidBinding`, `PluginLoadFailed`, …).
    pub reason: &'static str,
    /// What is wrong, for the Event and the log.
    pub message: String,
    /// The cause may pass by itself: try again every [`RETRY_EVERY`].
    pub transient: bool,
    /// Another version holds a claim this one needs (a parent kind, a
    /// name): try again when a claim is given up.
    pub claimed: bool,
}

impl Refusal {
    /// A refusal for good (until the ConfigMap changes).
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            reason,
            message: message.into(),
            transient: false,
            claimed: false,
        }
    }

    /// The same refusal, tried again every [`RETRY_EVERY`].
    #[must_use]
    pub fn transient(self) -> Self {
        Refusal {
            transient: true,
            ..self
        }
    }

    /// The same refusal, tried again when a claim is given up.
    #[must_use]
    pub fn claimed(self) -> Self {
        Refusal {
            claimed: true,
            ..self
        }
    }
}

/// What a version put into service says of itself: the loader writes it
/// to the ConfigMap (annotations) and into the loaded Event.
pub struct Installed {
    /// sha256 of the component in service.
    pub digest: String,
    /// Where it was fetched from (an OCI tag resolved), if remote.
    pub source: Option<String>,
    /// The loaded Event's message.
    pub message: String,
}

/// One kind of binding: its ConfigMap format and what putting a version
/// into service and out of it means. The loader owns the rest.
pub trait Lifecycle: Send + 'static {
    /// The parsed document.
    type Spec: Send + Sync + 'static;
    /// A version made ready off the loop: plugin loaded and its config
    /// accepted.
    type Ready: Send + 'static;
    /// Something of the kind's own to react to between ConfigMap events.
    type Signal: Send;

    /// The label that marks its ConfigMaps.
    const LABEL: &'static str;
    /// The `data` key of its document.
    const DOCUMENT_KEY: &'static str;
    /// The annotation the loader sets to the digest in service.
    const DIGEST_ANNOTATION: &'static str;
    /// The annotation the loader sets to where a remote component came from.
    const SOURCE_ANNOTATION: &'static str;
    /// Field manager of the loader's annotations.
    const FIELD_MANAGER: &'static str;
    /// The Events' action.
    const ACTION: &'static str;
    /// The Event reason of a document that does not parse or check.
    const INVALID: &'static str;
    /// The Event reason of a version put into service.
    const LOADED: &'static str;
    /// What it is called in logs (`binding`, `policy`).
    const NOUN: &'static str;

    /// Parse and check the document.
    fn parse(text: &str) -> Result<Self::Spec, String>;
    /// The binding's own name (for logs and metrics).
    fn name(spec: &Self::Spec) -> &str;
    /// The component's source, if remote, and its pin.
    fn component(spec: &Self::Spec) -> (Option<&SourceSpec>, Option<&str>);
    /// Whether `spec` needs a claim that `other` (of ConfigMap `other_cm`)
    /// holds; the refusal says which.
    fn conflict(spec: &Self::Spec, other_cm: &str, other: &Self::Spec) -> Option<Refusal>;

    /// Make a version of ConfigMap `cm_name` ready: fetch its component
    /// through `plugin`, then load and check it (against the version
    /// serving, if the kind compares them). Runs in a task of its own.
    fn prepare(
        &self,
        cm_name: &str,
        spec: Arc<Self::Spec>,
        plugin: PendingPlugin,
    ) -> impl Future<Output = Result<Self::Ready, Refusal>> + Send + 'static;
    /// Put a ready version of ConfigMap `cm_name` into service, in place of
    /// the one serving, if any.
    fn install(
        &mut self,
        cm_name: &str,
        ready: Self::Ready,
    ) -> impl Future<Output = Result<Installed, Refusal>> + Send;
    /// Take the version of ConfigMap `cm_name` out of service.
    fn retire(&mut self, cm_name: &str) -> impl Future<Output = ()> + Send;
    /// A version was refused (`spec`, when its document parsed).
    fn refused(&mut self, cm_name: &str, spec: Option<&Self::Spec>);
    /// The versions found at start are settled: in service or refused.
    fn settled(&mut self);
    /// Wait for the next signal of the kind's own.
    fn signal(&mut self) -> impl Future<Output = Self::Signal> + Send;
    /// React to a signal.
    fn on_signal(&mut self, signal: Self::Signal) -> impl Future<Output = ()> + Send;
    /// The loader stops: take everything out of service.
    fn shutdown(&mut self) -> impl Future<Output = ()> + Send;
}

/// A version's component: at hand, or to fetch.
pub struct PendingPlugin {
    component: Component,
    pin: Option<String>,
    fetcher: Fetcher,
}

impl PendingPlugin {
    /// The `component` of a version pinned to `pin`, fetched (if remote)
    /// by `fetcher`.
    pub fn new(component: Component, pin: Option<String>, fetcher: Fetcher) -> Self {
        Self {
            component,
            pin,
            fetcher,
        }
    }

    /// Whether it is still to be fetched.
    pub fn is_remote(&self) -> bool {
        self.component.is_remote()
    }

    /// The component's bytes: at hand, or downloaded and checked against
    /// the pin (`PluginFetchFailed`, transient where a retry may help).
    pub async fn fetch(self) -> Result<PluginBytes, Refusal> {
        match self.component {
            Component::Inline(bytes) => Ok(bytes),
            Component::Remote(source) => {
                tracing::info!(%source, "fetching plugin");
                match self.fetcher.fetch(&source, self.pin.as_deref()).await {
                    Ok(fetched) => Ok(PluginBytes::fetched(fetched, &source)),
                    Err(e) => {
                        let refusal =
                            Refusal::new("PluginFetchFailed", format!("fetching {source}: {e}"));
                        Err(if e.is_transient() {
                            refusal.transient()
                        } else {
                            refusal
                        })
                    }
                }
            }
        }
    }
}

/// The document and the component of the version a ConfigMap holds.
pub(crate) fn read<L: Lifecycle>(cm: &ConfigMap) -> Result<(L::Spec, Component), Refusal> {
    let invalid = |message: String| Refusal::new(L::INVALID, message);
    let text = envelope::document(cm, L::DOCUMENT_KEY).map_err(|e| invalid(e.to_string()))?;
    let spec = L::parse(text).map_err(invalid)?;
    let (source, pin) = L::component(&spec);
    let source = envelope::check_source(source, pin.is_some())
        .map_err(|(field, message)| invalid(format!("{}: {field}: {message}", L::DOCUMENT_KEY)))?;
    let component = envelope::component(cm, L::DOCUMENT_KEY, source, pin)
        .map_err(|e| invalid(e.to_string()))?;
    Ok((spec, component))
}

/// Run the loader of `lifecycle` over the ConfigMaps of `namespace` until
/// `shutdown` completes; then take everything out of service.
pub(crate) async fn run<L: Lifecycle>(
    client: Client,
    namespace: &str,
    lifecycle: L,
    fetcher: Fetcher,
    recorder: Recorder,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let (prepared_tx, mut prepared_rx) = mpsc::unbounded_channel();
    let mut loader = Loader {
        lifecycle,
        api: api.clone(),
        recorder,
        fetcher,
        prepared_tx,
        active: HashMap::new(),
        refused: HashMap::new(),
        preparing: HashMap::new(),
        initial: None,
    };
    let mut events = watcher(api, watcher::Config::default().labels(L::LABEL))
        .default_backoff()
        .boxed();
    let mut found: Vec<ConfigMap> = Vec::new();
    let mut retry = tokio::time::interval(RETRY_EVERY);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            signal = loader.lifecycle.signal() => loader.lifecycle.on_signal(signal).await,
            _ = retry.tick() => loader.retry_refused().await,
            Some(done) = prepared_rx.recv() => loader.prepared(done).await,
            event = events.next() => match event {
                Some(Ok(watcher::Event::Init)) => found.clear(),
                Some(Ok(watcher::Event::InitApply(cm))) => found.push(cm),
                Some(Ok(watcher::Event::InitDone)) => loader.found(std::mem::take(&mut found)).await,
                Some(Ok(watcher::Event::Apply(cm))) => loader.upsert(cm).await,
                Some(Ok(watcher::Event::Delete(cm))) => loader.remove(&cm.name_any()).await,
                Some(Err(e)) => tracing::warn!(error = %e, "watching {}s failed; retrying", L::NOUN),
                None => break,
            },
        }
    }
    for (_, preparing) in loader.preparing.drain() {
        preparing.task.abort();
    }
    loader.lifecycle.shutdown().await;
    Ok(())
}

/// A version in service.
struct Active<S> {
    content: u64,
    spec: Arc<S>,
}

/// A refused version, kept to be tried again when its cause may pass.
struct Refused {
    content: u64,
    /// Tried again every [`RETRY_EVERY`].
    retry: Option<ConfigMap>,
    /// Tried again when a claim is given up.
    claimed: Option<ConfigMap>,
}

/// A version being made ready in a task of its own. It holds its claims
/// meanwhile, so that the first of two claimants still wins.
struct Preparing<S> {
    content: u64,
    spec: Arc<S>,
    remote: bool,
    task: JoinHandle<()>,
}

/// A preparation that finished.
struct Prepared<R> {
    cm: ConfigMap,
    content: u64,
    result: Result<R, Refusal>,
}

struct Loader<L: Lifecycle> {
    lifecycle: L,
    api: Api<ConfigMap>,
    recorder: Recorder,
    fetcher: Fetcher,
    prepared_tx: mpsc::UnboundedSender<Prepared<L::Ready>>,
    active: HashMap<String, Active<L::Spec>>,
    refused: HashMap<String, Refused>,
    preparing: HashMap<String, Preparing<L::Spec>>,
    /// After the first list: the inline versions found in it still being
    /// prepared (the lifecycle is settled when none is left; remote ones
    /// never hold that up).
    initial: Option<HashSet<String>>,
}

impl<L: Lifecycle> Loader<L> {
    /// The first list (or a relist): oldest first, so the oldest claimant
    /// wins; versions gone meanwhile are retired.
    async fn found(&mut self, mut found: Vec<ConfigMap>) {
        found.sort_by_key(|cm| cm.metadata.creation_timestamp.clone().map(|t| t.0));
        let seen: HashSet<String> = found.iter().map(ResourceExt::name_any).collect();
        for cm in found {
            self.upsert(cm).await;
        }
        let gone: Vec<String> = self
            .active
            .keys()
            .chain(self.preparing.keys())
            .chain(self.refused.keys())
            .filter(|name| !seen.contains(*name))
            .cloned()
            .collect();
        for name in gone {
            self.remove(&name).await;
        }
        self.initial = Some(
            self.preparing
                .iter()
                .filter(|(_, p)| !p.remote)
                .map(|(name, _)| name.clone())
                .collect(),
        );
        self.check_settled();
    }

    async fn upsert(&mut self, cm: ConfigMap) {
        if self.take(cm).await {
            self.release_claims().await;
        }
    }

    /// Take in a version; true when that gave up claims (it superseded a
    /// version in preparation).
    async fn take(&mut self, cm: ConfigMap) -> bool {
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
            return false; // metadata only, e.g. the loader's own annotations
        }
        // A newer version supersedes one being prepared, and an older
        // refused one.
        let superseded = self.preparing.remove(&name).map(|old| old.task.abort());
        self.refused.remove(&name);
        match read::<L>(&cm) {
            Ok((spec, component)) => {
                if let Some(conflict) = self.conflict(&name, &spec) {
                    self.refuse(&cm, content, Some(&spec), conflict).await;
                } else {
                    self.start_prepare(cm, content, Arc::new(spec), component);
                }
            }
            Err(refusal) => self.refuse(&cm, content, None, refusal).await,
        }
        superseded.is_some()
    }

    /// Who holds a claim `spec` needs: versions in service and in
    /// preparation of other ConfigMaps.
    fn conflict(&self, cm_name: &str, spec: &L::Spec) -> Option<Refusal> {
        let active = self.active.iter().map(|(n, a)| (n, &a.spec));
        let preparing = self.preparing.iter().map(|(n, p)| (n, &p.spec));
        active
            .chain(preparing)
            .filter(|(other, _)| *other != cm_name)
            .find_map(|(other, claimant)| L::conflict(spec, other, claimant))
    }

    fn start_prepare(
        &mut self,
        cm: ConfigMap,
        content: u64,
        spec: Arc<L::Spec>,
        component: Component,
    ) {
        let name = cm.name_any();
        let (_, pin) = L::component(&spec);
        let plugin = PendingPlugin {
            component,
            pin: pin.map(str::to_string),
            fetcher: self.fetcher.clone(),
        };
        let remote = plugin.is_remote();
        let work = self.lifecycle.prepare(&name, spec.clone(), plugin);
        let tx = self.prepared_tx.clone();
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
                spec,
                remote,
                task,
            },
        );
    }

    /// A preparation finished: put the version into service, unless a
    /// newer one superseded it meanwhile.
    async fn prepared(&mut self, done: Prepared<L::Ready>) {
        let name = done.cm.name_any();
        if self
            .preparing
            .get(&name)
            .is_none_or(|p| p.content != done.content)
        {
            return; // superseded or deleted meanwhile
        }
        let Some(preparing) = self.preparing.remove(&name) else {
            return;
        };
        let spec = preparing.spec;
        let result = match done.result {
            Ok(ready) => match self.conflict(&name, &spec) {
                Some(conflict) => Err(conflict),
                None => self.lifecycle.install(&name, ready).await,
            },
            Err(refusal) => Err(refusal),
        };
        // Settled before the annotation and Event are written: the version
        // may be serving already (a controller reconciling), and readiness
        // must not lag behind it by two API calls.
        if let Some(initial) = &mut self.initial {
            initial.remove(&name);
        }
        self.check_settled();
        match result {
            Ok(installed) => {
                let replaced = self.active.insert(
                    name.clone(),
                    Active {
                        content: done.content,
                        spec: spec.clone(),
                    },
                );
                tracing::debug!(configmap = %name, name = L::name(&spec), digest = %installed.digest, "{} version installed", L::NOUN);
                self.annotate(&name, &installed).await;
                self.event(&done.cm, EventType::Normal, L::LOADED, &installed.message)
                    .await;
                if replaced.is_some() {
                    // Its claims may differ from the new version's.
                    self.release_claims().await;
                }
            }
            Err(refusal) => {
                // Its claims are gone: versions waiting for them go first,
                // then this one is refused (and waits in turn, if it was
                // refused for a claim).
                self.release_claims().await;
                self.refuse(&done.cm, done.content, Some(&spec), refusal)
                    .await;
            }
        }
    }

    /// Record a refused version with a Warning Event; the version in
    /// service, if any, keeps serving.
    async fn refuse(
        &mut self,
        cm: &ConfigMap,
        content: u64,
        spec: Option<&L::Spec>,
        refusal: Refusal,
    ) {
        let name = cm.name_any();
        self.lifecycle.refused(&name, spec);
        let serving = if self.active.contains_key(&name) {
            "; the previous version keeps serving"
        } else {
            ""
        };
        tracing::warn!(configmap = %name, reason = refusal.reason, "{} refused: {}{serving}", L::NOUN, refusal.message);
        self.event(
            cm,
            EventType::Warning,
            refusal.reason,
            &format!("{}{serving}", refusal.message),
        )
        .await;
        self.refused.insert(
            name,
            Refused {
                content,
                retry: refusal.transient.then(|| cm.clone()),
                claimed: refusal.claimed.then(|| cm.clone()),
            },
        );
    }

    /// A claim was given up: try again the versions refused for one.
    async fn release_claims(&mut self) {
        let waiting: Vec<ConfigMap> = self
            .refused
            .values_mut()
            .filter_map(|r| r.claimed.take())
            .collect();
        for cm in waiting {
            self.refused.remove(&cm.name_any());
            // A refused version was not in preparation: taking it in again
            // gives up no claim.
            Box::pin(self.take(cm)).await;
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

    async fn remove(&mut self, cm_name: &str) {
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
            tracing::info!(
                configmap = cm_name,
                name = L::name(&active.spec),
                "{} deleted; out of service",
                L::NOUN
            );
            self.lifecycle.retire(cm_name).await;
            released = true;
        }
        if released {
            self.release_claims().await;
        }
        self.check_settled();
    }

    fn check_settled(&mut self) {
        if self.initial.as_ref().is_some_and(HashSet::is_empty) {
            self.initial = None;
            self.lifecycle.settled();
        }
    }

    /// Write the digest (and source) in service to the ConfigMap.
    async fn annotate(&self, cm_name: &str, installed: &Installed) {
        let mut annotations = json!({L::DIGEST_ANNOTATION: installed.digest});
        if let Some(source) = &installed.source {
            annotations[L::SOURCE_ANNOTATION] = json!(source);
        }
        let patch = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm_name, "annotations": annotations}
        });
        let params = PatchParams::apply(L::FIELD_MANAGER).force();
        if let Err(e) = self
            .api
            .patch(cm_name, &params, &Patch::Apply(&patch))
            .await
        {
            tracing::warn!(configmap = cm_name, error = %e, "could not annotate the {} with its digest", L::NOUN);
        }
    }

    async fn event(&self, cm: &ConfigMap, kind: EventType, reason: &str, message: &str) {
        config_map_event(&self.recorder, cm, L::ACTION, kind, reason, message).await;
    }
}

/// Publish an Event about a binding ConfigMap; its note is cut to
/// Kubernetes' 1 KiB.
pub(crate) async fn config_map_event(
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
