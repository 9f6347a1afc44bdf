//! The watches that keep to the namespaces the operator watches
//! (`--watch-namespaces`, a [`WatchScope`]).
//!
//! In a scoped operator a namespaced kind is watched with one watch per
//! namespace, which needs only a Role in each. Their events are merged
//! into the one stream a reflector store takes. kube-runtime watches one
//! namespace or all of them, and a store swaps in its whole content at the
//! end of an initial list; so the first lists of all namespaces are folded
//! into one, and a later relist of one namespace (after its watch expired)
//! becomes applies and deletes of that namespace's objects only. No
//! library merges namespaced watches into one store, hence this.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::cached::CachedObject;
use crate::watch_scope::WatchScope;

/// Events of one watch, as a reflector takes them.
pub(crate) type WatchEvent = Result<watcher::Event<CachedObject>, watcher::Error>;

/// Watch `resource` (namespaced or not) with `config` within `scope`,
/// retrying with kube-runtime's default backoff. Objects come as the caches
/// keep them (without managedFields: see [`CachedObject`]).
pub(crate) fn watch(
    client: &Client,
    resource: &Arc<ApiResource>,
    namespaced: bool,
    config: &watcher::Config,
    scope: &WatchScope,
) -> futures::stream::BoxStream<'static, WatchEvent> {
    let one = |api: Api<CachedObject>| watcher(api, config.clone()).default_backoff();
    match scope {
        WatchScope::Namespaces(names) if namespaced => {
            let streams = names.iter().map(|ns| {
                let ns_owned = ns.clone();
                one(Api::namespaced_with(client.clone(), ns, resource))
                    .map(move |event| (ns_owned.clone(), event))
                    .boxed()
            });
            let mut merge = Merge::new(names, ApiResource::clone(resource));
            let merged = futures::stream::select_all(streams)
                .map(move |(ns, event)| futures::stream::iter(merge.fold(&ns, event)))
                .flatten();
            // The merged stream's own Init, before any namespace's events.
            futures::stream::once(async { Ok(watcher::Event::Init) })
                .chain(merged)
                .boxed()
        }
        _ => one(Api::all_with(client.clone(), resource)).boxed(),
    }
}

/// Folds the events of one watch per namespace into the events of one
/// watch of them all.
struct Merge {
    resource: ApiResource,
    /// Namespaces whose first list has not ended yet.
    first_lists: HashSet<String>,
    /// Names of the objects of each namespace that are in the store.
    known: HashMap<String, HashSet<String>>,
    /// Names listed so far by a namespace's relist.
    relisting: HashMap<String, HashSet<String>>,
}

impl Merge {
    fn new(namespaces: &[String], resource: ApiResource) -> Self {
        Self {
            resource,
            first_lists: namespaces.iter().cloned().collect(),
            known: HashMap::new(),
            relisting: HashMap::new(),
        }
    }

    fn first_list(&self) -> bool {
        !self.first_lists.is_empty()
    }

    /// The merged events for `event` of namespace `ns`.
    fn fold(&mut self, ns: &str, event: WatchEvent) -> Vec<WatchEvent> {
        use watcher::Event;
        let event = match event {
            Ok(event) => event,
            Err(e) => return vec![Err(e)],
        };
        let known = self.known.entry(ns.to_string()).or_default();
        match event {
            Event::Apply(obj) => {
                known.insert(obj.name_any());
                vec![Ok(Event::Apply(obj))]
            }
            Event::Delete(obj) => {
                known.remove(&obj.name_any());
                vec![Ok(Event::Delete(obj))]
            }
            // The merged stream opens with one Init of its own (below).
            Event::Init if self.first_lists.contains(ns) => Vec::new(),
            Event::Init => {
                self.relisting.insert(ns.to_string(), HashSet::new());
                Vec::new()
            }
            Event::InitApply(obj) => {
                known.insert(obj.name_any());
                if let Some(listed) = self.relisting.get_mut(ns) {
                    listed.insert(obj.name_any());
                    vec![Ok(Event::Apply(obj))]
                } else {
                    vec![Ok(Event::InitApply(obj))]
                }
            }
            Event::InitDone => {
                if let Some(listed) = self.relisting.remove(ns) {
                    let gone: Vec<String> = known.difference(&listed).cloned().collect();
                    gone.into_iter()
                        .map(|name| {
                            known.remove(&name);
                            let obj = DynamicObject::new(&name, &self.resource).within(ns);
                            Ok(Event::Delete(CachedObject::new(obj)))
                        })
                        .collect()
                } else {
                    self.first_lists.remove(ns);
                    if self.first_list() {
                        Vec::new()
                    } else {
                        vec![Ok(Event::InitDone)]
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::GroupVersionKind;
    use watcher::Event;

    fn resource() -> ApiResource {
        ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
    }

    fn obj(ns: &str, name: &str) -> CachedObject {
        CachedObject::new(DynamicObject::new(name, &resource()).within(ns))
    }

    /// What a reflector store holds after `events`, as `ns/name`.
    fn store_after(events: &[WatchEvent]) -> Vec<String> {
        let mut writer = kube::runtime::reflector::store::Writer::new(Arc::new(resource()));
        for event in events.iter().flatten() {
            writer.apply_watcher_event(event);
        }
        let mut names: Vec<String> = writer
            .as_reader()
            .state()
            .iter()
            .map(|o| format!("{}/{}", o.namespace().unwrap(), o.name_any()))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_first_lists_of_every_namespace_fill_the_store_at_once() {
        let mut merge = Merge::new(&["a".into(), "b".into()], resource());
        let mut events = vec![Ok(Event::Init)];
        for (ns, event) in [
            ("a", Event::Init),
            ("a", Event::InitApply(obj("a", "x"))),
            ("b", Event::Init),
            ("a", Event::InitDone),
        ] {
            events.extend(merge.fold(ns, Ok(event)));
        }
        // b has not listed yet: nothing is swapped in.
        assert!(store_after(&events).is_empty());
        assert!(
            !events
                .iter()
                .flatten()
                .any(|e| matches!(e, Event::InitDone))
        );
        for (ns, event) in [
            ("b", Event::InitApply(obj("b", "y"))),
            ("b", Event::InitDone),
        ] {
            events.extend(merge.fold(ns, Ok(event)));
        }
        assert_eq!(store_after(&events), ["a/x", "b/y"]);
    }

    #[test]
    fn a_relist_of_one_namespace_deletes_only_what_is_gone_from_it() {
        let mut merge = Merge::new(&["a".into(), "b".into()], resource());
        let mut events = vec![Ok(Event::Init)];
        let script = [
            ("a", Event::Init),
            ("a", Event::InitApply(obj("a", "x"))),
            ("a", Event::InitApply(obj("a", "gone"))),
            ("a", Event::InitDone),
            ("b", Event::Init),
            ("b", Event::InitApply(obj("b", "y"))),
            ("b", Event::InitDone),
            ("b", Event::Apply(obj("b", "z"))),
            // a's watch expired: it lists again, without `gone`.
            ("a", Event::Init),
            ("a", Event::InitApply(obj("a", "x"))),
            ("a", Event::InitApply(obj("a", "new"))),
            ("a", Event::InitDone),
        ];
        for (ns, event) in script {
            events.extend(merge.fold(ns, Ok(event)));
        }
        assert_eq!(store_after(&events), ["a/new", "a/x", "b/y", "b/z"]);
        // And a plain delete still deletes.
        events.extend(merge.fold("b", Ok(Event::Delete(obj("b", "z")))));
        assert_eq!(store_after(&events), ["a/new", "a/x", "b/y"]);
    }
}
