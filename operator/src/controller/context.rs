//! What one binding's controller shares between reconciles: the plugin in
//! service (swappable), resolved kinds with their caches, and the ledger
//! of each parent ([`Ledgers`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use gantry_kube::recorder::Recorder;
use kube::api::{ApiResource, DynamicObject};
use kube::core::{Selector, SelectorExt};
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;

use super::Shared;
use super::cached::CachedObject;
use super::ledger::Ledgers;
pub use super::owners::OwnerIndex;
use super::spec::{BindingSpec, CHILD_LABEL, KindRef, RelatedSpec};
use gantry_sandbox::runtime::ReconcilerPlugin;

/// A kind resolved through discovery.
#[derive(Debug, Clone)]
pub struct KindInfo {
    /// apiVersion/kind as the binding names it.
    pub kind: KindRef,
    /// Group, version, plural (shared by every cache key of the kind).
    pub resource: Arc<ApiResource>,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a `/status` subresource.
    pub has_status: bool,
}

impl KindInfo {
    /// An API handle in `namespace` (ignored for cluster-scoped kinds).
    pub fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &*self.resource),
            _ => Api::all_with(client.clone(), &*self.resource),
        }
    }

    /// `obj` as JSON with `apiVersion` and `kind` set (list items may lack them).
    pub fn to_json(&self, obj: &DynamicObject) -> Value {
        let mut value = serde_json::to_value(obj).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("apiVersion".into(), self.kind.api_version.clone().into());
            map.insert("kind".into(), self.kind.kind.clone().into());
        }
        value
    }
}

/// A child kind with its cache (objects labelled with this binding).
pub struct ChildKind {
    /// The kind.
    pub info: KindInfo,
    /// Cached children of every parent of the binding.
    pub store: Store<CachedObject>,
    /// The cached children by their controller's UID.
    pub owners: Arc<OwnerIndex>,
}

/// A related kind with its cache.
pub struct RelatedKind {
    /// What the binding declares.
    pub spec: RelatedSpec,
    /// The kind.
    pub info: KindInfo,
    /// Label selector, parsed.
    pub selector: Option<Selector>,
    /// Cached objects.
    pub store: Store<CachedObject>,
}

impl RelatedKind {
    /// Whether `obj` is related to a parent in `parent_namespace`.
    pub fn matches(&self, obj: &CachedObject, parent_namespace: Option<&str>) -> bool {
        if self.info.namespaced {
            let wanted = self.spec.namespace.as_deref().or(parent_namespace);
            if wanted.is_some() && obj.namespace().as_deref() != wanted {
                return false;
            }
        }
        if !self.spec.names.is_empty() && !self.spec.names.iter().any(|n| *n == obj.name_any()) {
            return false;
        }
        self.selector
            .as_ref()
            .is_none_or(|s| s.matches(obj.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())))
    }
}

/// The plugin version in service and the spec it came with.
pub struct Current {
    /// The plugin.
    pub plugin: Arc<ReconcilerPlugin>,
    /// The binding (config and limits are read from here on every call).
    pub spec: Arc<BindingSpec>,
}

/// Everything one binding's controller shares.
pub struct BindingContext {
    /// The binding's name.
    pub name: String,
    /// The spec the watches were built from.
    pub spec: Arc<BindingSpec>,
    current: RwLock<Arc<Current>>,
    /// API client.
    pub client: Client,
    /// The parent kind.
    pub parent: KindInfo,
    /// Cache of parents.
    pub parents: Store<CachedObject>,
    /// Child kinds.
    pub children: Vec<ChildKind>,
    /// Related kinds.
    pub related: Vec<RelatedKind>,
    /// Scope of each child kind, for the guardrails.
    pub child_scopes: HashMap<KindRef, bool>,
    /// Event recorder.
    pub recorder: Recorder,
    /// Operator-wide state.
    pub shared: Arc<Shared>,
    /// What the controller remembers of each parent.
    pub ledgers: Ledgers,
    /// The binding's reconciles at once, taken first come, first served.
    pub slots: tokio::sync::Semaphore,
    /// How many reconciles kube-runtime's runner may hold: the slots and
    /// [`WAITING_IN_ORDER`] waiting for one.
    pub runner_bound: usize,
    in_flight: std::sync::atomic::AtomicUsize,
}

/// How many of a binding's reconciles wait for a slot in the order they
/// became due. kube-runtime's runner polls every reconcile it holds each
/// time one of them ends, so it holds no more than these; what is due
/// beyond them waits in the runner's pending set, taken in no order.
pub const WAITING_IN_ORDER: usize = 1024;

/// Counts a reconcile as in flight while alive.
pub struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `namespace/name` (or `name`) of an object.
pub fn object_key(obj: &impl Resource) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

impl BindingContext {
    /// Assemble the context; `current` is the plugin to start with.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        spec: Arc<BindingSpec>,
        current: Current,
        client: Client,
        parent: KindInfo,
        parents: Store<CachedObject>,
        children: Vec<ChildKind>,
        related: Vec<RelatedKind>,
        recorder: Recorder,
        shared: Arc<Shared>,
    ) -> Self {
        let child_scopes = children
            .iter()
            .map(|c| (c.info.kind.clone(), c.info.namespaced))
            .collect();
        // The binding's own bound, under the operator's.
        let ceiling = shared.options.concurrency.max(1);
        let slots = spec
            .max_concurrent_reconciles
            .map_or(ceiling, |n| usize::from(n).min(ceiling));
        Self {
            name: spec.name.clone(),
            spec,
            current: RwLock::new(Arc::new(current)),
            client,
            parent,
            parents,
            children,
            related,
            child_scopes,
            recorder,
            shared,
            ledgers: Ledgers::default(),
            slots: tokio::sync::Semaphore::new(slots),
            runner_bound: slots + WAITING_IN_ORDER,
            in_flight: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Mark a reconcile in flight until the guard drops.
    pub fn start_reconcile(&self) -> InFlight<'_> {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(&self.in_flight)
    }

    /// Reconciles running now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The plugin and spec in service now; a reconcile keeps the version it
    /// started with even if a swap happens meanwhile.
    pub fn current(&self) -> Arc<Current> {
        self.current.read().unwrap().clone()
    }

    /// Put a new plugin version (and config/limits) into service.
    pub fn swap(&self, current: Current) {
        *self.current.write().unwrap() = Arc::new(current);
    }

    /// Children of the parent with `uid`, from the caches.
    pub fn observed_children(&self, uid: &str) -> Vec<(usize, Arc<CachedObject>)> {
        let mut out = Vec::new();
        for (index, child) in self.children.iter().enumerate() {
            for key in child.owners.owned_by(uid, &child.info.resource) {
                if let Some(obj) = child.store.get(&key)
                    && is_our_child(obj.as_ref(), &self.name, uid)
                {
                    out.push((index, obj));
                }
            }
        }
        out
    }

    /// Related objects of a parent in `namespace`, from the caches.
    pub fn related_objects(&self, namespace: Option<&str>) -> Vec<Value> {
        let mut out = Vec::new();
        for related in &self.related {
            for obj in related.store.state() {
                if related.matches(&obj, namespace) {
                    out.push(obj.to_json(&related.info.resource));
                }
            }
        }
        out
    }

    /// Wait until every cache has its first full list. Readiness is polled
    /// afresh every 20 ms rather than awaited: a waiter parked on a store
    /// before its first list was seen to miss the wake-up and sit out the
    /// whole timeout (kube-runtime 5).
    pub async fn caches_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.children_and_related_synced() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn children_and_related_synced(&self) -> bool {
        use futures::FutureExt;
        self.children
            .iter()
            .map(|c| &c.store)
            .chain(self.related.iter().map(|r| &r.store))
            .all(|s| s.wait_until_ready().now_or_never().is_some())
    }

    /// Whether the parent, child and related caches have all been listed.
    pub fn caches_synced(&self) -> bool {
        use futures::FutureExt;
        self.parents.wait_until_ready().now_or_never().is_some()
            && self.children_and_related_synced()
    }
}

/// The controller owner reference of `obj`, if any.
pub fn controller_owner(
    obj: &impl Resource,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    obj.meta()
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

/// Whether `obj` carries our label and its controller is the parent `uid`.
pub fn is_our_child(obj: &impl Resource, binding: &str, uid: &str) -> bool {
    obj.labels().get(CHILD_LABEL).map(String::as_str) == Some(binding)
        && controller_owner(obj).is_some_and(|o| o.uid == uid)
}
