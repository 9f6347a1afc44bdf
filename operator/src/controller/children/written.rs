//! What one reconcile's writes did to the parent's children: the objects
//! the API server returned (shown to the plugin's next call in place of
//! the cached ones, which may lag), what was pruned, the intents the
//! children now carry, and what changed, for the reconcile's report. The
//! reconcile records it in the parent's ledger once, as it ends
//! ([`Written::report`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use gantry_sdk::{ObjectRef, Trigger};
use kube::ResourceExt;
use kube::api::DynamicObject;

use crate::controller::cached::CachedObject;
use crate::controller::context::ChildKind;
use crate::controller::ledger::{AppliedIntents, ChildKey, ChildReport, ChildVersion};
use crate::controller::report::Changes;

/// A child of the parent by kind (index into the binding's children),
/// namespace and name: the order of the request's `observed` list.
type Slot = (usize, Option<String>, String);

/// What this reconcile's writes did to the parent's children.
#[derive(Default)]
pub(crate) struct Written {
    /// Each child written: as the API server returned it, or `None` when
    /// pruned.
    children: BTreeMap<Slot, Option<Arc<CachedObject>>>,
    /// Versions written since the plugin was last called.
    unseen: Vec<(usize, Arc<CachedObject>)>,
    /// A child was pruned since the plugin was last called.
    pruned_unseen: bool,
    /// The child written last.
    last: Option<Slot>,
    /// The intents the children carry: the ledger's, with this
    /// reconcile's applies and prunes over them.
    intents: AppliedIntents,
    /// Versions written that the plugin has been shown.
    shown: Vec<ChildVersion>,
    /// What the writes changed, for the reconcile's report.
    pub changes: Changes,
}

impl Written {
    /// Nothing written yet; the children carry `intents`, as the ledger
    /// has them.
    pub(crate) fn new(intents: AppliedIntents) -> Self {
        Self {
            intents,
            ..Self::default()
        }
    }

    /// Our apply of `key`, a child of kind `kind`, with the intent `print`
    /// returned `object` (kept as the caches keep objects).
    pub(crate) fn applied(
        &mut self,
        kind: usize,
        key: &ChildKey,
        print: u64,
        object: DynamicObject,
    ) {
        self.intents.record(key, print);
        let object = Arc::new(CachedObject::new(object));
        let slot = (kind, object.namespace(), object.name_any());
        self.children.insert(slot.clone(), Some(object.clone()));
        self.unseen.push((kind, object));
        self.last = Some(slot);
    }

    /// We pruned `key`, a child of kind `kind`.
    pub(crate) fn pruned(&mut self, kind: usize, key: ChildKey) {
        self.gone(&key);
        let (_, namespace, name) = key;
        let slot = (kind, namespace, name);
        self.children.insert(slot.clone(), None);
        self.pruned_unseen = true;
        self.last = Some(slot);
    }

    /// `key` is gone without our delete (or replaced): it carries no
    /// intent of ours.
    pub(crate) fn gone(&mut self, key: &ChildKey) {
        self.intents.forget(key);
    }

    /// Whether `key` was last applied with the intent `print`, by this
    /// reconcile or, before it, as the ledger has it.
    pub(crate) fn applied_as(&self, key: &ChildKey, print: u64) -> bool {
        self.intents.applied_as(key, print)
    }

    /// The child `name` (in `namespace`) of kind `kind` as this reconcile
    /// last applied it, if it did (the cache may not show it yet).
    pub(crate) fn applied_object(
        &self,
        kind: usize,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<CachedObject>> {
        let slot = (kind, namespace.map(str::to_string), name.to_string());
        self.children.get(&slot).cloned().flatten()
    }

    /// Whether anything was written since the plugin was last called.
    pub(crate) fn changed_since_call(&self) -> bool {
        !self.unseen.is_empty() || self.pruned_unseen
    }

    /// Why the plugin is called again: the child written last changed.
    pub(crate) fn trigger(&self, kinds: &[ChildKind]) -> Option<Trigger> {
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
    pub(crate) fn observed(
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

    /// The plugin is called on what was written so far: the versions
    /// written since its last call are shown to it, so their watch events
    /// will not be news.
    pub(crate) fn show(&mut self, kinds: &[ChildKind]) {
        self.pruned_unseen = false;
        let shown = self.unseen.drain(..).map(|(kind, obj)| {
            (
                (
                    kinds[kind].info.kind.clone(),
                    obj.namespace(),
                    obj.name_any(),
                ),
                obj.resource_version().unwrap_or_default(),
            )
        });
        self.shown.extend(shown);
    }

    /// What the writes leave in the parent's ledger.
    pub(crate) fn report(&mut self) -> ChildReport {
        ChildReport {
            applied: self.intents.clone(),
            shown: std::mem::take(&mut self.shown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::spec::KindRef;
    use serde_json::json;

    fn config_map(name: &str, version: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
        }))
        .unwrap()
    }

    fn key(name: &str) -> ChildKey {
        (
            KindRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            Some("ns".into()),
            name.into(),
        )
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
        written.applied(0, &key("c"), 1, config_map("c", "5"));
        written.applied(0, &key("b"), 1, config_map("b", "6"));
        written.pruned(0, key("d"));
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
    fn intents_applied_and_pruned_go_over_the_ledgers() {
        let mut before = AppliedIntents::default();
        before.record(&key("a"), 1);
        before.record(&key("b"), 1);
        before.record(&key("c"), 1);
        let mut written = Written::new(before);
        assert!(written.applied_as(&key("a"), 1), "as the ledger has it");
        written.applied(0, &key("a"), 2, config_map("a", "5"));
        written.pruned(0, key("b"));
        written.gone(&key("c"));
        assert!(written.applied_as(&key("a"), 2));
        assert!(!written.applied_as(&key("a"), 1));
        let report = written.report();
        assert!(report.applied.applied_as(&key("a"), 2));
        assert!(!report.applied.applied_as(&key("b"), 1), "pruned");
        assert!(!report.applied.applied_as(&key("c"), 1), "gone");
        assert!(report.shown.is_empty(), "the plugin saw none of it");
    }

    #[test]
    fn writes_shown_once_are_not_shown_again() {
        let resource = Arc::new(kube::api::ApiResource::erase::<
            k8s_openapi::api::core::v1::ConfigMap,
        >(&()));
        let kinds = [ChildKind {
            info: crate::controller::context::KindInfo {
                kind: key("a").0,
                resource: resource.clone(),
                namespaced: true,
                has_status: false,
            },
            store: kube::runtime::reflector::store::Writer::new(resource).as_reader(),
            owners: Arc::default(),
        }];
        let mut written = Written::default();
        written.applied(0, &key("a"), 1, config_map("a", "7"));
        written.show(&kinds);
        assert!(!written.changed_since_call(), "nothing new since");
        written.show(&kinds);
        let shown = written.report().shown;
        assert_eq!(shown, vec![(key("a"), "7".to_string())]);
    }
}
