//! What a kind of binding has in service, by name: read by many (webhook
//! handlers, guardrails, configuration syncs), written by its loader's
//! lifecycle. Replacing an entry is atomic: work already started keeps the
//! version it began with.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

/// The versions in service, by name. Cheap to clone; clones share them.
pub struct InService<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    by_name: RwLock<BTreeMap<String, Arc<T>>>,
    changed: watch::Sender<u64>,
    loaded: watch::Sender<bool>,
}

impl<T> Clone for InService<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Default for InService<T> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                by_name: RwLock::new(BTreeMap::new()),
                changed: watch::channel(0).0,
                loaded: watch::channel(false).0,
            }),
        }
    }
}

impl<T> std::fmt::Debug for InService<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.inner.by_name.read().unwrap().keys())
            .finish()
    }
}

impl<T> InService<T> {
    /// The entry `name`, if in service.
    pub fn get(&self, name: &str) -> Option<Arc<T>> {
        self.inner.by_name.read().unwrap().get(name).cloned()
    }

    /// Every entry in service, by name.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.inner
            .by_name
            .read()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }

    /// Put `entry` into service as `name`, replacing any version of it.
    pub fn insert(&self, name: String, entry: T) {
        self.inner
            .by_name
            .write()
            .unwrap()
            .insert(name, Arc::new(entry));
        self.inner.changed.send_modify(|n| *n += 1);
    }

    /// Take `name` out of service.
    pub fn remove(&self, name: &str) -> Option<Arc<T>> {
        let removed = self.inner.by_name.write().unwrap().remove(name);
        if removed.is_some() {
            self.inner.changed.send_modify(|n| *n += 1);
        }
        removed
    }

    /// Changes: the value increases each time the set changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Record that the bindings found at start are processed.
    pub fn mark_loaded(&self) {
        self.inner.loaded.send_replace(true);
    }

    /// Whether the bindings found at start are processed.
    pub fn is_loaded(&self) -> bool {
        *self.inner.loaded.borrow()
    }

    /// Completes once the bindings found at start are processed.
    pub async fn loaded(&self) {
        let mut rx = self.inner.loaded.subscribe();
        let _ = rx.wait_for(|loaded| *loaded).await;
    }
}
