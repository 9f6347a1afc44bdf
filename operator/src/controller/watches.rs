//! A binding's caches: its kinds resolved through discovery, and a store
//! and a watch for the parent kind, each child kind and each related kind,
//! kept current by a task of their own. They are built before a version
//! serves, so that it can be shadow-run on every parent first, and a
//! controller then attaches to their events; `gantry plugin diff` and
//! `capture` build them the same way, with no controller.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt, TryStreamExt};
use kube::Client;
use kube::core::{GroupVersionKind, Selector};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Shared;
use super::cached::CachedObject;
use super::context::{BindingContext, ChildKind, Current, KindInfo, RelatedKind};
use super::spec::{BindingSpec, CHILD_LABEL, KindRef};
use crate::delivery::loader::Refusal;
use gantry_kube::recorder::Recorder;

/// Objects whose change may call for a reconcile, as a controller takes them.
pub type Changes = BoxStream<'static, Result<CachedObject, watcher::Error>>;

/// The caches of one binding, kept current until dropped.
pub struct Watches {
    /// The binding's context over these caches.
    pub ctx: Arc<BindingContext>,
    /// Set once a controller takes the changes; until then they are dropped.
    attached: Arc<AtomicBool>,
    receivers: Receivers,
    task: CacheTask,
}

/// The changes of each watched kind, once a controller is attached.
struct Receivers {
    parents: mpsc::UnboundedReceiver<CachedObject>,
    children: Vec<mpsc::UnboundedReceiver<CachedObject>>,
    related: Vec<mpsc::UnboundedReceiver<CachedObject>>,
}

/// Which cache a change came from.
#[derive(Clone, Copy)]
enum Source {
    Parent,
    Child(usize),
    Related(usize),
}

/// What a controller takes from [`Watches::attach`].
pub struct Attached {
    /// Changed parents.
    pub parents: Changes,
    /// Changed children, per child kind (in the binding's order).
    pub children: Vec<Changes>,
    /// Changed related objects, per related kind.
    pub related: Vec<Changes>,
    /// Keeps the caches current; dropping it stops them.
    pub caches: CacheTask,
}

/// The task that keeps a binding's caches current; aborted when dropped.
pub struct CacheTask(JoinHandle<()>);

impl Drop for CacheTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Watches {
    /// Resolve the kinds of `spec` and start its caches, with `current` as
    /// the version the context starts with.
    pub async fn start(
        client: &Client,
        spec: Arc<BindingSpec>,
        current: Current,
        recorder: Recorder,
        shared: Arc<Shared>,
    ) -> Result<Self, Refusal> {
        let parent = resolve(client, &spec.parent).await?;
        let mut child_infos = Vec::new();
        for child in &spec.children {
            child_infos.push(resolve(client, child).await?);
        }
        let mut related_infos = Vec::new();
        let scope = &shared.options.watch_scope;
        for related in &spec.related {
            if let Some(namespace) = related
                .namespace
                .as_deref()
                .filter(|ns| !scope.contains(ns))
            {
                return Err(Refusal::new(
                    "InvalidBinding",
                    format!(
                        "related {} is read from namespace {namespace}, which this operator does not watch (--watch-namespaces {})",
                        related.kind,
                        scope.describe()
                    ),
                ));
            }
            let selector = match &related.selector {
                Some(s) => Some(Selector::try_from(s.clone()).map_err(|e| {
                    Refusal::new(
                        "InvalidBinding",
                        format!("related {}: selector: {e}", related.kind),
                    )
                })?),
                None => None,
            };
            related_infos.push((
                related.clone(),
                resolve(client, &related.kind_ref()).await?,
                selector,
            ));
        }

        let writer =
            |info: &KindInfo| reflector::store::Writer::<CachedObject>::new(info.resource.clone());
        let parent_writer = writer(&parent);
        let parents_store = parent_writer.as_reader();
        let child_writers: Vec<_> = child_infos.iter().map(writer).collect();
        let related_writers: Vec<_> = related_infos.iter().map(|(_, i, _)| writer(i)).collect();
        let children: Vec<ChildKind> = child_infos
            .iter()
            .zip(&child_writers)
            .map(|(info, w)| ChildKind {
                info: info.clone(),
                store: w.as_reader(),
                owners: Arc::default(),
            })
            .collect();
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

        // Every watch feeds its store; the merged changes go to a
        // controller once one is attached.
        let mut streams: SelectAll<BoxStream<'static, (Source, ChangeResult)>> = SelectAll::new();
        let scope = shared.options.watch_scope.clone();
        let watch = |info: &KindInfo, config: watcher::Config| {
            super::scope::watch(client, &info.resource, info.namespaced, &config, &scope)
        };
        streams.push(tag(
            Source::Parent,
            reflector::reflector(parent_writer, watch(&parent, watcher::Config::default()))
                .applied_objects(),
        ));
        let child_selector = format!("{CHILD_LABEL}={}", spec.name);
        for (index, (kind, w)) in children.iter().zip(child_writers).enumerate() {
            let owners = kind.owners.clone();
            let config = watcher::Config::default().labels(&child_selector);
            let stream = reflector::reflector(w, watch(&kind.info, config))
                .inspect_ok(move |event| owners.observe(event))
                .touched_objects();
            streams.push(tag(Source::Child(index), stream));
        }
        for (index, ((_, info, selector), w)) in
            related_infos.iter().zip(related_writers).enumerate()
        {
            let config = match selector {
                Some(s) => watcher::Config::default().labels_from(s),
                None => watcher::Config::default(),
            };
            let stream = reflector::reflector(w, watch(info, config)).touched_objects();
            streams.push(tag(Source::Related(index), stream));
        }

        let (parent_tx, parents) = mpsc::unbounded_channel();
        let (child_tx, child_rx): (Vec<_>, Vec<_>) = (0..children.len())
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        let (related_tx, related_rx): (Vec<_>, Vec<_>) = (0..related_infos.len())
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        let attached = Arc::new(AtomicBool::new(false));
        let name = spec.name.clone();
        let forwarding = attached.clone();
        let task = tokio::spawn(async move {
            while let Some((source, change)) = streams.next().await {
                let object = match change {
                    Ok(object) => object,
                    Err(e) => {
                        tracing::debug!(binding = %name, error = %e, "a watch failed; it is retried with backoff");
                        continue;
                    }
                };
                if !forwarding.load(Ordering::Acquire) {
                    continue;
                }
                let sender = match source {
                    Source::Parent => &parent_tx,
                    Source::Child(i) => &child_tx[i],
                    Source::Related(i) => &related_tx[i],
                };
                let _ = sender.send(object);
            }
        });

        let ctx = Arc::new(BindingContext::new(
            spec,
            current,
            client.clone(),
            parent,
            parents_store,
            children,
            related,
            recorder,
            shared,
        ));
        Ok(Self {
            ctx,
            attached,
            receivers: Receivers {
                parents,
                children: child_rx,
                related: related_rx,
            },
            task: CacheTask(task),
        })
    }

    /// Wait until every cache has its first full list; `false` after
    /// `timeout`.
    pub async fn synced(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.ctx.caches_synced() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Hand the changes to a controller. Changes seen before are not
    /// replayed: the controller reconciles every cached parent to start.
    pub fn attach(self) -> Attached {
        self.attached.store(true, Ordering::Release);
        let Receivers {
            parents,
            children,
            related,
        } = self.receivers;
        Attached {
            parents: changes(parents),
            children: children.into_iter().map(changes).collect(),
            related: related.into_iter().map(changes).collect(),
            caches: self.task,
        }
    }
}

type ChangeResult = Result<CachedObject, watcher::Error>;

fn tag(
    source: Source,
    stream: impl Stream<Item = ChangeResult> + Send + 'static,
) -> BoxStream<'static, (Source, ChangeResult)> {
    stream.map(move |change| (source, change)).boxed()
}

fn changes(receiver: mpsc::UnboundedReceiver<CachedObject>) -> Changes {
    futures::stream::unfold(receiver, |mut rx| async move {
        rx.recv().await.map(|object| (Ok(object), rx))
    })
    .boxed()
}

/// The served resource of `kind`, through discovery (`UnknownKind`,
/// transient, when the API server does not serve it).
pub async fn resolve(client: &Client, kind: &KindRef) -> Result<KindInfo, Refusal> {
    let (group, version) = match kind.api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", kind.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, caps)) => Ok(KindInfo {
            kind: kind.clone(),
            resource: Arc::new(resource),
            namespaced: caps.scope == kube::discovery::Scope::Namespaced,
            has_status: caps.subresources.iter().any(|(r, _)| r.plural == "status"),
        }),
        Err(e) => Err(Refusal::new(
            "UnknownKind",
            format!("kind {kind} is not served by the API server: {e}"),
        )
        .transient()),
    }
}

/// `parent` (of another binding context) as cached in `ctx`, if it is.
pub fn same_parent(
    ctx: &BindingContext,
    parent: &impl kube::Resource,
) -> Option<Arc<CachedObject>> {
    use kube::ResourceExt;
    let reference = ObjectRef::new_with(&parent.name_any(), ctx.parent.resource.clone());
    let reference = match parent.namespace() {
        Some(ns) => reference.within(&ns),
        None => reference,
    };
    ctx.parents.get(&reference)
}
