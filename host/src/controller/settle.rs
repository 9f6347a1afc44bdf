//! A reconcile settles before it reports. When its apply changed children,
//! the plugin is called again with the children as the API server returned
//! them, until an answer writes nothing (at most [`MAX_CALLS`] calls). The
//! status is then written once, from children the plugin has seen, and the
//! watch events of those writes are not news (see `ParentState`). A
//! controller-runtime operator gets there through a reconcile per event
//! instead: one status write and one call per change of each child.

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_sdk::{ObjectRef, Trigger};
use kube::ResourceExt;
use kube::api::DynamicObject;

use super::cached::CachedObject;
use super::context::{ChildKind, ChildVersion};
use super::report::Changes;

/// Plugin calls in one reconcile at most: one, and two more while its
/// applies change children. A plugin that builds children in stages (one
/// after another is observed) gets there over several reconciles.
pub const MAX_CALLS: usize = 3;

/// A child of the parent by kind (index into the binding's children),
/// namespace and name: the order of the request's `observed` list.
type Slot = (usize, Option<String>, String);

/// What this reconcile's writes did to the parent's children.
#[derive(Default)]
pub struct Written {
    /// Each child written: as the API server returned it, or `None` when
    /// pruned.
    children: BTreeMap<Slot, Option<Arc<CachedObject>>>,
    /// Versions written since the plugin was last called.
    unseen: Vec<(usize, Arc<CachedObject>)>,
    /// A child was pruned since the plugin was last called.
    pruned_unseen: bool,
    /// The child written last.
    last: Option<Slot>,
    /// What the writes changed, for the reconcile's report.
    pub changes: Changes,
}

impl Written {
    /// Our apply of a child of kind `kind` returned `object` (kept as the
    /// caches keep objects).
    pub fn applied(&mut self, kind: usize, object: DynamicObject) {
        let object = Arc::new(CachedObject::new(object));
        let slot = (kind, object.namespace(), object.name_any());
        self.children.insert(slot.clone(), Some(object.clone()));
        self.unseen.push((kind, object));
        self.last = Some(slot);
    }

    /// We pruned the child `name` (in `namespace`) of kind `kind`.
    pub fn pruned(&mut self, kind: usize, namespace: Option<String>, name: String) {
        let slot = (kind, namespace, name);
        self.children.insert(slot.clone(), None);
        self.pruned_unseen = true;
        self.last = Some(slot);
    }

    /// The child `name` (in `namespace`) of kind `kind` as this reconcile
    /// last applied it, if it did (the cache may not show it yet).
    pub fn applied_object(
        &self,
        kind: usize,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<CachedObject>> {
        let slot = (kind, namespace.map(str::to_string), name.to_string());
        self.children.get(&slot).cloned().flatten()
    }

    /// Whether anything was written since the plugin was last called.
    pub fn changed_since_call(&self) -> bool {
        !self.unseen.is_empty() || self.pruned_unseen
    }

    /// Why the plugin is called again: the child written last changed.
    pub fn trigger(&self, kinds: &[ChildKind]) -> Option<Trigger> {
        let (kind, namespace, name) = self.last.clone()?;
        let kind = &kinds[kind].info.kind;
        Some(Trigger::ChildChanged(ObjectRef {
            api_version: kind.api_version.clone(),
            kind: kind.kind.clone(),
            namespace,
            name,
        }))
    }

    /// The parent's children: `cached` (in the cache's order: kind, then
    /// namespace and name) with this reconcile's writes over them.
    pub fn observed(
        &self,
        cached: Vec<(usize, Arc<CachedObject>)>,
    ) -> Vec<(usize, Arc<CachedObject>)> {
        if self.children.is_empty() {
            return cached;
        }
        let mut merged: BTreeMap<Slot, Arc<CachedObject>> = cached
            .into_iter()
            .map(|(kind, obj)| ((kind, obj.namespace(), obj.name_any()), obj))
            .collect();
        for (slot, written) in &self.children {
            match written {
                Some(obj) => merged.insert(slot.clone(), obj.clone()),
                None => merged.remove(slot),
            };
        }
        merged
            .into_iter()
            .map(|((kind, _, _), obj)| (kind, obj))
            .collect()
    }

    /// The versions written since the last call, now shown to the plugin:
    /// their watch events will not be news.
    pub fn shown(&mut self, kinds: &[ChildKind]) -> Vec<ChildVersion> {
        self.pruned_unseen = false;
        self.unseen
            .drain(..)
            .map(|(kind, obj)| {
                (
                    (
                        kinds[kind].info.kind.clone(),
                        obj.namespace(),
                        obj.name_any(),
                    ),
                    obj.resource_version().unwrap_or_default(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(name: &str, version: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
        }))
        .unwrap()
    }

    fn names(observed: &[(usize, Arc<CachedObject>)]) -> Vec<(usize, String, String)> {
        observed
            .iter()
            .map(|(kind, obj)| (*kind, obj.name_any(), obj.resource_version().unwrap()))
            .collect()
    }

    #[test]
    fn writes_show_over_the_cache_in_the_caches_order() {
        let cached = |name| Arc::new(CachedObject::new(config_map(name, "1")));
        let cached = vec![(0, cached("b")), (0, cached("d")), (1, cached("a"))];
        let mut written = Written::default();
        assert_eq!(names(&written.observed(cached.clone())), names(&cached));
        written.applied(0, config_map("c", "5"));
        written.applied(0, config_map("b", "6"));
        written.pruned(0, Some("ns".into()), "d".into());
        assert!(written.changed_since_call());
        let applied = |name| written.applied_object(0, Some("ns"), name);
        assert_eq!(applied("b").unwrap().resource_version().unwrap(), "6");
        assert!(applied("d").is_none(), "pruned");
        assert!(applied("a").is_none(), "not written");
        assert_eq!(
            names(&written.observed(cached)),
            vec![
                (0, "b".into(), "6".into()),
                (0, "c".into(), "5".into()),
                (1, "a".into(), "1".into()),
            ]
        );
    }

    #[test]
    fn writes_shown_once_are_not_shown_again() {
        let resource = Arc::new(kube::api::ApiResource::erase::<
            k8s_openapi::api::core::v1::ConfigMap,
        >(&()));
        let kinds = [ChildKind {
            info: crate::controller::context::KindInfo {
                kind: crate::controller::binding::KindRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                },
                resource: resource.clone(),
                namespaced: true,
                has_status: false,
            },
            store: kube::runtime::reflector::store::Writer::new(resource).as_reader(),
            owners: Arc::default(),
        }];
        let mut written = Written::default();
        written.applied(0, config_map("a", "7"));
        let shown = written.shown(&kinds);
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].1, "7");
        assert_eq!(shown[0].0.2, "a");
        assert!(!written.changed_since_call(), "nothing new since");
        assert!(written.shown(&kinds).is_empty());
    }
}
