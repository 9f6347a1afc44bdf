//! Background controllers, run after every committed write: the garbage collector
//! (ownerReferences, foreground and orphan propagation), the namespace controller
//! (deleting a namespace's contents, then the namespace) and CRD cleanup (deleting a
//! CRD's objects before the CRD).
//!
//! Each pass is one store transaction computed from a consistent view; passes repeat
//! until one writes nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::app::App;
use crate::objects::lifecycle::{self, Deletion, FOREGROUND, ORPHAN, Propagation};
use crate::objects::meta;
use crate::storage::{View, Write};

/// Runs the controllers until `stop` fires.
pub async fn run(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let started = std::time::Instant::now();
        for _ in 0..1000 {
            match app.commit(|view| Ok(((), plan(view)))).await {
                Ok(((), events)) if events.is_empty() => break,
                // Something changed: run another pass.
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("controller pass failed: {e}");
                    break;
                }
            }
        }
        // A pass reads every object, so under a steady stream of writes
        // back-to-back passes would cost O(objects) per write and take a
        // whole core (10,000 parents with 30,000 children crawled). Resting
        // four times as long as the last pass took bounds the controllers to
        // a fifth of a core; the writes that arrive meanwhile are handled by
        // the next pass together. With few objects the rest is microseconds.
        let rest = started.elapsed() * 4;
        tokio::select! {
            () = app.controllers.notified() => {}
            _ = stop.changed() => return,
        }
        tokio::select! {
            () = tokio::time::sleep(rest) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Splits a storage key into (group, plural, namespace, name).
fn key_parts(key: &str) -> Option<(&str, &str, &str, &str)> {
    let mut it = key.splitn(4, '/');
    Some((it.next()?, it.next()?, it.next()?, it.next()?))
}

struct Plan {
    writes: Vec<Write>,
    touched: HashSet<String>,
}

impl Plan {
    fn push(&mut self, key: &str, w: Write) {
        if self.touched.insert(key.to_string()) {
            self.writes.push(w);
        }
    }

    fn delete(&mut self, key: &str, obj: &Value) {
        if meta::is_deleting(obj) || self.touched.contains(key) {
            return;
        }
        // A CRD goes as through the API: its custom resources first.
        let mut obj = obj.clone();
        if key.starts_with(&format!("{}/{}/", crate::crd::GROUP, crate::crd::PLURAL)) {
            crate::crd::with_cleanup_finalizer(&mut obj);
        }
        match lifecycle::delete(
            key,
            &obj,
            Propagation::Background,
            false,
            lifecycle::Marking::Generic,
        ) {
            Deletion::Removed(w) | Deletion::Pending(_, Some(w)) => self.push(key, w),
            Deletion::Pending(_, None) => {}
        }
    }
}

fn owner_uids(obj: &Value) -> Vec<(String, bool)> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| {
                    let uid = r.get("uid")?.as_str()?.to_string();
                    Some((uid, r.get("blockOwnerDeletion") == Some(&json!(true))))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One controller pass: the writes to make.
fn plan(view: &View<'_>) -> Vec<Write> {
    let all = view.list("");
    let uids: HashSet<&str> = all.iter().map(|(_, o)| meta::uid(o)).collect();
    let mut dependents: HashMap<&str, Vec<(&str, &Value, bool)>> = HashMap::new();
    for (key, obj) in &all {
        for (uid, block) in owner_uids(obj) {
            if let Some(u) = uids.get(uid.as_str()) {
                dependents
                    .entry(u)
                    .or_default()
                    .push((key.as_str(), &**obj, block));
            }
        }
    }
    let mut p = Plan {
        writes: vec![],
        touched: HashSet::new(),
    };
    let crd_prefix = format!("{}/{}/", crate::crd::GROUP, crate::crd::PLURAL);
    for (key, obj) in &all {
        if !meta::is_deleting(obj) {
            continue;
        }
        let uid = meta::uid(obj);
        let fins = meta::finalizers(obj);
        let deps = dependents.get(uid).cloned().unwrap_or_default();
        if fins.iter().any(|f| f == ORPHAN) {
            for (dkey, dep, _) in &deps {
                let mut d = (*dep).clone();
                if let Some(refs) = d
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                    if refs.is_empty() {
                        meta::meta_mut(&mut d).remove("ownerReferences");
                    }
                }
                p.push(dkey, Write::Put(dkey.to_string(), d));
            }
            p.push(key, lifecycle::remove_finalizer(key, obj, ORPHAN, false));
            continue;
        }
        if fins.iter().any(|f| f == FOREGROUND) {
            for (dkey, dep, _) in &deps {
                p.delete(dkey, dep);
            }
            if !deps.iter().any(|(_, _, block)| *block) {
                p.push(
                    key,
                    lifecycle::remove_finalizer(key, obj, FOREGROUND, false),
                );
            }
            continue;
        }
        if let Some(("", "namespaces", "", ns)) = key_parts(key) {
            let content: Vec<_> = all
                .iter()
                // Namespace objects have an empty namespace segment, so this is the content.
                .filter(|(k, _)| key_parts(k).is_some_and(|(_, _, kns, _)| kns == ns))
                .collect();
            for (k, o) in &content {
                p.delete(k, o);
            }
            if content.is_empty() && crate::strategy::spec_finalizers_nonempty(obj) {
                let mut n = (**obj).clone();
                n["spec"]["finalizers"] = json!([]);
                if fins.is_empty() {
                    p.push(key, Write::DeleteAs(key.clone(), n));
                } else {
                    p.push(key, Write::Put(key.clone(), n));
                }
            }
            continue;
        }
        if key.starts_with(&crd_prefix) && fins.iter().any(|f| f == crate::crd::CLEANUP_FINALIZER) {
            let group = obj
                .pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or("");
            let plural = obj
                .pointer("/spec/names/plural")
                .and_then(Value::as_str)
                .unwrap_or("");
            let prefix = format!("{group}/{plural}/");
            let content: Vec<_> = all.iter().filter(|(k, _)| k.starts_with(&prefix)).collect();
            for (k, o) in &content {
                p.delete(k, o);
            }
            if content.is_empty() {
                p.push(
                    key,
                    lifecycle::remove_finalizer(key, obj, crate::crd::CLEANUP_FINALIZER, false),
                );
            }
        }
    }
    // Garbage collection: dependents whose owners are all gone.
    for (key, obj) in &all {
        let owners = owner_uids(obj);
        if !owners.is_empty() && !owners.iter().any(|(u, _)| uids.contains(u.as_str())) {
            p.delete(key, obj);
        }
    }
    p.writes.extend(crate::apiservices::sync_custom(view));
    p.writes
}
