//! Intents: each desired child as it will be applied, computed once per
//! plugin answer, judged by the guardrail policies and applied as is.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::controller::cached::CachedObject;
use crate::controller::context::BindingContext;
use crate::controller::guardrails::DesiredChild;
use crate::controller::ledger::ChildKey;
use crate::controller::spec::CHILD_LABEL;
use crate::policy::guardrail_policies::ChildIntent;

/// A desired child as it will be applied.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
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
    pub(crate) fn cached(&self, ctx: &BindingContext) -> Option<Arc<CachedObject>> {
        let kind = &ctx.children[self.kind];
        let reference = ObjectRef::new_with(&self.child.name, kind.info.resource.clone());
        let reference = match &self.child.namespace {
            Some(ns) => reference.within(ns),
            None => reference,
        };
        kind.store.get(&reference)
    }

    /// The child as guardrail policies judge it: the object to apply, and
    /// the cached one it would replace.
    pub(crate) fn judged<'a>(&'a self, ctx: &'a BindingContext) -> ChildIntent<'a> {
        let info = &ctx.children[self.kind].info;
        ChildIntent {
            resource: &info.resource,
            namespaced: info.namespaced,
            name: &self.child.name,
            namespace: self.child.namespace.as_deref(),
            display: self.child.display(),
            object: &self.object,
            old: self.cached(ctx).map(|live| live.to_json(&info.resource)),
        }
    }

    /// The child's identity in the parent's ledger.
    pub(crate) fn key(&self) -> ChildKey {
        (
            self.child.kind.clone(),
            self.child.namespace.clone(),
            self.child.name.clone(),
        )
    }
}

/// The intents of `desired`, children of `parent` (guardrails passed them,
/// so every kind is declared).
pub(crate) fn intents(
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
