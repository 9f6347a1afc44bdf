//! When a binding's controller starts: does the operator's identity have
//! every right the binding needs? Asked with `SelfSubjectAccessReviews`;
//! what is missing becomes one Warning Event `MissingPermissions` on the
//! binding's ConfigMap (and a log line), instead of 403s later, one
//! reconcile at a time.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use super::context::{BindingContext, KindInfo};
use crate::rbac::{self, Kind};

impl From<&KindInfo> for Kind {
    fn from(info: &KindInfo) -> Self {
        Self {
            group: info.resource.group.clone(),
            plural: info.resource.plural.clone(),
            namespaced: info.namespaced,
            has_status: info.has_status,
        }
    }
}

/// Reason of the Warning.
pub const MISSING: &str = "MissingPermissions";

/// Check the rights of `ctx`'s binding (ConfigMap `cm_name`) off the
/// caller's task.
pub fn check_in_background(ctx: Arc<BindingContext>, cm_name: String) {
    tokio::spawn(async move { check(&ctx, &cm_name).await });
}

async fn check(ctx: &BindingContext, cm_name: &str) {
    let options = &ctx.shared.options;
    let children: Vec<Kind> = ctx.children.iter().map(|c| Kind::from(&c.info)).collect();
    let related: Vec<(Kind, Option<String>)> = ctx
        .related
        .iter()
        .zip(&ctx.spec.related)
        .map(|(r, spec)| (Kind::from(&r.info), spec.namespace.clone()))
        .collect();
    let mut needs = rbac::needs::of_binding(
        &Kind::from(&ctx.parent),
        &children,
        &related,
        &options.watch_scope,
    );
    needs.extend(
        rbac::needs::of_operator(&options.namespace, &options.watch_scope, false)
            .into_iter()
            .filter(|n| n.resource == "events"),
    );
    let missing = match rbac::check::missing(&ctx.client, &needs).await {
        Ok(missing) => missing,
        Err(e) => {
            tracing::debug!(binding = %ctx.name, error = %e, "could not review the operator's permissions");
            return;
        }
    };
    if missing.is_empty() {
        return;
    }
    let message = format!(
        "the operator may not: {}; its reconciles will fail where it needs them (`gantry rbac --binding binding.yaml` prints a least-privilege role)",
        missing.join("; ")
    );
    tracing::warn!(binding = %ctx.name, configmap = cm_name, "{message}");
    let event = Event {
        type_: EventType::Warning,
        reason: MISSING.into(),
        note: Some(message.chars().take(1024).collect()),
        action: "CheckPermissions".into(),
        secondary: None,
    };
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some(cm_name.to_string()),
        namespace: Some(options.namespace.clone()),
        ..ObjectReference::default()
    };
    if let Err(e) = ctx.recorder.publish(&event, &reference).await {
        tracing::debug!(error = %e, "could not publish the missing permissions");
    }
}
