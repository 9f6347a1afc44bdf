//! Children: server-side apply with the binding's field manager, skipping
//! writes that would change nothing, and pruning what is no longer desired.

use std::collections::HashSet;
use std::sync::Arc;

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::Instrument;

use super::ReconcileError;
use super::binding::CHILD_LABEL;
use super::cached::CachedObject;
use super::context::{BindingContext, ChildKey, controller_owner, is_our_child, object_key};
use super::guardrails::DesiredChild;
use super::intent::{fingerprint, reflects};
use super::report::Change;
use super::settle::Written;

/// What applying the children did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ApplyStats {
    /// Children written.
    pub applied: usize,
    /// Children left alone: unchanged intent, live object still shows it.
    pub skipped: usize,
}

/// The controller owner reference pointing at `parent`.
fn owner_reference(ctx: &BindingContext, parent: &DynamicObject) -> Value {
    json!({
        "apiVersion": ctx.parent.kind.api_version,
        "kind": ctx.parent.kind.kind,
        "name": parent.name_any(),
        "uid": parent.uid().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// A desired child as it will be applied: computed once per reconcile,
/// judged by the guardrail policies and applied as is.
#[derive(Debug, Clone)]
pub struct Intent {
    /// The child the plugin asked for.
    pub child: DesiredChild,
    /// Its kind, as an index into the binding's children.
    pub kind: usize,
    /// The object to apply: the child with the owner reference and the
    /// binding label set.
    pub object: Value,
}

impl Intent {
    /// The child as the cache has it now, if it does.
    pub fn cached(&self, ctx: &BindingContext) -> Option<Arc<CachedObject>> {
        let kind = &ctx.children[self.kind];
        let reference = ObjectRef::new_with(&self.child.name, kind.info.resource.clone());
        let reference = match &self.child.namespace {
            Some(ns) => reference.within(ns),
            None => reference,
        };
        kind.store.get(&reference)
    }
}

/// The intents of `desired`, children of `parent` (guardrails passed them,
/// so every kind is declared).
pub fn intents(
    ctx: &BindingContext,
    parent: &DynamicObject,
    desired: Vec<DesiredChild>,
) -> Vec<Intent> {
    desired
        .into_iter()
        .filter_map(|child| {
            let kind = ctx
                .children
                .iter()
                .position(|c| c.info.kind == child.kind)?;
            let object = intent(ctx, parent, &child);
            Some(Intent {
                child,
                kind,
                object,
            })
        })
        .collect()
}

/// `child.object` with the owner reference and the binding label set.
fn intent(ctx: &BindingContext, parent: &DynamicObject, child: &DesiredChild) -> Value {
    let mut object = child.object.clone();
    let meta = object
        .as_object_mut()
        .expect("guardrails checked children are objects")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    meta["ownerReferences"] = json!([owner_reference(ctx, parent)]);
    if !meta.get("labels").is_some_and(Value::is_object) {
        meta["labels"] = json!({});
    }
    meta["labels"][CHILD_LABEL] = ctx.name.clone().into();
    object
}

/// What to do with one intent, from the cache and the ledger alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Ours, applied with this intent last time, and the live object
    /// still shows it: no write.
    Skip,
    /// Ours: apply.
    Apply,
    /// Not in the (label-filtered) cache: read it first, since it may exist
    /// without our label and then is not ours to change.
    LookUp,
    /// In the cache but controlled by another parent or binding: refuse.
    NotOurs,
}

/// The step for an intent `object` of binding `binding` and the parent
/// with `uid`: `live` is the cached child and its JSON, `applied_before`
/// whether the ledger has this intent as the last one applied.
pub fn step(
    live: Option<(&CachedObject, &Value)>,
    binding: &str,
    uid: &str,
    applied_before: bool,
    object: &Value,
) -> Step {
    match live {
        None => Step::LookUp,
        Some((live, _)) if !is_our_child(live, binding, uid) => Step::NotOurs,
        Some((_, json)) if applied_before && reflects(json, object) => Step::Skip,
        Some(_) => Step::Apply,
    }
}

/// Apply every intent of `parent`; what the API server returned goes into
/// `written`.
pub async fn apply_children(
    ctx: &BindingContext,
    parent: &DynamicObject,
    intents: &[Intent],
    written: &mut Written,
) -> Result<ApplyStats, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    let parent_key = object_key(parent);
    let manager = ctx.spec.field_manager();
    let mut stats = ApplyStats::default();
    for intent in intents {
        let (child, object) = (&intent.child, &intent.object);
        let kind = &ctx.children[intent.kind];
        let key: ChildKey = (
            child.kind.clone(),
            child.namespace.clone(),
            child.name.clone(),
        );
        let print = fingerprint(object);
        let api = kind.info.api(&ctx.client, child.namespace.as_deref());
        let cached = written
            .applied_object(intent.kind, child.namespace.as_deref(), &child.name)
            .or_else(|| intent.cached(ctx));
        let live = cached
            .as_deref()
            .map(|live| (live, live.to_json(&kind.info.resource)));
        let applied_before = ctx.with_state(&parent_key, |s| s.applied_as(&key, print));
        let live = live.as_ref().map(|(object, json)| (*object, json));
        // The child as read when the cache lacks it, for the hand-over.
        let mut read = None;
        let before = match step(live, &ctx.name, &uid, applied_before, object) {
            Step::Skip => {
                stats.skipped += 1;
                continue;
            }
            Step::NotOurs => {
                let live = cached.as_deref().expect("only a cached child is not ours");
                return Err(not_ours(child, live));
            }
            Step::LookUp => {
                // Not in our (label-filtered) cache: it may still exist
                // without our label, and then it is not ours to change.
                let existing = api
                    .get_opt(&child.name)
                    .await
                    .map_err(ReconcileError::Kube)?;
                if let Some(existing) = &existing
                    && controller_owner(existing).is_none_or(|o| o.uid != uid)
                {
                    return Err(not_ours(child, existing));
                }
                read = existing.as_ref().and_then(|e| serde_json::to_value(e).ok());
                existing.and_then(|e| e.resource_version())
            }
            Step::Apply => cached.as_deref().and_then(ResourceExt::resource_version),
        };
        super::handover::hand_over(
            &api,
            &ctx.current().spec.hand_over,
            &ctx.name,
            &manager,
            &child.kind,
            object,
            read.as_ref().or(live.map(|(_, json)| json)),
        )
        .await
        .map_err(|e| ReconcileError::Apply {
            child: child.display(),
            source: e,
        })?;
        let returned = api
            .patch(
                &child.name,
                &PatchParams::apply(&manager).force(),
                &Patch::Apply(object),
            )
            .instrument(tracing::info_span!("apply", child = %child.display()))
            .await
            .map_err(|e| ReconcileError::Apply {
                child: child.display(),
                source: e,
            })?;
        ctx.with_state(&parent_key, |s| s.record_applied(&key, print));
        // A no-op apply (the same resourceVersion back) changed nothing.
        let change = match before {
            None => Some(Change::Created),
            Some(version) => {
                (returned.resource_version() != Some(version)).then_some(Change::Updated)
            }
        };
        if let Some(change) = change {
            written
                .changes
                .record(child_name(&child.kind.kind, &child.name), change);
        }
        written.applied(intent.kind, returned);
        stats.applied += 1;
    }
    Ok(stats)
}

/// A child as reports name it: `Kind name` (children are mostly in the
/// parent's namespace, and the kind's group rarely tells two apart).
fn child_name(kind: &str, name: &str) -> String {
    format!("{kind} {name}")
}

fn not_ours(child: &DesiredChild, live: &impl Resource) -> ReconcileError {
    let owner = controller_owner(live)
        .map_or_else(|| "nobody".into(), |o| format!("{} {}", o.kind, o.name));
    ReconcileError::NotOwned {
        child: child.display(),
        owner,
    }
}

/// Delete the `observed` children of `parent` that carry our label and
/// controller reference but are no longer desired (with a UID
/// precondition), noting each in `written`. Returns how many were deleted.
pub async fn prune_children(
    ctx: &BindingContext,
    parent: &DynamicObject,
    intents: &[Intent],
    observed: Vec<(usize, Arc<CachedObject>)>,
    written: &mut Written,
) -> Result<usize, ReconcileError> {
    // Kinds are told apart by group and kind: `v1 ConfigMap` and a custom
    // `ConfigMap` of another group are different children.
    let wanted: HashSet<(&str, &str, Option<&str>, &str)> = intents
        .iter()
        .map(|i| &i.child)
        .map(|d| {
            (
                d.kind.group(),
                d.kind.kind.as_str(),
                d.namespace.as_deref(),
                d.name.as_str(),
            )
        })
        .collect();
    let mut pruned = 0;
    for (index, obj) in observed {
        let kind = &ctx.children[index].info;
        let name = obj.name_any();
        let namespace = obj.namespace();
        if wanted.contains(&(
            kind.kind.group(),
            kind.kind.kind.as_str(),
            namespace.as_deref(),
            name.as_str(),
        )) || obj.meta().deletion_timestamp.is_some()
        {
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: obj.uid(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match kind
            .api(&ctx.client, namespace.as_deref())
            .delete(&name, &params)
            .await
        {
            Ok(_) => {
                pruned += 1;
                written
                    .changes
                    .record(child_name(&kind.kind.kind, &name), Change::Pruned);
                written.pruned(index, namespace.clone(), name.clone());
            }
            // Already gone, or replaced by another object of that name.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(ReconcileError::Kube(e)),
        }
        let parent_key = object_key(parent);
        let key: ChildKey = (kind.kind.clone(), namespace.clone(), name.clone());
        ctx.with_state(&parent_key, |s| s.forget_applied(&key));
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Takes a `json!` literal by value so each call reads as data.
    #[allow(clippy::needless_pass_by_value)]
    fn child(binding: &str, owner_uid: &str, data: Value) -> (CachedObject, Value) {
        let json = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "c", "namespace": "default",
                "labels": {CHILD_LABEL: binding},
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                                     "uid": owner_uid, "controller": true}],
            },
            "data": data,
        });
        (serde_json::from_value(json.clone()).unwrap(), json)
    }

    #[test]
    fn an_unchanged_child_still_shown_live_is_skipped() {
        let (live, json) = child("widgets", "u1", json!({"a": "1"}));
        let intent = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        assert_eq!(
            step(Some((&live, &json)), "widgets", "u1", true, &intent),
            Step::Skip
        );
        // Not applied with this intent before (a restart, or a new intent): applied.
        assert_eq!(
            step(Some((&live, &json)), "widgets", "u1", false, &intent),
            Step::Apply
        );
        // Someone changed it since: applied again.
        let drifted = json!({"metadata": {"name": "c"}, "data": {"a": "2"}});
        assert_eq!(
            step(Some((&live, &json)), "widgets", "u1", true, &drifted),
            Step::Apply
        );
    }

    #[test]
    fn a_child_of_another_parent_or_binding_is_not_ours() {
        let intent = json!({"metadata": {"name": "c"}});
        let (other_parent, json) = child("widgets", "u2", json!({}));
        assert_eq!(
            step(
                Some((&other_parent, &json)),
                "widgets",
                "u1",
                false,
                &intent
            ),
            Step::NotOurs
        );
        let (other_binding, json) = child("gadgets", "u1", json!({}));
        assert_eq!(
            step(
                Some((&other_binding, &json)),
                "widgets",
                "u1",
                true,
                &intent
            ),
            Step::NotOurs
        );
        assert_eq!(step(None, "widgets", "u1", true, &intent), Step::LookUp);
    }
}
