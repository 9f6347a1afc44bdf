//! The request a plugin gets for a parent: the parent, its observed
//! children and related objects from the caches, the binding's config, the
//! trigger, and `finalizing` when the parent is going.

use std::sync::Arc;

use gantry_sdk::{Request, Trigger};
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};

use super::cached::CachedObject;
use super::context::BindingContext;
use super::spec::BindingSpec;

/// The request the plugin of `spec` gets for `parent`, its children as the
/// caches have them.
pub fn request(
    ctx: &BindingContext,
    parent: &DynamicObject,
    spec: &BindingSpec,
    trigger: Trigger,
) -> Request {
    let observed = ctx.observed_children(&parent.uid().unwrap_or_default());
    request_observing(ctx, parent, spec, trigger, &observed)
}

/// The request for `parent` with `observed` children (of the binding's
/// child kinds, by index).
pub fn request_observing(
    ctx: &BindingContext,
    parent: &DynamicObject,
    spec: &BindingSpec,
    trigger: Trigger,
    observed: &[(usize, Arc<CachedObject>)],
) -> Request {
    let observed = observed
        .iter()
        .map(|(index, obj)| obj.to_json(&ctx.children[*index].info.resource))
        .collect();
    Request {
        parent: ctx.parent.to_json(parent),
        observed,
        related: ctx.related_objects(parent.namespace().as_deref()),
        config: spec.config.clone(),
        finalizing: parent.meta().deletion_timestamp.is_some(),
        trigger,
    }
}
