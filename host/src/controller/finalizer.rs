//! The binding's finalizer on parents: added before the first reconcile of
//! a finalizing binding, removed once the plugin reports `finalized`.
//! Writes carry the resourceVersion, so a concurrent change is a conflict
//! and is retried rather than lost.

use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::ReconcileError;
use super::context::BindingContext;

/// Whether `parent` has `finalizer`.
pub fn has(parent: &DynamicObject, finalizer: &str) -> bool {
    parent.finalizers().iter().any(|f| f == finalizer)
}

async fn set(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizers: Vec<String>,
) -> Result<(), ReconcileError> {
    let patch = json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": parent.resource_version()}
    });
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
pub async fn add(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizer: &str,
) -> Result<(), ReconcileError> {
    let mut finalizers = parent.finalizers().to_vec();
    finalizers.push(finalizer.to_string());
    set(ctx, parent, finalizers).await
}

/// Remove `finalizer` from `parent`.
pub async fn remove(
    ctx: &BindingContext,
    parent: &DynamicObject,
    finalizer: &str,
) -> Result<(), ReconcileError> {
    let finalizers = parent
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    set(ctx, parent, finalizers).await
}
