//! Children: server-side apply with the binding's field manager, skipping
//! writes that would change nothing, and pruning what is no longer desired.

use std::collections::HashSet;

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::Instrument;

use super::ReconcileError;
use super::binding::CHILD_LABEL;
use super::context::{BindingContext, ChildKey, controller_owner, is_our_child, object_key};
use super::guardrails::DesiredChild;
use super::intent::{fingerprint, reflects};

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

/// `child.object` with the owner reference and the binding label set.
pub(crate) fn intent(ctx: &BindingContext, parent: &DynamicObject, child: &DesiredChild) -> Value {
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

/// Apply every desired child of `parent`.
pub async fn apply_children(
    ctx: &BindingContext,
    parent: &DynamicObject,
    desired: &[DesiredChild],
) -> Result<ApplyStats, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    let parent_key = object_key(parent);
    let manager = ctx.spec.field_manager();
    let mut stats = ApplyStats::default();
    for child in desired {
        let kind = ctx
            .children
            .iter()
            .find(|c| c.info.kind == child.kind)
            .expect("guardrails only pass declared kinds");
        let key: ChildKey = (
            child.kind.clone(),
            child.namespace.clone(),
            child.name.clone(),
        );
        let object = intent(ctx, parent, child);
        let print = fingerprint(&object);
        let api = kind.info.api(&ctx.client, child.namespace.as_deref());

        let reference = ObjectRef::new_with(&child.name, kind.info.resource.clone());
        let reference = match &child.namespace {
            Some(ns) => reference.within(ns),
            None => reference,
        };
        let cached = kind.store.get(&reference);
        match &cached {
            Some(live) => {
                if !is_our_child(live, &ctx.name, &uid) {
                    return Err(not_ours(child, live));
                }
                let unchanged =
                    ctx.with_state(&parent_key, |s| s.applied.get(&key) == Some(&print));
                if unchanged && reflects(&kind.info.to_json(live), &object) {
                    stats.skipped += 1;
                    continue;
                }
            }
            None => {
                // Not in our (label-filtered) cache: it may still exist
                // without our label, and then it is not ours to change.
                if let Some(existing) = api
                    .get_opt(&child.name)
                    .await
                    .map_err(ReconcileError::Kube)?
                    && controller_owner(&existing).is_none_or(|o| o.uid != uid)
                {
                    return Err(not_ours(child, &existing));
                }
            }
        }
        api.patch(
            &child.name,
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(&object),
        )
        .instrument(tracing::info_span!("apply", child = %child.display()))
        .await
        .map_err(|e| ReconcileError::Apply {
            child: child.display(),
            source: e,
        })?;
        ctx.with_state(&parent_key, |s| s.applied.insert(key, print));
        stats.applied += 1;
    }
    Ok(stats)
}

fn not_ours(child: &DesiredChild, live: &DynamicObject) -> ReconcileError {
    let owner = controller_owner(live)
        .map(|o| format!("{} {}", o.kind, o.name))
        .unwrap_or_else(|| "nobody".into());
    ReconcileError::NotOwned {
        child: child.display(),
        owner,
    }
}

/// Delete children of `parent` that carry our label and controller
/// reference but are no longer desired (with a UID precondition). Returns
/// how many were deleted.
pub async fn prune_children(
    ctx: &BindingContext,
    parent: &DynamicObject,
    desired: &[DesiredChild],
) -> Result<usize, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    // Kinds are told apart by group and kind: `v1 ConfigMap` and a custom
    // `ConfigMap` of another group are different children.
    let wanted: HashSet<(&str, &str, Option<&str>, &str)> = desired
        .iter()
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
    for (index, obj) in ctx.observed_children(&uid) {
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
            Ok(_) => pruned += 1,
            // Already gone, or replaced by another object of that name.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(ReconcileError::Kube(e)),
        }
        let parent_key = object_key(parent);
        ctx.with_state(&parent_key, |s| {
            s.applied
                .remove(&(kind.kind.clone(), namespace.clone(), name.clone()))
        });
    }
    Ok(pruned)
}
