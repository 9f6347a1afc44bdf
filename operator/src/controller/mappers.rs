//! Which watch events call for which parent's reconcile, and why: a
//! parent's own change, a child's change mapped to its controller parent,
//! a related object's change mapped to every parent that reads it. Each
//! is judged by the parent's ledger first: our own writes, and changes
//! during a running reconcile, are not news now (see `ParentState`).

use std::sync::Arc;

use gantry_sdk::{ObjectRef as SdkRef, Trigger};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::cached::CachedObject;
use super::context::{BindingContext, KindInfo, controller_owner, object_key};

/// A parent's event → whether it calls for a reconcile now.
pub(crate) fn parent_changed(
    ctx: Arc<BindingContext>,
) -> impl Fn(&CachedObject) -> bool + Send + Sync + 'static {
    move |parent: &CachedObject| {
        let version = parent.metadata.resource_version.as_deref().unwrap_or("");
        ctx.ledgers.parent_changed(&object_key(parent), version)
    }
}

/// A child event → its controller parent (and note why).
pub(crate) fn child_mapper(
    ctx: Arc<BindingContext>,
    info: KindInfo,
) -> impl Fn(CachedObject) -> Option<ObjectRef<CachedObject>> + Send + Sync + 'static {
    move |child: CachedObject| {
        let owner = controller_owner(&child)?;
        if owner.kind != ctx.parent.kind.kind || owner.api_version != ctx.parent.kind.api_version {
            return None;
        }
        let namespace = if ctx.parent.namespaced {
            child.namespace()
        } else {
            None
        };
        let key = match &namespace {
            Some(ns) => format!("{ns}/{}", owner.name),
            None => owner.name.clone(),
        };
        let version = (
            (info.kind.clone(), child.namespace(), child.name_any()),
            child.resource_version().unwrap_or_default(),
        );
        let trigger = Trigger::ChildChanged(object_ref(&info, &child));
        if !ctx.ledgers.child_changed(&key, version, trigger) {
            return None;
        }
        let parent = ObjectRef::new_with(&owner.name, ctx.parent.resource.clone());
        Some(match namespace {
            Some(ns) => parent.within(&ns),
            None => parent,
        })
    }
}

/// A related object's event → every parent that reads it.
pub(crate) fn related_mapper(
    ctx: Arc<BindingContext>,
    index: usize,
) -> impl Fn(CachedObject) -> Vec<ObjectRef<CachedObject>> + Send + Sync + 'static {
    move |obj: CachedObject| {
        let related = &ctx.related[index];
        let reference = object_ref(&related.info, &obj);
        ctx.parents
            .state()
            .into_iter()
            .filter(|parent| related.matches(&obj, parent.namespace().as_deref()))
            .filter(|parent| {
                ctx.ledgers.related_changed(
                    &object_key(parent.as_ref()),
                    Trigger::RelatedChanged(reference.clone()),
                )
            })
            .map(|parent| ObjectRef::from_obj_with(parent.as_ref(), ctx.parent.resource.clone()))
            .collect()
    }
}

/// `obj`, a child or related object of kind `info`, as a trigger names it.
fn object_ref(info: &KindInfo, obj: &impl Resource) -> SdkRef {
    SdkRef {
        api_version: info.kind.api_version.clone(),
        kind: info.kind.kind.clone(),
        namespace: obj.namespace(),
        name: obj.name_any(),
    }
}
