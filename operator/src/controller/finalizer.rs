//! The binding's finalizer on parents: added before the first reconcile of
//! a finalizing binding, removed once the plugin reports `finalized`.
//! Writes carry the resourceVersion, so a concurrent change is a conflict
//! and is retried rather than lost.

use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::ReconcileError;
use super::context::BindingContext;

/// Whether `parent` has `finalizer`.
pub(crate) fn has(parent: &DynamicObject, finalizer: &str) -> bool {
    parent.finalizers().iter().any(|f| f == finalizer)
}

/// The merge patch that sets `parent`'s finalizers to `finalizers`, on the
/// condition that the parent is unchanged since it was read.
pub(crate) fn patch(parent: &DynamicObject, finalizers: &[String]) -> Value {
    json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": parent.resource_version()}
    })
}

/// `parent`'s finalizers with `finalizer` added (once).
pub(crate) fn with(parent: &DynamicObject, finalizer: &str) -> Vec<String> {
    let mut finalizers = parent.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == finalizer) {
        finalizers.push(finalizer.to_string());
    }
    finalizers
}

/// `parent`'s finalizers without `finalizer`; the others stay, in order.
pub(crate) fn without(parent: &DynamicObject, finalizer: &str) -> Vec<String> {
    parent
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect()
}

async fn set(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizers: Vec<String>,
) -> Result<(), ReconcileError> {
    let patch = patch(parent, &finalizers);
    ctx.parent
        .api(&ctx.client, parent.namespace().as_deref())
        .patch(
            &parent.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(ReconcileError::Kube)?;
    Ok(())
}

/// Add `finalizer` to `parent`.
pub(crate) async fn add(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizer: &str,
) -> Result<(), ReconcileError> {
    set(ctx, parent, with(parent, finalizer)).await
}

/// Remove `finalizer` from `parent`.
pub(crate) async fn remove(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizer: &str,
) -> Result<(), ReconcileError> {
    set(ctx, parent, without(parent, finalizer)).await
}

/// Remove the binding's `finalizer` from `parent` because the binding
/// `why` (no longer finalizes, was deleted), with a Normal Event saying so.
/// A parent without it is left alone.
pub(crate) async fn release(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizer: &str,
    why: &str,
) -> Result<(), ReconcileError> {
    if !has(parent, finalizer) {
        return Ok(());
    }
    remove(ctx, parent, finalizer).await?;
    let message = format!(
        "binding {} {why}: its finalizer {finalizer} is removed, and the plugin is not called to finalize",
        ctx.name
    );
    super::events::publish(
        ctx,
        parent,
        kube::runtime::events::EventType::Normal,
        "FinalizerRemoved",
        &message,
    )
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(finalizers: &[&str]) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "resourceVersion": "42", "finalizers": finalizers},
        }))
        .unwrap()
    }

    #[test]
    fn the_finalizer_is_added_once_and_removed_leaving_the_others() {
        let ours = "gantry.dev/widgets";
        let p = parent(&["example.com/keep"]);
        assert!(!has(&p, ours));
        assert_eq!(with(&p, ours), ["example.com/keep", ours]);
        let p = parent(&["example.com/keep", ours]);
        assert!(has(&p, ours));
        assert_eq!(with(&p, ours), ["example.com/keep", ours]);
        assert_eq!(without(&p, ours), ["example.com/keep"]);
    }

    #[test]
    fn the_patch_is_conditional_on_the_version_read() {
        let p = parent(&[]);
        let patch = patch(&p, &["gantry.dev/widgets".to_string()]);
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(
            patch["metadata"]["finalizers"],
            json!(["gantry.dev/widgets"])
        );
    }
}
