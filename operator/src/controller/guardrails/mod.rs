//! What a plugin's answer must pass before any child is written: the
//! host's own [`checks`] (declared kinds, namespaces, [`names`], nothing
//! of Gantry's) on its desired children, then the binding's guardrail
//! policies, which [`judge`] each child as it will be applied (its intent,
//! see `children`).

pub(crate) mod checks;
pub(crate) mod names;

use kube::ResourceExt;
use kube::api::DynamicObject;

pub use checks::{DesiredChild, Rules, check_children};

use super::ReconcileError;
use super::context::BindingContext;
use crate::policy::guardrail_policies::ChildIntent;

/// The desired children of a plugin's `response` for `parent`, if the
/// host's checks pass them. The checks run on the blocking pool: up to the
/// output cap of JSON to walk is no work for the async executor.
pub async fn check(
    ctx: &BindingContext,
    parent: &DynamicObject,
    response: &gantry_sdk::Response,
) -> Result<Vec<DesiredChild>, ReconcileError> {
    let children = response.children.clone();
    let parent_kind = ctx.parent.kind.clone();
    let parent_namespace = parent.namespace();
    let operator_namespace = ctx.shared.options.namespace.clone();
    let scopes = ctx.child_scopes.clone();
    tokio::task::spawn_blocking(move || {
        check_children(
            children,
            &Rules {
                parent_kind: &parent_kind,
                parent_namespace: parent_namespace.as_deref(),
                operator_namespace: &operator_namespace,
                scopes: &scopes,
            },
        )
    })
    .await
    .unwrap_or_else(|e| Err(vec![format!("guardrail check failed: {e}")]))
    .map_err(ReconcileError::Guardrails)
}

/// Let the binding's guardrail `policies` judge the `children` as they will
/// be applied, as the API server's webhooks would judge their applies.
pub async fn judge(
    ctx: &BindingContext,
    policies: &[String],
    children: &[ChildIntent<'_>],
) -> Result<(), ReconcileError> {
    crate::policy::guardrail_policies::check(
        &ctx.shared.options.policies,
        &ctx.client,
        &ctx.name,
        policies,
        children,
    )
    .await
    .map_err(ReconcileError::from)
}
