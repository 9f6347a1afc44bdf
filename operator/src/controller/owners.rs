//! Children by the UID of their controller owner, kept beside a reflector
//! store from the same watch events, so that a reconcile finds a parent's
//! children without scanning every child of the binding (kube-runtime's
//! `Store` has no secondary indexes).
//!
//! The index holds names, not store keys: an `ObjectRef` carried its
//! kind's five strings, and two of them per child cost about a kilobyte
//! (docs/benchmarks.md, "Memory"). Each owner UID is held once, shared by
//! its children's entries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::cached::CachedObject;
use super::context::controller_owner;

/// A cached child's namespace and name: its store key without the kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ChildName {
    namespace: Option<Box<str>>,
    name: Box<str>,
}

impl ChildName {
    fn of(obj: &CachedObject) -> Self {
        Self {
            namespace: obj.metadata.namespace.as_deref().map(Box::from),
            name: obj.metadata.name.as_deref().unwrap_or_default().into(),
        }
    }

    fn key(&self, resource: &Arc<ApiResource>) -> ObjectRef<CachedObject> {
        let key = ObjectRef::new_with(&self.name, resource.clone());
        match &self.namespace {
            Some(ns) => key.within(ns),
            None => key,
        }
    }
}

/// The index of one child kind's cache.
#[derive(Default)]
pub struct OwnerIndex {
    state: Mutex<IndexState>,
}

#[derive(Default)]
struct IndexState {
    /// Each owner's children, sorted by namespace and name.
    by_owner: HashMap<Arc<str>, Vec<ChildName>>,
    owner_of: HashMap<ChildName, Arc<str>>,
    /// A relist in progress: applied at its end, as the store does.
    relist: Option<Vec<(ChildName, Option<String>)>>,
}

impl IndexState {
    fn remove(&mut self, child: &ChildName) {
        let Some(owner) = self.owner_of.remove(child) else {
            return;
        };
        if let Some(children) = self.by_owner.get_mut(&owner) {
            if let Ok(at) = children.binary_search(child) {
                children.remove(at);
            }
            if children.is_empty() {
                self.by_owner.remove(&owner);
            }
        }
    }

    fn insert(&mut self, child: ChildName, owner: Option<String>) {
        self.remove(&child);
        let Some(owner) = owner else {
            return;
        };
        // One `Arc` per owner, whichever child named it first.
        let owner = match self.by_owner.get_key_value(owner.as_str()) {
            Some((shared, _)) => shared.clone(),
            None => Arc::from(owner),
        };
        let children = self.by_owner.entry(owner.clone()).or_default();
        if let Err(at) = children.binary_search(&child) {
            children.insert(at, child.clone());
        }
        self.owner_of.insert(child, owner);
    }
}

fn entry(obj: &CachedObject) -> (ChildName, Option<String>) {
    (
        ChildName::of(obj),
        controller_owner(obj).map(|o| o.uid.clone()),
    )
}

impl OwnerIndex {
    /// Follow one watch event.
    pub fn observe(&self, event: &watcher::Event<CachedObject>) {
        let mut state = self.state.lock().unwrap();
        match event {
            watcher::Event::Apply(obj) => {
                let (child, owner) = entry(obj);
                state.insert(child, owner);
            }
            watcher::Event::Delete(obj) => state.remove(&ChildName::of(obj)),
            watcher::Event::Init => state.relist = Some(Vec::new()),
            watcher::Event::InitApply(obj) => {
                let item = entry(obj);
                state.relist.get_or_insert_with(Vec::new).push(item);
            }
            watcher::Event::InitDone => {
                let items = state.relist.take().unwrap_or_default();
                state.by_owner.clear();
                state.owner_of.clear();
                for (child, owner) in items {
                    state.insert(child, owner);
                }
            }
        }
    }

    /// The store keys (of `resource`) of the children whose controller has
    /// `uid`, by namespace and name.
    pub fn owned_by(&self, uid: &str, resource: &Arc<ApiResource>) -> Vec<ObjectRef<CachedObject>> {
        let state = self.state.lock().unwrap();
        state
            .by_owner
            .get(uid)
            .map(|children| children.iter().map(|c| c.key(resource)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn child(name: &str, owner_uid: Option<&str>) -> CachedObject {
        let owners: Vec<Value> = owner_uid
            .map(|uid| json!({"apiVersion": "v1", "kind": "P", "name": "p", "uid": uid, "controller": true}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}}))
        .unwrap()
    }

    fn names(index: &OwnerIndex, uid: &str) -> Vec<String> {
        let resource = Arc::new(ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(
            &(),
        ));
        let keys = index.owned_by(uid, &resource);
        assert!(
            keys.iter()
                .all(|k| k.dyntype == resource && k.namespace.as_deref() == Some("ns"))
        );
        keys.into_iter().map(|k| k.name).collect()
    }

    #[test]
    fn follows_applies_deletes_owner_changes_and_relists() {
        let index = OwnerIndex::default();
        let observe = |event| index.observe(&event);
        observe(watcher::Event::Apply(child("b", Some("u1"))));
        observe(watcher::Event::Apply(child("a", Some("u1"))));
        observe(watcher::Event::Apply(child("c", Some("u2"))));
        observe(watcher::Event::Apply(child("orphan", None)));
        assert_eq!(names(&index, "u1"), ["a", "b"]);
        // An update with the same owner changes nothing.
        observe(watcher::Event::Apply(child("a", Some("u1"))));
        assert_eq!(names(&index, "u1"), ["a", "b"]);
        // A new controller moves the child.
        observe(watcher::Event::Apply(child("b", Some("u2"))));
        assert_eq!(names(&index, "u1"), ["a"]);
        assert_eq!(names(&index, "u2"), ["b", "c"]);
        // Losing its controller takes it out.
        observe(watcher::Event::Apply(child("a", None)));
        assert!(names(&index, "u1").is_empty());
        observe(watcher::Event::Delete(child("c", Some("u2"))));
        assert_eq!(names(&index, "u2"), ["b"]);
        // A relist replaces everything at its end, not before.
        observe(watcher::Event::Init);
        observe(watcher::Event::InitApply(child("d", Some("u1"))));
        assert!(names(&index, "u1").is_empty());
        observe(watcher::Event::InitDone);
        assert_eq!(names(&index, "u1"), ["d"]);
        assert!(names(&index, "u2").is_empty());
    }

    #[test]
    fn an_owner_uid_is_held_once() {
        let index = OwnerIndex::default();
        for name in ["a", "b", "c"] {
            index.observe(&watcher::Event::Apply(child(name, Some("u1"))));
        }
        let state = index.state.lock().unwrap();
        let (owner, _) = state.by_owner.get_key_value("u1").unwrap();
        // The map's key and each child's back-reference.
        assert_eq!(Arc::strong_count(owner), 4);
    }
}
