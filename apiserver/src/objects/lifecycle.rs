//! Deletion: finalizers, propagation policies, and the writes a delete turns into.

use serde_json::{Value, json};

use crate::objects::meta;
use crate::storage::Write;

/// `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Delete now; the garbage collector removes dependents afterwards.
    Background,
    /// Delete dependents first (`foregroundDeletion` finalizer).
    Foreground,
    /// Keep dependents, removing their ownerReferences (`orphan` finalizer).
    Orphan,
}

/// Finalizer for foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";
/// Finalizer for orphaning dependents.
pub const ORPHAN: &str = "orphan";

impl Propagation {
    /// Parses the query/body value.
    pub fn parse(v: &str) -> Option<Self> {
        match v {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }
}

/// How the registry of a kind marks an object it cannot remove yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marking {
    /// kube's generic registry (`markAsDeleting`): deletionTimestamp,
    /// deletionGracePeriodSeconds 0, and generation + 1 when it has one.
    Generic,
    /// Namespaces and CRDs, whose registries delete their own way: only
    /// deletionTimestamp.
    Own,
}

/// What deleting an object does.
pub enum Deletion {
    /// The object is gone (the write removes it).
    Removed(Write),
    /// The object stays with deletionTimestamp set until its finalizers are removed.
    Pending(Value, Option<Write>),
}

/// Marks `obj` as deleting, as `marking` says.
pub fn mark(obj: &mut Value, marking: Marking) {
    let m = meta::meta_mut(obj);
    m.insert("deletionTimestamp".into(), json!(meta::now_rfc3339()));
    if marking == Marking::Generic {
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        if let Some(generation) = m.get("generation").and_then(Value::as_i64)
            && generation > 0
        {
            m.insert("generation".into(), json!(generation + 1));
        }
    }
}

/// Deletes `obj` at `key`: marks it as `marking` says (finalizers present or
/// added by `policy`, or `keep_alive` for namespaces) or removes it.
pub fn delete(
    key: &str,
    obj: &Value,
    policy: Propagation,
    keep_alive: bool,
    marking: Marking,
) -> Deletion {
    let mut fins = meta::finalizers(obj);
    let extra = match policy {
        Propagation::Foreground => Some(FOREGROUND),
        Propagation::Orphan => Some(ORPHAN),
        Propagation::Background => None,
    };
    let mut changed = false;
    if let Some(f) = extra
        && !fins.iter().any(|x| x == f)
    {
        fins.push(f.to_string());
        changed = true;
    }
    if fins.is_empty() && !keep_alive {
        return Deletion::Removed(Write::Delete(key.to_string()));
    }
    let mut new = obj.clone();
    if !meta::is_deleting(obj) {
        mark(&mut new, marking);
        changed = true;
    }
    let m = meta::meta_mut(&mut new);
    if !fins.is_empty() {
        m.insert("finalizers".into(), json!(fins));
    }
    if changed {
        Deletion::Pending(new.clone(), Some(Write::Put(key.to_string(), new)))
    } else {
        Deletion::Pending(new, None)
    }
}

/// The object with one finalizer removed, and the write that stores (or, when it was
/// the last thing holding a deleting object, removes) it.
pub fn remove_finalizer(key: &str, obj: &Value, finalizer: &str, keep_alive: bool) -> Write {
    let mut new = obj.clone();
    let fins: Vec<String> = meta::finalizers(obj)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    let m = meta::meta_mut(&mut new);
    if fins.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(fins));
    }
    if fins.is_empty() && meta::is_deleting(obj) && !keep_alive {
        return Write::DeleteAs(key.to_string(), new);
    }
    Write::Put(key.to_string(), new)
}
